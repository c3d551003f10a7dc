import fs from "node:fs";
import { MessageChannel, type Transferable, Worker } from "node:worker_threads";
import { Admission, DEFAULT_QUEUE_LIMITS, type PoolStats, type QueueLimits } from "./admission.ts";
import { DataDirLock } from "./data-dir-lock.ts";
import type { Port, Reply, Request } from "./pglite-protocol.ts";
import { type Prepared, textOf } from "./prepared.ts";
import type { Engine, QueryResult, Tx } from "./types.ts";

export { DataDirInUseError } from "./data-dir-lock.ts";

/** Request without its id: what a caller sends. */
type Call = Request extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

export interface PgliteOpenOptions {
  /** A persistent database in this directory; in memory when omitted. */
  dataDir?: string;
  /** Start from a snapshot made by `dump()` (used to clone test databases). */
  loadDataDir?: Blob;
  /** The bounded wait for the connection (docs/security.md). */
  queue?: QueueLimits;
  /**
   * `worker` (the default): PGlite runs in a worker thread, so a running statement never blocks
   * the thread that serves HTTP. `main`: in this thread, as before; kept as the benchmarks' baseline.
   */
  thread?: "worker" | "main";
  /** PostgreSQL's shared_buffers (e.g. '32MB'); PGlite's own default (128MB) when unset. */
  sharedBuffers?: string | undefined;
  /**
   * Runs once the data directory is locked, before it is opened in this process: a first start
   * creates the database in a child process there (src/db/open.ts).
   */
  prepare?: () => Promise<void>;
  /**
   * The parent process holds the data directory's lock and waits for this one: the child that
   * creates a first start's database (src/db/first-start.ts). Nothing else may set it.
   */
  lockedByParent?: boolean;
}

/**
 * Embedded PostgreSQL (PGlite, WASM). It has a single connection, so transactions run one after
 * another; they wait for it in an Admission queue that refuses a request past its bound at once.
 *
 * PGlite runs in a worker thread and every statement is a message to it: while one statement
 * runs, this thread keeps answering (health checks, 429s, 503s, other interfaces' cached work).
 * A data directory must never be opened by two processes at once (PGlite does not guard against
 * it and the files would be corrupted), so the engine holds a lock the kernel releases when the
 * process dies (src/db/data-dir-lock.ts).
 */
export class PgliteEngine implements Engine {
  readonly kind = "pglite";

  /** What it was opened with (reopen() opens the same). */
  private readonly options: PgliteOpenOptions;
  private readonly port: { postMessage(m: Request, transfer?: Transferable[]): void };
  /** Keeps the process alive while calls wait for the thread, and only then (see call()). */
  private readonly hold: { ref(): void; unref(): void } | undefined;
  private readonly stopThread: () => Promise<void>;
  private readonly lock: DataDirLock | undefined;
  private readonly admission: Admission;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
  private readonly notices = new Map<number, () => void>();
  private nextId = 1;
  private nextTx = 1;
  private dead: Error | undefined;

  private constructor(
    options: PgliteOpenOptions,
    port: { postMessage(m: Request, transfer?: Transferable[]): void },
    stopThread: () => Promise<void>,
    lock: DataDirLock | undefined,
    queue: QueueLimits,
    hold?: { ref(): void; unref(): void },
  ) {
    this.options = { ...options, loadDataDir: undefined, prepare: undefined };
    this.port = port;
    this.hold = hold;
    hold?.unref();
    this.stopThread = stopThread;
    this.lock = lock;
    this.admission = new Admission(1, queue);
  }

  static async open(options: PgliteOpenOptions = {}): Promise<PgliteEngine> {
    let lock: DataDirLock | undefined;
    if (options.dataDir) {
      fs.mkdirSync(options.dataDir, { recursive: true });
      if (!options.lockedByParent) lock = await DataDirLock.acquire(options.dataDir);
    }
    try {
      await options.prepare?.();
      return await PgliteEngine.start(options, lock);
    } catch (error) {
      lock?.release();
      throw error;
    }
  }

  /**
   * The same data directory in a new thread, holding the lock throughout; this engine is closed.
   * What initdb and the migrations made PGlite hold (WebAssembly memory only grows, and compiled
   * code and caches stay) goes with the old thread, so a first start ends where a restart does
   * (bench/README.md, "Memory of the embedded default"). A persistent database in a worker only.
   */
  async reopen(): Promise<PgliteEngine> {
    if (!this.options.dataDir || this.options.thread === "main")
      throw new Error("only a data directory opened in a worker thread can be reopened");
    await this.stop({ releaseLock: false });
    try {
      return await PgliteEngine.start(this.options, this.lock);
    } catch (error) {
      this.lock?.release();
      throw error;
    }
  }

  private static async start(
    options: PgliteOpenOptions,
    lock: DataDirLock | undefined,
  ): Promise<PgliteEngine> {
    const loadDataDir = options.loadDataDir ? await options.loadDataDir.arrayBuffer() : undefined;
    const open = { dataDir: options.dataDir, loadDataDir, sharedBuffers: options.sharedBuffers };
    const queue = options.queue ?? DEFAULT_QUEUE_LIMITS;
    if (options.thread === "main") {
      const { port1, port2 } = new MessageChannel();
      const ports = {
        ref: () => {
          port1.ref();
          port2.ref();
        },
        unref: () => {
          port1.unref();
          port2.unref();
        },
      };
      const engine = new PgliteEngine(options, port1, async () => port1.close(), lock, queue, ports);
      port1.on("message", (m: Reply) => engine.onReply(m));
      // PGlite itself is loaded here only in this mode; by default only the thread loads it.
      const { host } = await import("./pglite-host.js");
      await host(port2 as unknown as Port, open);
      ports.unref();
      return engine;
    }
    const worker = new Worker(new URL("./pglite-thread.js", import.meta.url), {
      workerData: open,
      transferList: loadDataDir ? [loadDataDir] : [],
    });
    const engine = new PgliteEngine(
      options,
      worker,
      async () => {
        await worker.terminate();
      },
      lock,
      queue,
      worker,
    );
    await new Promise<void>((resolve, reject) => {
      worker.once("error", reject);
      worker.once("message", (m: { ready: boolean; message?: string }) => {
        worker.off("error", reject);
        if (m.ready) resolve();
        else reject(new Error(`The embedded database could not open: ${m.message}`));
      });
    });
    worker.on("message", (m: Reply) => engine.onReply(m));
    // A thread that dies (a WASM abort, out of memory) fails what waits on it and everything after.
    worker.on("error", (error) => engine.fail(error));
    worker.on("exit", (code) => engine.fail(new Error(`The embedded database's thread exited (${code}).`)));
    return engine;
  }

  private onReply(m: Reply): void {
    if ("notify" in m) {
      this.notices.get(m.notify)?.();
      return;
    }
    const waiter = this.pending.get(m.id);
    if (!waiter) return;
    if (m.ok) waiter.resolve(m.value);
    else waiter.reject(Object.assign(new Error(String(m.error.message)), m.error));
  }

  private fail(error: Error): void {
    this.dead ??= error;
    for (const waiter of [...this.pending.values()]) waiter.reject(error);
  }

  private call<T>(request: Call, transfer?: Transferable[]): Promise<T> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    // An idle engine does not keep the process alive (an unclosed one must not hang a CLI command
    // or a test file); one with a call in flight does, until the answer comes.
    if (this.pending.size === 0) this.hold?.ref();
    return new Promise<T>((resolve, reject) => {
      const settle = () => {
        this.pending.delete(id);
        if (this.pending.size === 0) this.hold?.unref();
      };
      this.pending.set(id, {
        resolve: (v) => {
          settle();
          resolve(v as T);
        },
        reject: (e) => {
          settle();
          reject(e);
        },
      });
      this.port.postMessage({ ...request, id } as Request, transfer);
    });
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>, options: { readOnly: boolean }): Promise<T> {
    const release = await this.admission.acquire();
    try {
      // Not awaited: the first statement follows `begin` at once and waits for it in the thread;
      // a `begin` that fails fails that statement, and `end`.
      const id = this.nextTx++;
      this.call({ op: "begin", tx: id, readOnly: options.readOnly }).catch(() => {});
      const tx: Tx = {
        query: <Row>(text: string | Prepared, params?: readonly unknown[]) =>
          this.call<QueryResult<Row>>({
            op: "query",
            tx: id,
            text: textOf(text),
            params: params as unknown[] | undefined,
          }),
        exec: async (sql: string) => {
          await this.call({ op: "exec", tx: id, sql });
        },
        copyFrom: (sql: string, source: AsyncIterable<string | Buffer>) =>
          copyInPieces(sql, source, (text, data) =>
            this.call<number>({ op: "copy", tx: id, text, data }, [data]),
          ),
      };
      let result: T;
      try {
        result = await fn(tx);
      } catch (error) {
        await this.call({ op: "end", tx: id, commit: false }).catch(() => {});
        throw error;
      }
      await this.call({ op: "end", tx: id, commit: true });
      return result;
    } finally {
      release();
    }
  }

  stats(): PoolStats {
    return { ...this.admission.stats(), threadPending: this.pending.size };
  }

  async listen(channel: string, onNotice: () => void): Promise<() => Promise<void>> {
    const listener = await this.call<number>({ op: "listen", channel });
    this.notices.set(listener, onNotice);
    return async () => {
      this.notices.delete(listener);
      await this.call({ op: "unlisten", listener }).catch(() => {});
    };
  }

  /** A snapshot of the whole database, loadable with `open({ loadDataDir })` (used to clone test databases). */
  async dump(): Promise<Blob> {
    return new Blob([await this.call<ArrayBuffer>({ op: "dump" })]);
  }

  /**
   * The whole database as one tar, for a backup (src/backup): taken inside a transaction of its
   * own, so between the others (the single connection is held), after a CHECKPOINT, so the files
   * need no recovery; `whileHeld` runs before the connection is let go (the media are linked then).
   */
  async snapshot(whileHeld?: () => Promise<void>): Promise<Uint8Array> {
    return this.transaction(
      async (tx) => {
        await tx.exec("checkpoint");
        // The thread's buffer itself (transferred, not copied): a backup holds one copy of the database.
        const tar = new Uint8Array(await this.call<ArrayBuffer>({ op: "dump" }));
        await whileHeld?.();
        return tar;
      },
      { readOnly: true },
    );
  }

  close(): Promise<void> {
    return this.stop({ releaseLock: true });
  }

  private async stop({ releaseLock }: { releaseLock: boolean }): Promise<void> {
    try {
      if (!this.dead) await this.call({ op: "close" });
    } finally {
      this.dead ??= new Error("The embedded database is closed.");
      await this.stopThread();
      if (releaseLock) this.lock?.release();
    }
  }
}

/** How much of a COPY goes to the embedded database at once: its thread holds one piece at a time. */
const COPY_PIECE_BYTES = 8 << 20;

/**
 * `COPY ... FROM STDIN` on PGlite, which has no COPY protocol: the rows go through
 * `COPY ... FROM '/dev/blob'`, a piece of about COPY_PIECE_BYTES at a time, each cut after a
 * newline (in COPY's text format a newline byte only ends a row: one inside a value is `\n`),
 * all in the caller's transaction. Measured against multi-row INSERTs of the same rows: bench/README.md.
 */
export async function copyInPieces(
  sql: string,
  source: AsyncIterable<string | Buffer>,
  send: (text: string, data: ArrayBuffer) => Promise<number>,
  pieceBytes = COPY_PIECE_BYTES,
): Promise<number> {
  const text = sql.replace(/\bfrom\s+stdin\s*$/i, "from '/dev/blob'");
  if (text === sql) throw new Error("copyFrom: the statement must end with FROM STDIN");
  let rows = 0;
  let pieces: Buffer[] = [];
  let size = 0;
  // One piece is copied while the next is made: the caller's parsing and the database's COPY
  // overlap, on two threads.
  let copying: Promise<void> = Promise.resolve();
  const flush = async (all: boolean) => {
    const joined = Buffer.concat(pieces, size);
    const cut = all ? joined.length : joined.lastIndexOf(0x0a) + 1;
    pieces = cut < joined.length ? [joined.subarray(cut)] : [];
    size = joined.length - cut;
    if (cut === 0) return;
    // A copy of its own, transferred to the database's thread rather than cloned.
    const data = new ArrayBuffer(cut);
    new Uint8Array(data).set(joined.subarray(0, cut));
    await copying;
    copying = send(text, data).then((n) => {
      rows += n;
    });
    // Awaited later; marked handled now, so that a COPY failing meanwhile is not an unhandled rejection.
    copying.catch(() => {});
  };
  try {
    for await (const chunk of source) {
      const piece = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      pieces.push(piece);
      size += piece.length;
      if (size >= pieceBytes) await flush(false);
    }
    if (size > 0) await flush(true);
    await copying;
  } catch (error) {
    // The source's error (a refused report) is the one to tell, once the piece in flight has ended.
    await copying.catch(() => {});
    throw error;
  }
  return rows;
}
