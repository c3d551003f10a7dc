import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { TEST_ENCRYPTION_KEY } from "./db.ts";
import { NODE_BASELINE_FLAGS, ROOT } from "./process.ts";

/**
 * `backline worker` as a real OS process (`node src/start/cli.ts worker`), as an operator runs it
 * beside the API processes (docs/operator.md, "Workers"). It logs at info, so its first line names
 * its Worker's id ("worker started"): the id it writes to internal.jobs.locked_by when it claims.
 * At info a worker logs only that, its "worker stopping" line and its warnings.
 */

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WorkerProcess {
  child: ChildProcess;
  /** The Worker's id, from its "worker started" line. */
  id: string;
  /** Everything it wrote, stdout and stderr. */
  output(): string;
  /** Its JSON log lines (pino), parsed. */
  logs(): Record<string, unknown>[];
  /** Resolves when it has exited. */
  exited: Promise<Exit>;
  /** Sends `signal` (SIGTERM: a graceful stop) and resolves with how it exited; SIGKILLs it after `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<Exit>;
}

/** Children still running, killed when the test process exits however it exits: a test never leaves one behind. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** The environment a worker runs with: this one, minus Backline's settings, plus `env`. */
function workerEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^(PORT|HOST|DATA_DIR|DATABASE_URL|MIGRATION_DATABASE_URL|DATABASE_POOL_SIZE|DEV_TENANT|LOG_LEVEL|PUBLIC_URL|MIGRATE_ON_START|SHUTDOWN_TIMEOUT_MS|WORKER|WORKER_CONCURRENCY|WORKER_LEASE_MS)$/.test(
          k,
        ),
    ),
  );
  // The test databases' master key: the tenants and secrets the test made are sealed with it.
  return { ...base, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, ...env, LOG_LEVEL: "info" };
}

function parseLines(text: string): Record<string, unknown>[] {
  const parsed: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      parsed.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // half a line, still being written
    }
  }
  return parsed;
}

/** Starts `backline worker` with `env` (DATABASE_URL, WORKER_*, …) and waits for its "worker started" line. */
export async function startWorkerProcess(
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<WorkerProcess> {
  const child = spawn(
    process.execPath,
    [...NODE_BASELINE_FLAGS, path.join(ROOT, "src/start/cli.ts"), "worker"],
    {
      cwd: ROOT,
      env: workerEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  running.add(child);
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<Exit>((resolve) => {
    child.once("exit", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
  });
  let gone: Exit | undefined;
  void exited.then((e) => {
    gone = e;
  });

  const deadline = Date.now() + timeoutMs;
  let id: string | undefined;
  while (id === undefined) {
    id = parseLines(out).find((l) => l.msg === "worker started")?.worker as string | undefined;
    if (id !== undefined) break;
    if (gone) throw new Error(`backline worker exited (${JSON.stringify(gone)}) before it started:\n${out}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`backline worker not started after ${timeoutMs} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }

  return {
    child,
    id,
    output: () => out,
    logs: () => parseLines(out),
    exited,
    async stop(signal = "SIGTERM", stopTimeoutMs = 15_000) {
      if (gone) return gone;
      child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), stopTimeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
