import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Db } from "../db/db.ts";
import { claim, complete, extendLease, fail, type GroupCaps, groupOf, type Job } from "./queue.ts";

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
  /**
   * Wake on the `backline_jobs` notice a committed enqueue sends (Db.listen; true by default), so
   * a job written by any process starts at once; `pollMs` still looks for jobs coming due and for
   * a lost notice. False: poll only (the benchmark's baseline).
   */
  listen?: boolean;
  /**
   * At most `max` jobs of `kinds` with the same payload `field` running at once in this worker
   * (delivery sends per store): a store that hangs holds at most that many of the slots.
   */
  perGroup?: { kinds: string[]; field: string; max: number };
}

/** The channel a committed insert into internal.jobs (or a job queued again) notifies (migration 0021). */
export const JOBS_CHANNEL = "backline_jobs";

/**
 * Claims and runs jobs of the kinds it has handlers for. `wake()` makes it look at once (after a
 * transaction that enqueued work); `stop()` stops claiming and waits for the jobs in flight.
 */
export class Worker {
  readonly id: string;
  private readonly opts: Required<Omit<WorkerOptions, "logger" | "id" | "listen" | "perGroup">> &
    Pick<WorkerOptions, "logger">;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  /** A wake-up came while the loop was not sleeping: look again before sleeping. */
  private woken = false;
  private readonly listenForNotices: boolean;
  private readonly perGroup: WorkerOptions["perGroup"];
  /** Jobs running per group (perGroup). */
  private readonly groupLoad = new Map<string, number>();

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
    this.listenForNotices = options.listen ?? true;
    this.perGroup = options.perGroup;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  wake(): void {
    this.woken = true;
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
    let unlisten: (() => Promise<void>) | undefined;
    if (this.listenForNotices) {
      try {
        unlisten = await this.opts.db.listen(JOBS_CHANNEL, () => this.wake());
      } catch (error) {
        this.opts.logger?.warn({ err: error, worker: this.id }, "jobs: cannot listen for notices; polling");
      }
    }
    try {
      await this.work();
    } finally {
      await unlisten?.().catch(() => {});
    }
  }

  private async work(): Promise<void> {
    const kinds = Object.keys(this.opts.handlers);
    while (this.running) {
      const free = this.opts.concurrency - this.inFlight.size;
      let claimed: Job[] = [];
      if (free > 0) {
        this.woken = false;
        try {
          claimed = await claim(this.opts.db, this.id, kinds, free, this.opts.leaseMs, this.caps());
        } catch (error) {
          this.opts.logger?.warn({ err: error, worker: this.id }, "claiming jobs failed; retrying");
        }
      }
      for (const job of claimed) {
        const group = groupOf(job, this.perGroup);
        if (group !== undefined) this.groupLoad.set(group, (this.groupLoad.get(group) ?? 0) + 1);
        const p = this.execute(job).finally(() => {
          this.inFlight.delete(p);
          if (group !== undefined) {
            const load = (this.groupLoad.get(group) ?? 1) - 1;
            if (load <= 0) this.groupLoad.delete(group);
            else this.groupLoad.set(group, load);
          }
          this.wake();
        });
        this.inFlight.add(p);
      }
      if (claimed.length === 0 || this.inFlight.size >= this.opts.concurrency) await this.sleep();
    }
  }

  private caps(): GroupCaps | undefined {
    if (!this.perGroup) return undefined;
    const room = new Map<string, number>();
    const full: string[] = [];
    for (const [group, load] of this.groupLoad) {
      if (load >= this.perGroup.max) full.push(group);
      else room.set(group, this.perGroup.max - load);
    }
    return { ...this.perGroup, room, full };
  }

  private sleep(): Promise<void> {
    // Woken while claiming (a notice, a job finished): there may be more to claim now.
    if (this.woken && this.inFlight.size < this.opts.concurrency) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.opts.pollMs);
      timer.unref();
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
