import type { Transferable } from "node:worker_threads";
import { PGlite, type Transaction } from "@electric-sql/pglite";
import { toPostgresText } from "./params.ts";

/**
 * The side of the embedded database that owns the PGlite instance. It runs in a worker thread
 * (src/db/pglite-thread.ts), so a long statement blocks that thread, never the one that serves
 * HTTP. The main thread's PgliteEngine speaks to it with the messages below; one message, one
 * answer with the same `id`.
 *
 * A transaction is opened by `begin` and stays open across messages until `end`: PGlite's own
 * transaction mutex makes a second `begin` wait until the first ends, exactly as before.
 */

export type Request =
  | { id: number; op: "begin"; tx: number; readOnly: boolean }
  | { id: number; op: "query"; tx: number; text: string; params: unknown[] | undefined }
  | { id: number; op: "exec"; tx: number; sql: string }
  | { id: number; op: "end"; tx: number; commit: boolean }
  | { id: number; op: "listen"; channel: string }
  | { id: number; op: "unlisten"; listener: number }
  | { id: number; op: "dump" }
  | { id: number; op: "close" };

export type Reply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: Record<string, unknown> }
  | { notify: number };

export interface OpenOptions {
  dataDir?: string | undefined;
  /** A snapshot from `dump` (a tar file's bytes) to start from. */
  loadDataDir?: ArrayBuffer | undefined;
  /** shared_buffers: PGlite touches all of it at start, so it is resident memory (docs/operations.md, "Memory"). */
  sharedBuffers?: string | undefined;
}

/** What the host needs of a port: a worker's parentPort or one end of a MessageChannel. */
export interface Port {
  postMessage(message: Reply, transfer?: Transferable[]): void;
  on(event: "message", listener: (message: Request) => void): void;
}

// int8 and date as text, as the PostgreSQL adapter returns them: bigints never lose precision
// and a date never shifts by a time zone. (numeric is text in both already.)
const SAME_AS_NODE_POSTGRES = { 20: (v: string) => v, 1082: (v: string) => v };

class Rollback extends Error {}

interface OpenTx {
  ptx: Transaction;
  /** Statements of one transaction run one after another, whatever the caller sends. */
  chain: Promise<unknown>;
  finish(commit: boolean): void;
  done: Promise<void>;
}

/** Opens PGlite and answers `port`'s requests until `close`. Resolves once the database is open. */
export async function host(port: Port, options: OpenOptions): Promise<void> {
  const defaults = (PGlite as unknown as { defaultStartParams?: string[] }).defaultStartParams;
  const pg = await PGlite.create(options.dataDir, {
    parsers: SAME_AS_NODE_POSTGRES,
    ...(options.sharedBuffers && defaults
      ? { startParams: [...defaults, "-c", `shared_buffers=${options.sharedBuffers}`] }
      : {}),
    ...(options.loadDataDir ? { loadDataDir: new Blob([options.loadDataDir]) } : {}),
  });
  // Every parameter goes to PostgreSQL as text, as node-postgres sends it: the server parses it
  // and a malformed value fails with its SQLSTATE, never with a client-side Error (src/db/params.ts).
  const textForEveryType = new Proxy({}, { get: () => toPostgresText });
  (pg as unknown as { serializers: Record<number, (v: unknown) => string | null> }).serializers =
    textForEveryType;
  /** Transactions by the id the caller gave them, from `begin` (still waiting for PGlite's lock) to `end`. */
  const txs = new Map<number, Promise<OpenTx>>();
  const listeners = new Map<number, () => Promise<void>>();
  let nextListener = 1;

  // The caller names the transaction and sends its first statement right behind `begin` without
  // waiting for an answer (one round trip less per transaction); statements wait here until it is open.
  const begin = (id: number, readOnly: boolean): Promise<void> => {
    const opened = new Promise<OpenTx>((resolve, reject) => {
      let finish: (commit: boolean) => void = () => {};
      const finished = new Promise<boolean>((r) => {
        finish = r;
      });
      let entered = false;
      const done = pg.transaction(async (ptx) => {
        entered = true;
        if (readOnly) await ptx.query("set transaction read only");
        resolve({ ptx, chain: Promise.resolve(), finish, done });
        if (!(await finished)) throw new Rollback();
      });
      // Rejections of `done` are read by `end`; one that comes before the transaction began is begin's.
      done.catch((error: unknown) => {
        if (!entered) reject(error);
      });
    });
    txs.set(id, opened);
    opened.catch(() => txs.delete(id));
    return opened.then(() => undefined);
  };

  const inTx = async <T>(id: number, run: (ptx: Transaction) => Promise<T>): Promise<T> => {
    const opened = txs.get(id);
    if (!opened) throw new Error(`transaction ${id} is not open`);
    const tx = await opened;
    const result = tx.chain.then(() => run(tx.ptx));
    tx.chain = result.catch(() => {});
    return result;
  };

  const handle = async (m: Request): Promise<{ value: unknown; transfer?: Transferable[] }> => {
    switch (m.op) {
      case "begin":
        await begin(m.tx, m.readOnly);
        return { value: null };
      case "query":
        return {
          value: await inTx(m.tx, async (ptx) => {
            const r = await ptx.query<Record<string, unknown>>(m.text, m.params);
            // PGlite counts affected rows only for writes (0 for a SELECT): take whichever says more.
            return { rows: r.rows, rowCount: Math.max(r.rows.length, r.affectedRows ?? 0) };
          }),
        };
      case "exec":
        await inTx(m.tx, (ptx) => ptx.exec(m.sql));
        return { value: null };
      case "end": {
        const opened = txs.get(m.tx);
        if (!opened) throw new Error(`transaction ${m.tx} is not open`);
        const tx = await opened;
        await tx.chain;
        tx.finish(m.commit);
        try {
          await tx.done;
        } catch (error) {
          if (!(error instanceof Rollback)) throw error;
        } finally {
          txs.delete(m.tx);
        }
        return { value: null };
      }
      case "listen": {
        const listener = nextListener++;
        listeners.set(listener, await pg.listen(m.channel, () => port.postMessage({ notify: listener })));
        return { value: listener };
      }
      case "unlisten": {
        await listeners.get(m.listener)?.();
        listeners.delete(m.listener);
        return { value: null };
      }
      case "dump": {
        const blob = (await pg.dumpDataDir("none")) as Blob;
        const bytes = await blob.arrayBuffer();
        return { value: bytes, transfer: [bytes] };
      }
      case "close":
        await pg.close();
        return { value: null };
    }
  };

  port.on("message", (m) => {
    handle(m).then(
      ({ value, transfer }) => port.postMessage({ id: m.id, ok: true, value }, transfer),
      (error: unknown) => port.postMessage({ id: m.id, ok: false, error: serializeError(error) }),
    );
  });
}

/** An error as plain data: its message and PostgreSQL's fields (code, detail, hint, column, ...). */
function serializeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const out: Record<string, unknown> = { name: error.name, message: error.message };
  for (const [key, value] of Object.entries(error)) {
    if (value === undefined || typeof value === "function") continue;
    if (typeof value === "object" && value !== null) continue;
    out[key] = value;
  }
  return out;
}
