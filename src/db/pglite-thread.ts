// The worker thread that runs the embedded database (see pglite-host.ts). Started by PgliteEngine.
import { parentPort, workerData } from "node:worker_threads";
import { host, type OpenOptions, type Port } from "./pglite-host.ts";

if (!parentPort) throw new Error("pglite-thread.ts runs as a worker thread");
const port = parentPort as unknown as Port;
host(port, workerData as OpenOptions).then(
  () => parentPort?.postMessage({ ready: true }),
  (error: unknown) =>
    parentPort?.postMessage({
      ready: false,
      message: error instanceof Error ? error.message : String(error),
    }),
);
