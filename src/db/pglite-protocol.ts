import type { Transferable } from "node:worker_threads";

/**
 * The messages between PgliteEngine (src/db/pglite.ts, the main thread) and the side that owns
 * the PGlite instance (src/db/pglite-host.js, the database's worker thread): one message, one
 * answer with the same `id`. Types only: the thread's own code is plain JavaScript, type-checked
 * from its JSDoc, so that no TypeScript file is loaded in that thread (bench/README.md, "Memory
 * of the embedded default").
 */

export type Request =
  | { id: number; op: "begin"; tx: number; readOnly: boolean }
  | { id: number; op: "query"; tx: number; text: string; params: unknown[] | undefined }
  | { id: number; op: "exec"; tx: number; sql: string }
  /** `COPY ... FROM '/dev/blob'` (`text`) fed `data`: whole rows of COPY's text format, transferred. */
  | { id: number; op: "copy"; tx: number; text: string; data: ArrayBuffer }
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
