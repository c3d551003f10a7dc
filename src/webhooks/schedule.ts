/**
 * When a webhook delivery is tried again (docs/webhooks.md, "Retries"): the first attempt at once,
 * then after about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h, each with ±20% jitter
 * so that an endpoint coming back is not hit by every waiting delivery in the same second. Ten
 * attempts over a little more than three days; after the tenth the delivery has failed.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** The wait after attempt n (index n - 1), before jitter. */
export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];

export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** The jitter: a delay is its scheduled value times a factor in [1 - JITTER, 1 + JITTER). */
export const JITTER = 0.2;

/**
 * How long to wait after `attempt` attempts were made before the next one: 0 before the first
 * (no jitter), the schedule with ±20% jitter after attempts 1 to 9, and undefined after the last
 * (no attempt follows). `random` returns a number in [0, 1), like Math.random.
 */
export function nextDelayMs(attempt: number, random: () => number = Math.random): number | undefined {
  if (!Number.isInteger(attempt) || attempt < 0) throw new RangeError(`bad attempt number ${attempt}`);
  if (attempt === 0) return 0;
  const base = RETRY_DELAYS_MS[attempt - 1];
  if (base === undefined) return undefined;
  return Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}
