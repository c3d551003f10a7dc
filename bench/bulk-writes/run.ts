// Bulk writes through /rest/v1 against the same rows written by the table owner (issue 40, item 1):
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:bulk
//
// For each engine (PostgreSQL, then the embedded PGlite) it makes two databases of the same
// schema: "after", migrated as this tree is, and "before", the same with the functions the
// migration "rules at statement speed" replaced put back as they were before it (their
// definitions read from a database migrated without it) and its triggers dropped. Both are served
// by this tree's server, in its own process, logging in as `authenticator` on PostgreSQL. Each
// round, in alternating order, each database gets:
//   - rest:  BENCH_RELEASES releases (default 8,000), then BENCH_TRACKS tracks (default 20,000;
//            two or three per release), POSTed to /rest/v1 as a logged-in user who owns the
//            account, in requests of at most BENCH_BODY_BYTES (default 1,000,000, under the
//            1 MiB body limit), Prefer: return=minimal;
//   - floor: the same rows, in the same pieces, inserted in SQL by the table owner (no row-level
//            security, and the rules' client checks skipped), one transaction per piece;
// and then BENCH_SINGLE (default 50) single-row writes through /rest/v1 (one release, one track)
// and a read of that release with its track, before and after interleaved. It prints per engine the seconds of each and floor/rest (1.0: a
// user's bulk write costs what the owner's does).
//
// Options: BENCH_ROUNDS (default 2), BENCH_ENGINES (default postgres,pglite), BENCH_BEFORE=0 skips
// the "before" database. The server's statement timeout for users is raised to 600 s for both
// databases (the default 8 s ends the "before" bulk requests in 504 on a loaded machine).
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { loadMigrations, migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Engine } from "../../src/db/types.ts";
import { newJwtSecret } from "../../src/tenancy/keys.ts";
import { type Seeded, userHeaders } from "../rest/catalog.ts";
import { ADMIN_URL, ROUNDS, type Server, startServer, stopServer, withDatabase } from "../support.ts";

const RELEASES = Number(process.env.BENCH_RELEASES ?? 8000);
const TRACKS = Number(process.env.BENCH_TRACKS ?? 20_000);
const BODY_BYTES = Number(process.env.BENCH_BODY_BYTES ?? 1_000_000);
const SINGLE = Number(process.env.BENCH_SINGLE ?? 50);
const ENGINES = (process.env.BENCH_ENGINES ?? "postgres,pglite").split(",").map((s) => s.trim());
const WITH_BEFORE = process.env.BENCH_BEFORE !== "0";
const MIGRATION = "rules_at_statement_speed";
const UNLIMITED = { max: 100_000_000, windowSeconds: 10 };

/** The functions the migration replaces, and the triggers it adds (dropped for "before"). */
const REPLACED = [
  "auth.readable_account_ids()",
  "auth.writable_account_ids()",
  "auth.tenant_account_ids()",
  "auth.sees_whole_account()",
  "auth.has_staff_role(uuid, text)",
  "internal.assign_owner()",
  "internal.release_rules()",
  "internal.track_rules()",
];
const MEMO_TABLES = ["memberships", "accounts", "tenants", "users", "staff", "platform_settings"];

type Variant = "before" | "after";
type Row = Record<string, unknown>;

interface Target {
  variant: Variant;
  seeded: Seeded;
  headers: Record<string, string>;
  /** The owner's engine (PostgreSQL); for PGlite opened only while its server is stopped. */
  owner?: Engine;
  server?: Server;
  start: () => Promise<Server>;
  openOwner: () => Promise<Engine>;
}

interface Figures {
  restReleases: number[];
  restTracks: number[];
  floorReleases: number[];
  floorTracks: number[];
  singleRelease: number[];
  singleTrack: number[];
  /** GET of that release with its track, ms: the helpers serve every read too. */
  read: number[];
}

const emptyFigures = (): Figures => ({
  restReleases: [],
  restTracks: [],
  floorReleases: [],
  floorTracks: [],
  singleRelease: [],
  singleTrack: [],
  read: [],
});

/**
 * The migrations before this change: what "before" is migrated with first, to read the functions
 * as they were. Only those before it: later ones build on it (0033 replaces a function 0032
 * creates), so the list without it alone no longer applies.
 */
function migrationsBefore() {
  const all = loadMigrations();
  const version = all.find((m) => m.name === MIGRATION)?.version;
  if (version === undefined) throw new Error(`no migration named ${MIGRATION}`);
  return all.filter((m) => m.version < version);
}

/**
 * Migrates `engine` to this tree's schema; for "before", reads the replaced functions as they were
 * before the migration and puts them back after it (so both databases have the same migrations
 * recorded and the same server starts on both).
 */
async function prepare(engine: Engine, variant: Variant): Promise<void> {
  if (variant === "after") {
    await migrate(engine);
    return;
  }
  await migrate(engine, migrationsBefore());
  const defs = await engine.transaction(
    async (tx) =>
      (
        await tx.query<{ def: string }>(
          "select pg_get_functiondef(p::regprocedure) as def from unnest($1::text[]) p",
          [REPLACED],
        )
      ).rows.map((r) => r.def),
    { readOnly: true },
  );
  await migrate(engine);
  if (defs.length !== REPLACED.length || !defs.some((d) => /SECURITY DEFINER/.test(d)))
    throw new Error("could not read the functions as they were before the migration");
  await engine.transaction(
    async (tx) => {
      for (const def of defs) await tx.exec(def);
      for (const t of MEMO_TABLES) await tx.exec(`drop trigger caller_memo_off on internal.${t}`);
    },
    { readOnly: false },
  );
}

/** A tenant without request limits, a user who owns one account, and an artist of that account. */
async function seed(engine: Engine): Promise<Seeded> {
  return engine.transaction(
    async (tx) => {
      const t = (
        await tx.query<{ id: string; jwt_secret: string; created_at: Date }>(
          `insert into internal.tenants (name, slug, jwt_secret, settings) values ('Bench', 'bench', $1, $2)
           returning id, jwt_secret, created_at`,
          [newJwtSecret(), JSON.stringify({ rest_rate_limits: { tenant: UNLIMITED, caller: UNLIMITED } })],
        )
      ).rows[0] as { id: string; jwt_secret: string; created_at: Date };
      const user = (
        await tx.query<{ id: string }>(
          "insert into internal.users (tenant_id, email) values ($1, 'bench@example.com') returning id",
          [t.id],
        )
      ).rows[0] as { id: string };
      const account = (
        await tx.query<{ id: string }>(
          "insert into internal.accounts (tenant_id, name) values ($1, 'Bench account') returning id",
          [t.id],
        )
      ).rows[0] as { id: string };
      await tx.query(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
        [t.id, account.id, user.id],
      );
      const artist = (
        await tx.query<{ id: string }>(
          "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
          [account.id],
        )
      ).rows[0] as { id: string };
      return {
        tenantId: t.id,
        secret: t.jwt_secret,
        createdAt: t.created_at,
        userId: user.id,
        artistId: artist.id,
      };
    },
    { readOnly: false },
  );
}

/** Splits rows into pieces whose JSON is at most BODY_BYTES. */
function pieces(rows: Row[]): string[] {
  const out: string[] = [];
  let current: string[] = [];
  let size = 2;
  for (const r of rows) {
    const s = JSON.stringify(r);
    if (current.length > 0 && size + s.length + 1 > BODY_BYTES) {
      out.push(`[${current.join(",")}]`);
      current = [];
      size = 2;
    }
    current.push(s);
    size += s.length + 1;
  }
  if (current.length > 0) out.push(`[${current.join(",")}]`);
  return out;
}

/** A batch of releases (ids chosen here, so the tracks can name them) and their tracks. */
function batch(artistId: string, tag: string): { releases: string[]; tracks: string[] } {
  const releases: Row[] = [];
  const tracks: Row[] = [];
  for (let i = 0; i < RELEASES; i++) {
    const id = randomUUID();
    releases.push({ id, artist_id: artistId, title: `Bulk ${tag} release ${i}`, release_date: "2027-01-01" });
  }
  for (let i = 0; tracks.length < TRACKS; i++) {
    const release = releases[i % releases.length] as Row;
    const n = Math.floor(i / releases.length) + 1;
    tracks.push({
      release_id: release.id,
      title: `Track ${n} of ${tag} ${i}`,
      track_number: n,
      duration: 180,
    });
  }
  return { releases: pieces(releases), tracks: pieces(tracks) };
}

async function post(server: Server, headers: Record<string, string>, table: string, body: string) {
  const res = await fetch(`${server.url}/rest/v1/${table}`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json", prefer: "return=minimal" },
    body,
  });
  if (res.status !== 201) throw new Error(`POST ${table}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return (performance.now() - t0) / 1000;
}

async function restBulk(t: Target, f: Figures, tag: string) {
  const server = t.server as Server;
  const b = batch(t.seeded.artistId, tag);
  f.restReleases.push(
    await timed(async () => {
      for (const body of b.releases) await post(server, t.headers, "releases", body);
    }),
  );
  f.restTracks.push(
    await timed(async () => {
      for (const body of b.tracks) await post(server, t.headers, "tracks", body);
    }),
  );
}

async function floorBulk(owner: Engine, t: Target, f: Figures, tag: string) {
  const b = batch(t.seeded.artistId, tag);
  const insert = async (table: string, columns: string, body: string) =>
    owner.transaction(
      (tx) =>
        tx.query(
          `insert into public.${table} (${columns}) select ${columns} from json_populate_recordset(null::public.${table}, $1::json)`,
          [body],
        ),
      { readOnly: false },
    );
  f.floorReleases.push(
    await timed(async () => {
      for (const body of b.releases) await insert("releases", "id, artist_id, title, release_date", body);
    }),
  );
  f.floorTracks.push(
    await timed(async () => {
      for (const body of b.tracks) await insert("tracks", "release_id, title, track_number, duration", body);
    }),
  );
}

/** SINGLE single-row writes through /rest/v1: a release, then a track of it; milliseconds each. */
async function singles(t: Target, f: Figures, n: number) {
  const server = t.server as Server;
  for (let i = 0; i < n; i++) {
    const id = randomUUID();
    const release = JSON.stringify({ id, artist_id: t.seeded.artistId, title: `Single ${i}` });
    f.singleRelease.push((await timed(() => post(server, t.headers, "releases", release))) * 1000);
    const track = JSON.stringify({ release_id: id, title: `Single track ${i}`, track_number: 1 });
    f.singleTrack.push((await timed(() => post(server, t.headers, "tracks", track))) * 1000);
    f.read.push(
      (await timed(async () => {
        const res = await fetch(`${server.url}/rest/v1/releases?id=eq.${id}&select=*,tracks(*)`, {
          headers: t.headers,
        });
        if (res.status !== 200) throw new Error(`GET release: ${res.status}`);
        await res.arrayBuffer();
      })) * 1000,
    );
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0
    ? Number.NaN
    : s.length % 2
      ? (s[m] as number)
      : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)] ?? Number.NaN;
const secs = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(", ");

/** Starts `t`'s server and warms it (schema cache, plans, the JIT) with a few writes not counted. */
async function ensureServer(t: Target): Promise<Server> {
  if (t.server) return t.server;
  t.server = await t.start();
  await singles(t, emptyFigures(), 5);
  return t.server;
}

async function runEngine(kind: string, targets: Target[]): Promise<string[]> {
  const figures = new Map<Variant, Figures>(targets.map((t) => [t.variant, emptyFigures()]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) {
      const f = figures.get(t.variant) as Figures;
      const tag = `${t.variant}-${round}`;
      const restFirst = round % 2 === 0;
      for (const side of restFirst ? ["rest", "floor"] : ["floor", "rest"]) {
        if (side === "rest") {
          await ensureServer(t);
          await restBulk(t, f, `rest-${tag}`);
        } else {
          // PGlite has one connection, held by the server's process: stop it for the owner's turn.
          if (kind === "pglite" && t.server) {
            await stopServer(t.server);
            t.server = undefined;
          }
          const owner = t.owner ?? (await t.openOwner());
          await floorBulk(owner, t, f, `floor-${tag}`);
          if (kind === "pglite") await owner.close();
        }
        const last = (xs: number[]) => xs[xs.length - 1]?.toFixed(2);
        process.stderr.write(
          `${kind} ${t.variant} round ${round + 1}: ${side} releases ${last(side === "rest" ? f.restReleases : f.floorReleases)} s, tracks ${last(side === "rest" ? f.restTracks : f.floorTracks)} s (load ${os.loadavg()[0]?.toFixed(1)})\n`,
        );
      }
    }
  }
  // Single-row writes, before and after interleaved in blocks of 10.
  for (const t of targets) await ensureServer(t);
  for (let done = 0; done < SINGLE; done += 10) {
    for (const t of done % 20 === 0 ? targets : [...targets].reverse()) {
      await singles(t, figures.get(t.variant) as Figures, Math.min(10, SINGLE - done));
    }
  }
  const lines = [
    `${kind}: ${RELEASES} releases, ${TRACKS} tracks, ${ROUNDS} rounds (seconds per round)`,
    "| database | rest releases s | floor releases s | floor/rest | rest tracks s | floor tracks s | floor/rest | single release ms (median / p90) | single track ms (median / p90) | read of one release with its tracks ms (median / p90) |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const t of targets) {
    const f = figures.get(t.variant) as Figures;
    const ratio = (floor: number[], rest: number[]) => (median(floor) / median(rest)).toFixed(2);
    lines.push(
      `| ${t.variant} | ${secs(f.restReleases)} | ${secs(f.floorReleases)} | ${ratio(f.floorReleases, f.restReleases)}x | ${secs(f.restTracks)} | ${secs(f.floorTracks)} | ${ratio(f.floorTracks, f.restTracks)}x | ${median(f.singleRelease).toFixed(1)} / ${p90(f.singleRelease).toFixed(1)} | ${median(f.singleTrack).toFixed(1)} / ${p90(f.singleTrack).toFixed(1)} | ${median(f.read).toFixed(1)} / ${p90(f.read).toFixed(1)} |`,
    );
  }
  return lines;
}

const SERVER_ENV = { STATEMENT_TIMEOUT_AUTHENTICATED_MS: "600000", LOG_LEVEL: "warn" };

async function postgresTargets(admin: pg.Client, cleanup: (() => Promise<void>)[]): Promise<Target[]> {
  await admin.query(rolesSetupSql("authenticator"));
  const variants: Variant[] = WITH_BEFORE ? ["after", "before"] : ["after"];
  const targets: Target[] = [];
  for (const variant of variants) {
    const dbName = `backline_bench_bulk_${variant}_${process.pid}`;
    await admin.query(`create database ${dbName}`);
    const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
    cleanup.push(async () => {
      await owner.close();
      await admin.query(`drop database if exists ${dbName} with (force)`);
    });
    await prepare(owner, variant);
    const seeded = await seed(owner);
    const env = {
      ...SERVER_ENV,
      DATABASE_URL: withDatabase(ADMIN_URL, dbName, "authenticator"),
      DATABASE_POOL_SIZE: "4",
    };
    const target: Target = {
      variant,
      seeded,
      headers: await userHeaders(seeded),
      owner,
      start: () => startServer("backline", env),
      openOwner: async () => owner,
    };
    cleanup.push(async () => {
      if (target.server) await stopServer(target.server);
    });
    targets.push(target);
  }
  return targets;
}

async function pgliteTargets(cleanup: (() => Promise<void>)[]): Promise<Target[]> {
  const variants: Variant[] = WITH_BEFORE ? ["after", "before"] : ["after"];
  const targets: Target[] = [];
  for (const variant of variants) {
    const dataDir = path.join(os.tmpdir(), `backline-bench-bulk-${variant}-${process.pid}`);
    const pgdata = path.join(dataDir, "pgdata");
    const engine = await PgliteEngine.open({ dataDir: pgdata });
    await prepare(engine, variant);
    const seeded = await seed(engine);
    await engine.close();
    const env = { ...SERVER_ENV, DATA_DIR: dataDir, DATABASE_URL: "" };
    const target: Target = {
      variant,
      seeded,
      headers: await userHeaders(seeded),
      start: () => startServer("backline", env),
      openOwner: () => PgliteEngine.open({ dataDir: pgdata }),
    };
    cleanup.push(async () => {
      if (target.server) await stopServer(target.server);
      fs.rmSync(dataDir, { recursive: true, force: true });
    });
    targets.push(target);
  }
  return targets;
}

async function main() {
  const out = [
    `${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), Node ${process.versions.node}, load average at start ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  ];
  for (const kind of ENGINES) {
    const cleanup: (() => Promise<void>)[] = [];
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    try {
      let targets: Target[];
      if (kind === "postgres") {
        await admin.connect();
        targets = await postgresTargets(admin, cleanup);
      } else {
        targets = await pgliteTargets(cleanup);
      }
      out.push("", ...(await runEngine(kind, targets)));
      out.push(
        `load average at the end: ${os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(" ")}`,
      );
    } finally {
      for (const c of cleanup.reverse()) await c().catch((e: unknown) => console.error(e));
      if (kind === "postgres") await admin.end();
    }
  }
  process.stdout.write(`${out.join("\n")}\n`);
}

await main();
