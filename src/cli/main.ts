import pino from "pino";
import { openDatabase } from "../db/open.ts";
import { loadConfigOrDie } from "../start/process.ts";
import { type DbOpener, processIo } from "./context.ts";
import { runCommandLine } from "./run.ts";

/** The `backline` process: the command runs here, on a database it opens for the command. */

/** Opens the database for one command (migrating it when MIGRATE_ON_START allows), then closes it. */
const openForCommand: DbOpener = async (fn) => {
  const config = loadConfigOrDie();
  const logger = pino({ level: "warn" }, pino.destination(2));
  const db = await openDatabase(config, { migrate: config.migrateOnStart, logger });
  try {
    return await fn(db, config);
  } finally {
    await db.close();
  }
};

const status = await runCommandLine(process.argv.slice(2), processIo, openForCommand);
process.exitCode = status;
// A failed command ends even if something it started still holds the event loop (its output is
// written by then; an unref'd timer lets a process that can end sooner do so).
if (status !== 0) setTimeout(() => process.exit(status), 2000).unref();
