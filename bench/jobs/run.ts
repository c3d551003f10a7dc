// Issue 20, item 2: how long after its enqueue commits a job starts in another process, with
// workers woken by LISTEN/NOTIFY and with the polling they did before (pollMs 1000); and on the
// embedded database, in the same process. Figures in bench/README.md.
import { type ChildProcess, fork } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { enqueue } from "../../src/jobs/queue.ts";
import { Worker } from "../../src/jobs/worker.ts";
import { ADMIN_URL, ROOT, withDatabase } from "../support.ts";

/** Jobs per side; one every GAP_MS (with jitter), both sides interleaved. */
const JOBS = Number(process.env.BENCH_JOBS ?? 200);
const GAP_MS = Number(process.env.BENCH_GAP_MS ?? 25);

const wallMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

function summary(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  return { n: s.length, p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99), max: s.at(-1) };
}

interface Child {
  child: ChildProcess;
  started: Map<number, number>;
  next(type: string): Promise<void>;
}

function forkWorker(url: string, kind: string, listen: boolean): Child {
  const child = fork(path.join(ROOT, "bench/jobs/child.ts"), {
    env: { ...process.env, BENCH_CHILD: JSON.stringify({ url, kind, listen }) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const started = new Map<number, number>();
  const waiters: { type: string; resolve: () => void }[] = [];
  child.on("message", (m: { type: string; n?: number; at?: number }) => {
    if (m.type === "started" && m.n !== undefined && m.at !== undefined) started.set(m.n, m.at);
    for (const w of waiters.filter((x) => x.type === m.type)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  return {
    child,
    started,
    next: (type) => new Promise((resolve) => waiters.push({ type, resolve })),
  };
}

async function onPostgres() {
  const dbName = `backline_bench_jobs_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${dbName}`);
  const children: Child[] = [];
  const db = new Db(
    new PostgresEngine({
      url: withDatabase(ADMIN_URL, dbName, "authenticator"),
      poolSize: 2,
      applicationName: "bench-jobs",
    }),
  );
  try {
    const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 1 });
    await migrate(owner);
    await owner.close();
    const url = withDatabase(ADMIN_URL, dbName, "authenticator");
    const listening = forkWorker(url, "bench.listen", true);
    const polling = forkWorker(url, "bench.poll", false);
    children.push(listening, polling);
    await Promise.all([listening.next("ready"), polling.next("ready")]);
    const committed = { listen: new Map<number, number>(), poll: new Map<number, number>() };
    for (let n = 0; n < JOBS; n++) {
      for (const side of ["listen", "poll"] as const) {
        await db.asService((tx) => enqueue(tx, `bench.${side}`, { n }));
        committed[side].set(n, wallMs());
      }
      await sleep(GAP_MS * (0.5 + Math.random()));
    }
    await sleep(2500);
    const lat = (side: "listen" | "poll", c: Child) =>
      [...committed[side]].flatMap(([n, at]) => {
        const s = c.started.get(n);
        return s === undefined ? [] : [s - at];
      });
    return {
      version: (await admin.query<{ v: string }>("select current_setting('server_version') as v")).rows[0]?.v,
      listen: summary(lat("listen", listening)),
      poll: summary(lat("poll", polling)),
    };
  } finally {
    for (const c of children) {
      c.child.send({ type: "stop" });
      await Promise.race([c.next("stopped"), sleep(5000)]);
      c.child.kill();
    }
    await db.close();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
}

async function onPglite() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-jobs-"));
  const engine = await PgliteEngine.open({ dataDir: dir });
  await migrate(engine);
  const db = new Db(engine);
  const started = new Map<number, number>();
  const worker = new Worker({
    db,
    handlers: {
      "bench.local": async (job) => {
        started.set(Number(job.payload.n), wallMs());
      },
    },
  });
  worker.start();
  await sleep(500);
  const committed = new Map<number, number>();
  const jobs = Math.min(JOBS, 100);
  for (let n = 0; n < jobs; n++) {
    await db.asService((tx) => enqueue(tx, "bench.local", { n }));
    committed.set(n, wallMs());
    await sleep(GAP_MS * (0.5 + Math.random()));
  }
  await sleep(1500);
  await worker.stop();
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return summary(
    [...committed].flatMap(([n, at]) => (started.has(n) ? [(started.get(n) as number) - at] : [])),
  );
}

const fmt = (s: ReturnType<typeof summary>) =>
  `${s.n} jobs | ${s.p50.toFixed(1)} | ${s.p90.toFixed(1)} | ${s.p99.toFixed(1)} | ${(s.max ?? Number.NaN).toFixed(1)}`;

const pgResult = await onPostgres();
console.log(
  `PostgreSQL ${pgResult.version}, ${os.cpus().length} cores, load ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
console.log("| worker | jobs | p50 ms | p90 ms | p99 ms | max ms |");
console.log("|---|---|---|---|---|---|");
console.log(`| other process, woken by LISTEN/NOTIFY | ${fmt(pgResult.listen)} |`);
console.log(`| other process, polling every 1000 ms (before) | ${fmt(pgResult.poll)} |`);
if (process.env.BENCH_PGLITE !== "0") {
  const local = await onPglite();
  console.log(`| PGlite, same process, woken by its notice | ${fmt(local)} |`);
}
