// The overload benchmark (issue 27): 100 connections of mixed reads and writes against the real
// server (`node src/start/server.ts` with `npm start`'s variables and flags) in its own process, and what it does
// under them: p50/p99, the share of 503s and 429s, any other failure (5xx, resets), and the
// server's idle and peak RSS. Side by side in one run:
//
//   embedded, main thread   the baseline: PGlite on the event-loop thread and an unbounded wait
//                           for the connection, as Backline ran before (PGLITE_THREAD=main and
//                           DATABASE_QUEUE_* set out of reach)
//   embedded                the default: PGlite in a worker thread, bounded wait (503 past it)
//   postgres                DATABASE_URL on the local server, pool of 10
//
//   npm run bench:load                                  # 100 connections, 15 s each
//   BENCH_DURATION=5 BENCH_TARGETS=embedded,postgres npm run bench:load -- --check   # what CI runs
//
// --check exits 1 if any answer was a reset, a timeout or a 5xx other than 503. BENCH_USERS (20):
// the signed-in users the connections act as (each signs up first: a password hash apiece).
// The workload: 4 of 5 requests read a page of releases (GET /rest/v1/releases), 1 in 5 inserts
// a release (POST /rest/v1/releases, return=minimal), each connection as one of 20 signed-in
// users with their own accounts. Rate limits are raised out of the way for the tenant (the bench
// measures the database path); refusals are counted either way.
import fs from "node:fs";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { Db } from "../../src/db/db.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { startServer } from "../../test/support/process.ts";
import { ADMIN_URL, npmStartEnv, ROOT, withDatabase } from "../support.ts";

const DURATION = Number(process.env.BENCH_DURATION ?? 15);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100);
const USERS = Number(process.env.BENCH_USERS ?? 20);
const TARGETS = (process.env.BENCH_TARGETS ?? "baseline,embedded,postgres").split(",");
const CHECK = process.argv.includes("--check");

interface Target {
  name: string;
  env: Record<string, string>;
  /** The target's database as its owner, while the server is stopped (to prepare the load). */
  withDb<T>(fn: (db: Db) => Promise<T>): Promise<T>;
  cleanup(): Promise<void>;
}

const LIMITS = {
  rest_rate_limits: {
    tenant: { max: 100_000_000, windowSeconds: 1 },
    caller: { max: 100_000_000, windowSeconds: 1 },
  },
};

interface User {
  email: string;
  accountId: string;
  artistId: string;
}

/** Raises the tenant's limits and gives each user's account an artist to release under. */
const prepare = (db: Db, tenantId: string, emails: string[]): Promise<User[]> =>
  db.asService(async (tx) => {
    await tx.query("update internal.tenants set settings = settings || $2::jsonb where id = $1", [
      tenantId,
      JSON.stringify(LIMITS),
    ]);
    const users: User[] = [];
    for (const email of emails) {
      const account = await tx.query<{ account_id: string }>(
        `select m.account_id from internal.memberships m join internal.users u on u.id = m.user_id
         where u.email = $1 and u.tenant_id = $2`,
        [email, tenantId],
      );
      const accountId = account.rows[0]?.account_id as string;
      const artist = await tx.query<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, $2) returning id",
        [accountId, `Artist of ${email}`],
      );
      users.push({ email, accountId, artistId: artist.rows[0]?.id as string });
    }
    return users;
  });

function embedded(name: string, env: Record<string, string>): Target {
  const dataDir = fs.mkdtempSync(path.join(ROOT, ".backline", "bench-load-"));
  return {
    name,
    // As `npm start` runs it: its environment and Node flags (package.json; bench/support.ts).
    env: { ...npmStartEnv(), DATA_DIR: dataDir, ...env },
    async withDb(fn) {
      const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
      try {
        return await fn(new Db(engine));
      } finally {
        await engine.close();
      }
    },
    async cleanup() {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function postgres(): Promise<Target> {
  const name = `backline_bench_load_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`drop database if exists ${name}`);
  await admin.query(`create database ${name}`);
  await admin.end();
  const dataDir = fs.mkdtempSync(path.join(ROOT, ".backline", "bench-load-pg-"));
  return {
    name: "postgres",
    env: {
      DATA_DIR: dataDir,
      DATABASE_URL: withDatabase(ADMIN_URL, name, "authenticator"),
      MIGRATION_DATABASE_URL: withDatabase(ADMIN_URL, name),
      DEV_TENANT: "true",
    },
    async withDb(fn) {
      const engine = new PostgresEngine({ url: withDatabase(ADMIN_URL, name), poolSize: 1 });
      try {
        return await fn(new Db(engine));
      } finally {
        await engine.close();
      }
    },
    async cleanup() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function rssOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
}

interface Result {
  name: string;
  requests: number;
  p50: number;
  p99: number;
  max: number;
  status: Record<string, number>;
  /** Resets, timeouts: answers that never came. */
  errors: number;
  idleRss: number;
  peakRss: number;
}

const PASSWORD = "correct horse battery staple";

async function signUp(url: string, anon: string, email: string): Promise<void> {
  const r = await fetch(`${url}/auth/v1/signup`, {
    method: "POST",
    headers: { apikey: anon, "content-type": "application/json" },
    body: JSON.stringify({ email, password: PASSWORD }),
  });
  if (!r.ok) throw new Error(`sign-up failed: ${r.status} ${await r.text()}`);
}

async function signIn(url: string, anon: string, email: string): Promise<Record<string, string>> {
  const r = await fetch(`${url}/auth/v1/token?grant_type=password`, {
    method: "POST",
    headers: { apikey: anon, "content-type": "application/json" },
    body: JSON.stringify({ email, password: PASSWORD }),
  });
  const body = (await r.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`sign-in failed: ${r.status} ${JSON.stringify(body)}`);
  return { apikey: anon, authorization: `Bearer ${body.access_token}` };
}

async function measure(target: Target): Promise<Result> {
  // First start: migrations, the development tenant and the users; then, stopped, the limits and
  // the artists; then the measured start.
  let server = await startServer(target.env, 120_000);
  const dev = JSON.parse(
    fs.readFileSync(path.join(target.env.DATA_DIR as string, "dev-tenant.json"), "utf8"),
  );
  const emails = Array.from({ length: USERS }, (_, i) => `load-${i}@example.com`);
  for (const email of emails) await signUp(server.url, dev.anon_key, email);
  await server.stop("SIGTERM");
  const prepared = await target.withDb((db) => prepare(db, dev.tenant_id, emails));
  server = await startServer(target.env, 120_000);
  const pid = server.child.pid as number;
  try {
    const users: (User & { headers: Record<string, string> })[] = [];
    for (const u of prepared) users.push({ ...u, headers: await signIn(server.url, dev.anon_key, u.email) });
    await new Promise((r) => setTimeout(r, 1000));
    const idleRss = rssOf(pid);
    let peakRss = idleRss;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, rssOf(pid));
    }, 100);
    const status: Record<string, number> = {};
    type SignedIn = (typeof users)[number];
    // Each connection acts as one user, picked on its first request.
    const as = (make: (u: SignedIn) => Partial<autocannon.Request>): autocannon.Request => ({
      setupRequest: (req, context) => {
        const ctx = context as { user?: SignedIn };
        ctx.user ??= users[Math.floor(Math.random() * users.length)];
        return { ...req, ...make(ctx.user as SignedIn) } as autocannon.Request;
      },
    });
    const r = await autocannon({
      url: server.url,
      connections: CONNECTIONS,
      duration: DURATION,
      timeout: 30,
      requests: [
        as((u) => ({
          method: "GET",
          path: "/rest/v1/releases?select=id,title,status&order=created_at.desc&limit=20",
          headers: u.headers,
        })),
        ...[1, 2, 3].map(() =>
          as((u) => ({
            method: "GET",
            path: "/rest/v1/releases?select=id,title&limit=20",
            headers: u.headers,
          })),
        ),
        as((u) => ({
          method: "POST",
          path: "/rest/v1/releases",
          headers: { ...u.headers, "content-type": "application/json", prefer: "return=minimal" },
          body: JSON.stringify({ account_id: u.accountId, artist_id: u.artistId, title: "Load test" }),
        })),
      ],
    });
    for (const [code, stat] of Object.entries(r.statusCodeStats ?? {})) status[code] = stat.count ?? 0;
    clearInterval(sampler);
    return {
      name: target.name,
      requests: r.requests.total,
      p50: r.latency.p50,
      p99: r.latency.p99,
      max: r.latency.max,
      status,
      errors: r.errors + r.timeouts,
      idleRss,
      peakRss,
    };
  } finally {
    await server.stop("SIGTERM");
    await target.cleanup();
  }
}

const MB = (n: number) => `${Math.round(n / 1024 / 1024)}`;
const share = (r: Result, code: string) =>
  `${(((r.status[code] ?? 0) / Math.max(1, r.requests)) * 100).toFixed(1)}%`;

fs.mkdirSync(path.join(ROOT, ".backline"), { recursive: true });
const targets: (() => Promise<Target>)[] = [];
if (TARGETS.includes("baseline")) {
  targets.push(async () =>
    embedded("embedded, main thread (baseline)", {
      PGLITE_THREAD: "main",
      DATABASE_QUEUE_MAX: "100000",
      DATABASE_QUEUE_TIMEOUT_MS: "600000",
    }),
  );
}
if (TARGETS.includes("embedded")) targets.push(async () => embedded("embedded", {}));
if (TARGETS.includes("postgres")) targets.push(postgres);

const results: Result[] = [];
for (const make of targets) results.push(await measure(await make()));

console.log(
  `\n${CONNECTIONS} connections, ${DURATION} s, 4 reads : 1 write, ${USERS} users\n\n` +
    "| target | requests | p50 ms | p99 ms | max ms | 2xx | 503 | 429 | other 5xx | resets/timeouts | idle RSS MB | peak RSS MB |\n" +
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
);
let failed = false;
for (const r of results) {
  const ok = Object.entries(r.status)
    .filter(([c]) => c.startsWith("2"))
    .reduce((a, [, n]) => a + n, 0);
  const other5xx = Object.entries(r.status)
    .filter(([c]) => c.startsWith("5") && c !== "503")
    .reduce((a, [, n]) => a + n, 0);
  if (other5xx > 0 || r.errors > 0) failed = true;
  console.log(
    `| ${r.name} | ${r.requests} | ${r.p50} | ${r.p99} | ${r.max} | ${ok} | ${share(r, "503")} | ${share(r, "429")} | ${other5xx} | ${r.errors} | ${MB(r.idleRss)} | ${MB(r.peakRss)} |`,
  );
}
if (CHECK && failed) {
  console.error("bench/load: an answer was a reset, a timeout or a 5xx other than 503");
  process.exit(1);
}
