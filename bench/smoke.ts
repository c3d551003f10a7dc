// Every benchmark in bench/, run once at a smoke size (bench/README.md, "Smoke run"): a second or
// a few hundred rows each, its side-by-side comparison included, on the embedded database and,
// where the benchmark has a PostgreSQL mode, on PostgreSQL (BENCH_DATABASE_URL, else
// TEST_DATABASE_URL, else the local server), one after another. No figure is asserted: a
// benchmark fails the run when it exits non-zero, outlives its time budget, or leaves a data
// directory, a file in the temporary folder or a PostgreSQL database behind. `.ci/run` runs it.
//
//   npm run bench:smoke                    # all of them
//   npm run bench:smoke -- rest webhooks   # those whose name starts with one of these words
//
// Each benchmark runs in a process group of its own (killed whole past its budget), with TMPDIR
// pointed at a folder of its own, which must be empty when it ends.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { ADMIN_URL, ROOT } from "./support.ts";

interface Smoke {
  name: string;
  /** The script and its arguments, from the repository's root. */
  argv: string[];
  /** The sizes: variables the script reads. */
  env: Record<string, string>;
  /**
   * Seconds before the process group is killed and the benchmark fails: for a hang, not a speed
   * limit, so well above what a loaded 2-core machine takes (bench/README.md).
   */
  budget: number;
  /** Chromium for the browser benchmarks. */
  browser?: boolean;
}

/** Short measurements for the autocannon benchmarks (bench/support.ts). */
const LOADED = { BENCH_DURATION: "1", BENCH_WARMUP: "0.5", BENCH_ROUNDS: "1", BENCH_CONNECTIONS: "4" };

const SMOKES: Smoke[] = [
  {
    name: "rest (postgres + pglite)",
    argv: ["bench/rest/run.ts"],
    env: { ...LOADED, BENCH_SMOKE: "1" },
    budget: 180,
  },
  {
    name: "public-api (postgres + pglite)",
    argv: ["bench/public-api/run.ts"],
    env: { ...LOADED, BENCH_SMOKE: "1" },
    budget: 180,
  },
  {
    name: "bulk-writes (postgres + pglite)",
    argv: ["bench/bulk-writes/run.ts"],
    env: { BENCH_RELEASES: "200", BENCH_TRACKS: "500", BENCH_ROUNDS: "1", BENCH_SINGLE: "3" },
    budget: 300,
  },
  {
    name: "webhooks (postgres + pglite)",
    argv: ["bench/webhooks/run.ts"],
    env: {
      BENCH_EVENTS: "100",
      BENCH_ENDPOINTS: "2",
      BENCH_ROUNDS: "1",
      BENCH_RATE: "50",
      BENCH_LATENCY_SECONDS: "1",
      BENCH_PGLITE_EVENTS: "50",
      BENCH_PGLITE_RATE: "20",
      BENCH_DEADLINE: "170",
    },
    budget: 180,
  },
  {
    name: "webhooks:hanging (postgres)",
    argv: ["bench/webhooks/hanging.ts"],
    env: { BENCH_SECONDS: "1", BENCH_RATE: "10" },
    budget: 180,
  },
  {
    name: "royalties (postgres)",
    argv: ["bench/royalties/run.ts", "postgres"],
    env: { BENCH_LINES: "2000", BENCH_REQUESTS: "5", BENCH_ACCOUNTS: "5" },
    budget: 180,
  },
  {
    name: "royalties (pglite)",
    argv: ["bench/royalties/run.ts", "pglite"],
    env: { BENCH_LINES: "2000", BENCH_REQUESTS: "5", BENCH_ACCOUNTS: "5" },
    budget: 180,
  },
  {
    name: "royalties, a DDEX DSR file (postgres)",
    argv: ["bench/royalties/run.ts", "postgres"],
    env: { BENCH_LINES: "2000", BENCH_REQUESTS: "5", BENCH_ACCOUNTS: "5", BENCH_FORMAT: "ddex-dsr" },
    budget: 180,
  },
  {
    name: "royalties:keyset (postgres)",
    argv: ["bench/royalties/keyset.ts"],
    env: { BENCH_LINES: "2000", BENCH_REQUESTS: "5", BENCH_ACCOUNTS: "5" },
    budget: 180,
  },
  {
    // Its other two targets (embedded, postgres) are the gate's "reduced load" step (.ci/run), which
    // runs them at 100 connections for 5 s with --check; here the one that step leaves out.
    name: "load (embedded main thread)",
    argv: ["bench/load/run.ts", "--check"],
    env: { BENCH_DURATION: "1", BENCH_CONNECTIONS: "10", BENCH_USERS: "3", BENCH_TARGETS: "baseline" },
    budget: 180,
  },
  {
    name: "jobs (postgres + pglite)",
    argv: ["bench/jobs/run.ts"],
    env: { BENCH_JOBS: "10" },
    budget: 180,
  },
  {
    name: "console (pglite)",
    argv: ["bench/console/run.ts"],
    env: { BENCH_RELEASES: "100", BENCH_ROUNDS: "1", BENCH_ENGINE: "pglite" },
    budget: 180,
    browser: true,
  },
  {
    name: "console (postgres)",
    argv: ["bench/console/run.ts"],
    env: { BENCH_RELEASES: "100", BENCH_ROUNDS: "1", BENCH_ENGINE: "postgres" },
    budget: 180,
    browser: true,
  },
  {
    name: "portal (pglite)",
    argv: ["bench/portal/run.ts"],
    env: { BENCH_RELEASES: "20", BENCH_TRACKS: "2", BENCH_ROUNDS: "1", BENCH_ENGINE: "pglite" },
    budget: 180,
    browser: true,
  },
  {
    name: "portal (postgres)",
    argv: ["bench/portal/run.ts"],
    env: { BENCH_RELEASES: "20", BENCH_TRACKS: "2", BENCH_ROUNDS: "1", BENCH_ENGINE: "postgres" },
    budget: 180,
    browser: true,
  },
  {
    name: "memory (pglite)",
    argv: ["bench/memory/run.ts"],
    env: { BENCH_IDLE_SECONDS: "1", BENCH_ROUNDS: "1" },
    budget: 180,
  },
  {
    name: "metrics (pglite)",
    argv: ["bench/metrics/run.ts"],
    env: { ...LOADED },
    budget: 180,
  },
  {
    name: "money (postgres)",
    argv: ["bench/money/run.ts"],
    env: {
      BENCH_ENGINE: "postgres",
      BENCH_LINES: "2000",
      BENCH_TRACKS: "100",
      BENCH_ROUNDS: "1",
      BENCH_STATEMENTS: "3",
    },
    budget: 180,
  },
  {
    name: "money (pglite)",
    argv: ["bench/money/run.ts"],
    env: {
      BENCH_ENGINE: "pglite",
      BENCH_LINES: "2000",
      BENCH_TRACKS: "100",
      BENCH_ROUNDS: "1",
      BENCH_STATEMENTS: "3",
    },
    budget: 180,
  },
  {
    name: "backup (pglite + postgres)",
    argv: ["bench/backup/run.ts"],
    env: { BENCH_RELEASES: "50", BENCH_MEDIA_FILES: "2", BENCH_MEDIA_MB: "1" },
    budget: 180,
  },
  {
    name: "staff (pglite + postgres)",
    argv: ["bench/staff/run.ts"],
    env: { ...LOADED, BENCH_TX: "50" },
    budget: 180,
  },
  {
    // Backline alone here: the Supabase Storage peer (STORAGE_PEER) is not part of the gate.
    name: "storage (postgres + pglite)",
    argv: ["bench/storage/run.ts"],
    env: { ...LOADED, BENCH_SMOKE: "1", STORAGE_PEER: "" },
    budget: 180,
  },
  {
    name: "storage:resumable (pglite)",
    argv: ["bench/storage/resumable.ts"],
    env: { BENCH_SMOKE: "1", STORAGE_PEER: "" },
    budget: 180,
  },
  {
    name: "stores sftp-delivery (pglite)",
    argv: ["bench/stores/sftp-delivery.ts", "pglite"],
    env: { BENCH_RELEASES: "3", BENCH_AUDIO_BYTES: "100000" },
    budget: 180,
  },
  {
    name: "stores sftp-delivery (postgres)",
    argv: ["bench/stores/sftp-delivery.ts", "postgres"],
    env: { BENCH_RELEASES: "3", BENCH_AUDIO_BYTES: "100000" },
    budget: 180,
  },
  {
    name: "chaos (postgres)",
    argv: ["bench/chaos/run.ts"],
    env: {
      CHAOS_RELEASES: "6",
      CHAOS_KILL_MIN_MS: "1000",
      CHAOS_KILL_MAX_MS: "2000",
      CHAOS_CONCURRENCY: "4",
    },
    budget: 300,
  },
];

/**
 * Whether a database that appeared during a benchmark is its own: every benchmark names its
 * databases with its process id (`backline_bench_<pid>`, `bench_backup_<pid>_a`, the test
 * helpers' `backline_test_<pid>_…`). Others may be another process's on a shared machine (a test
 * run beside this one), never to be touched.
 */
const madeBy = (name: string, pid: number | undefined) =>
  pid !== undefined && name.split("_").includes(String(pid));

async function databases(): Promise<Set<string>> {
  const c = new pg.Client({ connectionString: ADMIN_URL });
  await c.connect();
  try {
    const r = await c.query<{ datname: string }>("select datname from pg_database");
    return new Set(r.rows.map((row) => row.datname));
  } finally {
    await c.end();
  }
}

async function dropDatabase(name: string): Promise<void> {
  const c = new pg.Client({ connectionString: ADMIN_URL });
  await c.connect();
  try {
    await c.query(`drop database if exists "${name.replaceAll('"', '""')}" with (force)`);
  } finally {
    await c.end();
  }
}

/** Everything under `dir`, as paths relative to it (directories with their contents). */
function listTree(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).sort();
}

/** Data directories a benchmark may make in the checkout (bench/load makes its own there). */
const CHECKOUT_DATA = path.join(ROOT, ".backline");
const checkoutDirs = () =>
  new Set(
    fs.existsSync(CHECKOUT_DATA) ? fs.readdirSync(CHECKOUT_DATA).filter((n) => n.startsWith("bench-")) : [],
  );

interface Outcome {
  name: string;
  seconds: number;
  ok: boolean;
  why: string[];
}

/**
 * What the test suite's helpers keep in the temporary folder on purpose, across processes: the
 * migrated template of the embedded database (test/support/db.ts), which the browser benchmarks
 * use. Kept between benchmarks (moved in before, out after), so it is built once per run.
 */
const CACHE = /^backline-test-(template|pgdata)-[0-9a-f]+(\.tar)?$/;

function moveAll(from: string, to: string, which: (name: string) => boolean): void {
  for (const name of fs.readdirSync(from))
    if (which(name)) fs.renameSync(path.join(from, name), path.join(to, name));
}

async function runOne(smoke: Smoke, root: string, cache: string): Promise<Outcome> {
  const tmp = fs.mkdtempSync(path.join(root, "tmp-"));
  moveAll(cache, tmp, () => true);
  const dbsBefore = await databases();
  const dirsBefore = checkoutDirs();
  const why: string[] = [];
  const t0 = performance.now();
  const child = spawn(process.execPath, smoke.argv, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      ...smoke.env,
      BENCH_DATABASE_URL: ADMIN_URL,
      TEST_DATABASE_URL: ADMIN_URL,
      TMPDIR: tmp,
      ...(smoke.browser ? { CHROMIUM_PATH: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium" } : {}),
    },
  });
  // The output is kept and shown only when the benchmark fails (the last 60 lines).
  let output = "";
  const keep = (d: Buffer) => {
    output += d.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let timedOut = false;
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, signal);
    } catch {
      // Already gone.
    }
  };
  current = () => killGroup("SIGKILL");
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup("SIGTERM");
    setTimeout(() => killGroup("SIGKILL"), 10_000).unref();
  }, smoke.budget * 1000);
  const code = await new Promise<number | null>((resolve) =>
    child.on("close", (c, signal) => resolve(c ?? (signal ? 128 : null))),
  );
  clearTimeout(timer);
  current = undefined;
  // Whatever it started and left running (a server, a browser) goes with its group.
  killGroup("SIGKILL");
  const seconds = (performance.now() - t0) / 1000;
  if (timedOut) why.push(`outlived its ${smoke.budget} s budget`);
  else if (code !== 0) why.push(`exited with ${code}`);

  moveAll(tmp, cache, (name) => CACHE.test(name));
  const leftFiles = listTree(tmp);
  if (leftFiles.length > 0)
    why.push(`left ${leftFiles.length} file(s) in the temporary folder: ${leftFiles.slice(0, 5).join(", ")}`);
  fs.rmSync(tmp, { recursive: true, force: true });
  const leftDirs = [...checkoutDirs()].filter((n) => !dirsBefore.has(n));
  if (leftDirs.length > 0) {
    why.push(`left data directories in .backline/: ${leftDirs.join(", ")}`);
    for (const n of leftDirs) fs.rmSync(path.join(CHECKOUT_DATA, n), { recursive: true, force: true });
  }
  const leftDbs = [...(await databases())].filter((n) => !dbsBefore.has(n) && madeBy(n, child.pid));
  if (leftDbs.length > 0) {
    why.push(`left PostgreSQL database(s): ${leftDbs.join(", ")}`);
    for (const n of leftDbs) await dropDatabase(n);
  }
  const ok = why.length === 0;
  if (!ok) {
    const tail = output.trimEnd().split("\n").slice(-60).join("\n");
    process.stdout.write(`---- ${smoke.name}: its last output\n${tail}\n----\n`);
  }
  return { name: smoke.name, seconds, ok, why };
}

/** Kills the benchmark running now, for an interrupted run. */
let current: (() => void) | undefined;

async function main() {
  const words = process.argv.slice(2);
  const chosen = words.length ? SMOKES.filter((s) => words.some((w) => s.name.startsWith(w))) : SMOKES;
  if (chosen.length === 0) throw new Error(`no benchmark named ${words.join(", ")}`);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "backline-bench-smoke-"));
  const cache = path.join(root, "cache");
  fs.mkdirSync(cache);
  const load = () =>
    os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ");
  process.stdout.write(`bench:smoke: ${chosen.length} benchmark run(s); load average ${load()}\n`);
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.once(signal, () => {
      current?.();
      fs.rmSync(root, { recursive: true, force: true });
      process.stdout.write(`bench:smoke: ${signal}, stopped\n`);
      process.exit(1);
    });
  const t0 = performance.now();
  const outcomes: Outcome[] = [];
  try {
    for (const smoke of chosen) {
      process.stdout.write(`-> ${smoke.name}\n`);
      const o = await runOne(smoke, root, cache);
      outcomes.push(o);
      process.stdout.write(
        `   ${o.ok ? "ok" : "FAILED"} in ${o.seconds.toFixed(1)} s${o.ok ? "" : `: ${o.why.join("; ")}`}\n`,
      );
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  const total = (performance.now() - t0) / 1000;
  const width = Math.max(...outcomes.map((o) => o.name.length));
  process.stdout.write("\nbench:smoke summary\n");
  for (const o of outcomes)
    process.stdout.write(
      `  ${o.ok ? "ok    " : "FAILED"}  ${o.name.padEnd(width)}  ${o.seconds.toFixed(1).padStart(6)} s${o.ok ? "" : `  ${o.why.join("; ")}`}\n`,
    );
  const failed = outcomes.filter((o) => !o.ok).length;
  process.stdout.write(
    `  ${outcomes.length - failed} passed, ${failed} failed, ${total.toFixed(0)} s in all; load average ${load()}\n`,
  );
  if (failed > 0) process.exitCode = 1;
}

await main();
