// The /rest/v1 benchmark (bench/README.md): Backline against a baseline that runs the same SQL in
// the same RLS transaction, side by side in one run, loaded by autocannon from this process while
// each server runs in its own.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:rest
//
// Options (environment): BENCH_DURATION (seconds per measurement, default 10), BENCH_CONNECTIONS
// (default 10), BENCH_ROUNDS (default 2: each pair measured this many times, order alternating).
import { type ChildProcess, spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import pg from "pg";
import { signAccessToken } from "../../src/auth/tokens.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Engine } from "../../src/db/types.ts";
import { newJwtSecret, tenantKeys } from "../../src/tenancy/keys.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const ADMIN_URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  "postgres://postgres@127.0.0.1:5432/postgres";
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);

function withDatabase(url: string, db: string, user?: string) {
  const u = new URL(url);
  u.pathname = `/${db}`;
  if (user) {
    u.username = user;
    u.password = "";
  }
  return u.toString();
}

interface Seeded {
  tenantId: string;
  secret: string;
  createdAt: Date;
  userId: string;
  artistId: string;
}

const UNLIMITED = { max: 100_000_000, windowSeconds: 10 };

/** The headers a request of the benchmark user carries: the anon key and an access token. */
async function userHeaders(s: Seeded): Promise<Record<string, string>> {
  const keys = await tenantKeys({ id: s.tenantId, jwt_secret: s.secret, created_at: s.createdAt });
  const { token } = await signAccessToken({
    secret: s.secret,
    issuer: "bench",
    expiresIn: 3600,
    tenantId: s.tenantId,
    user: {
      id: s.userId,
      email: "bench@example.com",
      phone: null,
      app_metadata: {},
      user_metadata: {},
      is_anonymous: false,
    },
    sessionId: "00000000-0000-4000-8000-000000000000",
    aal: "aal1",
    amr: [],
  });
  return { apikey: keys.anon_key, authorization: `Bearer ${token}` };
}

/** A catalog of 51 accounts x 3 artists x 40 releases x 12 tracks; the benchmark user owns one account. */
async function seed(engine: Engine): Promise<Seeded> {
  return engine.transaction(
    async (tx) => {
      const t = (
        await tx.query<{ id: string; jwt_secret: string; created_at: Date }>(
          // Backline's request limits would cap the load: the bench tenant gets room.
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
      await tx.exec(`
      insert into internal.accounts (tenant_id, name) select '${t.id}', 'Account ' || g from generate_series(0, 50) g;
      insert into internal.memberships (tenant_id, account_id, user_id, role)
        select '${t.id}', id, '${user.id}', 'owner' from internal.accounts where tenant_id = '${t.id}' and name = 'Account 0';
      insert into public.artist_profiles (account_id, name)
        select a.id, 'Artist ' || a.name || ' ' || g from internal.accounts a, generate_series(1, 3) g where a.tenant_id = '${t.id}';
      insert into public.releases (account_id, artist_id, title, release_date)
        select ap.account_id, ap.id, 'Release ' || g || ' of ' || ap.name, date '2026-01-01' + g
        from public.artist_profiles ap, generate_series(1, 40) g;
      insert into public.tracks (release_id, account_id, title, duration, track_number)
        select r.id, r.account_id, 'Track ' || g || ' of ' || r.title, 60 + (g * 37) % 300, g
        from public.releases r, generate_series(1, 12) g;
      analyze;
    `);
      const artist = (
        await tx.query<{ id: string }>(
          `select ap.id from public.artist_profiles ap join internal.accounts a on a.id = ap.account_id
         where a.name = 'Account 0' and a.tenant_id = $1 order by ap.name limit 1`,
          [t.id],
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

function startServer(
  kind: "backline" | "baseline",
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const port = String(20000 + Math.floor(Math.random() * 20000));
    const child = spawn(process.execPath, [path.join(ROOT, "bench/rest/servers.ts"), kind], {
      cwd: ROOT,
      env: { ...process.env, ...env, PORT: port, LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    child.stdout?.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve({ child, url: `http://127.0.0.1:${port}` });
    });
    child.on("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
}

interface Measure {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

async function load(url: string, headers: Record<string, string>): Promise<Measure> {
  // Warm up the pool and the plans, then measure.
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers });
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

const QUERIES = (artistId: string) => [
  { name: "release_with_tracks", table: "releases", query: `artist_id=eq.${artistId}&select=*,tracks(*)` },
  {
    name: "filtered_list_50",
    table: "tracks",
    query: "select=id,title,duration,track_number&duration=gte.120&order=title&limit=50",
  },
];

async function main() {
  const dbName = `backline_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${dbName}`);
  const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
  const results: string[] = [];
  try {
    await migrate(owner);
    const s = await seed(owner);
    const headers = await userHeaders(s);
    const queries = QUERIES(s.artistId);
    const appUrl = withDatabase(ADMIN_URL, dbName, "authenticator");
    const claims = { role: "authenticated", sub: s.userId, tenant_id: s.tenantId };
    const env = {
      DATABASE_URL: appUrl,
      DATABASE_POOL_SIZE: "10",
      BENCH_CLAIMS: JSON.stringify(claims),
      BENCH_QUERIES: JSON.stringify(queries),
    };
    const backline = await startServer("backline", env);
    const baseline = await startServer("baseline", env);
    try {
      // Same answers first: the comparison is only fair if both return the same rows.
      for (const q of queries) {
        const a = await (await fetch(`${backline.url}/rest/v1/${q.table}?${q.query}`, { headers })).text();
        const b = await (await fetch(`${baseline.url}/${q.name}`)).text();
        if (a !== b) throw new Error(`${q.name}: Backline and the baseline answer differently`);
        const rows = (JSON.parse(a) as unknown[]).length;
        results.push(`${q.name}: ${rows} rows, ${a.length} bytes`);
      }
      const table: string[] = [];
      for (const q of queries) {
        const sums = { backline: [] as Measure[], baseline: [] as Measure[] };
        for (let round = 0; round < ROUNDS; round++) {
          const order =
            round % 2 === 0 ? (["backline", "baseline"] as const) : (["baseline", "backline"] as const);
          for (const which of order) {
            const m =
              which === "backline"
                ? await load(`${backline.url}/rest/v1/${q.table}?${q.query}`, headers)
                : await load(`${baseline.url}/${q.name}`, {});
            sums[which].push(m);
          }
        }
        const avg = (ms: Measure[], k: keyof Measure) => ms.reduce((a, m) => a + m[k], 0) / ms.length;
        const bl = {
          rps: avg(sums.backline, "rps"),
          p50: avg(sums.backline, "p50"),
          p99: avg(sums.backline, "p99"),
          errors: avg(sums.backline, "errors"),
        };
        const base = {
          rps: avg(sums.baseline, "rps"),
          p50: avg(sums.baseline, "p50"),
          p99: avg(sums.baseline, "p99"),
          errors: avg(sums.baseline, "errors"),
        };
        table.push(
          `| ${q.name} | ${base.rps.toFixed(0)} | ${bl.rps.toFixed(0)} | ${(bl.rps / base.rps).toFixed(2)}x | ${base.p50.toFixed(1)} / ${base.p99.toFixed(1)} | ${bl.p50.toFixed(1)} / ${bl.p99.toFixed(1)} | ${(bl.p99 / base.p99).toFixed(2)}x | ${bl.errors + base.errors} |`,
        );
      }
      results.push(
        "",
        `PostgreSQL, ${CONNECTIONS} connections, ${DURATION} s x ${ROUNDS} rounds, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
        "| query | baseline req/s | Backline req/s | ratio | baseline p50/p99 ms | Backline p50/p99 ms | p99 ratio | errors |",
        "|---|---|---|---|---|---|---|---|",
        ...table,
      );
    } finally {
      backline.child.kill("SIGTERM");
      baseline.child.kill("SIGTERM");
    }
    results.push("", await pgliteFigures());
  } finally {
    await owner.close();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
  process.stdout.write(`${results.join("\n")}\n`);
}

/** The same queries on the embedded database (one connection: requests take turns). */
async function pgliteFigures(): Promise<string> {
  const dataDir = path.join(os.tmpdir(), `backline-bench-pglite-${process.pid}`);
  const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
  await migrate(engine);
  const s = await seed(engine);
  await engine.close();
  const headers = await userHeaders(s);
  const server = await startServer("backline", { DATA_DIR: dataDir, DATABASE_URL: "" });
  const lines = [
    `PGlite (embedded), ${CONNECTIONS} connections, ${DURATION} s`,
    "| query | Backline req/s | p50 / p99 ms | errors |",
    "|---|---|---|---|",
  ];
  try {
    for (const q of QUERIES(s.artistId)) {
      const m = await load(`${server.url}/rest/v1/${q.table}?${q.query}`, headers);
      lines.push(
        `| ${q.name} | ${m.rps.toFixed(0)} | ${m.p50.toFixed(1)} / ${m.p99.toFixed(1)} | ${m.errors} |`,
      );
    }
  } finally {
    server.child.kill("SIGTERM");
  }
  return lines.join("\n");
}

await main();
