import pino from "pino";
import { openDatabase } from "../db/open.ts";
import { die, loadConfigOrDie } from "../start/process.ts";
import { CliError, type DbOpener, processIo } from "./context.ts";
import { buildProgram } from "./index.ts";

/** The `backline` process: every command runs here, on a database it opens for the command. */

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

const { program } = buildProgram(processIo, openForCommand);

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof CliError) {
    process.stderr.write(`backline: ${error.message}\n`);
    process.exit(1);
  }
  die(error);
});
