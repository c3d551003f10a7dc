// The two servers the /rest/v1 benchmark compares, one per process:
//   node bench/rest/servers.ts backline   the real app (buildApp), as `npm start` runs it
//   node bench/rest/servers.ts baseline   a minimal Fastify route per query that runs the SQL
//                                         Backline generates for it, in the same RLS transaction
//                                         (Db.withRequestContext) with the same driver and pool
// Settings come from the environment: DATABASE_URL, PORT, and for the baseline BENCH_CLAIMS and
// BENCH_QUERIES (JSON), written by run.ts.
import Fastify from "fastify";
import pino from "pino";
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { buildApp } from "../../src/http/app.ts";
import { buildRead } from "../../src/rest/execute.ts";
import { parseQuery } from "../../src/rest/parse-query.ts";
import { parsePrefer } from "../../src/rest/prefer.ts";
import { loadSchemaCache } from "../../src/rest/schema-cache.ts";

const which = process.argv[2];
const config = loadConfig(process.env);
if (config.database.engine !== "postgres" && which === "baseline")
  throw new Error("the baseline needs DATABASE_URL");

if (which === "backline") {
  const { openDatabase } = await import("../../src/db/open.ts");
  const db = await openDatabase(config, { migrate: false });
  const app = buildApp({ config, db, logger: pino({ level: "warn" }) });
  await app.listen({ port: config.port, host: "127.0.0.1" });
} else if (which === "baseline") {
  const dbc = config.database as { url: string; poolSize: number };
  const db = new Db(new PostgresEngine({ url: dbc.url, poolSize: dbc.poolSize }));
  const claims = JSON.parse(process.env.BENCH_CLAIMS ?? "{}");
  const queries = JSON.parse(process.env.BENCH_QUERIES ?? "[]") as {
    name: string;
    table: string;
    query: string;
  }[];
  const cache = await loadSchemaCache(db);
  const app = Fastify({ logger: false });
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
      config.restMaxRows,
    );
    app.get(`/${q.name}`, async (_request, reply) => {
      const body = await db.withRequestContext(
        claims,
        async (tx) => (await tx.query<{ body: string }>(sql, params)).rows[0]?.body ?? "[]",
        { readOnly: true },
      );
      return reply.type("application/json; charset=utf-8").send(body);
    });
  }
  await app.listen({ port: config.port, host: "127.0.0.1" });
} else {
  throw new Error("usage: servers.ts backline|baseline");
}
// Exit normally on a signal, so that --cpu-prof and the like can write their output.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(0));
process.stdout.write("ready\n");
