import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { Agent } from "undici";
import { copyMigratedDatabase } from "./support/db.ts";
import { freePort, NODE_BASELINE_FLAGS, ROOT, startServer, tempDir } from "./support/process.ts";

/**
 * Issue 27 at the level of processes: the embedded data directory's lock (two starts at once,
 * a `kill -9`), and a SIGTERM under load that no client sees as a reset.
 */

/** `npm start` as a child, resolving with how it ended or when it printed that it is ready. */
function start(dataDir: string, port: number) {
  const child = spawn(process.execPath, [...NODE_BASELINE_FLAGS, path.join(ROOT, "src/start/server.ts")], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: "warn", DATABASE_URL: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  child.stderr.on("data", (d) => {
    out += d;
  });
  const outcome = new Promise<{ ready: true } | { exited: number | null }>((resolve) => {
    child.on("exit", (code) => resolve({ exited: code }));
    const timer = setInterval(async () => {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/ready`)).ok) {
          clearInterval(timer);
          resolve({ ready: true });
        }
      } catch {
        // not yet
      }
    }, 100);
    child.on("exit", () => clearInterval(timer));
  });
  return { child, outcome, output: () => out };
}

describe("the embedded data directory's lock", () => {
  test("two starts at once: exactly one runs, the other names it; after kill -9 the next start takes over", async () => {
    const dataDir = tempDir("backline-lock-");
    const children: ReturnType<typeof start>[] = [];
    try {
      const a = start(dataDir, await freePort());
      const b = start(dataDir, await freePort());
      children.push(a, b);
      const [ra, rb] = await Promise.all([a.outcome, b.outcome]);
      const running = "ready" in ra ? a : b;
      const refused = "ready" in ra ? b : a;
      const refusal = "ready" in ra ? rb : ra;
      assert.ok(!("ready" in ra && "ready" in rb), "both started on one data directory");
      assert.deepEqual(refusal, { exited: 1 }, refused.output());
      assert.match(
        refused.output(),
        new RegExp(`backline: The embedded database in .* is in use by process ${running.child.pid}\\.`),
      );

      // kill -9: no clean-up runs, and the next start still gets the directory at once.
      running.child.kill("SIGKILL");
      await new Promise((r) => running.child.once("exit", r));
      const c = start(dataDir, await freePort());
      children.push(c);
      assert.deepEqual(await c.outcome, { ready: true }, c.output());
      c.child.kill("SIGTERM");
      await new Promise((r) => c.child.once("exit", r));
    } finally {
      // A failed assertion must not leave a server running (the test file would never end).
      for (const p of children)
        if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("SIGTERM under load", () => {
  test("50 keep-alive clients: every request is answered or cleanly refused, none is reset", async () => {
    const dataDir = tempDir("backline-stop-");
    // Migrated beforehand: this test is about stopping, not about a first start.
    await copyMigratedDatabase(dataDir);
    const server = await startServer({ DATA_DIR: dataDir });
    const dev = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8")) as {
      anon_key: string;
    };
    const agent = new Agent({ connections: 50, keepAliveTimeout: 30_000 });
    const outcomes: Record<string, number> = {};
    const note = (what: string) => {
      outcomes[what] = (outcomes[what] ?? 0) + 1;
    };
    let stopAt = 0;
    try {
      const clients = Array.from({ length: 50 }, async (_, i) => {
        // Each client sends until the server is gone: a refused connection is where it ends.
        for (;;) {
          const url = i % 2 ? `${server.url}/ready` : `${server.url}/auth/v1/settings`;
          try {
            const r = await fetch(url, {
              headers: { apikey: dev.anon_key },
              dispatcher: agent,
            } as RequestInit);
            await r.arrayBuffer();
            note(String(r.status));
          } catch (error) {
            const code = String((error as { cause?: { code?: string } }).cause?.code ?? error);
            note(code);
            if (code === "ECONNREFUSED") return;
            // Anything else (a reset, a hang-up) is what must not happen; stop this client.
            if (stopAt) return;
          }
        }
      });
      await new Promise((r) => setTimeout(r, 1500));
      stopAt = Date.now();
      const exit = await server.stop("SIGTERM");
      await Promise.all(clients);
      assert.equal(exit, 0, server.output());
      const bad = Object.keys(outcomes).filter((k) => !["200", "503", "ECONNREFUSED"].includes(k));
      assert.deepEqual(bad, [], JSON.stringify(outcomes));
      assert.ok((outcomes["200"] ?? 0) > 50, JSON.stringify(outcomes));
    } finally {
      await agent.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
