// The /rest/v1 benchmark (bench/README.md): Backline against a baseline that runs the same SQL in
// the same RLS transaction, side by side in one run, loaded by autocannon from this process while
// each server runs in its own.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:rest
//
// Options (environment): BENCH_DURATION (seconds per measurement, default 10), BENCH_CONNECTIONS
// (default 10), BENCH_ROUNDS (default 2: each pair measured this many times, order alternating).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import {
  ADMIN_URL,
  average,
  CONNECTIONS,
  DURATION,
  load,
  type Measure,
  ROUNDS,
  startServer,
  stopServer,
  withDatabase,
} from "../support.ts";
import { seed, userHeaders } from "./catalog.ts";

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
        const bl = average(sums.backline);
        const base = average(sums.baseline);
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
      await stopServer(backline);
      await stopServer(baseline);
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
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "backline-bench-pglite-"));
  try {
    return await pgliteOn(dataDir);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function pgliteOn(dataDir: string): Promise<string> {
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
    await stopServer(server);
  }
  return lines.join("\n");
}

await main();
