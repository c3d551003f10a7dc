/**
 * Retries as the public API asks clients to (docs/public-api.md, "Idempotent requests", "Rate
 * limits" and "Errors"): a `429` or `503` started nothing and is retried after its `Retry-After`;
 * `409 idempotency_request_in_progress` means the first attempt of this POST still runs, and is
 * retried after its `Retry-After` too; a network error is retried for the methods that are safe to
 * repeat — GET, HEAD, PUT, DELETE, and a POST, which always carries an `Idempotency-Key`: the same
 * key on every attempt, so the server runs it once and replays its answer to the retry.
 */

export interface RetryOptions {
  /** Retries after the first attempt (default 3; 0 turns retrying off). */
  retries?: number;
  /** The first backoff when the server names no `Retry-After`, doubled at each retry (default 250 ms). */
  baseDelayMs?: number;
  /** The longest backoff without `Retry-After` (default 8 s). */
  maxDelayMs?: number;
  /**
   * The longest `Retry-After` the client waits for (default 60 s): a longer one is returned to the
   * caller as it is (a rate limit or a reveal pause measured in minutes is the caller's to handle).
   */
  maxRetryAfterMs?: number;
  /** Called before each retry, for logs and metrics. */
  onRetry?: (retry: RetryEvent) => void;
}

export interface RetryEvent {
  /** 1 for the first retry. */
  attempt: number;
  delayMs: number;
  method: string;
  url: string;
  /** The status that caused it, or the network error's message. */
  reason: number | string;
  idempotencyKey: string | null;
}

/** Methods a network error may be retried for (POST too: it carries an Idempotency-Key). */
const REPEATABLE = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST"]);

/** `Retry-After` as milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function sleep(ms: number, signal: AbortSignal | null): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      signal?.removeEventListener("abort", abort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}

/** Whether an answer is worth retrying: what it is, read without consuming the caller's body. */
async function retryableStatus(response: Response): Promise<boolean> {
  if (response.status === 429 || response.status === 503) return true;
  if (response.status !== 409 || !response.headers.has("retry-after")) return false;
  try {
    const body = (await response.clone().json()) as { code?: unknown };
    return body.code === "idempotency_request_in_progress";
  } catch {
    return false;
  }
}

/**
 * A fetch for openapi-fetch (`createClient({ fetch })`) that adds an `Idempotency-Key` to every
 * POST that has none and retries as described above.
 */
export function retryingFetch(
  options: RetryOptions = {},
  fetchImpl: (request: Request) => Promise<Response> = (r) => globalThis.fetch(r),
): (request: Request) => Promise<Response> {
  const retries = options.retries ?? 3;
  const base = options.baseDelayMs ?? 250;
  const maxDelay = options.maxDelayMs ?? 8_000;
  const maxRetryAfter = options.maxRetryAfterMs ?? 60_000;
  const backoff = (attempt: number) => {
    const ceiling = Math.min(maxDelay, base * 2 ** (attempt - 1));
    return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
  };

  return async (input) => {
    let request = input;
    const method = request.method.toUpperCase();
    if (method === "POST" && !request.headers.has("idempotency-key")) {
      const headers = new Headers(request.headers);
      headers.set("Idempotency-Key", crypto.randomUUID());
      request = new Request(request, { headers });
    }
    const key = request.headers.get("idempotency-key");
    for (let attempt = 1; ; attempt++) {
      const last = attempt > retries;
      let response: Response;
      try {
        // Each attempt sends a copy: the body of a Request can be read once.
        response = await fetchImpl(last ? request : request.clone());
      } catch (error) {
        if (last || request.signal.aborted || !REPEATABLE.has(method)) throw error;
        const delayMs = backoff(attempt);
        options.onRetry?.({
          attempt,
          delayMs,
          method,
          url: request.url,
          reason: error instanceof Error ? error.message : String(error),
          idempotencyKey: key,
        });
        await sleep(delayMs, request.signal);
        continue;
      }
      if (last || !(await retryableStatus(response))) return response;
      const delayMs = retryAfterMs(response.headers.get("retry-after")) ?? backoff(attempt);
      if (delayMs > maxRetryAfter) return response;
      options.onRetry?.({
        attempt,
        delayMs,
        method,
        url: request.url,
        reason: response.status,
        idempotencyKey: key,
      });
      await response.body?.cancel();
      await sleep(delayMs, request.signal);
    }
  };
}
