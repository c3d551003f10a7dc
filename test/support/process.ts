import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { NODE_BASELINE_FLAGS } from "./wasm-baseline.ts";

export { NODE_BASELINE_FLAGS };

/** Running Backline's real entry points as child processes, as a user would. */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export function tempDir(prefix = "backline-test-"): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** The environment a child runs with: this one, minus Backline's settings, plus `env`. */
export function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^(PORT|HOST|DATA_DIR|DATABASE_URL|MIGRATION_DATABASE_URL|DEV_TENANT|LOG_LEVEL|PUBLIC_URL|MIGRATE_ON_START)$/.test(
          k,
        ),
    ),
  );
  return { ...base, LOG_LEVEL: "warn", ...env };
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `backline <args>` to completion. */
export function runCli(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<RunResult> {
  return runToEnd([path.join(ROOT, "bin/backline.js"), ...args], env, timeoutMs);
}

/** Runs `node <args>` to completion (for entry points expected to exit). */
export function runToEnd(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...NODE_BASELINE_FLAGS, ...args], {
      cwd: ROOT,
      env: childEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timed out after ${timeoutMs} ms: ${args.join(" ")}\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface RunningServer {
  child: ChildProcess;
  url: string;
  output(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `node src/start/server.ts` (what `npm start` runs) and waits until /health answers. */
export async function startServer(env: Record<string, string>, timeoutMs = 60_000): Promise<RunningServer> {
  const port = env.PORT ?? String(await freePort());
  const child = spawn(process.execPath, [...NODE_BASELINE_FLAGS, path.join(ROOT, "src/start/server.ts")], {
    cwd: ROOT,
    env: childEnv({ ...env, PORT: port }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const early = await Promise.race([
      exited,
      new Promise<"running">((r) => setTimeout(() => r("running"), 100)),
    ]);
    if (early !== "running") throw new Error(`server exited with ${early} before it was ready:\n${out}`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`server not ready after ${timeoutMs} ms:\n${out}`);
    }
  }
  return {
    child,
    url,
    output: () => out,
    async stop(signal = "SIGTERM") {
      child.kill(signal);
      return exited;
    },
  };
}
