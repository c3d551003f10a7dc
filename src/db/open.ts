import type { Logger } from "pino";
import type { Config } from "../config.ts";
import { sealPlainSecrets } from "../secrets/at-rest.ts";
import { loadSecretBox } from "../secrets/box.ts";
import type { QueueLimits } from "./admission.ts";
import { Db } from "./db.ts";
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
    let pglite = await PgliteEngine.open({
      dataDir: dbc.dataDir,
      queue: config.databaseQueue,
      thread: dbc.thread,
      sharedBuffers: dbc.sharedBuffers,
    });
    // After a first start's initdb and migrations (or an upgrade's), the database continues in a
    // fresh thread: the old one's memory never shrinks back (docs/operations.md, "Memory").
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

/** Applies pending migrations; returns how many. */
async function runMigrations(engine: Engine, logger?: Pick<Logger, "info">): Promise<number> {
  const applied = await migrate(engine, loadMigrations());
  for (const m of applied) logger?.info({ version: m.version, name: m.name }, "migration applied");
  return applied.length;
}
