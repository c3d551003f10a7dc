import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Engine, Tx } from "./types.ts";

/**
 * Numbered, forward-only, plain-SQL migrations (src/db/migrations/NNNN_name.sql). Each runs in
 * its own transaction and is recorded with its checksum in internal.schema_migrations; an
 * applied file that has since been edited stops the runner. The same files serve PGlite and
 * PostgreSQL. Concurrent runners (several processes starting at once) queue on an advisory lock.
 */

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export interface MigrationStatus {
  applied: { version: number; name: string; appliedAt: Date }[];
  pending: Migration[];
}

export class MigrationError extends Error {
  override name = "MigrationError";
}

// An arbitrary constant: the advisory lock that serialises migration runs on one database.
const LOCK_KEY = 4_242_001;

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

let bundled: Migration[] | undefined;

/** The migrations shipped with Backline (read once), or those in `dir`. */
export function loadMigrations(dir?: string): Migration[] {
  if (dir === undefined) {
    bundled ??= readMigrations(MIGRATIONS_DIR);
    return bundled;
  }
  return readMigrations(dir);
}

function readMigrations(dir: string): Migration[] {
  const migrations = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .map((file) => {
      const m = FILE_NAME.exec(file);
      if (!m?.[1] || !m[2])
        throw new MigrationError(`Migration file name ${file} must look like 0001_name.sql`);
      const sql = fs.readFileSync(path.join(dir, file), "utf8");
      return { version: Number(m[1]), name: m[2], sql, checksum: checksum(sql) };
    })
    .sort((a, b) => a.version - b.version);
  migrations.forEach((m, i) => {
    if (m.version !== i + 1)
      throw new MigrationError(
        `Migrations must be numbered 1..n without gaps; found ${m.version} at position ${i + 1}`,
      );
  });
  return migrations;
}

function checksum(sql: string): string {
  return createHash("sha256").update(sql.replace(/\r\n/g, "\n")).digest("hex");
}

const BOOTSTRAP = `
  create schema if not exists internal;
  create table if not exists internal.schema_migrations (
    version integer primary key,
    name text not null,
    checksum text not null,
    applied_at timestamptz not null default now()
  );
`;

async function readApplied(
  tx: Tx,
): Promise<{ version: number; name: string; checksum: string; applied_at: Date }[]> {
  const exists = await tx.query<{ t: string | null }>(
    "select to_regclass('internal.schema_migrations')::text as t",
  );
  if (!exists.rows[0]?.t) return [];
  const r = await tx.query<{ version: number; name: string; checksum: string; applied_at: Date }>(
    "select version, name, checksum, applied_at from internal.schema_migrations order by version",
  );
  return r.rows;
}

function compare(
  applied: { version: number; name: string; checksum: string; applied_at: Date }[],
  migrations: Migration[],
): MigrationStatus {
  const byVersion = new Map(migrations.map((m) => [m.version, m]));
  for (const row of applied) {
    const file = byVersion.get(row.version);
    if (!file) {
      throw new MigrationError(
        `The database has migration ${row.version} (${row.name}) that this version of Backline does not know: it was migrated by a newer release.`,
      );
    }
    if (file.checksum !== row.checksum) {
      throw new MigrationError(
        `Migration ${row.version} (${row.name}) was edited after it was applied. Applied migrations are never changed: add a new one instead.`,
      );
    }
  }
  const done = new Set(applied.map((r) => r.version));
  return {
    applied: applied.map((r) => ({ version: r.version, name: r.name, appliedAt: r.applied_at })),
    pending: migrations.filter((m) => !done.has(m.version)),
  };
}

/** What is applied and what is pending, without changing anything (any role that can read schema_migrations). */
export async function migrationStatus(tx: Tx, migrations = loadMigrations()): Promise<MigrationStatus> {
  return compare(await readApplied(tx), migrations);
}

/**
 * Reads the applied migrations with whatever login this is: the schema owner reads its own table;
 * the server's non-superuser login reads it through service_role, the one role granted SELECT.
 */
async function readAppliedAsLogin(tx: Tx) {
  const r = await tx.query<{ ok: boolean }>(
    "select coalesce((select pg_has_role(session_user, oid, 'MEMBER') from pg_roles where rolname = 'service_role'), false) as ok",
  );
  if (r.rows[0]?.ok) await tx.query("select set_config('role', 'service_role', true)");
  return readApplied(tx);
}

/** Applies every pending migration in order; returns those it applied. */
export async function migrate(engine: Engine, migrations = loadMigrations()): Promise<Migration[]> {
  // Nothing to do is the common case at start-up, and needs no privilege beyond reading.
  const before = await engine.transaction(async (tx) => compare(await readAppliedAsLogin(tx), migrations), {
    readOnly: true,
  });
  if (before.pending.length === 0) return [];

  const done: Migration[] = [];
  for (;;) {
    const applied = await engine.transaction(
      async (tx) => {
        try {
          await tx.query("select pg_advisory_xact_lock($1)", [LOCK_KEY]);
          await tx.exec(BOOTSTRAP);
        } catch (error) {
          throw new MigrationError(
            `Cannot apply migrations as this database login: ${error instanceof Error ? error.message : String(error)}. ` +
              "Run `backline migrate` with MIGRATION_DATABASE_URL set to the schema owner's login (docs/database.md).",
            { cause: error },
          );
        }
        // Read again under the lock: another process may have applied it meanwhile.
        const next = compare(await readApplied(tx), migrations).pending[0];
        if (!next) return undefined;
        try {
          await tx.exec(next.sql);
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          throw new MigrationError(`Migration ${next.version} (${next.name}) failed: ${message}`, {
            cause: error,
          });
        }
        await tx.query(
          "insert into internal.schema_migrations (version, name, checksum) values ($1, $2, $3)",
          [next.version, next.name, next.checksum],
        );
        // Every running process reads /rest/v1's schema cache again once this commits (PostgREST's notice).
        await tx.query("select pg_notify('pgrst', 'reload schema')");
        return next;
      },
      { readOnly: false },
    );
    if (!applied) return done;
    done.push(applied);
  }
}

/** A pending migration as a dry run applied it: how long it took and the table locks it took. */
export interface DryRunStep {
  version: number;
  name: string;
  ms: number;
  /** Each table it locked, with the strongest lock mode it took there (PostgreSQL's names). */
  locks: { table: string; mode: string }[];
}

class DryRunRollback extends Error {}

/** PostgreSQL's table lock modes, weakest first. */
const LOCK_MODES = [
  "AccessShareLock",
  "RowShareLock",
  "RowExclusiveLock",
  "ShareUpdateExclusiveLock",
  "ShareLock",
  "ShareRowExclusiveLock",
  "ExclusiveLock",
  "AccessExclusiveLock",
];

/**
 * `backline migrate --dry-run` (docs/operations.md, "Upgrades"): applies every pending migration
 * in one transaction, in order, as `migrate` would, timing each and reading after each the table
 * locks it added (pg_locks of this backend: a lock is held to the end of the transaction, so what
 * a migration took is what is new after it), then rolls the whole transaction back. What it says
 * is what the real run will do to this database now: how long each step holds its locks, and
 * which of them (an AccessExclusiveLock) stops reads of a table while it runs.
 */
export async function dryRunMigrations(engine: Engine, migrations = loadMigrations()): Promise<DryRunStep[]> {
  const steps: DryRunStep[] = [];
  try {
    await engine.transaction(
      async (tx) => {
        await tx.query("select pg_advisory_xact_lock($1)", [LOCK_KEY]);
        await tx.exec(BOOTSTRAP);
        const pending = compare(await readApplied(tx), migrations).pending;
        const locksNow = async () =>
          new Map(
            (
              await tx.query<{ tbl: string; mode: string }>(
                `select n.nspname || '.' || c.relname as tbl, l.mode
                 from pg_catalog.pg_locks l
                 join pg_catalog.pg_class c on c.oid = l.relation
                 join pg_catalog.pg_namespace n on n.oid = c.relnamespace
                 where l.pid = pg_catalog.pg_backend_pid() and l.granted and l.locktype = 'relation'
                   and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%'
                   and c.relkind in ('r', 'p', 'v', 'm')`,
              )
            ).rows.map((r) => [`${r.tbl} ${r.mode}`, r]),
          );
        let before = await locksNow();
        for (const m of pending) {
          const started = performance.now();
          try {
            await tx.exec(m.sql);
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            throw new MigrationError(`Migration ${m.version} (${m.name}) failed: ${message}`, {
              cause: error,
            });
          }
          const ms = Math.round((performance.now() - started) * 10) / 10;
          const after = await locksNow();
          const strongest = new Map<string, string>();
          for (const [k, l] of after) {
            if (before.has(k)) continue;
            const had = strongest.get(l.tbl);
            if (!had || LOCK_MODES.indexOf(l.mode) > LOCK_MODES.indexOf(had)) strongest.set(l.tbl, l.mode);
          }
          steps.push({
            version: m.version,
            name: m.name,
            ms,
            locks: [...strongest]
              .map(([table, mode]) => ({ table, mode }))
              .sort((a, b) => (a.table < b.table ? -1 : 1)),
          });
          before = after;
        }
        throw new DryRunRollback();
      },
      { readOnly: false },
    );
  } catch (error) {
    if (!(error instanceof DryRunRollback)) throw error;
  }
  return steps;
}
