// The webhook delivery benchmark (bench/README.md, "Webhooks"): sustained deliveries per second from
// one WebhookDispatcher to a local receiver, against baselines that send the same signed bodies
// without the database, side by side in one run; and the delay from the commit of a state change
// to its delivery, at a steady rate.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:webhooks
//
// Options (environment): BENCH_EVENTS (5000), BENCH_ENDPOINTS (4), BENCH_BATCH (50 events per
// writing transaction), BENCH_CONCURRENCY (50, the dispatcher's default), BENCH_ROUNDS (2, order
// alternating), BENCH_RATE (200 events/s) and BENCH_LATENCY_SECONDS (10) for the latency,
// BENCH_VERIFY_EVERY (1: the receiver verifies every request; n: every nth), BENCH_PGLITE_EVENTS
// (1000; 0 skips the PGlite part) and BENCH_PGLITE_RATE (50 events/s for its latency),
// BENCH_DEADLINE (900 s for the whole run).
//
// Processes: this one writes the events and runs the receiver (so commit and arrival times are
// read on one clock, performance.now()); the dispatcher, and each baseline, run in a process of
// their own (child.ts), as a server or worker process would. PostgreSQL, the three of them share
// the machine. On PGlite (embedded, one connection, in one process) everything runs in this process.
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher.ts";
import { newSigningSecret, SecretBox } from "../../src/webhooks/secrets.ts";
import { ADMIN_URL, ROUNDS, withDatabase } from "../support.ts";
import { BenchReceiver } from "./receiver.ts";
import {
  type ChildMessage,
  type ChildTask,
  type EndpointSpec,
  EVENT_TYPE,
  ownCpuMs,
  type ParentMessage,
  percentile,
  postgresCpuMs,
  releaseData,
} from "./shared.ts";

const num = (name: string, fallback: number): number => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a number ≥ 0`);
  return v;
};
const EVENTS = num("BENCH_EVENTS", 5000);
const ENDPOINTS = Math.max(1, num("BENCH_ENDPOINTS", 4));
const BATCH = Math.max(1, num("BENCH_BATCH", 50));
const CONCURRENCY = Math.max(1, num("BENCH_CONCURRENCY", 50));
const RATE = Math.max(1, num("BENCH_RATE", 200));
const LATENCY_SECONDS = Math.max(1, num("BENCH_LATENCY_SECONDS", 10));
const VERIFY_EVERY = Math.max(1, num("BENCH_VERIFY_EVERY", 1));
const PGLITE_EVENTS = num("BENCH_PGLITE_EVENTS", 1000);
/** PGlite's rate for the latency: well under what it sustains (one connection, in this process). */
const PGLITE_RATE = Math.max(1, num("BENCH_PGLITE_RATE", 50));
const DEADLINE_S = num("BENCH_DEADLINE", 900);
/** The dispatcher's pool: the app's default DATABASE_POOL_SIZE. */
const DISPATCHER_POOL = 10;
/** How long one measurement may take before the run fails. */
const PHASE_TIMEOUT_MS = 180_000;

const HERE = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Clean-up and the deadline: whatever is started registers how to undo it; a failure or the
// deadline undoes everything (children killed, servers closed, the database dropped).

const cleanups: { what: string; fn: () => Promise<void> }[] = [];
const defer = (what: string, fn: () => Promise<void>) => cleanups.push({ what, fn });

let cleaning: Promise<void> | undefined;

/** Undoes everything started so far, last first; one clean-up at a time (the deadline's and main's share it). */
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    while (cleanups.length > 0) {
      const c = cleanups.pop();
      if (!c) break;
      const bounded = Promise.race([
        c.fn(),
        sleep(15_000).then(() => Promise.reject(new Error("timed out"))),
      ]);
      await bounded.catch((error: unknown) =>
        process.stderr.write(`clean-up: ${c.what}: ${String(error)}\n`),
      );
    }
  })().finally(() => {
    cleaning = undefined;
  });
  return cleaning;
}

const watchdog = setTimeout(() => {
  process.stderr.write(`bench:webhooks: the ${DEADLINE_S} s deadline passed; cleaning up\n`);
  void cleanUp().finally(() => process.exit(1));
}, DEADLINE_S * 1000);
watchdog.unref();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    process.stderr.write(`bench:webhooks: ${signal}; cleaning up\n`);
    void cleanUp().finally(() => process.exit(1));
  });
}

// ---------------------------------------------------------------------------------------------
// The sender process (child.ts).

interface Child {
  proc: ChildProcess;
  /** The next message of `type`; rejects if the process exits first or after `timeoutMs`. */
  next<T extends ChildMessage["type"]>(
    type: T,
    timeoutMs: number,
  ): Promise<Extract<ChildMessage, { type: T }>>;
  send(m: ParentMessage): void;
}

function forkChild(task: ChildTask): Child {
  const proc = fork(path.join(HERE, "child.ts"), [], {
    env: { ...process.env, BENCH_CHILD: JSON.stringify(task) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const inbox: ChildMessage[] = [];
  const waiters = new Set<() => void>();
  let exited = false;
  proc.on("message", (m: ChildMessage) => {
    inbox.push(m);
    for (const w of waiters) w();
  });
  proc.on("exit", () => {
    exited = true;
    for (const w of waiters) w();
  });
  defer(`sender process ${proc.pid}`, async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
  });
  return {
    proc,
    send: (m) => proc.send(m),
    next(type, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => done(new Error(`sender process: no ${type} within ${timeoutMs} ms`)),
          timeoutMs,
        );
        const check = () => {
          const i = inbox.findIndex((m) => m.type === type);
          if (i >= 0) return done(undefined, inbox.splice(i, 1)[0]);
          if (exited)
            done(new Error(`sender process exited (${proc.exitCode ?? proc.signalCode}) before ${type}`));
        };
        const done = (error: Error | undefined, m?: ChildMessage) => {
          clearTimeout(timer);
          waiters.delete(check);
          if (error) reject(error);
          else resolve(m as Extract<ChildMessage, { type: typeof type }>);
        };
        waiters.add(check);
        check();
      });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The measurements, on either engine.

interface Endpoint extends EndpointSpec {
  id: string;
}

/** A running dispatcher: stop() returns its process's CPU time (when it has a process of its own). */
interface Running {
  stop(): Promise<{ cpuMs: number | undefined; warnings: number }>;
}

interface Setup {
  db: Db;
  receiver: BenchReceiver;
  tenantId: string;
  /** The throughput account and its endpoints. */
  account: string;
  endpoints: Endpoint[];
  /** The latency account and its one endpoint. */
  latencyAccount: string;
  startDispatcher(): Promise<Running>;
  /** Succeeded deliveries so far per account, for the checks of the database's record. */
  recorded: Map<string, number>;
  /** PostgreSQL's CPU time for this database so far (ms); undefined on PGlite. */
  postgresCpu(): number | undefined;
}

interface Throughput {
  sender: string;
  deliveries: number;
  perSecond: number;
  /** From the first receipt to the last. */
  seconds: number;
  exactlyOnce: boolean;
  duplicates: number;
  missing: number;
  badSignatures: number;
  verified: number;
  failedSends: number;
  /** CPU ms per delivery: the sender's process, this process (receiver, and writer for the dispatcher), PostgreSQL. */
  cpu: { sender: number | undefined; bench: number; postgres: number | undefined };
  /** The dispatcher only: how long writing the events took, and until the last attempt was recorded. */
  writeSeconds?: number;
  recordedSeconds?: number;
  warnings?: number;
}

interface Latency {
  events: number;
  writeRate: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  min: number;
  exactlyOnce: boolean;
  warnings: number;
}

async function addEndpoint(db: Db, box: SecretBox, accountId: string, url: string, secret: string) {
  return db.asService(async (tx) => {
    const r = await tx.query<{ id: string }>(
      `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
       values ($1, $2, $3, $4) returning id`,
      [accountId, url, [EVENT_TYPE], box.encrypt(secret)],
    );
    const id = r.rows[0]?.id;
    if (!id) throw new Error("no endpoint");
    return id;
  });
}

async function prepare(
  db: Db,
  box: SecretBox,
  receiver: BenchReceiver,
  prefix: string,
  startDispatcher: () => Promise<Running>,
  postgresCpu: () => number | undefined,
): Promise<Setup> {
  const { tenant } = await createTenant(db, {
    name: `Webhook bench ${prefix}`,
    slug: `bench-${prefix}-${process.pid}`,
  });
  const account = await createAccount(db, { tenantId: tenant.id, name: "Night Owl Records" });
  const latencyAccount = await createAccount(db, { tenantId: tenant.id, name: "Latency Records" });
  const endpoints: Endpoint[] = [];
  for (let i = 0; i < ENDPOINTS; i++) {
    const secret = newSigningSecret();
    const url = receiver.route(`${prefix}-throughput-${i}`, i, secret);
    endpoints.push({ id: await addEndpoint(db, box, account.id, url, secret), url, secret });
  }
  const secret = newSigningSecret();
  await addEndpoint(db, box, latencyAccount.id, receiver.route(`${prefix}-latency`, 0, secret), secret);
  return {
    db,
    receiver,
    tenantId: tenant.id,
    account: account.id,
    endpoints,
    latencyAccount: latencyAccount.id,
    startDispatcher,
    recorded: new Map(),
    postgresCpu,
  };
}

/** Writes `count` events of `accountId` in transactions of `batch`; their ids. */
async function writeEvents(s: Setup, accountId: string, count: number, batch: number): Promise<string[]> {
  const ids: string[] = [];
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    const data = Array.from({ length: n }, (_, i) => releaseData(accountId, done + i));
    const rows = await s.db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string }>(
            `insert into internal.events (tenant_id, account_id, type, data)
             select $1, $2, $3, d from jsonb_array_elements($4::jsonb) with ordinality as t(d, n) order by n
             returning id`,
            [s.tenantId, accountId, EVENT_TYPE, JSON.stringify(data)],
          )
        ).rows,
    );
    for (const r of rows) ids.push(r.id);
  }
  return ids;
}

/** Waits until the database records every delivery of `accountId` as succeeded, each in one attempt. */
async function checkRecorded(s: Setup, accountId: string, added: number): Promise<void> {
  const expected = (s.recorded.get(accountId) ?? 0) + added;
  s.recorded.set(accountId, expected);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await s.db.asService(
      async (tx) =>
        (
          await tx.query<{ succeeded: number; other: number; attempts: number; logged: number }>(
            `select count(*) filter (where d.status = 'succeeded')::int as succeeded,
                    count(*) filter (where d.status <> 'succeeded')::int as other,
                    coalesce(sum(d.attempts), 0)::int as attempts,
                    (select count(*)::int from internal.webhook_attempts a
                     join internal.webhook_deliveries x on x.id = a.delivery_id where x.account_id = $1) as logged
             from internal.webhook_deliveries d where d.account_id = $1`,
            [accountId],
          )
        ).rows[0],
      { readOnly: true },
    );
    if (r && r.succeeded === expected && r.other === 0) {
      if (r.attempts !== expected || r.logged !== expected)
        throw new Error(`${r.attempts} attempts counted and ${r.logged} logged for ${expected} deliveries`);
      return;
    }
    if (Date.now() > deadline)
      throw new Error(`recorded: ${JSON.stringify(r)} after 60 s, ${expected} succeeded expected`);
    await sleep(50);
  }
}

/** Every expected id arrived exactly once at endpoint `index` (and nothing else did). */
function onceEach(
  receiver: BenchReceiver,
  index: number,
  ids: string[],
): { duplicates: number; missing: number } {
  const seen = receiver.tally.seen[index] ?? new Map<string, number>();
  let duplicates = 0;
  let missing = 0;
  for (const id of ids) {
    const n = seen.get(id) ?? 0;
    if (n === 0) missing++;
    else duplicates += n - 1;
  }
  // Ids that were not expected at all count as duplicates (something sent that was not written).
  duplicates += Math.max(0, seen.size - (ids.length - missing));
  return { duplicates, missing };
}

const perDelivery = (ms: number | undefined, n: number) => (ms === undefined ? undefined : ms / n);

async function dispatcherThroughput(s: Setup, events: number): Promise<Throughput> {
  const { receiver } = s;
  receiver.reset(s.endpoints.length);
  const total = events * s.endpoints.length;
  const running = await s.startDispatcher();
  const bench0 = ownCpuMs();
  const pg0 = s.postgresCpu();
  const t0 = performance.now();
  const ids = await writeEvents(s, s.account, events, BATCH);
  const written = performance.now();
  await receiver.waitFor(total, PHASE_TIMEOUT_MS, "dispatcher");
  await checkRecorded(s, s.account, total);
  const recorded = performance.now();
  const pg1 = s.postgresCpu();
  const bench1 = ownCpuMs();
  const { cpuMs, warnings } = await running.stop();
  const t = receiver.tally;
  let duplicates = 0;
  let missing = 0;
  s.endpoints.forEach((_, i) => {
    const r = onceEach(receiver, i, ids);
    duplicates += r.duplicates;
    missing += r.missing;
  });
  const seconds = (t.last - t.first) / 1000;
  return {
    sender: "WebhookDispatcher",
    deliveries: t.total,
    perSecond: t.total / seconds,
    seconds,
    exactlyOnce: duplicates === 0 && missing === 0 && t.total === total,
    duplicates,
    missing,
    badSignatures: t.badSignature,
    verified: t.verified,
    failedSends: 0,
    cpu: {
      sender: perDelivery(cpuMs, total),
      bench: (bench1 - bench0) / total,
      postgres: pg0 !== undefined && pg1 !== undefined ? Math.max(0, pg1 - pg0) / total : undefined,
    },
    writeSeconds: (written - t0) / 1000,
    recordedSeconds: (recorded - t.first) / 1000,
    warnings,
  };
}

async function baselineThroughput(s: Setup, client: "http" | "sender"): Promise<Throughput> {
  const { receiver } = s;
  receiver.reset(s.endpoints.length);
  const total = EVENTS * s.endpoints.length;
  const child = forkChild({
    kind: "baseline",
    client,
    endpoints: s.endpoints.map(({ url, secret }) => ({ url, secret })),
    accountId: s.account,
    events: EVENTS,
    concurrency: CONCURRENCY,
  });
  await child.next("ready", 30_000);
  const bench0 = ownCpuMs();
  const pg0 = s.postgresCpu();
  const done = await child.next("done", PHASE_TIMEOUT_MS);
  const pg1 = s.postgresCpu();
  const bench1 = ownCpuMs();
  const t = receiver.tally;
  let duplicates = 0;
  let missing = 0;
  for (const seen of t.seen) {
    for (const n of seen.values()) duplicates += n - 1;
    missing += Math.max(0, EVENTS - seen.size);
  }
  const seconds = (t.last - t.first) / 1000;
  return {
    sender: client === "http" ? "plain node:http loop (no database)" : "WebhookSender loop (no database)",
    deliveries: t.total,
    perSecond: t.total / seconds,
    seconds,
    exactlyOnce: duplicates === 0 && missing === 0 && t.total === total && done.failed === 0,
    duplicates,
    missing,
    badSignatures: t.badSignature,
    verified: t.verified,
    failedSends: done.failed,
    cpu: {
      sender: done.cpuMs / total,
      bench: (bench1 - bench0) / total,
      postgres: pg0 !== undefined && pg1 !== undefined ? Math.max(0, pg1 - pg0) / total : undefined,
    },
  };
}

/**
 * One event per transaction, RATE a second for LATENCY_SECONDS (after one second of warm-up, not
 * counted), to the latency account's one endpoint: for each, commit (noted when the commit has
 * returned to this process) to arrival at the receiver.
 */
async function latency(s: Setup, rate: number): Promise<Latency> {
  const { receiver } = s;
  receiver.reset(1);
  const running = await s.startDispatcher();
  const warm = rate;
  const count = rate * LATENCY_SECONDS;
  const interval = 1000 / rate;
  const committedAt = new Map<string, number>();
  const writes: Promise<void>[] = [];
  const start = performance.now() + 20;
  let measuredFrom = 0;
  for (let i = 0; i < warm + count; i++) {
    const target = start + i * interval;
    const wait = target - performance.now();
    if (wait >= 1) await sleep(wait);
    if (i === warm) measuredFrom = performance.now();
    const data = JSON.stringify(releaseData(s.latencyAccount, i));
    writes.push(
      s.db
        .asService(async (tx) => {
          const r = await tx.query<{ id: string }>(
            "insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, $3, $4::jsonb) returning id",
            [s.tenantId, s.latencyAccount, EVENT_TYPE, data],
          );
          return r.rows[0]?.id;
        })
        .then((id) => {
          if (!id) throw new Error("no event");
          if (i >= warm) committedAt.set(id, performance.now());
        }),
    );
  }
  await Promise.all(writes);
  const writeRate = count / ((performance.now() - measuredFrom) / 1000);
  await receiver.waitFor(warm + count, PHASE_TIMEOUT_MS, "latency");
  await checkRecorded(s, s.latencyAccount, warm + count);
  const { warnings } = await running.stop();
  const arrived = receiver.tally.arrivedAt[0] ?? new Map<string, number>();
  const delays: number[] = [];
  for (const [id, at] of committedAt) {
    const got = arrived.get(id);
    if (got === undefined) throw new Error(`event ${id} was not delivered`);
    delays.push(got - at);
  }
  delays.sort((a, b) => a - b);
  const seen = receiver.tally.seen[0] ?? new Map<string, number>();
  const once = [...seen.values()].every((n) => n === 1) && seen.size === warm + count;
  return {
    events: delays.length,
    writeRate,
    p50: percentile(delays, 50),
    p90: percentile(delays, 90),
    p99: percentile(delays, 99),
    max: delays[delays.length - 1] ?? Number.NaN,
    min: delays[0] ?? Number.NaN,
    // Every event written (the warm-up's too) arrived, once.
    exactlyOnce: once && receiver.tally.total === warm + count && receiver.tally.badSignature === 0,
    warnings,
  };
}

// ---------------------------------------------------------------------------------------------
// The engines.

interface PostgresResults {
  version: string;
  rounds: Throughput[][];
  latency: Latency;
}

async function onPostgres(receiver: BenchReceiver): Promise<PostgresResults> {
  const dbName = `backline_bench_webhooks_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  defer("admin connection", () => admin.end());
  const version =
    (await admin.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? "?";
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${dbName}`);
  defer(`database ${dbName}`, async () => {
    await admin.query(`drop database if exists ${dbName} with (force)`);
  });
  const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
  try {
    await migrate(owner);
  } finally {
    await owner.close();
  }
  const appUrl = withDatabase(ADMIN_URL, dbName, "authenticator");
  // The writer: a state change's transaction is its own, on the app's login role.
  // The server's master key: tenants are made with a sealed signing secret, and the dispatcher
  // (child.ts) opens the endpoints' secrets with the same key.
  const key = randomBytes(32);
  const db = new Db(new PostgresEngine({ url: appUrl, poolSize: 4, applicationName: "bench-writer" }), {
    secrets: new SecretBox(key),
  });
  defer("writer pool", () => db.close());
  const startDispatcher = async (): Promise<Running> => {
    const child = forkChild({
      kind: "dispatcher",
      url: appUrl,
      key: key.toString("base64"),
      poolSize: DISPATCHER_POOL,
      concurrency: CONCURRENCY,
    });
    await child.next("ready", 30_000);
    return {
      async stop() {
        child.send({ type: "stop" });
        const m = await child.next("stopped", 60_000);
        return { cpuMs: m.cpuMs, warnings: m.warnings };
      },
    };
  };
  const s = await prepare(db, db.secrets, receiver, "pg", startDispatcher, () => postgresCpuMs(dbName));

  const rounds: Throughput[][] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = ["http", "sender", "dispatcher"] as const;
    const results: Throughput[] = [];
    for (const which of round % 2 === 0 ? order : [...order].reverse()) {
      process.stderr.write(`postgres round ${round + 1}: ${which}\n`);
      results.push(
        which === "dispatcher" ? await dispatcherThroughput(s, EVENTS) : await baselineThroughput(s, which),
      );
    }
    // Always in the same order in the results: plain HTTP, WebhookSender, dispatcher.
    results.sort((a, b) => rank(a.sender) - rank(b.sender));
    rounds.push(results);
  }
  process.stderr.write("postgres: latency\n");
  const lat = await latency(s, RATE);
  return { version, rounds, latency: lat };
}

const rank = (sender: string) =>
  sender.startsWith("plain") ? 0 : sender.startsWith("WebhookSender") ? 1 : 2;

interface PgliteResults {
  throughput: Throughput;
  latency: Latency;
}

async function onPglite(receiver: BenchReceiver): Promise<PgliteResults> {
  const engine = await PgliteEngine.open();
  defer("PGlite", () => engine.close());
  await migrate(engine);
  const box = new SecretBox(randomBytes(32));
  const db = new Db(engine, { secrets: box });
  let warnings = 0;
  const complain = (...args: unknown[]) => {
    warnings++;
    process.stderr.write(
      `dispatcher: ${JSON.stringify(args, (_k, v: unknown) => (v instanceof Error ? v.stack : v))}\n`,
    );
  };
  const startDispatcher = async (): Promise<Running> => {
    warnings = 0;
    const d = new WebhookDispatcher({
      db,
      secrets: box,
      allowPrivate: true,
      concurrency: CONCURRENCY,
      logger: { info: () => {}, warn: complain, error: complain },
    });
    d.start();
    await sleep(200);
    return {
      async stop() {
        await d.stop();
        return { cpuMs: undefined, warnings };
      },
    };
  };
  const s = await prepare(db, box, receiver, "pglite", startDispatcher, () => undefined);
  process.stderr.write("pglite: throughput\n");
  const throughput = await dispatcherThroughput(s, PGLITE_EVENTS);
  process.stderr.write("pglite: latency\n");
  return { throughput, latency: await latency(s, PGLITE_RATE) };
}

// ---------------------------------------------------------------------------------------------

const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "-");
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "-");
const f3 = (n: number | undefined) => (n !== undefined && Number.isFinite(n) ? n.toFixed(3) : "-");
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

function latencyRow(name: string, l: Latency): string {
  return `| ${name} | ${l.events} | ${f0(l.writeRate)} | ${f1(l.p50)} | ${f1(l.p90)} | ${f1(l.p99)} | ${f1(l.max)} | ${f1(l.min)} | ${l.exactlyOnce ? "yes" : "NO"} |`;
}

async function main() {
  const machine = {
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model ?? "?",
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.versions.node,
    load1: os.loadavg()[0] ?? 0,
  };
  const receiver = await BenchReceiver.start(VERIFY_EVERY);
  defer("receiver", () => receiver.close());
  const started = performance.now();
  const pgResults = await onPostgres(receiver);
  const pgliteResults = PGLITE_EVENTS > 0 ? await onPglite(receiver) : undefined;
  await cleanUp();

  const lines: string[] = [];
  const verification =
    VERIFY_EVERY === 1 ? "every request verified" : `every ${VERIFY_EVERY}th request verified`;
  lines.push(
    `Machine: ${machine.cores} cores (${machine.cpu}), ${machine.memGiB} GiB, Node ${machine.node}, load ${machine.load1.toFixed(2)} at start; PostgreSQL ${pgResults.version}`,
    "",
    `PostgreSQL, throughput: ${EVENTS} events x ${ENDPOINTS} endpoints = ${EVENTS * ENDPOINTS} deliveries, concurrency ${CONCURRENCY}, events written ${BATCH} per transaction, ${ROUNDS} round(s); receiver: ${verification}`,
    "| sender | deliveries/s per round | mean | vs plain HTTP | CPU ms/delivery: sender / bench / PostgreSQL | exactly once |",
    "|---|---|---|---|---|---|",
  );
  const senders = pgResults.rounds[0]?.map((t) => t.sender) ?? [];
  const meanOf = (i: number) => mean(pgResults.rounds.map((r) => r[i]?.perSecond ?? Number.NaN));
  const cpuMean = (i: number, k: "sender" | "bench" | "postgres") => {
    const xs = pgResults.rounds.map((r) => r[i]?.cpu[k]);
    return xs.every((x) => x !== undefined) ? mean(xs as number[]) : undefined;
  };
  senders.forEach((name, i) => {
    const per = pgResults.rounds.map((r) => f0(r[i]?.perSecond ?? Number.NaN)).join(", ");
    const once = pgResults.rounds.every((r) => r[i]?.exactlyOnce && r[i]?.badSignatures === 0);
    lines.push(
      `| ${name} | ${per} | ${f0(meanOf(i))} | ${(meanOf(i) / meanOf(0)).toFixed(2)}x | ${f3(cpuMean(i, "sender"))} / ${f3(cpuMean(i, "bench"))} / ${f3(cpuMean(i, "postgres"))} | ${once ? "yes" : "NO"} |`,
    );
  });
  const dispatcherRuns = pgResults.rounds.map((r) => r[2]).filter((t): t is Throughput => t !== undefined);
  lines.push(
    "",
    `Dispatcher rounds: events written in ${dispatcherRuns.map((t) => `${f1(t.writeSeconds ?? Number.NaN)} s`).join(", ")}; ` +
      `first receipt to last: ${dispatcherRuns.map((t) => `${f1(t.seconds)} s`).join(", ")}; ` +
      `to the last attempt recorded: ${dispatcherRuns.map((t) => `${f1(t.recordedSeconds ?? Number.NaN)} s`).join(", ")}; ` +
      `dispatcher warnings: ${dispatcherRuns.reduce((n, t) => n + (t.warnings ?? 0), 0)}`,
    "",
    `Latency, commit to receipt: one event per transaction, ${LATENCY_SECONDS} s after 1 s of warm-up, one endpoint; PostgreSQL at ${RATE} events/s, PGlite at ${PGLITE_RATE}/s`,
    "| engine | events | write rate/s | p50 ms | p90 ms | p99 ms | max ms | min ms | exactly once |",
    "|---|---|---|---|---|---|---|---|---|",
    latencyRow("PostgreSQL", pgResults.latency),
  );
  if (pgliteResults) {
    const t = pgliteResults.throughput;
    lines.push(
      latencyRow("PGlite (embedded, all in one process)", pgliteResults.latency),
      "",
      `PGlite (embedded; dispatcher, writer and receiver in this one process): ${PGLITE_EVENTS} events x ${ENDPOINTS} endpoints = ${t.deliveries} deliveries at ${f0(t.perSecond)}/s (first receipt to last ${f1(t.seconds)} s; written in ${f1(t.writeSeconds ?? Number.NaN)} s); exactly once: ${t.exactlyOnce && t.badSignatures === 0 ? "yes" : "NO"}`,
    );
  }
  const goal = { deliveriesPerSecond: 1000, p50Ms: 100 };
  const met = meanOf(2) >= goal.deliveriesPerSecond && pgResults.latency.p50 < goal.p50Ms;
  lines.push(
    "",
    `Goal on PostgreSQL (>= ${goal.deliveriesPerSecond} deliveries/s, p50 < ${goal.p50Ms} ms): ${met ? "met" : "NOT met"} (${f0(meanOf(2))}/s, p50 ${f1(pgResults.latency.p50)} ms). Whole run ${f0((performance.now() - started) / 1000)} s.`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
  const json = {
    bench: "webhooks",
    machine,
    settings: {
      events: EVENTS,
      endpoints: ENDPOINTS,
      batch: BATCH,
      concurrency: CONCURRENCY,
      rounds: ROUNDS,
      rate: RATE,
      pgliteRate: PGLITE_RATE,
      latencySeconds: LATENCY_SECONDS,
      verifyEvery: VERIFY_EVERY,
      pgliteEvents: PGLITE_EVENTS,
    },
    postgres: pgResults,
    pglite: pgliteResults,
    goalMet: met,
  };
  process.stdout.write(
    `${JSON.stringify(json, (_k, v: unknown) => (typeof v === "number" ? Math.round(v * 1000) / 1000 : v))}\n`,
  );
  const allOnce =
    pgResults.rounds.every((r) => r.every((t) => t.exactlyOnce && t.badSignatures === 0)) &&
    pgResults.latency.exactlyOnce &&
    (!pgliteResults || (pgliteResults.throughput.exactlyOnce && pgliteResults.latency.exactlyOnce));
  if (!allOnce) process.exitCode = 1;
}

try {
  await main();
} catch (error) {
  process.stderr.write(`bench:webhooks failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  await cleanUp();
  process.exitCode = 1;
} finally {
  clearTimeout(watchdog);
}
