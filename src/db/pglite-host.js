// @ts-check
// Plain JavaScript, type-checked from its JSDoc: it runs in the embedded database's thread, which
// loads no TypeScript file (src/db/pglite-protocol.ts says why; the messages' types are there).
/** @import { Transferable } from "node:worker_threads" */
/** @import { Results, Transaction } from "@electric-sql/pglite" */
/** @import { OpenOptions, Port, Request } from "./pglite-protocol.ts" */
import { PGlite } from "@electric-sql/pglite";
import { toPostgresText } from "./params.js";

/*
 * The side of the embedded database that owns the PGlite instance. It runs in a worker thread
 * (src/db/pglite-thread.js), so a long statement blocks that thread, never the one that serves
 * HTTP. The main thread's PgliteEngine speaks to it with the messages of pglite-protocol.ts; one
 * message, one answer with the same `id`.
 *
 * A transaction is opened by `begin` and stays open across messages until `end`: PGlite's own
 * transaction mutex makes a second `begin` wait until the first ends, exactly as before.
 */

// int8 and date as text, as the PostgreSQL adapter returns them: bigints never lose precision
// and a date never shifts by a time zone. (numeric is text in both already.)
const SAME_AS_NODE_POSTGRES = { 20: (/** @type {string} */ v) => v, 1082: (/** @type {string} */ v) => v };

class Rollback extends Error {}

/**
 * @typedef {object} OpenTx
 * @property {Transaction} ptx
 * @property {Promise<unknown>} chain Statements of one transaction run one after another, whatever the caller sends.
 * @property {(commit: boolean) => void} finish
 * @property {Promise<void>} done
 */

/**
 * Opens PGlite and answers `port`'s requests until `close`. Resolves once the database is open.
 *
 * @param {Port} port
 * @param {OpenOptions} options
 * @returns {Promise<void>}
 */
export async function host(port, options) {
  const defaults = /** @type {{ defaultStartParams?: string[] }} */ (/** @type {unknown} */ (PGlite))
    .defaultStartParams;
  const pg = await PGlite.create(options.dataDir, {
    parsers: SAME_AS_NODE_POSTGRES,
    ...(options.sharedBuffers && defaults
      ? { startParams: [...defaults, "-c", `shared_buffers=${options.sharedBuffers}`] }
      : {}),
    ...(options.loadDataDir ? { loadDataDir: new Blob([options.loadDataDir]) } : {}),
  });
  // Every parameter goes to PostgreSQL as text, as node-postgres sends it: the server parses it
  // and a malformed value fails with its SQLSTATE, never with a client-side Error (src/db/params.js).
  const textForEveryType = new Proxy({}, { get: () => toPostgresText });
  Object.assign(pg, { serializers: textForEveryType });
  /**
   * Transactions by the id the caller gave them, from `begin` (still waiting for PGlite's lock) to `end`.
   * @type {Map<number, Promise<OpenTx>>}
   */
  const txs = new Map();
  /** @type {Map<number, () => Promise<void>>} */
  const listeners = new Map();
  let nextListener = 1;

  // The caller names the transaction and sends its first statement right behind `begin` without
  // waiting for an answer (one round trip less per transaction); statements wait here until it is open.
  /**
   * @param {number} id
   * @param {boolean} readOnly
   * @returns {Promise<void>}
   */
  const begin = (id, readOnly) => {
    /** @type {Promise<OpenTx>} */
    const opened = new Promise((resolve, reject) => {
      /** @type {(commit: boolean) => void} */
      let finish = () => {};
      /** @type {Promise<boolean>} */
      const finished = new Promise((r) => {
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
      done.catch((/** @type {unknown} */ error) => {
        if (!entered) reject(error);
      });
    });
    txs.set(id, opened);
    opened.catch(() => txs.delete(id));
    return opened.then(() => undefined);
  };

  /**
   * @template T
   * @param {number} id
   * @param {(ptx: Transaction) => Promise<T>} run
   * @returns {Promise<T>}
   */
  const inTx = async (id, run) => {
    const opened = txs.get(id);
    if (!opened) throw new Error(`transaction ${id} is not open`);
    const tx = await opened;
    const result = tx.chain.then(() => run(tx.ptx));
    tx.chain = result.catch(() => {});
    return result;
  };

  /**
   * @param {Request} m
   * @returns {Promise<{ value: unknown; transfer?: Transferable[] }>}
   */
  const handle = async (m) => {
    switch (m.op) {
      case "begin":
        await begin(m.tx, m.readOnly);
        return { value: null };
      case "query":
        return {
          value: await inTx(m.tx, async (ptx) => {
            /** @type {Results<Record<string, unknown>>} */
            const r = await ptx.query(m.text, m.params);
            // PGlite counts affected rows only for writes (0 for a SELECT): take whichever says more.
            return { rows: r.rows, rowCount: Math.max(r.rows.length, r.affectedRows ?? 0) };
          }),
        };
      case "exec":
        await inTx(m.tx, (ptx) => ptx.exec(m.sql));
        return { value: null };
      case "copy":
        return {
          value: await inTx(m.tx, async (ptx) => {
            // Reading '/dev/blob' is reading a server file, which only the database's owner may do:
            // the owner runs this one statement (its text is Backline's own, src/db/pglite.ts, never
            // a client's), then the transaction's role is back.
            const was = await ptx.query(
              "select current_setting('role') as role, set_config('role', 'none', true)",
            );
            const role = /** @type {{ role: string }} */ (was.rows[0]).role;
            const r = await ptx.query(m.text, [], { blob: new Blob([m.data]) });
            await ptx.query("select set_config('role', $1, true)", [role]);
            return r.affectedRows ?? 0;
          }),
        };
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
        const blob = /** @type {Blob} */ (await pg.dumpDataDir("none"));
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
      (/** @type {unknown} */ error) =>
        port.postMessage({ id: m.id, ok: false, error: serializeError(error) }),
    );
  });
}

/**
 * An error as plain data: its message and PostgreSQL's fields (code, detail, hint, column, ...).
 *
 * @param {unknown} error
 * @returns {Record<string, unknown>}
 */
function serializeError(error) {
  if (!(error instanceof Error)) return { message: String(error) };
  /** @type {Record<string, unknown>} */
  const out = { name: error.name, message: error.message };
  for (const [key, value] of Object.entries(error)) {
    if (value === undefined || typeof value === "function") continue;
    if (typeof value === "object" && value !== null) continue;
    out[key] = value;
  }
  return out;
}
