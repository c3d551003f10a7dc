// bench/royalties: import a generated report of BENCH_LINES lines (default 10,000,000) on one
// engine, side by side with a baseline that COPYs the same normalised rows, then time
// GET /royalties?group_by=store for one account at that size. bench/README.md has the figures.
//
//   npm run bench:royalties -- postgres      (BENCH_DATABASE_URL / TEST_DATABASE_URL, else local)
//   npm run bench:royalties -- pglite        (BENCH_LINES=1000000 for a shorter run)
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import fs from "node:fs/promises";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import pino from "pino";
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { buildApp } from "../../src/http/app.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import { SecretBox } from "../../src/secrets/box.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { ADMIN_URL, ROOT, withDatabase } from "../support.ts";
import {
  ACCOUNTS,
  type Catalog,
  makeCatalog,
  writeReport as writeBacklineReport,
  writeBaseline,
  writeDsrReport,
} from "./generate.ts";

// Tenants are made with a signing secret, sealed: a throwaway key for the bench's database.
// One key for the whole run: the database is reopened after the import (the GET step), and a
// fresh key there could not open what the first one sealed (SecretKeyError, answered 500).
const BENCH_KEY = randomBytes(32);
const benchSecrets = () => new SecretBox(BENCH_KEY);

// BENCH_FORMAT=ddex-dsr: the same catalog and line count as a DDEX DSR flat file.
const writeReport = process.env.BENCH_FORMAT === "ddex-dsr" ? writeDsrReport : writeBacklineReport;

const ENGINE = (process.argv[2] ?? "postgres") as "postgres" | "pglite";
const LINES = Number(process.env.BENCH_LINES ?? 10_000_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 500);
const COLUMNS = `import_id, tenant_id, account_id, release_id, track_id, line_number, reporting_period,
  period_start, period_end, store, territory, upc, isrc, usage_type, units, gross, fees, net, currency`;

const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const dir = await fs.mkdtemp(path.join(os.tmpdir(), "backline-bench-royalties-"));
const cleanups: (() => Promise<unknown>)[] = [async () => fs.rm(dir, { recursive: true, force: true })];

async function seed(db: Db): Promise<{ tenantId: string; catalog: Catalog }> {
  const { tenant } = await createTenant(db, {
    name: "Bench",
    slug: `bench-${randomUUID().slice(0, 8)}`,
    // The public API's per-key rate limit would stop the latency loop.
    settings: { public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } },
  });
  const accounts: string[] = [];
  for (let i = 0; i < ACCOUNTS; i++)
    accounts.push((await createAccount(db, { tenantId: tenant.id, name: `Label ${i}` })).id);
  const catalog = makeCatalog(accounts);
  await db.asService(async (tx) => {
    const artists = new Map<string, string>();
    for (const a of accounts) {
      const r = await tx.query<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
        [a],
      );
      artists.set(a, r.rows[0]?.id ?? "");
    }
    await tx.query(
      `insert into public.releases (id, account_id, artist_id, title, upc)
       select id, account_id, artist_id, 'Bench release', upc from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[])
         as r(id, account_id, artist_id, upc)`,
      [
        catalog.releases.map((r) => r.id),
        catalog.releases.map((r) => r.accountId),
        catalog.releases.map((r) => artists.get(r.accountId)),
        catalog.releases.map((r) => r.upc),
      ],
    );
  });
  // In slices: each track takes an advisory lock on its ISRC until its transaction ends.
  for (let i = 0; i < catalog.tracks.length; i += 1000) {
    const slice = catalog.tracks.slice(i, i + 1000);
    await db.asService((tx) =>
      tx.query(
        `insert into public.tracks (id, release_id, account_id, title, isrc, duration, track_number)
         select id, release_id, account_id, 'Bench track', isrc, 200, n
         from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::int[]) as t(id, release_id, account_id, isrc, n)`,
        [
          slice.map((t) => t.id),
          slice.map((t) => t.releaseId),
          slice.map((t) => t.accountId),
          slice.map((t) => t.isrc),
          slice.map((_, j) => ((i + j) % 10) + 1),
        ],
      ),
    );
  }
  // Imports match only releases that went to the stores: move them on once their tracks are in
  // (the operator may set any status; delivered writes history but no event).
  await db.asService((tx) =>
    tx.query("update public.releases set status = 'delivered' where id = any ($1::uuid[])", [
      catalog.releases.map((r) => r.id),
    ]),
  );
  return { tenantId: tenant.id, catalog };
}

/**
 * The V8 flags of the import's process: BENCH_NODE_OPTIONS when set, else those the `backline`
 * command runs with (its shebang line), so that the figures are the operator's.
 */
function importNodeFlags(): string[] {
  const given = process.env.BENCH_NODE_OPTIONS;
  if (given !== undefined) return given.split(" ").filter(Boolean);
  const shebang = readFileSync(path.join(ROOT, "bin/backline.js"), "utf8").split("\n")[0] ?? "";
  return shebang
    .replace(/^#!.*?\bnode\b/, "")
    .split(" ")
    .filter(Boolean);
}

function runChild(target: string, tenantId: string, file: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const flags = importNodeFlags();
    const child = spawn(
      process.execPath,
      [...flags, path.join(ROOT, "bench/royalties/child.ts"), target, tenantId, file],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.on("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`import child exited ${code}`)),
    );
  });
}

async function measureGet(db: Db, accountId: string): Promise<Record<string, number>> {
  const config = loadConfig({ LOG_LEVEL: "silent", DATA_DIR: dir });
  const app = buildApp({ config, db, logger: pino({ level: "silent" }) });
  // Port 0: the system picks a free one (a random pick could meet another process's).
  await app.listen({ port: 0, host: "127.0.0.1" });
  const port = (app.server.address() as AddressInfo).port;
  try {
    const { secret } = await issueKey(db, { accountId, mode: "live" });
    const url = `http://127.0.0.1:${port}/api/public/v1/royalties?group_by=store`;
    const get = async (u: string) => {
      const t0 = performance.now();
      const res = await fetch(u, { headers: { authorization: `Bearer ${secret}` } });
      const body = (await res.json()) as { data?: unknown[] };
      if (res.status !== 200 || !body.data?.length)
        throw new Error(`GET ${u}: ${res.status} ${JSON.stringify(body)}`);
      return performance.now() - t0;
    };
    const pct = (xs: number[], p: number) =>
      xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * p) - 1)] ?? 0;
    const times: number[] = [];
    const lines: number[] = [];
    for (let i = 0; i < 20; i++) await get(url);
    for (let i = 0; i < REQUESTS; i++) {
      times.push(await get(url));
      if (i % 5 === 0) lines.push(await get(url.replace("group_by=store", "limit=100")));
    }
    return {
      p50: pct(times, 0.5),
      p99: pct(times, 0.99),
      max: pct(times, 1),
      linesP50: pct(lines, 0.5),
      linesP99: pct(lines, 0.99),
    };
  } finally {
    await app.close();
  }
}

try {
  const report = path.join(dir, "report.csv");
  const baseline = path.join(dir, "baseline.tsv");
  let db: Db;
  let target: string;
  let baselineSeconds: number;
  let tenantId: string;
  let catalog: Catalog;
  let version = "";

  if (ENGINE === "postgres") {
    const name = `backline_bench_royalties_${process.pid}`;
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    version =
      (await admin.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? "";
    await admin.query(rolesSetupSql("authenticator"));
    await admin.query(`create database ${name}`);
    cleanups.push(async () => {
      // BENCH_KEEP=1 leaves the database for a look at its plans (its name is logged).
      if (process.env.BENCH_KEEP) log(`kept database ${name}`);
      else await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    });
    const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, name), poolSize: 1 });
    await migrate(owner);
    await owner.close();
    target = withDatabase(ADMIN_URL, name, "authenticator");
    db = new Db(new PostgresEngine({ url: target, poolSize: 4 }), { secrets: benchSecrets() });
    ({ tenantId, catalog } = await seed(db));
    log(`generating ${LINES} lines`);
    await writeReport(catalog, report, LINES);
    const importId = randomUUID();
    await writeBaseline(catalog, baseline, LINES, importId, tenantId);
    // Baseline: plain COPY of the normalised rows into the same table, as the superuser.
    const raw = new pg.Client({ connectionString: withDatabase(ADMIN_URL, name) });
    await raw.connect();
    await raw.query(
      "insert into internal.royalty_imports (id, tenant_id, format, file_sha256, status) values ($1, $2, 'backline', $3, 'rejected')",
      [importId, tenantId, randomBytes(32).toString("hex")],
    );
    log("baseline COPY");
    const t0 = performance.now();
    await raw.query("begin");
    await pipeline(
      createReadStream(baseline, { highWaterMark: 1 << 20 }),
      raw.query(copyFrom(`copy internal.royalty_lines (${COLUMNS}) from stdin`)),
    );
    await raw.query("commit");
    baselineSeconds = (performance.now() - t0) / 1000;
    await raw.query("truncate internal.royalty_lines, internal.royalty_imports");
    await raw.query("vacuum analyze internal.royalty_lines");
    await raw.end();
  } else {
    target = path.join(dir, "pglite");
    const engine = await PgliteEngine.open({ dataDir: target });
    await migrate(engine);
    db = new Db(engine, { secrets: benchSecrets() });
    ({ tenantId, catalog } = await seed(db));
    await db.close();
    log(`generating ${LINES} lines`);
    await writeReport(catalog, report, LINES);
    const importId = randomUUID();
    await writeBaseline(catalog, baseline, LINES, importId, tenantId);
    // Baseline: PGlite's COPY FROM '/dev/blob', fed the normalised rows 100,000 at a time.
    const raw = await PGlite.create(target);
    version =
      (await raw.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? "";
    await raw.query(
      "insert into internal.royalty_imports (id, tenant_id, format, file_sha256, status) values ($1, $2, 'backline', $3, 'rejected')",
      [importId, tenantId, randomBytes(32).toString("hex")],
    );
    log("baseline COPY");
    const t0 = performance.now();
    await raw.transaction(async (tx) => {
      const copy = (text: string) =>
        tx.query(`copy internal.royalty_lines (${COLUMNS}) from '/dev/blob'`, [], { blob: new Blob([text]) });
      let pending = "";
      for await (const chunk of createReadStream(baseline, { encoding: "utf8", highWaterMark: 1 << 20 })) {
        pending += chunk;
        if (pending.length >= 32 << 20) {
          const cut = pending.lastIndexOf("\n") + 1;
          await copy(pending.slice(0, cut));
          pending = pending.slice(cut);
        }
      }
      if (pending) await copy(pending);
    });
    baselineSeconds = (performance.now() - t0) / 1000;
    await raw.query("truncate internal.royalty_lines, internal.royalty_imports");
    await raw.close();
    db = undefined as unknown as Db;
  }

  log("import");
  const result = await runChild(target, tenantId, report);
  log(JSON.stringify(result));
  // Autovacuum analyzes the new rows within a minute or so; the benchmark does not wait for it.
  if (ENGINE === "pglite") {
    const raw = await PGlite.create(target);
    await raw.query("analyze internal.royalty_lines");
    await raw.query("analyze internal.royalty_totals");
    await raw.close();
    db = new Db(await PgliteEngine.open({ dataDir: target }), { secrets: benchSecrets() });
  } else {
    const raw = new pg.Client({
      connectionString: withDatabase(ADMIN_URL, new URL(target).pathname.slice(1)),
    });
    await raw.connect();
    await raw.query("analyze internal.royalty_lines, internal.royalty_totals");
    await raw.end();
  }
  log("GET /royalties?group_by=store");
  const get = await measureGet(db, catalog.accounts[0] ?? "");
  await db.close();

  const importSeconds = Number(result.seconds);
  const size = (await fs.stat(report)).size;
  const out = {
    engine: ENGINE,
    version,
    lines: LINES,
    reportMb: Math.round(size / 1e6),
    baselineSeconds: Number(baselineSeconds.toFixed(1)),
    baselineLinesPerSecond: Math.round(LINES / baselineSeconds),
    importSeconds: Number(importSeconds.toFixed(1)),
    importLinesPerSecond: Math.round(LINES / importSeconds),
    ratio: Number((baselineSeconds / importSeconds).toFixed(2)),
    importMaxRssMb: Math.round(Number(result.maxRssMb)),
    importPhases: result.phases,
    nodeOptions: importNodeFlags().join(" "),
    get: Object.fromEntries(Object.entries(get).map(([k, v]) => [k, Number(v.toFixed(1))])),
    cpus: os.cpus().length,
    cpu: os.cpus()[0]?.model,
    memGb: Math.round(os.totalmem() / 1e9),
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  for (const c of cleanups.reverse()) await c().catch((e: unknown) => log(`cleanup: ${String(e)}`));
}
