import fs from "node:fs";
import pino from "pino";
import { openDatabase } from "../db/open.ts";
import { loadConfigOrDie } from "../start/process.ts";
import { type DbOpener, processIo, RunOnServer } from "./context.ts";
import { runCommandLine } from "./run.ts";
import { cliSocketPath, forwardToServer } from "./socket.ts";

/**
 * The `backline` process. A command that needs the database opens it for itself — or, when a
 * running server holds the embedded data directory and listens for CLI commands, the whole
 * command line is sent to that server, which runs it (socket.ts).
 */

const openLocally: DbOpener = async (fn) => {
  const config = loadConfigOrDie();
  const logger = pino({ level: "warn" }, pino.destination(2));
  const db = await openDatabase(config, { migrate: config.migrateOnStart, logger });
  try {
    return await fn(db, config);
  } finally {
    await db.close();
  }
};

/** The server's socket when one may be listening (embedded database), else opens the database here. */
const openForCommand: DbOpener = async (fn) => {
  const config = loadConfigOrDie();
  if (config.database.engine === "pglite") {
    const socket = cliSocketPath(config.dataDir);
    if (fs.existsSync(socket)) throw new RunOnServer(socket);
  }
  return openLocally(fn);
};

const args = process.argv.slice(2);
let status: number;
try {
  status = await runCommandLine(args, processIo, openForCommand);
} catch (error) {
  if (!(error instanceof RunOnServer)) throw error;
  // No server answers there (it was killed and left its socket file): open the database here.
  status =
    (await forwardToServer(error.socket, args, processIo)) ??
    (await runCommandLine(args, processIo, openLocally));
}
process.exitCode = status;
// A failed command ends even if something it started still holds the event loop (its output is
// written by then; an unref'd timer lets a process that can end sooner do so).
if (status !== 0) setTimeout(() => process.exit(status), 2000).unref();
