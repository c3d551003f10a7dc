import { createHash } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

/**
 * One process at a time in an embedded data directory, with a lock the kernel releases when the
 * process dies — however it dies (`kill -9`, a crash, a container stopped) — so a dead server
 * never keeps the directory and no PID is ever trusted.
 *
 * The lock is a listening Unix socket. On Linux it lives in the abstract namespace, named after
 * the directory's real path: binding it is atomic (of two starts at the same moment exactly one
 * binds), and it vanishes with the process. Elsewhere (macOS, BSD) it is a socket file beside
 * the directory: a file whose listener is gone (connecting is refused) is stale and replaced.
 * The holder answers a connection with its PID, so a refused start can say who holds the directory.
 */
export class DataDirInUseError extends Error {
  readonly dataDir: string;
  readonly pid: number | undefined;

  constructor(dataDir: string, pid: number | undefined) {
    super(
      `The embedded database in ${dataDir} is in use by ${pid ? `process ${pid}` : "another process"}. ` +
        "Stop that process first, or point DATABASE_URL at a PostgreSQL server to run several processes.",
    );
    this.name = "DataDirInUseError";
    this.dataDir = dataDir;
    this.pid = pid;
  }
}

export class DataDirLock {
  private readonly server: net.Server;
  private readonly file: string | undefined;

  private constructor(server: net.Server, file: string | undefined) {
    this.server = server;
    this.file = file;
  }

  static async acquire(dataDir: string): Promise<DataDirLock> {
    const real = fs.realpathSync(dataDir);
    const abstract = process.platform === "linux";
    const address = abstract
      ? `\0backline-datadir-${createHash("sha256").update(real).digest("hex").slice(0, 40)}`
      : path.join(path.dirname(real), `.${path.basename(real)}.lock.sock`);
    for (let attempt = 0; attempt < 3; attempt++) {
      const server = net.createServer((socket) => socket.end(`${process.pid}\n`));
      try {
        await listen(server, address);
        server.unref();
        return new DataDirLock(server, abstract ? undefined : address);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE") throw error;
        const holder = await askHolder(address);
        if (holder.alive) throw new DataDirInUseError(real, holder.pid);
        // Only a socket file can be stale (an abstract name dies with its process): replace it.
        if (!abstract) fs.rmSync(address, { force: true });
      }
    }
    throw new DataDirInUseError(real, undefined);
  }

  release(): void {
    this.server.close();
    if (this.file) fs.rmSync(this.file, { force: true });
  }
}

function listen(server: net.Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(address, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** Connects to the lock's socket: a live holder answers with its PID. */
function askHolder(address: string): Promise<{ alive: boolean; pid: number | undefined }> {
  return new Promise((resolve) => {
    let text = "";
    const socket = net.connect(address);
    socket.setTimeout(2000);
    socket.on("data", (chunk) => {
      text += chunk.toString("utf8");
    });
    socket.on("end", () => {
      const pid = Number.parseInt(text, 10);
      resolve({ alive: true, pid: Number.isInteger(pid) ? pid : undefined });
    });
    socket.on("timeout", () => {
      socket.destroy();
      resolve({ alive: true, pid: undefined });
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      resolve({ alive: error.code !== "ECONNREFUSED" && error.code !== "ENOENT", pid: undefined });
    });
  });
}
