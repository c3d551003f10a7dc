import fs from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import type { Engine, QueryResult, Tx } from "./types.ts";

// int8 and date as text, as the PostgreSQL adapter returns them: bigints never lose precision
// and a date never shifts by a time zone. (numeric is text in both already.)
const SAME_AS_NODE_POSTGRES = { 20: (v: string) => v, 1082: (v: string) => v };

/**
 * Embedded PostgreSQL (PGlite, WASM) in this process. It has a single connection, so
 * transactions run one after another; PGlite's own mutex orders them.
 *
 * A data directory must never be opened by two processes at once (PGlite does not guard
 * against it and the files would be corrupted), so the engine holds a lock file beside it.
 */
export class PgliteEngine implements Engine {
  readonly kind = "pglite";

  private readonly pg: PGlite;
  private readonly lock: DataDirLock | undefined;

  private constructor(pg: PGlite, lock: DataDirLock | undefined) {
    this.pg = pg;
    this.lock = lock;
  }

  /** Opens (and creates) a persistent database in `dataDir`, or an in-memory one when omitted. */
  static async open(options: { dataDir?: string; loadDataDir?: Blob } = {}): Promise<PgliteEngine> {
    let lock: DataDirLock | undefined;
    if (options.dataDir) {
      fs.mkdirSync(options.dataDir, { recursive: true });
      lock = DataDirLock.acquire(options.dataDir);
    }
    try {
      const pg = await PGlite.create(options.dataDir, {
        parsers: SAME_AS_NODE_POSTGRES,
        ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      });
      return new PgliteEngine(pg, lock);
    } catch (error) {
      lock?.release();
      throw error;
    }
  }

  transaction<T>(fn: (tx: Tx) => Promise<T>, options: { readOnly: boolean }): Promise<T> {
    return this.pg.transaction(async (ptx) => {
      if (options.readOnly) await ptx.query("set transaction read only");
      const tx: Tx = {
        async query<Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<Row>> {
          const r = await ptx.query<Row>(text, params as unknown[] | undefined);
          // PGlite counts affected rows only for writes (0 for a SELECT): take whichever says more.
          return { rows: r.rows, rowCount: Math.max(r.rows.length, r.affectedRows ?? 0) };
        },
        async exec(sql: string) {
          await ptx.exec(sql);
        },
      };
      return fn(tx);
    });
  }

  async listen(channel: string, onNotice: () => void): Promise<() => Promise<void>> {
    return this.pg.listen(channel, () => onNotice());
  }

  /** A snapshot of the whole database, loadable with `open({ loadDataDir })` (used to clone test databases). */
  dump(): Promise<Blob> {
    return this.pg.dumpDataDir("none") as Promise<Blob>;
  }

  async close(): Promise<void> {
    try {
      await this.pg.close();
    } finally {
      this.lock?.release();
    }
  }
}

export class DataDirInUseError extends Error {
  readonly dataDir: string;
  readonly pid: number;

  constructor(dataDir: string, pid: number) {
    super(
      `The embedded database in ${dataDir} is in use by process ${pid}. Stop that process first, ` +
        "or point DATABASE_URL at a PostgreSQL server to run several processes.",
    );
    this.name = "DataDirInUseError";
    this.dataDir = dataDir;
    this.pid = pid;
  }
}

class DataDirLock {
  private readonly file: string;

  private constructor(file: string) {
    this.file = file;
  }

  static acquire(dataDir: string): DataDirLock {
    const file = path.join(path.dirname(dataDir), `${path.basename(dataDir)}.lock`);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(file, String(process.pid), { flag: "wx" });
        return new DataDirLock(file);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
        const holder = Number.parseInt(fs.readFileSync(file, "utf8"), 10);
        if (Number.isInteger(holder) && holder !== process.pid && isAlive(holder)) {
          throw new DataDirInUseError(dataDir, holder);
        }
        // A stale lock left by a process that died: take it over.
        fs.rmSync(file, { force: true });
      }
    }
    throw new Error(`Could not lock ${dataDir}`);
  }

  release(): void {
    fs.rmSync(this.file, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
