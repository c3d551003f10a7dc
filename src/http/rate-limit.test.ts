import assert from "node:assert/strict";
import { test } from "node:test";
import { MemoryRateLimiter } from "./rate-limit.ts";

test("MemoryRateLimiter: a fixed window per key, reset at the next window", () => {
  const limiter = new MemoryRateLimiter();
  const limit = { max: 2, windowSeconds: 10 };
  const t0 = 1_000_000_000_000; // on a window boundary
  assert.deepEqual(limiter.hit("a", limit, t0), { allowed: true, remaining: 1, retryAfter: 10 });
  assert.equal(limiter.hit("a", limit, t0 + 1000).allowed, true);
  assert.deepEqual(limiter.hit("a", limit, t0 + 2500), { allowed: false, remaining: 0, retryAfter: 8 });
  assert.equal(limiter.hit("b", limit, t0 + 2500).allowed, true, "keys are counted apart");
  assert.equal(limiter.hit("a", limit, t0 + 10_000).allowed, true, "a new window starts afresh");
});
