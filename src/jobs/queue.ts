import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";

/**
 * The durable job queue (internal.jobs). A job is written in the same transaction as the change
 * that causes it (`enqueue(tx, ...)`), so it exists exactly when the change does. Workers claim
 * jobs with FOR UPDATE SKIP LOCKED and hold them for a lease; a worker that dies leaves its jobs
 * to be claimed again when the lease runs out, so every job runs at least once and never twice
 * at the same time. Failures are retried with exponential backoff; after max_attempts a job is
 * dead and stays visible with its last error.
 *
 * Why our own: pg-boss and graphile-worker need a PostgreSQL server connection (and LISTEN);
 * the embedded database is in-process PGlite. The queue is one table and four statements.
 */

export interface Job {
  id: string;
  kind: string;
  payload: Record<string, unknown>;
  /** This run's attempt number, from 1. */
  attempts: number;
  max_attempts: number;
}

export interface EnqueueOptions {
  runAt?: Date;
  /** At most one queued or running job per (kind, dedupe key); a second enqueue is a no-op. */
  dedupeKey?: string;
  maxAttempts?: number;
}

/** Writes a job in the caller's transaction; returns its id, or undefined when deduplicated. */
export async function enqueue(
  tx: Tx,
  kind: string,
  payload: Record<string, unknown>,
  options: EnqueueOptions = {},
): Promise<string | undefined> {
  const r = await tx.query<{ id: string }>(
    `insert into internal.jobs (kind, payload, run_at, dedupe_key, max_attempts)
     values ($1, $2, coalesce($3::timestamptz, now()), $4, coalesce($5::int, 10))
     on conflict (kind, dedupe_key) where dedupe_key is not null and status in ('queued', 'running') do nothing
     returning id`,
    [
      kind,
      JSON.stringify(payload),
      options.runAt ?? null,
      options.dedupeKey ?? null,
      options.maxAttempts ?? null,
    ],
  );
  return r.rows[0]?.id;
}

/**
 * A cap on jobs running at once per group: jobs of `kinds` whose payload has the same `field`
 * (delivery sends per store). `room` is how many more each group may start now (groups not named
 * there: `max`); `full` are the groups at their cap, not claimed at all.
 */
export interface GroupCaps {
  kinds: string[];
  field: string;
  max: number;
  room: Map<string, number>;
  full: string[];
}

/** The group of a job under `caps`, or undefined when it is not capped. */
export function groupOf(
  job: Pick<Job, "kind" | "payload">,
  caps: Pick<GroupCaps, "kinds" | "field"> | undefined,
) {
  if (!caps?.kinds.includes(job.kind)) return undefined;
  const value = job.payload[caps.field];
  return typeof value === "string" ? value : undefined;
}

/**
 * Claims up to `limit` runnable jobs of the given kinds for `workerId`: queued ones whose time has
 * come, and running ones whose lease ran out (their worker died). With `caps`, no group gets more
 * than its room, and groups at their cap are passed over.
 */
export async function claim(
  db: Db,
  workerId: string,
  kinds: string[],
  limit: number,
  leaseMs: number,
  caps?: GroupCaps,
): Promise<Job[]> {
  if (kinds.length === 0 || limit <= 0) return [];
  return db.asService(async (tx) => {
    // A job whose last attempt's worker was lost (killed, out of memory) is dead, not run again:
    // a job that kills its worker every time must not take down one worker after another.
    await tx.query(
      `update internal.jobs
       set status = 'dead', finished_at = now(), locked_by = null, locked_until = null,
           last_error = coalesce(last_error || E'\n', '') || 'the worker of the last attempt was lost (its lease ran out)'
       where kind = any($1::text[]) and status = 'running' and locked_until < now() and attempts >= max_attempts`,
      [kinds],
    );
    if (caps) return claimCapped(tx, workerId, kinds, limit, leaseMs, caps);
    return (
      await tx.query<Job>(
        `update internal.jobs j
           set status = 'running', locked_by = $1, locked_until = now() + make_interval(secs => $4::double precision / 1000),
               attempts = j.attempts + 1
           where j.id in (
             select id from internal.jobs
             where kind = any($2::text[])
               and ((status = 'queued' and run_at <= now()) or (status = 'running' and locked_until < now()))
             order by run_at, id
             limit $3
             for update skip locked)
           returning j.id::text as id, j.kind, j.payload, j.attempts, j.max_attempts`,
        [workerId, kinds, limit, leaseMs],
      )
    ).rows;
  });
}

async function claimCapped(
  tx: Tx,
  workerId: string,
  kinds: string[],
  limit: number,
  leaseMs: number,
  caps: GroupCaps,
): Promise<Job[]> {
  // Looked at: twice what may be taken, so one group with a backlog cannot fill the batch alone.
  const candidates = (
    await tx.query<{ id: string; kind: string; grp: string | null }>(
      `select id::text as id, kind, case when kind = any($4::text[]) then payload ->> $5 end as grp
       from internal.jobs
       where kind = any($1::text[])
         and ((status = 'queued' and run_at <= now()) or (status = 'running' and locked_until < now()))
         and not (kind = any($4::text[]) and coalesce(payload ->> $5, '') = any($3::text[]))
       order by run_at, id
       limit $2
       for update skip locked`,
      [kinds, limit * 2, caps.full, caps.kinds, caps.field],
    )
  ).rows;
  const taken: string[] = [];
  const taking = new Map<string, number>();
  for (const c of candidates) {
    if (taken.length >= limit) break;
    if (c.grp !== null) {
      const n = taking.get(c.grp) ?? 0;
      if (n >= (caps.room.get(c.grp) ?? caps.max)) continue;
      taking.set(c.grp, n + 1);
    }
    taken.push(c.id);
  }
  if (taken.length === 0) return [];
  return (
    await tx.query<Job>(
      `update internal.jobs j
         set status = 'running', locked_by = $1, locked_until = now() + make_interval(secs => $3::double precision / 1000),
             attempts = j.attempts + 1
         where j.id = any ($2::bigint[])
         returning j.id::text as id, j.kind, j.payload, j.attempts, j.max_attempts`,
      [workerId, taken, leaseMs],
    )
  ).rows;
}

/** Extends the lease of a job this worker still holds; false when it lost it. */
export async function extendLease(db: Db, job: Job, workerId: string, leaseMs: number): Promise<boolean> {
  const r = await db.asService((tx) =>
    tx.query(
      `update internal.jobs set locked_until = now() + make_interval(secs => $3::double precision / 1000)
       where id = $1 and locked_by = $2 and status = 'running'`,
      [job.id, workerId, leaseMs],
    ),
  );
  return r.rowCount > 0;
}

/** Marks a job done; a recurring one (rerunAt) is queued again for then, with fresh attempts. */
export async function complete(db: Db, job: Job, workerId: string, rerunAt?: Date): Promise<void> {
  await db.asService((tx) =>
    rerunAt
      ? tx.query(
          `update internal.jobs set status = 'queued', run_at = $3, attempts = 0, finished_at = null, locked_by = null,
             locked_until = null, last_error = null
           where id = $1 and locked_by = $2`,
          [job.id, workerId, rerunAt],
        )
      : tx.query(
          `update internal.jobs set status = 'succeeded', finished_at = now(), locked_by = null, locked_until = null, last_error = null
           where id = $1 and locked_by = $2`,
          [job.id, workerId],
        ),
  );
}

/** Exponential backoff with ±20% jitter: 2 s, 4 s, 8 s … capped at one hour. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(3_600_000, 1000 * 2 ** Math.max(1, attempt));
  return Math.round(base * (0.8 + 0.4 * random()));
}

/** Records a failure: queued again after the backoff, or dead after its last attempt. */
export async function fail(
  db: Db,
  job: Job,
  workerId: string,
  error: unknown,
  delayMs = backoffMs(job.attempts),
): Promise<"retry" | "dead"> {
  const message = (error instanceof Error ? (error.stack ?? error.message) : String(error)).slice(0, 4000);
  const dead = job.attempts >= job.max_attempts;
  await db.asService((tx) =>
    tx.query(
      `update internal.jobs
       set status = case when $3 then 'dead' else 'queued' end,
           run_at = case when $3 then run_at else now() + make_interval(secs => $4::double precision / 1000) end,
           finished_at = case when $3 then now() end,
           locked_by = null, locked_until = null, last_error = $5
       where id = $1 and locked_by = $2`,
      [job.id, workerId, dead, delayMs, message],
    ),
  );
  return dead ? "dead" : "retry";
}

export const JOB_STATUSES = ["queued", "running", "succeeded", "dead"] as const;

export interface JobRow {
  id: string;
  kind: string;
  status: (typeof JOB_STATUSES)[number];
  payload: Record<string, unknown>;
  attempts: number;
  max_attempts: number;
  run_at: Date;
  locked_by: string | null;
  last_error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

/** Jobs for the operator to look at (dead ones first of all), newest first. */
export async function listJobs(
  db: Db,
  filter: { status?: JobRow["status"]; kind?: string; limit?: number } = {},
): Promise<JobRow[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<JobRow>(
          `select id::text as id, kind, status, payload, attempts, max_attempts, run_at, locked_by, last_error,
                  created_at, finished_at
           from internal.jobs j
           where ($1::text is null or status = $1) and ($2::text is null or kind = $2)
           order by j.created_at desc, j.id desc limit $3`,
          [filter.status ?? null, filter.kind ?? null, filter.limit ?? 100],
        )
      ).rows,
    { readOnly: true },
  );
}

/**
 * A dead job queued again, now, with a fresh set of attempts (after the operator fixed what
 * killed it). Undefined when there is no such dead job — or when a job of the same kind and
 * dedupe key is already queued or running, which does the same work.
 */
export async function retryDeadJob(
  db: Db,
  id: string,
  scope: { tenantId?: string } = {},
): Promise<(JobRow & { updated_at: Date }) | undefined> {
  if (!/^[0-9]{1,18}$/.test(id)) return undefined;
  return db.asService(async (tx) => {
    const r = await tx.query<JobRow & { updated_at: Date }>(
      `update internal.jobs j
       set status = 'queued', run_at = now(), attempts = 0, finished_at = null, locked_by = null, locked_until = null
       where j.id = $1::bigint and j.status = 'dead' and ($2::uuid is null or j.tenant_id = $2::uuid)
         and not exists (select 1 from internal.jobs o where o.kind = j.kind and o.dedupe_key = j.dedupe_key
                         and o.status in ('queued', 'running'))
       returning id::text as id, kind, status, payload, attempts, max_attempts, run_at, locked_by, last_error,
                 created_at, finished_at, updated_at`,
      [id, scope.tenantId ?? null],
    );
    return r.rows[0];
  });
}
