import fs from "node:fs";
import { baselineWasmOnly } from "../db/memory.ts";
import { type DbOpener, processIo, RunOnServer } from "./context.ts";
import { runCommandLine } from "./run.ts";
import { cliSocketPath, forwardToServer } from "./socket.ts";

/**
 * The `backline` process. A command that needs the database opens it for itself — or, when a
 * running server holds the embedded data directory and listens for CLI commands, the whole
 * command line is sent to that server, which runs it (socket.ts).
 */

// The database and its drivers are loaded by the commands that use it only: --help, a usage error
// or a command sent to a running server start in a fraction of the time (docs/cli.md).
const openLocally: DbOpener = async (fn) => {
  const { loadConfigOrDie } = await import("../start/process.ts");
  const { openDatabase } = await import("../db/open.ts");
  const { default: pino } = await import("pino");
  const config = loadConfigOrDie();
  if (config.database.engine === "pglite" && !longRunning(args)) baselineWasmOnly();
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
  // A bad setting is thrown here and explained in one line like any failure.
  const { loadConfig } = await import("../config.ts");
  const config = loadConfig(process.env);
  if (config.database.engine === "pglite") {
    const socket = cliSocketPath(config.dataDir);
    if (fs.existsSync(socket)) throw new RunOnServer(socket);
  }
  return openLocally(fn);
};

/**
 * A command that runs for seconds opens the embedded database's WebAssembly on V8's baseline
 * compiler only: optimising PGlite's large module costs more than a short command gains from it
 * (`backline jobs list`: 1.5 → 0.8 s of CPU, 690 → 190 MB peak; bench/README.md). The flags are
 * process-wide, so the database's thread, started after this, runs the same way. The server, a
 * worker and a royalty import run long and heavy: they keep V8's defaults (on the baseline
 * compiler a 1M-line import peaks at 439 instead of 793 MB but takes 1.7× as long; the 793 MB
 * is V8 optimising one large function of PostgreSQL's, once per process: bench/README.md, "The
 * embedded import's COPY, and where its peak memory comes from").
 */
function longRunning(args: string[]): boolean {
  const [group, command] = args.filter((a) => !a.startsWith("-"));
  return group === "serve" || group === "worker" || (group === "royalties" && command === "import");
}

/**
 * Commands that never use a running server: they run the server, or need no database (`restore`
 * makes a new data directory, which no server may hold yet).
 */
const LOCAL_COMMANDS = new Set(["serve", "worker", "migrate", "db", "media", "restore", "help"]);

/**
 * A command line a running server may take at once, before anything else is loaded: a command
 * that is not one of LOCAL_COMMANDS, on the embedded database, with the server's socket there.
 */
async function serverSocketFor(args: string[]): Promise<string | undefined> {
  const first = args.find((a) => !a.startsWith("-"));
  if (!first || LOCAL_COMMANDS.has(first) || args.includes("--help") || args.includes("-h")) return undefined;
  const { loadConfig } = await import("../config.ts");
  try {
    const config = loadConfig(process.env);
    const socket = cliSocketPath(config.dataDir);
    return config.database.engine === "pglite" && fs.existsSync(socket) ? socket : undefined;
  } catch {
    return undefined; // a bad setting: the command itself reports it
  }
}

const args = process.argv.slice(2);
let status: number | undefined;
const early = await serverSocketFor(args);
if (early) status = await forwardToServer(early, args, processIo);
try {
  status ??= await runCommandLine(args, processIo, early ? openLocally : openForCommand);
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
