// What the benchmarks share: settings from the environment, database URLs, the servers of
// bench/rest/servers.ts in their own processes, and autocannon measurements.
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const ADMIN_URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  "postgres://postgres@127.0.0.1:5432/postgres";
/** Seconds per measurement. */
export const DURATION = Number(process.env.BENCH_DURATION ?? 10);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
/** Each pair is measured this many times, the order alternating. */
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
/** Seconds of warm-up before each measurement. */
export const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
/** BENCH_SMOKE=1: the smallest data that still runs every step (bench/smoke.ts), for benchmarks with no size of their own. */
export const SMOKE = process.env.BENCH_SMOKE === "1";

/** package.json's start script, e.g. `A=1 node --flag src/start/server.ts`: its variables and node's arguments. */
export function npmStart(): { env: Record<string, string>; args: string[] } {
  const script = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts.start as string;
  const words = script.trim().split(/\s+/);
  const env: Record<string, string> = {};
  while (words[0] && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0])) {
    const [name, ...value] = (words.shift() as string).split("=");
    env[name as string] = value.join("=");
  }
  if (words.shift() !== "node") throw new Error(`the start script does not run node: ${script}`);
  return { env, args: words };
}

/** npmStart() for a server started as `node src/start/server.ts`: its variables, and its flags as NODE_OPTIONS. */
export function npmStartEnv(): Record<string, string> {
  const start = npmStart();
  const flags = start.args.filter((a) => a.startsWith("--"));
  return { ...start.env, ...(flags.length ? { NODE_OPTIONS: flags.join(" ") } : {}) };
}

/** `url` pointed at database `db`, optionally as another login. */
export function withDatabase(url: string, db: string, user?: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  if (user) {
    u.username = user;
    u.password = "";
  }
  return u.toString();
}

/** A port free right now (the system's pick): a random one could meet another process's. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface Server {
  child: ChildProcess;
  url: string;
}

/** `node bench/rest/servers.ts <kind>` on a random port; resolves once it says it is ready. */
export async function startServer(
  kind: "backline" | "baseline",
  env: Record<string, string>,
): Promise<Server> {
  const port = String(await freePort());
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, "bench/rest/servers.ts"), kind], {
      cwd: ROOT,
      env: { ...process.env, ...env, PORT: port, LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    child.stdout?.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve({ child, url: `http://127.0.0.1:${port}` });
    });
    child.on("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
}

export async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  const exited = new Promise((resolve) => server.child.once("exit", resolve));
  server.child.kill("SIGTERM");
  await exited;
}

export interface Measure {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU milliseconds per request of the server's process (with `cpu` given to load). */
  serverCpu?: number;
  /** CPU milliseconds per request of the PostgreSQL backends serving that database. */
  databaseCpu?: number;
}

/** CPU seconds (user + system) process `pid` has used so far, read from /proc (Linux). */
export function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds used so far by each PostgreSQL backend connected to database `db` (their titles name it), by pid. */
export function postgresCpuSeconds(db: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const title = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (title.startsWith("postgres: ") && title.split(" ").includes(db))
        out.set(Number(entry), cpuSecondsOf(Number(entry)));
    } catch {
      // The process ended meanwhile.
    }
  }
  return out;
}

/**
 * The CPU seconds the backends used between two readings: per backend, so one that closed
 * meanwhile (node-postgres closes connections idle for 10 s) takes nothing away, and one that
 * opened counts whole.
 */
function postgresCpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, seconds] of after) total += seconds - (before.get(pid) ?? 0);
  return total;
}

/**
 * Warms the pool and the plans for WARMUP seconds (2), then measures for DURATION seconds. With `cpu`, also the
 * CPU time per request of the server's process and of the database's backends over the
 * measurement: a figure other work on the machine disturbs far less than requests per second.
 */
export async function load(
  url: string,
  headers: Record<string, string>,
  cpu?: { server: Server; database?: string },
): Promise<Measure> {
  await autocannon({ url, connections: CONNECTIONS, duration: WARMUP, headers });
  const pid = cpu?.server.child.pid;
  const before = pid
    ? {
        server: cpuSecondsOf(pid),
        db: cpu?.database ? postgresCpuSeconds(cpu.database) : new Map<number, number>(),
      }
    : undefined;
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  const m: Measure = {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
  };
  if (pid && before && r.requests.total > 0) {
    m.serverCpu = ((cpuSecondsOf(pid) - before.server) * 1000) / r.requests.total;
    if (cpu?.database)
      m.databaseCpu =
        (postgresCpuBetween(before.db, postgresCpuSeconds(cpu.database)) * 1000) / r.requests.total;
  }
  return m;
}

export function average(ms: Measure[]): Measure {
  const avg = (k: keyof Measure) => ms.reduce((a, m) => a + (m[k] ?? 0), 0) / ms.length;
  const out: Measure = { rps: avg("rps"), p50: avg("p50"), p99: avg("p99"), errors: avg("errors") };
  if (ms.every((m) => m.serverCpu !== undefined)) out.serverCpu = avg("serverCpu");
  if (ms.every((m) => m.databaseCpu !== undefined)) out.databaseCpu = avg("databaseCpu");
  return out;
}
