import type { Db } from "../db/db.ts";

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
  const windowMs = limit.windowSeconds * 1000;
  const windowStart = new Date(Math.floor(now.getTime() / windowMs) * windowMs);
  const hits = await db.asService(async (tx) => {
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
    return r.rows[0]?.hits ?? 1;
  });
  const retryAfter = Math.max(1, Math.ceil((windowStart.getTime() + windowMs - now.getTime()) / 1000));
  return { allowed: hits <= limit.max, remaining: Math.max(0, limit.max - hits), retryAfter };
}

/**
 * Fixed-window counters in this process's memory: for limits checked on every request, where a
 * database write per request would cost more than the limit saves. Each process counts its own
 * share, so behind N processes the effective limit is up to N times the configured one.
 */
export class MemoryRateLimiter {
  private readonly windows = new Map<string, { start: number; hits: number }>();
  private sweptAt = 0;

  hit(key: string, limit: Limit, now: number = Date.now()): LimitResult {
    const windowMs = limit.windowSeconds * 1000;
    const start = Math.floor(now / windowMs) * windowMs;
    let w = this.windows.get(key);
    if (!w || w.start !== start) {
      w = { start, hits: 0 };
      this.windows.set(key, w);
    }
    w.hits++;
    if (now - this.sweptAt > 60_000) this.sweep(now);
    return {
      allowed: w.hits <= limit.max,
      remaining: Math.max(0, limit.max - w.hits),
      retryAfter: Math.max(1, Math.ceil((start + windowMs - now) / 1000)),
    };
  }

  /** What `hit` would answer, without counting this call. */
  peek(key: string, limit: Limit, now: number = Date.now()): LimitResult {
    const windowMs = limit.windowSeconds * 1000;
    const start = Math.floor(now / windowMs) * windowMs;
    const w = this.windows.get(key);
    const hits = w && w.start === start ? w.hits : 0;
    return {
      allowed: hits < limit.max,
      remaining: Math.max(0, limit.max - hits),
      retryAfter: Math.max(1, Math.ceil((start + windowMs - now) / 1000)),
    };
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [key, w] of this.windows) if (now - w.start > 3_600_000) this.windows.delete(key);
  }
}
