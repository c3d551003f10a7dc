// @ts-check
// The worker thread that runs the embedded database (see pglite-host.js). Started by PgliteEngine.
// Plain JavaScript, as everything this thread loads: a TypeScript file would load Node's type
// stripper in the thread too, 12 MB that stay (src/db/pglite-protocol.ts).
/** @import { OpenOptions, Port } from "./pglite-protocol.ts" */
import { parentPort, workerData } from "node:worker_threads";
import { host } from "./pglite-host.js";

if (!parentPort) throw new Error("pglite-thread.js runs as a worker thread");
const port = /** @type {Port} */ (/** @type {unknown} */ (parentPort));
host(port, /** @type {OpenOptions} */ (workerData)).then(
  () => parentPort?.postMessage({ ready: true }),
  (/** @type {unknown} */ error) =>
    parentPort?.postMessage({
      ready: false,
      message: error instanceof Error ? error.message : String(error),
    }),
);
