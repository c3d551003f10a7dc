// The /rest/v1 benchmark (bench/README.md): Backline against a baseline that runs the same SQL in
// the same RLS transaction, side by side in one run, loaded by autocannon from this process while
// each server runs in its own.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:rest
//
// Options (environment): BENCH_DURATION (seconds per measurement, default 10), BENCH_CONNECTIONS
// (default 10), BENCH_ROUNDS (default 2: each pair measured this many times, order alternating),
// BENCH_ACCOUNTS (default 51: the catalogue's size, bench/rest/catalog.ts), BENCH_ENGINES (default
// postgres,pglite; postgres skips the embedded figures), BENCH_STATEMENTS (default 200: runs per
// mode of the statement-alone comparison).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { generated } from "../../src/db/prepared.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Claims } from "../../src/db/types.ts";
import { buildRead } from "../../src/rest/execute.ts";
import { parseQuery } from "../../src/rest/parse-query.ts";
import { parsePrefer } from "../../src/rest/prefer.ts";
import { loadSchemaCache } from "../../src/rest/schema-cache.ts";
import {
  ADMIN_URL,
  average,
  CONNECTIONS,
  DURATION,
  load,
  type Measure,
  ROUNDS,
  SMOKE,
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
    const claims: Claims = { role: "authenticated", sub: s.userId, tenant_id: s.tenantId };
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
                ? await load(`${backline.url}/rest/v1/${q.table}?${q.query}`, headers, {
                    server: backline,
                    database: dbName,
                  })
                : await load(`${baseline.url}/${q.name}`, {}, { server: baseline, database: dbName });
            sums[which].push(m);
          }
        }
        const bl = average(sums.backline);
        const base = average(sums.baseline);
        table.push(
          `| ${q.name} | ${base.rps.toFixed(0)} | ${bl.rps.toFixed(0)} | ${(bl.rps / base.rps).toFixed(2)}x | ${base.p50.toFixed(1)} / ${base.p99.toFixed(1)} | ${bl.p50.toFixed(1)} / ${bl.p99.toFixed(1)} | ${(bl.p99 / base.p99).toFixed(2)}x | ${cpu(base)} | ${cpu(bl)} | ${bl.errors + base.errors} |`,
        );
      }
      results.push(
        "",
        `PostgreSQL, ${CONNECTIONS} connections, ${DURATION} s x ${ROUNDS} rounds, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
        "| query | baseline req/s | Backline req/s | ratio | baseline p50/p99 ms | Backline p50/p99 ms | p99 ratio | baseline CPU ms/req Node / PostgreSQL | Backline CPU ms/req Node / PostgreSQL | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
        ...table,
      );
    } finally {
      await stopServer(backline);
      await stopServer(baseline);
    }
    results.push("", await statementFigures(appUrl, claims, queries));
    if ((process.env.BENCH_ENGINES ?? "postgres,pglite").includes("pglite"))
      results.push("", await pgliteFigures());
  } finally {
    await owner.close();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
  process.stdout.write(`${results.join("\n")}\n`);
}

/** CPU milliseconds per request: the server's Node process / the database's PostgreSQL backends. */
function cpu(m: Measure): string {
  return `${m.serverCpu?.toFixed(2) ?? "?"} / ${m.databaseCpu?.toFixed(2) ?? "?"}`;
}

/**
 * The statement alone, as the database sees it: each query's SQL in the request's RLS transaction
 * on one connection, sent unnamed (parsed, rewritten with the policies and planned each time), as
 * a prepared statement (what /rest/v1 sends), and prepared but planned for its values every time
 * (plan_cache_mode = force_custom_plan). Only the statement is timed; the three take turns.
 */
async function statementFigures(
  url: string,
  claims: Claims,
  queries: ReturnType<typeof QUERIES>,
): Promise<string> {
  const RUNS = SMOKE ? 10 : Number(process.env.BENCH_STATEMENTS ?? 200);
  const db = new Db(new PostgresEngine({ url, poolSize: 1 }));
  const modes = ["unnamed", "prepared", "prepared, custom plans"] as const;
  const lines = [
    `The statement alone (one connection, ${RUNS} runs per mode in turns of 10; ms)`,
    "| query | unnamed p50 / p99 | prepared p50 / p99 | prepared, custom plans p50 / p99 | prepared / unnamed (p50) | plans (generic / custom) |",
    "|---|---|---|---|---|---|",
  ];
  try {
    const cache = await loadSchemaCache(db);
    // The app's default (REST_MAX_ROWS), as the servers run it.
    const maxRows = loadConfig({ ...process.env, DATABASE_URL: url }).restMaxRows;
    for (const q of queries) {
      const table = cache.tables.get(q.table);
      if (!table) throw new Error(`no table ${q.table}`);
      const { sql, params } = buildRead(
        cache,
        {
          table,
          query: parseQuery([...new URLSearchParams(q.query)]),
          prefer: parsePrefer(undefined),
          range: undefined,
        },
        maxRows,
      );
      const times: Record<(typeof modes)[number], number[]> = {
        unnamed: [],
        prepared: [],
        "prepared, custom plans": [],
      };
      for (let turn = 0; turn < RUNS / 10; turn++) {
        for (const mode of modes) {
          for (let i = 0; i < 10; i++) {
            await db.withRequestContext(
              claims,
              async (tx) => {
                if (mode === "prepared, custom plans")
                  await tx.exec("set local plan_cache_mode = force_custom_plan");
                const start = performance.now();
                await tx.query(mode === "unnamed" ? sql : generated(sql), params);
                times[mode].push(performance.now() - start);
              },
              { readOnly: true },
            );
          }
        }
      }
      // Whether PostgreSQL went over to a generic plan for the prepared statement (src/db/prepared.ts).
      const plans = await db.asService(
        async (tx) =>
          (
            await tx.query<{ generic_plans: string; custom_plans: string }>(
              "select generic_plans, custom_plans from pg_prepared_statements where name = $1",
              [generated(sql).name],
            )
          ).rows[0],
      );
      const pct = (xs: number[], p: number) =>
        [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? 0;
      const cell = (xs: number[]) => `${pct(xs, 0.5).toFixed(2)} / ${pct(xs, 0.99).toFixed(2)}`;
      lines.push(
        `| ${q.name} | ${cell(times.unnamed)} | ${cell(times.prepared)} | ${cell(times["prepared, custom plans"])} | ${(pct(times.prepared, 0.5) / pct(times.unnamed, 0.5)).toFixed(2)}x | ${plans?.generic_plans ?? "?"} / ${plans?.custom_plans ?? "?"} |`,
      );
    }
  } finally {
    await db.close();
  }
  return lines.join("\n");
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
