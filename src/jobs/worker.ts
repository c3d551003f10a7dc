import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Db } from "../db/db.ts";
import { claim, complete, extendLease, fail, type Job } from "./queue.ts";

/** What a job handler gets besides the job: a signal that aborts when its lease is lost or the worker stops hard. */
export interface JobContext {
  signal: AbortSignal;
}

/**
 * Handlers by job kind. A handler must be idempotent: a job can run again after a crash. A
 * recurring job's handler returns when it runs next: the same job is queued again for then.
 */
export type Handlers = Record<string, (job: Job, ctx: JobContext) => Promise<unknown>>;

export interface WorkerOptions {
  db: Db;
  handlers: Handlers;
  /** Jobs run at once by this worker. */
  concurrency?: number;
  /** How long to sleep when there is nothing to do, unless woken. */
  pollMs?: number;
  /**
   * How long a claimed job is this worker's before another may take it. Renewed every third of
   * it while the handler runs, so it bounds only how long a dead worker's jobs wait.
   */
  leaseMs?: number;
  logger?: Pick<Logger, "info" | "warn" | "error">;
  id?: string;
}

/**
 * Claims and runs jobs of the kinds it has handlers for. `wake()` makes it look at once (after a
 * transaction that enqueued work); `stop()` stops claiming and waits for the jobs in flight.
 */
export class Worker {
  readonly id: string;
  private readonly opts: Required<Omit<WorkerOptions, "logger" | "id">> & Pick<WorkerOptions, "logger">;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;

  constructor(options: WorkerOptions) {
    this.id = options.id ?? `worker-${randomUUID().slice(0, 8)}`;
    this.opts = {
      db: options.db,
      handlers: options.handlers,
      concurrency: options.concurrency ?? 4,
      pollMs: options.pollMs ?? 1000,
      leaseMs: options.leaseMs ?? 60_000,
      logger: options.logger,
    };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  wake(): void {
    this.wakeUp?.();
  }

  /** Stops claiming, then waits for the jobs in flight to finish. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
  }

  private async run(): Promise<void> {
    const kinds = Object.keys(this.opts.handlers);
    while (this.running) {
      const free = this.opts.concurrency - this.inFlight.size;
      let claimed: Job[] = [];
      if (free > 0) {
        try {
          claimed = await claim(this.opts.db, this.id, kinds, free, this.opts.leaseMs);
        } catch (error) {
          this.opts.logger?.warn({ err: error, worker: this.id }, "claiming jobs failed; retrying");
        }
      }
      for (const job of claimed) {
        const p = this.execute(job).finally(() => {
          this.inFlight.delete(p);
          this.wake();
        });
        this.inFlight.add(p);
      }
      if (claimed.length === 0 || this.inFlight.size >= this.opts.concurrency) await this.sleep();
    }
  }

  private sleep(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, this.opts.pollMs);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = done;
    });
  }

  private async execute(job: Job): Promise<void> {
    const handler = this.opts.handlers[job.kind];
    const controller = new AbortController();
    const renew = setInterval(
      () => {
        extendLease(this.opts.db, job, this.id, this.opts.leaseMs)
          .then((held) => {
            if (!held) controller.abort(new Error("lease lost"));
          })
          .catch(() => {});
      },
      Math.max(50, Math.floor(this.opts.leaseMs / 3)),
    );
    renew.unref();
    try {
      if (!handler) throw new Error(`no handler for ${job.kind}`);
      const next = await handler(job, { signal: controller.signal });
      await complete(this.opts.db, job, this.id, next instanceof Date ? next : undefined);
    } catch (error) {
      const outcome = await fail(this.opts.db, job, this.id, error).catch(() => "unrecorded");
      this.opts.logger?.warn(
        { err: error, job_id: job.id, kind: job.kind, attempt: job.attempts, outcome },
        "job failed",
      );
    } finally {
      clearInterval(renew);
    }
  }
}
