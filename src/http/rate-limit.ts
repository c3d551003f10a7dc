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
