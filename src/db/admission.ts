import { AsyncLocalStorage } from "node:async_hooks";

/**
 * The bounded wait for a database connection (docs/security.md, "Overload and faults").
 *
 * An engine has a fixed number of connections (PGlite one, PostgreSQL its pool). A transaction
 * takes a slot for as long as it runs. Work started by an HTTP request waits at most
 * `maxWaitMs` for a slot and only while fewer than `maxWaiting` other requests wait; past either
 * bound it is refused at once with DatabaseBusyError, which every interface answers as
 * `503 Service Unavailable` with `Retry-After`. Background work (jobs, webhooks, the CLI) is not
 * a request: it waits its turn without a bound, so overload never fails a job.
 *
 * Whether the caller is a request is read from `requestScope`, entered by the HTTP app for each
 * request, so no function between the route and the engine has to pass it along.
 */
export const requestScope = new AsyncLocalStorage<{ readonly request: true }>();

export interface QueueLimits {
  /** The most requests that may wait for a connection at once; the next is refused. */
  maxWaiting: number;
  /** How long a request waits for a connection before it is refused. */
  maxWaitMs: number;
}

export const DEFAULT_QUEUE_LIMITS: QueueLimits = { maxWaiting: 100, maxWaitMs: 1000 };

/**
 * Too many requests are waiting for the database. `code` is PostgreSQL's SQLSTATE for "too many
 * connections", so the one SQLSTATE table (src/db/errors.ts) maps it to 503 on every interface.
 */
export class DatabaseBusyError extends Error {
  override name = "DatabaseBusyError";
  readonly code = "53300";
  readonly detail: string;
  readonly hint = "Retry after the number of seconds in the Retry-After header.";

  constructor(reason: "queue_full" | "wait_timeout", limits: QueueLimits) {
    super("The database is busy; the request was not started. Retry in a moment.");
    this.detail =
      reason === "queue_full"
        ? `${limits.maxWaiting} requests were already waiting for a database connection.`
        : `No database connection was free within ${limits.maxWaitMs} ms.`;
  }
}

/** A snapshot of an engine's connections: for /metrics (src/observability/metrics.ts). */
export interface PoolStats {
  /** Connections the engine may use at once (PGlite: 1). */
  size: number;
  /** Taken by a running transaction. */
  inUse: number;
  /** Transactions waiting for one (requests and background work). */
  waiting: number;
  /** PostgreSQL: connections open in the pool and, of those, idle ones. */
  open?: number;
  idle?: number;
  /** PGlite: calls sent to the database's thread and not yet answered. */
  threadPending?: number;
}

interface Waiter {
  grant(): void;
  bounded: boolean;
}

/** A counting semaphore with a bounded, FIFO queue for requests and an unbounded one for background work. */
export class Admission {
  private free: number;
  /** The number of slots (connections). */
  readonly size: number;
  private readonly queue: Waiter[] = [];
  private waitingRequests = 0;
  readonly limits: QueueLimits;

  constructor(slots: number, limits: QueueLimits = DEFAULT_QUEUE_LIMITS) {
    this.free = slots;
    this.size = slots;
    this.limits = limits;
  }

  /** Numbers for /metrics-style introspection and tests. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Slots taken by running transactions. */
  get inUse(): number {
    return this.size - this.free;
  }

  /** How the slots are used now: what /metrics reports (src/observability/). */
  stats(): PoolStats {
    return { size: this.size, inUse: this.inUse, waiting: this.queue.length };
  }

  /** Resolves with a release function once a slot is free; a request past the bounds is refused. */
  acquire(): Promise<() => void> {
    const bounded = requestScope.getStore() !== undefined;
    if (this.free > 0 && this.queue.length === 0) {
      this.free--;
      return Promise.resolve(this.releaser());
    }
    if (bounded && this.waitingRequests >= this.limits.maxWaiting) {
      return Promise.reject(new DatabaseBusyError("queue_full", this.limits));
    }
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter: Waiter = {
        bounded,
        grant: () => {
          if (timer) clearTimeout(timer);
          if (bounded) this.waitingRequests--;
          resolve(this.releaser());
        },
      };
      if (bounded) {
        this.waitingRequests++;
        timer = setTimeout(() => {
          const i = this.queue.indexOf(waiter);
          if (i < 0) return;
          this.queue.splice(i, 1);
          this.waitingRequests--;
          reject(new DatabaseBusyError("wait_timeout", this.limits));
        }, this.limits.maxWaitMs);
      }
      this.queue.push(waiter);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      if (next) next.grant();
      else this.free++;
    };
  }
}
