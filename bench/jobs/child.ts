// The jobs benchmark's worker process (run.ts forks it with BENCH_CHILD set): a real Worker on
// the benchmark's database that tells the benchmark, over IPC, the moment each job's handler starts.
import { Db } from "../../src/db/db.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { Worker } from "../../src/jobs/worker.ts";

interface Task {
  url: string;
  kind: string;
  listen: boolean;
}

const task = JSON.parse(process.env.BENCH_CHILD ?? "null") as Task | null;
if (!task || !process.send) throw new Error("child.ts is run by bench/jobs/run.ts (fork, BENCH_CHILD)");
process.on("disconnect", () => process.exit(0));

const wallMs = () => performance.timeOrigin + performance.now();
const db = new Db(new PostgresEngine({ url: task.url, poolSize: 4, applicationName: "bench-jobs-worker" }));
const worker = new Worker({
  db,
  concurrency: 4,
  listen: task.listen,
  handlers: {
    [task.kind]: async (job) => {
      process.send?.({ type: "started", n: job.payload.n, at: wallMs() });
    },
  },
});
worker.start();
// The worker's first look at the queue is done once its LISTEN is up (or at once when polling).
setTimeout(() => process.send?.({ type: "ready" }), 500);
process.on("message", async (m: { type: string }) => {
  if (m.type !== "stop") return;
  await worker.stop();
  await db.close();
  process.send?.({ type: "stopped" });
  process.disconnect();
});
