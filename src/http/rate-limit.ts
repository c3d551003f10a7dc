import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";

/**
 * Fixed-window rate limits counted in the database (internal.rate_limits), so every process of a
 * deployment shares them. A hit is counted in its own transaction: it stays counted even when the
 * request it belongs to fails, which is the point for sign-in attempts.
 */
export interface Limit {
  max: number;
  windowSeconds: number;
}

export interface LimitResult {
  allowed: boolean;
  remaining: number;
  /** Seconds until the window resets. */
  retryAfter: number;
}

export async function consume(
  db: Db,
  key: string,
  limit: Limit,
  now: Date = new Date(),
): Promise<LimitResult> {
  return db.asService((tx) => consumeIn(tx, key, limit, now));
}

/**
 * The same count inside a transaction of the caller's: it stays counted only if that transaction
 * commits (a limit on something the transaction does, such as mailing a code, not on attempts).
 */
export async function consumeIn(
  tx: Tx,
  key: string,
  limit: Limit,
  now: Date = new Date(),
): Promise<LimitResult> {
  const windowMs = limit.windowSeconds * 1000;
  const windowStart = new Date(Math.floor(now.getTime() / windowMs) * windowMs);
  const r = await tx.query<{ hits: number }>(
    `insert into internal.rate_limits (key, window_start, hits) values ($1, $2, 1)
     on conflict (key, window_start) do update set hits = internal.rate_limits.hits + 1
     returning hits`,
    [key, windowStart],
  );
  // Now and then, forget windows older than a day.
  if (Math.random() < 0.01) {
    await tx.query("delete from internal.rate_limits where window_start < now() - interval '1 day'");
  }
  const hits = r.rows[0]?.hits ?? 1;
  const retryAfter = Math.max(1, Math.ceil((windowStart.getTime() + windowMs - now.getTime()) / 1000));
  return { allowed: hits <= limit.max, remaining: Math.max(0, limit.max - hits), retryAfter };
}

/**
 * Fixed-window counters in this process's memory, decided locally: a check is a map lookup and a
 * refusal costs no database work. Each process counts its own hits; on PostgreSQL `startSharing`
 * adds the other processes' hits in the background (docs/operations.md, "Rate limits across
 * processes"): every `intervalMs` this process adds what it counted since the last exchange to
 * internal.rate_counters (an unlogged table) and reads back every process's total for the windows it
 * is counting, in one statement. A limit then holds across N processes to within what they let
 * through during one interval; without sharing (the embedded database is one process) the counts
 * are this process's, which are all there are.
 */
export class MemoryRateLimiter {
  private readonly windows = new Map<string, Window>();
  private sweptAt = 0;

  hit(key: string, limit: Limit, now: number = Date.now()): LimitResult {
    const windowMs = limit.windowSeconds * 1000;
    const start = Math.floor(now / windowMs) * windowMs;
    let w = this.windows.get(key);
    if (!w || w.start !== start) {
      w = { start, windowMs, local: 0, pushed: 0, total: 0 };
      this.windows.set(key, w);
    }
    w.local++;
    if (now - this.sweptAt > 60_000) this.sweep(now);
    const hits = countOf(w);
    return {
      allowed: hits <= limit.max,
      remaining: Math.max(0, limit.max - hits),
      retryAfter: Math.max(1, Math.ceil((start + windowMs - now) / 1000)),
    };
  }

  /** What `hit` would answer, without counting this call. */
  peek(key: string, limit: Limit, now: number = Date.now()): LimitResult {
    const windowMs = limit.windowSeconds * 1000;
    const start = Math.floor(now / windowMs) * windowMs;
    const w = this.windows.get(key);
    const hits = w && w.start === start ? countOf(w) : 0;
    return {
      allowed: hits < limit.max,
      remaining: Math.max(0, limit.max - hits),
      retryAfter: Math.max(1, Math.ceil((start + windowMs - now) / 1000)),
    };
  }

  /**
   * One exchange with the database: adds this process's new hits of every current window and
   * learns every process's totals for them. Safe to call at any time; `startSharing` calls it on
   * a timer.
   */
  async sync(db: Db, now: number = Date.now()): Promise<void> {
    const keys: string[] = [];
    const starts: string[] = [];
    const ends: string[] = [];
    const deltas: number[] = [];
    const entries: [Window, number][] = [];
    for (const [key, w] of this.windows) {
      if (w.start + w.windowMs <= now) continue;
      keys.push(key);
      starts.push(new Date(w.start).toISOString());
      ends.push(new Date(w.start + w.windowMs).toISOString());
      deltas.push(w.local - w.pushed);
      entries.push([w, w.local]);
    }
    if (keys.length === 0) return;
    this.exchanges++;
    const sweep = this.exchanges % 200 === 0;
    const rows = await db.asService(async (tx) => {
      const r = await tx.query<{ i: number; hits: number }>(
        `with mine as (
           select i::int, key, window_start, window_end, delta
           from unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::int[])
             with ordinality as t(key, window_start, window_end, delta, i)
         ), added as (
           insert into internal.rate_counters as c (key, window_start, window_end, hits)
           select key, window_start, window_end, delta from mine where delta > 0
           on conflict (key, window_start) do update set hits = c.hits + excluded.hits
           returning c.key, c.window_start, c.hits
         )
         select m.i, coalesce(a.hits, c.hits, 0) as hits
         from mine m
         left join added a on a.key = m.key and a.window_start = m.window_start
         left join internal.rate_counters c on m.delta = 0 and c.key = m.key and c.window_start = m.window_start`,
        [keys, starts, ends, deltas],
      );
      // Now and then, forget windows that have ended.
      if (sweep)
        await tx.query("delete from internal.rate_counters where window_end < now() - interval '1 minute'");
      return r.rows;
    });
    for (const row of rows) {
      const entry = entries[Number(row.i) - 1];
      if (!entry) continue;
      const [w, sent] = entry;
      // The window may have been replaced or counted on meanwhile: what was counted since stays local.
      w.pushed = sent;
      w.total = Math.max(w.total, Number(row.hits));
    }
  }

  /**
   * Shares the counts with every other process on this database (PostgreSQL), every `intervalMs`,
   * until the returned function is called. A failed exchange is reported and tried again at the next.
   */
  startSharing(db: Db, intervalMs: number, onError: (error: unknown) => void): () => Promise<void> {
    let running: Promise<void> | undefined;
    const timer = setInterval(() => {
      if (running) return;
      running = this.sync(db)
        .catch(onError)
        .finally(() => {
          running = undefined;
        });
    }, intervalMs);
    timer.unref();
    return async () => {
      clearInterval(timer);
      await running;
    };
  }

  private exchanges = 0;

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [key, w] of this.windows) if (now - w.start > 3_600_000) this.windows.delete(key);
  }
}

/** A window's count: every process's total at the last exchange, plus what this one counted since. */
interface Window {
  start: number;
  windowMs: number;
  /** Hits this process counted in the window. */
  local: number;
  /** How many of them the database has. */
  pushed: number;
  /** Every process's hits at the last exchange (this process's pushed ones included). */
  total: number;
}

const countOf = (w: Window) => Math.max(w.total, w.pushed) + (w.local - w.pushed);
