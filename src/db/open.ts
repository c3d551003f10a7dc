import fs from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import type { Config } from "../config.ts";
import { sealPlainSecrets } from "../secrets/at-rest.ts";
import { loadSecretBox } from "../secrets/box.ts";
import type { QueueLimits } from "./admission.ts";
import { Db } from "./db.ts";
import type { FirstStartJob, FirstStartResult } from "./first-start.ts";
import { BASELINE_WASM_FLAGS } from "./memory.ts";
import { loadMigrations, migrate, migrationStatus } from "./migrate.ts";
import { PgliteEngine } from "./pglite.ts";
import type { PostgresEngine } from "./postgres.ts";
import type { Engine } from "./types.ts";

export class DatabaseUnavailableError extends Error {
  override name = "DatabaseUnavailableError";
}

/** host:port/database as user, without the password: safe to print. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${decodeURIComponent(u.username)}@` : "";
    return `${user}${u.hostname}${u.port ? `:${u.port}` : ""}${u.pathname}`;
  } catch {
    return "(unparseable URL)";
  }
}

async function connectPostgres(
  url: string,
  poolSize: number,
  purpose: string,
  queue?: QueueLimits,
): Promise<PostgresEngine> {
  // The PostgreSQL driver is loaded only where it is used (not by a server on the embedded database).
  const { PostgresEngine } = await import("./postgres.ts");
  const engine = new PostgresEngine({ url, poolSize, applicationName: `backline ${purpose}`, queue });
  try {
    await engine.transaction((tx) => tx.query("select 1"), { readOnly: true });
    return engine;
  } catch (error) {
    await engine.close().catch(() => {});
    const reason = error instanceof Error ? error.message || error.name : String(error);
    throw new DatabaseUnavailableError(`Cannot connect to PostgreSQL at ${describeUrl(url)}: ${reason}`, {
      cause: error,
    });
  }
}

export interface OpenOptions {
  /** Apply pending migrations (as the migration login on PostgreSQL). */
  migrate: boolean;
  logger?: Pick<Logger, "info">;
}

/** Opens the configured database, applying migrations when asked, and returns the request-facing Db. */
export async function openDatabase(config: Config, options: OpenOptions): Promise<Db> {
  const dbc = config.database;
  const secrets = loadSecretBox(config);
  let engine: Engine;
  if (dbc.engine === "pglite") {
    // A first start (no database in the directory yet) creates it and applies the migrations in a
    // child process, with the directory locked by this one; the memory they take goes back to
    // the operating system when it exits (src/db/first-start.ts, docs/operations.md, "Memory").
    const firstStart =
      options.migrate && dbc.thread === "worker"
        ? async () => {
            if (fs.existsSync(path.join(dbc.dataDir, "PG_VERSION"))) return;
            const applied = await createInChildProcess({
              dataDir: dbc.dataDir,
              sharedBuffers: dbc.sharedBuffers,
            });
            for (const m of applied)
              options.logger?.info({ version: m.version, name: m.name }, "migration applied");
          }
        : undefined;
    let pglite = await PgliteEngine.open({
      dataDir: dbc.dataDir,
      queue: config.databaseQueue,
      thread: dbc.thread,
      sharedBuffers: dbc.sharedBuffers,
      ...(firstStart ? { prepare: firstStart } : {}),
    });
    // After an upgrade's migrations (or a first start's, with PGLITE_THREAD=main), the database
    // continues in a fresh thread: the old one's memory never shrinks back.
    if (options.migrate && (await runMigrations(pglite, options.logger)) > 0 && dbc.thread === "worker")
      pglite = await pglite.reopen();
    engine = pglite;
  } else {
    engine = await connectPostgres(dbc.url, dbc.poolSize, "api", config.databaseQueue);
    if (options.migrate) {
      const separate = dbc.migrationUrl !== dbc.url;
      const migrator = separate ? await connectPostgres(dbc.migrationUrl, 1, "migrate") : engine;
      try {
        await runMigrations(migrator, options.logger);
      } finally {
        if (separate) await migrator.close();
      }
    }
  }
  const db = new Db(engine, { secrets });
  if (!options.migrate) {
    const { pending } = await db.asService((tx) => migrationStatus(tx), { readOnly: true });
    if (pending.length > 0) {
      await db.close();
      throw new DatabaseUnavailableError(
        `The database is ${pending.length} migration(s) behind (next: ${pending[0]?.version} ${pending[0]?.name}). Run \`backline migrate\`.`,
      );
    }
  }
  // Secrets written in plain text by an older version are sealed now (docs/security.md).
  try {
    const sealed = await sealPlainSecrets(db);
    if (sealed.total > 0)
      options.logger?.info({ sealed: sealed.counts }, "plain secrets sealed with the master key");
  } catch (error) {
    await db.close();
    throw error;
  }
  return db;
}

/**
 * Runs src/db/first-start.ts in a child process (the same Node.js, flags and environment) and
 * returns the migrations it applied; its error, if it fails.
 */
async function createInChildProcess(job: FirstStartJob): Promise<{ version: number; name: string }[]> {
  const { fork } = await import("node:child_process");
  const child = fork(new URL("./first-start.ts", import.meta.url), [JSON.stringify(job)], {
    // WebAssembly on V8's baseline compiler only, as short `backline` commands run it (src/cli/main.ts):
    // optimising PGlite's code for a process that ends after the migrations costs more than it
    // saves (a first start's child 7.5 → 6.2 s here).
    execArgv: [...process.execArgv, ...BASELINE_WASM_FLAGS],
    stdio: ["ignore", "ignore", "pipe", "ipc"],
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    if (stderr.length < 64 * 1024) stderr += chunk;
  });
  let result: FirstStartResult | undefined;
  child.on("message", (m: FirstStartResult) => {
    result = m;
  });
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolve, reject) => {
      child.once("error", reject);
      child.once("close", (code, signal) => resolve({ code, signal }));
    },
  );
  if (result?.ok) return result.applied;
  if (result) throw Object.assign(new Error(result.message), { name: result.name, code: result.code });
  const how = exit.signal ? `was killed by ${exit.signal}` : `exited with ${exit.code}`;
  throw new Error(
    `Creating the embedded database failed: its process ${how}.${stderr ? `\n${stderr.trim()}` : ""}`,
  );
}

/** Applies pending migrations; returns how many. */
async function runMigrations(engine: Engine, logger?: Pick<Logger, "info">): Promise<number> {
  const applied = await migrate(engine, loadMigrations());
  for (const m of applied) logger?.info({ version: m.version, name: m.name }, "migration applied");
  return applied.length;
}
