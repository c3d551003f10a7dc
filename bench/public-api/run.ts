// The /api/public/v1 benchmark: the public API's release endpoints (API key, one key-lookup
// transaction plus one read transaction per request) against the table interface answering the
// same question with the user's JWT (/rest/v1, one transaction), side by side in one run. Each
// side is the real app (bench/rest/servers.ts backline) in its own process, loaded in turn by
// autocannon from this process; the catalog is bench/rest's.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:public-api
//
// Options (environment): BENCH_DURATION (seconds per measurement, default 10), BENCH_CONNECTIONS
// (default 10), BENCH_ROUNDS (default 2: each pair measured this many times, order alternating).
// Besides requests per second, each side's CPU time per request: its server process and the
// PostgreSQL backends of the bench database (bench/support.ts load()), which the machine's other
// work disturbs far less.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Engine } from "../../src/db/types.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import { type Seeded, seed, userHeaders } from "../rest/catalog.ts";
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

// The public API allows 100 requests per 10 s per key by default: the bench tenant gets room.
const RATE_LIMIT = { max: 100_000_000, windowSeconds: 1 };

type Json = Record<string, unknown>;

interface Query {
  name: string;
  /** /api/public/v1 path, with the API key. */
  publicPath: string;
  /** /rest/v1 path answering the same question, with the user's JWT. */
  restPath: string;
  /** Extra headers for the /rest/v1 request. */
  restHeaders?: Record<string, string>;
  /** Throws unless both answers hold the same thing; returns a description of them. */
  check: (pub: Json, rest: Json[]) => string;
}

const QUERIES = (releaseId: string): Query[] => [
  {
    name: "release_detail",
    publicPath: `/api/public/v1/releases/${releaseId}`,
    restPath: `/rest/v1/releases?id=eq.${releaseId}&select=*,tracks(*),artist_profiles(*)`,
    check: (pub, rest) => {
      const tracks = (pub.tracks as Json[] | undefined)?.length;
      const artists = pub.artists as Json[] | undefined;
      const r = rest[0];
      if (pub.id !== releaseId || rest.length !== 1 || r?.id !== releaseId)
        throw new Error("release_detail: not the release asked for");
      if (!tracks || tracks !== (r.tracks as Json[] | undefined)?.length)
        throw new Error(`release_detail: ${tracks} tracks vs ${(r.tracks as Json[] | undefined)?.length}`);
      if (!artists?.length || artists[0]?.id !== (r.artist_profiles as Json | null)?.id)
        throw new Error("release_detail: the artists differ");
      return `1 release, ${tracks} tracks, ${artists.length} artist(s)`;
    },
  },
  {
    name: "list_50",
    publicPath: "/api/public/v1/releases?limit=50",
    // The same work on both sides: the public API counts the total for `total`/`has_more`.
    restPath: "/rest/v1/releases?select=*&order=created_at.desc,id.asc&limit=50",
    restHeaders: { prefer: "count=exact" },
    check: (pub, rest) => {
      const n = (pub.data as Json[] | undefined)?.length;
      if (n !== 50 || rest.length !== 50) throw new Error(`list_50: ${n} and ${rest.length} rows, not 50`);
      return `50 rows each (public API total ${pub.total})`;
    },
  },
];

interface Prepared {
  releaseId: string;
  apiKey: string;
  headers: { public: Record<string, string>; rest: Record<string, string> };
}

/** On a seeded catalog: a live API key for the user's account, room in the rate limit, a release to ask for. */
async function prepare(engine: Engine, s: Seeded): Promise<Prepared> {
  const { accountId, releaseId } = await engine.transaction(
    async (tx) => {
      await tx.query(`update internal.tenants set settings = settings || $2::jsonb where id = $1`, [
        s.tenantId,
        JSON.stringify({ public_api_rate_limit: RATE_LIMIT }),
      ]);
      const r = (
        await tx.query<{ account_id: string; release_id: string }>(
          `select ap.account_id, r.id as release_id from public.artist_profiles ap
           join public.releases r on r.artist_id = ap.id where ap.id = $1 order by r.title limit 1`,
          [s.artistId],
        )
      ).rows[0];
      if (!r) throw new Error("no release for the bench artist");
      return { accountId: r.account_id, releaseId: r.release_id };
    },
    { readOnly: false },
  );
  const { secret } = await issueKey(new Db(engine), { accountId, mode: "live", name: "bench" });
  return {
    releaseId,
    apiKey: secret,
    headers: { public: { authorization: `Bearer ${secret}` }, rest: await userHeaders(s) },
  };
}

/** One request, which must answer 200 with JSON; the public API's must show the lifted rate limit. */
async function getJson(url: string, headers: Record<string, string>, isPublic: boolean) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  // 206: /rest/v1 with Prefer: count=exact answers a partial range so.
  if (res.status !== 200 && res.status !== 206)
    throw new Error(`${url}: ${res.status} ${text.slice(0, 500)}`);
  if (isPublic && !res.headers.get("ratelimit-policy")?.includes(`q=${RATE_LIMIT.max};`))
    throw new Error(`${url}: rate limit not lifted (${res.headers.get("ratelimit-policy")})`);
  return { body: JSON.parse(text) as unknown, bytes: Buffer.byteLength(text) };
}

async function main() {
  const dbName = `backline_bench_public_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${dbName}`);
  const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
  const results: string[] = [];
  try {
    await migrate(owner);
    const s = await seed(owner);
    const p = await prepare(owner, s);
    const queries = QUERIES(p.releaseId);
    const env = {
      DATABASE_URL: withDatabase(ADMIN_URL, dbName, "authenticator"),
      DATABASE_POOL_SIZE: "10",
    };
    // Two identical processes of the real app, one loaded per side, so neither warms the other.
    const servers = { public: await startServer("backline", env), rest: await startServer("backline", env) };
    try {
      for (const q of queries) {
        const a = await getJson(`${servers.public.url}${q.publicPath}`, p.headers.public, true);
        const b = await getJson(
          `${servers.rest.url}${q.restPath}`,
          { ...p.headers.rest, ...q.restHeaders },
          false,
        );
        const what = q.check(a.body as Json, b.body as Json[]);
        results.push(`${q.name}: ${what}; public API ${a.bytes} bytes, /rest/v1 ${b.bytes} bytes`);
      }
      const table: string[] = [];
      for (const q of queries) {
        const runs = { public: [] as Measure[], rest: [] as Measure[] };
        for (let round = 0; round < ROUNDS; round++) {
          const order = round % 2 === 0 ? (["public", "rest"] as const) : (["rest", "public"] as const);
          for (const which of order) {
            const m =
              which === "public"
                ? await load(`${servers.public.url}${q.publicPath}`, p.headers.public, {
                    server: servers.public,
                    database: dbName,
                  })
                : await load(
                    `${servers.rest.url}${q.restPath}`,
                    { ...p.headers.rest, ...q.restHeaders },
                    { server: servers.rest, database: dbName },
                  );
            runs[which].push(m);
          }
        }
        const pub = average(runs.public);
        const rest = average(runs.rest);
        const ms = (v: number | undefined) => (v === undefined ? "?" : v.toFixed(2));
        table.push(
          `| ${q.name} | ${rest.rps.toFixed(0)} | ${pub.rps.toFixed(0)} | ${(pub.rps / rest.rps).toFixed(2)}x | ${rest.p50.toFixed(1)} / ${rest.p99.toFixed(1)} | ${pub.p50.toFixed(1)} / ${pub.p99.toFixed(1)} | ${(pub.p99 / rest.p99).toFixed(2)}x | ${ms(rest.serverCpu)} + ${ms(rest.databaseCpu)} | ${ms(pub.serverCpu)} + ${ms(pub.databaseCpu)} | ${pub.errors + rest.errors} |`,
        );
      }
      results.push(
        "",
        `PostgreSQL, ${CONNECTIONS} connections, ${DURATION} s x ${ROUNDS} rounds, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), Node ${process.versions.node}`,
        "| query | /rest/v1 req/s | public API req/s | ratio | /rest/v1 p50/p99 ms | public API p50/p99 ms | p99 ratio | /rest/v1 CPU ms per request (server + database) | public API CPU ms per request | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
        ...table,
      );
    } finally {
      await Promise.all([stopServer(servers.public), stopServer(servers.rest)]);
    }
    results.push("", await pgliteFigures());
  } finally {
    await owner.close();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
  process.stdout.write(`${results.join("\n")}\n`);
}

/** The public API endpoints on the embedded database (one connection: requests take turns). */
async function pgliteFigures(): Promise<string> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "backline-bench-public-pglite-"));
  try {
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    let p: Prepared;
    try {
      await migrate(engine);
      p = await prepare(engine, await seed(engine));
    } finally {
      await engine.close();
    }
    const server = await startServer("backline", { DATA_DIR: dataDir, DATABASE_URL: "" });
    const lines = [
      `PGlite (embedded), ${CONNECTIONS} connections, ${DURATION} s`,
      "| query | public API req/s | p50 / p99 ms | CPU ms per request (the server, its database thread included) | errors |",
      "|---|---|---|---|---|",
    ];
    try {
      for (const q of QUERIES(p.releaseId)) {
        // The same answers here too (the /rest/v1 side only checked, not measured).
        const a = await getJson(`${server.url}${q.publicPath}`, p.headers.public, true);
        const b = await getJson(`${server.url}${q.restPath}`, { ...p.headers.rest, ...q.restHeaders }, false);
        q.check(a.body as Json, b.body as Json[]);
        const m = await load(`${server.url}${q.publicPath}`, p.headers.public, { server });
        lines.push(
          `| ${q.name} | ${m.rps.toFixed(0)} | ${m.p50.toFixed(1)} / ${m.p99.toFixed(1)} | ${m.serverCpu?.toFixed(2) ?? "?"} | ${m.errors} |`,
        );
      }
    } finally {
      await stopServer(server);
    }
    return lines.join("\n");
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

await main();
