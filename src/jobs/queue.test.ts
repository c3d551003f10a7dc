import assert from "node:assert/strict";
import { test } from "node:test";
import { backoffMs } from "./queue.ts";

test("backoffMs doubles from 2 s with ±20% jitter and stops at an hour", () => {
  assert.equal(
    backoffMs(1, () => 0.5),
    2000,
  );
  assert.equal(
    backoffMs(3, () => 0.5),
    8000,
  );
  assert.equal(
    backoffMs(1, () => 0),
    1600,
  );
  assert.equal(
    backoffMs(1, () => 1),
    2400,
  );
  assert.equal(
    backoffMs(30, () => 0.5),
    3_600_000,
  );
});
