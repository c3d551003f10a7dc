import fs from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import type { Config } from "../config.ts";
import type { Db } from "../db/db.ts";
import { enqueue } from "../jobs/queue.ts";
import type { Handlers } from "../jobs/worker.ts";
import { backupFileName, createBackup } from "./backup.ts";
import { nextRun } from "./schedule.ts";

/**
 * Scheduled backups (docs/operations.md, "Scheduled backups"): with BACKUP_SCHEDULE set, the
 * worker runs the recurring job `backup.run` (one row, dedupe key `backup`, so one backup at a
 * time across every worker process), which writes `backline-<time>.tar.gz` into BACKUP_DIR and
 * then keeps the newest BACKUP_KEEP of them. A failed backup is logged at error and the schedule
 * goes on.
 */

export const BACKUP_JOB_KIND = "backup.run";
const DEDUPE = "backup";
const NAME = /^backline-\d{8}T\d{6}Z\.tar\.gz$/;

/** Deletes all but the newest `keep` backups in `dir` (only files named as scheduled backups are). */
export function pruneBackups(dir: string, keep: number): string[] {
  const names = fs
    .readdirSync(dir)
    .filter((n) => NAME.test(n))
    .sort()
    .reverse();
  const removed = names.slice(keep);
  for (const n of removed) fs.rmSync(path.join(dir, n), { force: true });
  return removed;
}

/** One scheduled backup, then the retention; returns the file written. */
export async function runScheduledBackup(
  db: Db,
  config: Config,
  logger?: Pick<Logger, "info" | "warn" | "error">,
): Promise<string> {
  const dir = config.backup.dir;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const report = await createBackup(db, config, { out: path.join(dir, backupFileName()) });
  const removed = pruneBackups(dir, config.backup.keep);
  logger?.info(
    { file: report.file, bytes: report.bytes, seconds: Number(report.seconds.toFixed(1)), removed },
    "scheduled backup written",
  );
  return report.file;
}

/** The `backup.run` handler: a backup, then the next run's time (undefined once BACKUP_SCHEDULE is unset). */
export function backupHandlers(
  db: Db,
  config: Config,
  logger?: Pick<Logger, "info" | "warn" | "error">,
): Handlers {
  return {
    [BACKUP_JOB_KIND]: async () => {
      const schedule = config.backup.schedule;
      if (!schedule) return undefined;
      try {
        await runScheduledBackup(db, config, logger);
      } catch (error) {
        logger?.error({ err: error }, "scheduled backup failed");
      }
      return nextRun(schedule, new Date());
    },
  };
}

/** Makes sure the recurring backup job exists when BACKUP_SCHEDULE is set (at start; idempotent across processes). */
export async function scheduleBackups(db: Db, config: Config): Promise<Date | undefined> {
  const schedule = config.backup.schedule;
  if (!schedule) return undefined;
  const next = nextRun(schedule, new Date());
  await db.asService(async (tx) => {
    await enqueue(tx, BACKUP_JOB_KIND, {}, { dedupeKey: DEDUPE, runAt: next });
    // A schedule changed to run sooner takes effect now, not after the old next run.
    await tx.query(
      `update internal.jobs set run_at = least(run_at, $3::timestamptz)
        where kind = $1 and dedupe_key = $2 and status = 'queued'`,
      [BACKUP_JOB_KIND, DEDUPE, next.toISOString()],
    );
  });
  return next;
}
