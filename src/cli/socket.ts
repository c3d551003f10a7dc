import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import type { Logger } from "pino";
import type { Config } from "../config.ts";
import type { Db } from "../db/db.ts";
import type { CliIo } from "./context.ts";

/**
 * The CLI while the embedded server runs (docs/cli.md). Only one process may open an embedded
 * data directory, so a server (or `backline worker`) holding it listens on a Unix socket inside
 * it, `DATA_DIR/run/cli.sock`; a `backline` command that needs the database and finds the socket
 * sends its command line there, and the server runs it on its own open database — the same
 * command code, printing through the socket: the same output, `--json`, exit status and the
 * royalty import's progress bar.
 *
 * Who may connect is decided by file permissions: the `run` folder is 0700 and the socket 0600, so
 * only the server's own user (and root) reach it — the user who could open the data directory
 * anyway. File arguments (a report to import, `--out`, `@settings`) are read and written by the
 * server, relative to the command's working directory.
 *
 * Frames are JSON lines. Client: `{"args": [...], "cwd": "/abs", "stderr_tty": bool}`; server:
 * `{"out": "..."}`, `{"err": "..."}`, then `{"exit": n}`.
 */

export function cliSocketPath(dataDir: string): string {
  return path.join(dataDir, "run", "cli.sock");
}

/** Commands a running server does not run for a client (they would fight it for its own state). */
const NOT_THROUGH_SERVER: Record<string, string> = {
  secrets:
    "stop the server first: rotating the master key makes a new DATA_DIR/encryption.key, which the running server holds",
};

export type CommandRunner = (
  args: string[],
  io: CliIo,
  withDb: <T>(fn: (db: Db, config: Config) => Promise<T>) => Promise<T>,
) => Promise<number>;

export interface CliSocket {
  path: string;
  close(): Promise<void>;
}

/**
 * Listens for CLI commands on DATA_DIR/run/cli.sock (embedded database only). Returns undefined,
 * after a warning, when the socket cannot be made (e.g. a path longer than a socket address).
 */
export async function listenForCli(
  config: Config,
  db: Db,
  logger: Pick<Logger, "info" | "warn">,
  run?: CommandRunner,
): Promise<CliSocket | undefined> {
  if (config.database.engine !== "pglite") return undefined;
  const dir = path.join(config.dataDir, "run");
  const file = cliSocketPath(config.dataDir);
  // The commands (and commander) are loaded by the first command a client sends, not at start.
  const runner: CommandRunner =
    run ?? (async (args, io, withDb) => (await import("./run.ts")).runCommandLine(args, io, withDb));
  const active = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    active.add(socket);
    socket.on("close", () => active.delete(socket));
    serveOne(socket, config, db, logger, runner);
  });
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o700);
    // A socket file left by a server that was killed: this process holds the data directory now.
    fs.rmSync(file, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(file, () => {
        server.off("error", reject);
        resolve();
      });
    });
    fs.chmodSync(file, 0o600);
  } catch (error) {
    logger.warn(
      { err: error, path: file },
      "the CLI socket could not be made: CLI commands wait for this process to stop",
    );
    server.close();
    return undefined;
  }
  server.unref();
  return {
    path: file,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of active) s.destroy();
      });
      fs.rmSync(file, { force: true });
    },
  };
}

function serveOne(
  socket: net.Socket,
  config: Config,
  db: Db,
  logger: Pick<Logger, "info" | "warn">,
  run: CommandRunner,
): void {
  let buffer = "";
  let started = false;
  const send = (frame: Record<string, unknown>) => {
    if (!socket.destroyed) socket.write(`${JSON.stringify(frame)}\n`);
  };
  socket.setEncoding("utf8");
  socket.on("error", () => {});
  socket.on("data", (chunk: string) => {
    if (started) return;
    buffer += chunk;
    if (buffer.length > 1 << 20) return void socket.destroy();
    const nl = buffer.indexOf("\n");
    if (nl === -1) return;
    started = true;
    let request: { args?: unknown; cwd?: unknown; stderr_tty?: unknown };
    try {
      request = JSON.parse(buffer.slice(0, nl));
    } catch {
      return void socket.destroy();
    }
    const { args, cwd } = request;
    if (
      !Array.isArray(args) ||
      !args.every((a) => typeof a === "string") ||
      typeof cwd !== "string" ||
      !path.isAbsolute(cwd)
    ) {
      return void socket.destroy();
    }
    const words = (args as string[]).filter((a) => !a.startsWith("-"));
    const refused = NOT_THROUGH_SERVER[words[0] ?? ""];
    if (refused) {
      send({ err: `backline: ${refused}\n` });
      send({ exit: 1 });
      socket.end();
      return;
    }
    // The command's words only: option values may hold secrets (store credentials).
    logger.info({ cli: words.slice(0, 2).join(" ") }, "CLI command run for a client");
    const io: CliIo = {
      stdout: (text) => send({ out: text }),
      stderr: (text) => send({ err: text }),
      stderrIsTTY: request.stderr_tty === true,
      cwd,
      setExitCode: () => {},
    };
    run(args as string[], io, (fn) => fn(db, config))
      .then((code) => send({ exit: code }))
      .catch((error: unknown) => {
        send({
          err: `backline: unexpected error: ${error instanceof Error ? error.message : String(error)}\n`,
        });
        send({ exit: 1 });
      })
      .finally(() => socket.end());
  });
}

/**
 * Sends a command line to the server listening on `file` and relays its output; resolves with the
 * exit status, or undefined when no server answers there (a socket file left by a dead server).
 */
export function forwardToServer(file: string, args: string[], io: CliIo): Promise<number | undefined> {
  return new Promise((resolve) => {
    let connected = false;
    let status: number | undefined;
    let buffer = "";
    const socket = net.connect(file);
    socket.setEncoding("utf8");
    socket.on("connect", () => {
      connected = true;
      socket.write(`${JSON.stringify({ args, cwd: io.cwd, stderr_tty: io.stderrIsTTY })}\n`);
    });
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      let nl = buffer.indexOf("\n");
      while (nl !== -1) {
        const frame = JSON.parse(buffer.slice(0, nl)) as { out?: string; err?: string; exit?: number };
        buffer = buffer.slice(nl + 1);
        if (frame.out !== undefined) io.stdout(frame.out);
        if (frame.err !== undefined) io.stderr(frame.err);
        if (frame.exit !== undefined) status = frame.exit;
        nl = buffer.indexOf("\n");
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      if (!connected && (error.code === "ECONNREFUSED" || error.code === "ENOENT")) resolve(undefined);
    });
    socket.on("close", () => {
      if (!connected) return resolve(undefined);
      if (status === undefined)
        io.stderr("backline: the server closed the connection before the command ended\n");
      resolve(status ?? 1);
    });
  });
}
