// bench/money: allocating one month's royalty lines into the ledger (internal.allocate_import, the
// function the import calls in its transaction), side by side in one run with its floor — a plain
// INSERT … SELECT of the same ledger entries — and then a payee's statement at that size
// (issue 39, "Performance"). Figures in bench/README.md, "Money: allocation and statements".
//
//   npm run bench:money
//   BENCH_ENGINE=postgres|pglite (default postgres), BENCH_LINES (default 1,000,000),
//   BENCH_TRACKS (default 100,000), BENCH_ROUNDS (default 2), BENCH_STATEMENTS (default 200),
//   BENCH_FLOOR=0 (the allocation alone, no floor and so no ratio: for the statements at a size)
//
// The data (bench/money/seed.ts): one account, BENCH_TRACKS tracks with 1–5 payees each by their
// splits, BENCH_LINES lines of one usage month (one in 50 unmatched), a 10% fee and an advance.
//
// Each round, in alternating order, on a fresh connection:
//   - allocation: `select internal.allocate_import(import)` through db.asService, exactly as
//     src/royalties/import.ts calls it (sums, fee, recoupment, split versions, the ledger's
//     balance trigger);
//   - floor: the same number of ledger entries (the payee entries computed by a join of the lines
//     with the split shares, plus the store, fee and recoupable entries) inserted by the table
//     owner with one INSERT … SELECT into bench.ledger_floor, a copy of internal.ledger_entries
//     (LIKE … INCLUDING ALL: the same columns, defaults, identity, checks and five indexes) without
//     its triggers — the real table's statement trigger would check the floor's balance too, and
//     the floor is what writing the rows costs, nothing else.
// Both roll back, except in the last round, where both commit (the ledger then holds the month,
// for the statements); between rounds both tables are vacuumed (outside the timings).
// Peak memory: the benchmark process's RSS (on PGlite it holds the database, in a worker thread),
// and on PostgreSQL the backend's, read from /proc (VmHWM, and the largest RssAnon seen, sampled
// every 100 ms).
//
// Then the statement of the person payee with the most entries, in the month just allocated:
//   - draft: statementFor(), computed from the ledger (the CLI's `money statement`, and what the
//     approval computes for each payee), BENCH_STATEMENTS times;
//   - approved: that statement written as the approval writes it, then
//     GET /api/public/v1/me/statements/{id} with the payee's own access token over HTTP (buildApp),
//     BENCH_STATEMENTS times;
// and a few drafts of the account's own payee (the largest statement of the account).
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import pino from "pino";
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Engine, Tx } from "../../src/db/types.ts";
import { buildApp } from "../../src/http/app.ts";
import { statementFor } from "../../src/money/statements.ts";
import { SecretBox } from "../../src/secrets/box.ts";
import { userToken } from "../../test/support/seed.ts";
import { ADMIN_URL, cpuSecondsOf, freePort, withDatabase } from "../support.ts";
import { type MoneySeed, seedMoney } from "./seed.ts";

const ENGINE = (process.env.BENCH_ENGINE ?? "postgres") as "postgres" | "pglite";
const LINES = Number(process.env.BENCH_LINES ?? 1_000_000);
const TRACKS = Number(process.env.BENCH_TRACKS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const WITH_FLOOR = process.env.BENCH_FLOOR !== "0";
const STATEMENTS = Number(process.env.BENCH_STATEMENTS ?? 200);
/** The server's default shared_buffers for the embedded database (src/config.ts PGLITE_SHARED_BUFFERS). */
const PGLITE_SHARED_BUFFERS = process.env.BENCH_PGLITE_SHARED_BUFFERS ?? "8MB";

const started = performance.now();
const log = (s: string) =>
  process.stderr.write(
    `${new Date().toISOString().slice(11, 19)} +${Math.round((performance.now() - started) / 1000)}s ${s}\n`,
  );
const mb = (bytes: number) => Math.round(bytes / 1048576);

class Rollback extends Error {}

/** Where the benchmark's database is, and how to reach it as the app and as its owner. */
interface Target {
  db: Db;
  /** The tables' owner: PostgreSQL's superuser login, or PGlite's own identity. */
  owner: Engine;
  /** A fresh app connection (its own backend on PostgreSQL, so its peak memory is this run's). */
  freshDb(): Promise<Db>;
  /** Statements run outside a transaction (VACUUM). */
  maintenance(sql: string): Promise<void>;
  version: string;
  close(): Promise<void>;
}

const box = new SecretBox(randomBytes(32));
const cleanups: (() => Promise<unknown>)[] = [];

async function postgresTarget(): Promise<Target> {
  const name = `backline_bench_money_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const version =
    (await admin.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? "";
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${name}`);
  cleanups.push(async () => {
    if (process.env.BENCH_KEEP) log(`kept database ${name}`);
    else await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  const ownerUrl = withDatabase(ADMIN_URL, name);
  const owner = new PostgresEngine({ url: ownerUrl, poolSize: 1, applicationName: "bench-money-owner" });
  await migrate(owner);
  const appUrl = withDatabase(ADMIN_URL, name, "authenticator");
  const db = new Db(new PostgresEngine({ url: appUrl, poolSize: 4 }), { secrets: box });
  const maint = new pg.Client({ connectionString: ownerUrl });
  await maint.connect();
  return {
    db,
    owner,
    version,
    freshDb: async () =>
      new Db(new PostgresEngine({ url: appUrl, poolSize: 1, applicationName: "bench-money" }), {
        secrets: box,
      }),
    maintenance: async (sql) => {
      await maint.query(sql);
    },
    close: async () => {
      await maint.end();
      await db.close();
      await owner.close();
    },
  };
}

async function pgliteTarget(): Promise<Target> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "backline-bench-money-"));
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const open = () => PgliteEngine.open({ dataDir: dir, sharedBuffers: PGLITE_SHARED_BUFFERS });
  let engine = await open();
  await migrate(engine);
  const t: Target = {
    db: new Db(engine, { secrets: box }),
    owner: engine,
    version: "",
    // One connection: the app's and the owner's are the same.
    freshDb: async () => t.db,
    maintenance: async (sql) => {
      // VACUUM needs the database outside a transaction: the engine is closed meanwhile.
      await engine.close();
      const raw = await PGlite.create(dir);
      await raw.exec(sql);
      await raw.close();
      engine = await open();
      t.db = new Db(engine, { secrets: box });
      t.owner = engine;
    },
    close: async () => {
      await engine.close();
    },
  };
  t.version = await engine.transaction(
    async (tx) =>
      (await tx.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v ?? "",
    { readOnly: true },
  );
  return t;
}

/** Reads /proc/<pid>/status fields, in kB. */
function procStatus(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  try {
    for (const line of fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n")) {
      const m = /^(VmHWM|VmRSS|RssAnon|RssShmem):\s+(\d+) kB/.exec(line);
      if (m) out[m[1] as string] = Number(m[2]);
    }
  } catch {
    // Gone, or not readable.
  }
  return out;
}

interface Memory {
  /** CPU seconds of the work: the PostgreSQL backend's (user + system), or on PGlite this process's (its worker included). */
  cpuSeconds: number;
  /** This process's largest RSS seen (MB). */
  benchRssMb: number;
  /** The PostgreSQL backend's peak RSS (VmHWM, shared buffers it touched included) and largest private (RssAnon) seen. */
  backendHwmMb?: number;
  backendAnonMb?: number;
}

/** Samples memory every 100 ms until stopped. */
function sampler(): { backend(pid: number): void; stop(): Memory } {
  let pid: number | undefined;
  let cpuFrom = process.cpuUsage();
  let rss = process.memoryUsage.rss();
  let anon = 0;
  const tick = () => {
    rss = Math.max(rss, process.memoryUsage.rss());
    if (pid) anon = Math.max(anon, procStatus(pid).RssAnon ?? 0);
  };
  const timer = setInterval(tick, 100);
  return {
    backend: (p) => {
      pid = p;
      cpuFrom = { user: cpuSecondsOf(p) * 1e6, system: 0 };
    },
    stop: () => {
      tick();
      clearInterval(timer);
      const cpu = pid ? cpuSecondsOf(pid) * 1e6 : process.cpuUsage().user + process.cpuUsage().system;
      const m: Memory = {
        cpuSeconds: Number(((cpu - cpuFrom.user - cpuFrom.system) / 1e6).toFixed(1)),
        benchRssMb: mb(rss),
      };
      if (pid) {
        m.backendHwmMb = Math.round((procStatus(pid).VmHWM ?? 0) / 1024);
        m.backendAnonMb = Math.round(anon / 1024);
      }
      return m;
    },
  };
}

interface Run {
  seconds: number;
  entries: number;
  memory: Memory;
}

/**
 * Runs `work` in a transaction of `db`, timed from just before it to just after it (the commit
 * included when `commit`), with the memory sampled meanwhile; rolled back unless `commit`.
 */
async function measured(
  db: Db,
  asOwner: Engine | undefined,
  commit: boolean,
  work: (tx: Tx) => Promise<number>,
) {
  const mem = sampler();
  let out: { seconds: number; entries: number } | undefined;
  const body = async (tx: Tx) => {
    if (ENGINE === "postgres") {
      const pid = (await tx.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]?.pid;
      if (pid) mem.backend(pid);
    }
    const t0 = performance.now();
    const entries = await work(tx);
    out = { seconds: (performance.now() - t0) / 1000, entries };
    if (!commit) throw new Rollback();
    return t0;
  };
  try {
    const t0 = asOwner ? await asOwner.transaction(body, { readOnly: false }) : await db.asService(body);
    if (out) out.seconds = (performance.now() - t0) / 1000;
  } catch (error) {
    if (!(error instanceof Rollback)) throw error;
  }
  if (!out) throw new Error("the measured work did not run");
  return { ...out, memory: mem.stop() } satisfies Run;
}

const FLOOR = `
insert into bench.ledger_floor (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, recoupable_id, import_id,
  release_id, track_id, usage_period, store, territory, split_version_id, currency, amount, fee_amount, recouped_amount,
  period)
select l.tenant_id, $2::uuid, 'allocation', 'payee', l.account_id, sh.payee_id, null::uuid, l.import_id, l.release_id,
  l.track_id, l.period_start, l.store, l.territory, v.id, l.currency, (l.net - l.net * $3 * 0.01) * sh.share * 0.01,
  l.net * $3 * 0.01 * sh.share * 0.01, 0::numeric, $4::date
from internal.royalty_lines l
join internal.split_versions v on v.track_id = l.track_id
join internal.split_shares sh on sh.version_id = v.id
where l.import_id = $1 and l.account_id is not null and l.reverses_line_id is null
union all
select s.tenant_id, $2, 'allocation', h.holder, s.account_id, null, null, $1, null, null, null, null, null, null,
  s.currency, h.amount, null, null, $4
from (select tenant_id, account_id, currency, sum(net) as net from internal.royalty_lines
  where import_id = $1 and account_id is not null and reverses_line_id is null group by 1, 2, 3) s
cross join lateral (values ('store', -s.net), ('fees', s.net * $3 * 0.01)) h (holder, amount)
union all
select c.tenant_id, $2, 'allocation', 'recoupable', c.account_id, null, c.id, $1, null, null, null, null, null, null,
  c.currency, 0, null, null, $4
from internal.recoupables c join internal.royalty_imports i on i.id = $1 and c.tenant_id = i.tenant_id`;

async function allocation(t: Target, s: MoneySeed, commit: boolean): Promise<Run> {
  const db = await t.freshDb();
  try {
    return await measured(db, undefined, commit, async (tx) =>
      Number(
        (await tx.query<{ n: string }>("select internal.allocate_import($1)::text as n", [s.importId]))
          .rows[0]?.n,
      ),
    );
  } finally {
    if (db !== t.db) await db.close();
  }
}

async function floor(t: Target, s: MoneySeed, commit: boolean): Promise<Run> {
  // On PostgreSQL a fresh owner connection, so that the backend's peak is the floor's own.
  const owner =
    ENGINE === "postgres"
      ? new PostgresEngine({
          url: withDatabase(ADMIN_URL, `backline_bench_money_${process.pid}`),
          poolSize: 1,
          applicationName: "bench-money-floor",
        })
      : t.owner;
  try {
    return await measured(t.db, owner, commit, async (tx) => {
      const r = await tx.query(FLOOR, [
        s.importId,
        randomUUID(),
        10,
        `${new Date().toISOString().slice(0, 7)}-01`,
      ]);
      return r.rowCount;
    });
  } finally {
    if (owner !== t.owner) await owner.close();
  }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(s.length * p) - 1))] ?? 0;
};
const latency = (xs: number[]) => ({
  n: xs.length,
  p50: Number(pct(xs, 0.5).toFixed(1)),
  p95: Number(pct(xs, 0.95).toFixed(1)),
  p99: Number(pct(xs, 0.99).toFixed(1)),
  max: Number(pct(xs, 1).toFixed(1)),
});

async function statements(t: Target, s: MoneySeed) {
  const period = new Date().toISOString().slice(0, 7);
  const busiest = await t.db.asService(async (tx) => {
    const rows = (
      await tx.query<{ id: string; email: string | null; kind: string; n: string }>(
        `select p.id, p.email, p.kind, count(*)::text as n from internal.ledger_entries e
         join internal.payees p on p.id = e.payee_id where e.import_id = $1
         group by p.id, p.email, p.kind order by count(*) desc`,
        [s.importId],
      )
    ).rows;
    return {
      person: rows.find((r) => r.kind === "person"),
      account: rows.find((r) => r.kind === "account"),
      payees: rows.length,
      median: Number(rows[Math.floor(rows.length / 2)]?.n ?? 0),
    };
  });
  const payee = busiest.person;
  if (!payee?.email) throw new Error("no person payee was allocated anything");
  // Drafts, computed from the ledger.
  const draft = async (id: string) => {
    const t0 = performance.now();
    const doc = await t.db.asService((tx) => statementFor(tx, id, period));
    if (!doc) throw new Error(`no statement for payee ${id}`);
    return { ms: performance.now() - t0, doc };
  };
  for (let i = 0; i < 5; i++) await draft(payee.id);
  const drafts: number[] = [];
  for (let i = 0; i < STATEMENTS; i++) drafts.push((await draft(payee.id)).ms);
  const { doc } = await draft(payee.id);
  // The approved statement, as the approval writes it, read by the payee over HTTP.
  const user = await t.db.asService(async (tx) => {
    const u = (
      await tx.query<{ id: string; email: string; tenant_id: string }>(
        "insert into internal.users (tenant_id, email, email_confirmed_at, email_proven_at) values ($1, $2, now(), now()) returning id, email, tenant_id",
        [s.tenant.id, payee.email],
      )
    ).rows[0] as { id: string; email: string; tenant_id: string };
    doc.id = randomUUID();
    doc.status = "approved";
    doc.approved_at = new Date().toISOString();
    await tx.query(
      `insert into internal.statements (id, tenant_id, account_id, payee_id, period, currency, opening_balance,
         closing_balance, document, approved_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())`,
      [
        doc.id,
        s.tenant.id,
        doc.account_id,
        payee.id,
        `${period}-01`,
        doc.currency,
        doc.opening_balance,
        doc.closing_balance,
        JSON.stringify(doc),
      ],
    );
    return u;
  });
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "backline-bench-money-app-"));
  cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const base = `http://127.0.0.1:${port}`;
  const config = loadConfig({ PORT: String(port), PUBLIC_URL: base, LOG_LEVEL: "silent", DATA_DIR: dataDir });
  const app = buildApp({ config, db: t.db, logger: pino({ level: "silent" }) });
  await app.listen({ port, host: "127.0.0.1" });
  const gets: number[] = [];
  let bytes = 0;
  try {
    const token = await userToken(t.db, s.tenant, user, `${base}/auth/v1`);
    const get = async () => {
      const t0 = performance.now();
      const res = await fetch(`${base}/api/public/v1/me/statements/${doc.id}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`GET /me/statements/{id}: ${res.status} ${body.slice(0, 500)}`);
      bytes = body.length;
      return performance.now() - t0;
    };
    for (let i = 0; i < 10; i++) await get();
    for (let i = 0; i < STATEMENTS; i++) gets.push(await get());
  } finally {
    await app.close();
  }
  // Last: the account's own payee (two million entries at 10M lines), whose drafts grow this
  // process's heap to gigabytes — the server above runs in this process, so its statement GETs
  // are timed before, not beside, that heap (its collections would be the server's pauses).
  const accountDrafts: number[] = [];
  let accountEarnings = 0;
  if (busiest.account) {
    for (let i = 0; i < 3; i++) {
      const d = await draft(busiest.account.id);
      accountDrafts.push(d.ms);
      accountEarnings = d.doc.earnings.length;
    }
  }
  return {
    payees: busiest.payees,
    medianEntriesPerPayee: busiest.median,
    payee: { id: payee.id, entries: Number(payee.n), earnings: doc.earnings.length },
    draftMs: latency(drafts),
    meGetMs: { ...latency(gets), bytes },
    accountPayee: busiest.account
      ? {
          entries: Number(busiest.account.n),
          earnings: accountEarnings,
          draftMs: accountDrafts.map(Math.round),
        }
      : undefined,
  };
}

try {
  log(`engine ${ENGINE}, ${LINES} lines, ${TRACKS} tracks, ${ROUNDS} rounds`);
  const t = ENGINE === "postgres" ? await postgresTarget() : await pgliteTarget();
  cleanups.push(() => t.close());
  const seedStart = performance.now();
  const s = await seedMoney(t.db, t.owner, { lines: LINES, tracks: TRACKS }, log);
  await t.owner.transaction(
    (tx) => tx.exec("create table bench.ledger_floor (like internal.ledger_entries including all)"),
    { readOnly: false },
  );
  await t.maintenance("vacuum analyze");
  const seedSeconds = (performance.now() - seedStart) / 1000;
  log(`seeded in ${seedSeconds.toFixed(0)} s: ${s.matchedLines} matched lines`);

  const alloc: Run[] = [];
  const flo: Run[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const last = round === ROUNDS - 1;
    const order = !WITH_FLOOR
      ? ["allocation"]
      : round % 2 === 0
        ? ["allocation", "floor"]
        : ["floor", "allocation"];
    for (const side of order) {
      const r = side === "allocation" ? await allocation(t, s, last) : await floor(t, s, last);
      (side === "allocation" ? alloc : flo).push(r);
      log(
        `round ${round + 1} ${side}: ${r.entries} entries in ${r.seconds.toFixed(1)} s ${JSON.stringify(r.memory)}`,
      );
    }
    await t.maintenance(last ? "vacuum analyze internal.ledger_entries" : "vacuum internal.ledger_entries");
    await t.owner.transaction((tx) => tx.exec("truncate bench.ledger_floor"), { readOnly: false });
  }
  const entries = alloc[0]?.entries ?? 0;
  if (flo.some((f) => f.entries !== entries) || alloc.some((a) => a.entries !== entries))
    log(
      `WARNING: entry counts differ: allocation ${alloc.map((a) => a.entries)}, floor ${flo.map((f) => f.entries)}`,
    );
  log("statements");
  const st = await statements(t, s);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const allocSeconds = sum(alloc.map((r) => r.seconds));
  const floorSeconds = sum(flo.map((r) => r.seconds));
  const out = {
    engine: ENGINE,
    version: t.version,
    lines: LINES,
    matchedLines: s.matchedLines,
    tracks: TRACKS,
    entries,
    rounds: ROUNDS,
    seedSeconds: Math.round(seedSeconds),
    allocation: {
      seconds: alloc.map((r) => Number(r.seconds.toFixed(2))),
      linesPerSecond: Math.round((s.matchedLines * ROUNDS) / allocSeconds),
      entriesPerSecond: Math.round((entries * ROUNDS) / allocSeconds),
      memory: alloc.map((r) => r.memory),
    },
    floor: {
      seconds: flo.map((r) => Number(r.seconds.toFixed(2))),
      entriesPerSecond: Math.round((entries * ROUNDS) / floorSeconds),
      memory: flo.map((r) => r.memory),
    },
    ratio: WITH_FLOOR ? Number((floorSeconds / allocSeconds).toFixed(2)) : null,
    // The same by CPU time (the backend's, or this process's on PGlite): less disturbed by other work on the machine.
    cpuRatio: !WITH_FLOOR
      ? null
      : Number(
          (sum(flo.map((r) => r.memory.cpuSeconds)) / sum(alloc.map((r) => r.memory.cpuSeconds))).toFixed(2),
        ),
    statements: st,
    benchMaxRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
    loadAverage: os.loadavg().map((x) => Number(x.toFixed(1))),
    cpus: os.cpus().length,
    cpu: os.cpus()[0]?.model,
    memGb: Math.round(os.totalmem() / 1e9),
    node: process.version,
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  for (const c of cleanups.reverse()) await c().catch((e: unknown) => log(`cleanup: ${String(e)}`));
}
