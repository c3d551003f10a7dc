import assert from "node:assert/strict";
import { test } from "node:test";
import { Count, count, Money, Timestamp, TimestampInput, timestamp } from "./formats.ts";

const WANT = "2026-11-26T03:45:12.345Z";

test("timestamp(): every form either engine gives is one string, RFC 3339 UTC with milliseconds", () => {
  const forms: (Date | string)[] = [
    new Date(WANT), // a timestamptz column, parsed by node-postgres or PGlite
    "2026-11-26T03:45:12.345678+00:00", // to_jsonb of a timestamptz, TimeZone UTC
    "2026-11-26T03:45:12.345999+00:00", // digits past the millisecond are cut, as the drivers cut them
    "2026-11-26T04:45:12.345678+01:00", // to_jsonb on a server whose TimeZone is Europe/Paris
    "2026-11-25T23:15:12.345-04:30", // a negative offset with minutes
    "2026-11-26 03:45:12.345678+00", // timestamptz::text (DateStyle ISO)
    "2026-11-26 06:45:12.345+03", // ::text with an hour-only offset
    "2026-11-26T03:45:12.345Z",
    "2026-11-26t03:45:12.345z",
  ];
  for (const form of forms) assert.equal(timestamp(form), WANT, String(form));
  // No fraction at all (to_jsonb writes none when the microseconds are 0): .000
  assert.equal(timestamp("2026-11-26T03:45:12+00:00"), "2026-11-26T03:45:12.000Z");
  assert.equal(timestamp("2026-11-26 03:45:12.3+00"), "2026-11-26T03:45:12.300Z");
  // Across a day and a year boundary.
  assert.equal(timestamp("2027-01-01T01:30:00.5+02:00"), "2026-12-31T23:30:00.500Z");
  assert.equal(timestamp(null), null);
  assert.equal(timestamp(undefined), null);
  for (const form of forms) assert.ok(Timestamp.safeParse(timestamp(form)).success);
});

test("timestamp(): a value that is not a time with a zone is a bug, said so", () => {
  for (const bad of ["2026-11-26", "2026-11-26T03:45:12", "yesterday", "", "2026-11-26T03:45:12.345+0"]) {
    assert.throws(() => timestamp(bad), /is not a time with a zone/, bad);
  }
  assert.throws(() => timestamp(new Date(Number.NaN)), /invalid Date/);
});

test("the schemas: Timestamp is exactly ms UTC, TimestampInput any RFC 3339 offset, Money a decimal string", () => {
  assert.ok(Timestamp.safeParse(WANT).success);
  for (const other of [
    "2026-11-26T03:45:12Z",
    "2026-11-26T03:45:12.345678Z",
    "2026-11-26T03:45:12.345+00:00",
  ]) {
    assert.ok(!Timestamp.safeParse(other).success, other);
    assert.ok(TimestampInput.safeParse(other.replace("345678", "345")).success, other);
  }
  for (const ok of ["0", "12.3456", "-0.5", "1000000000000.0001"]) assert.ok(Money.safeParse(ok).success, ok);
  for (const bad of ["1e3", "12.", ".5", "12,5", " 1"]) assert.ok(!Money.safeParse(bad).success, bad);
  assert.ok(!Money.safeParse(12.5).success);
  assert.ok(Count.safeParse(3).success);
  assert.ok(!Count.safeParse(3.5).success);
  assert.ok(!Count.safeParse("3").success);
});

test("count(): database text to an exact integer, or an error past 2^53 - 1", () => {
  assert.equal(count("42"), 42);
  assert.equal(count(-7n), -7);
  assert.equal(count(9007199254740991n), Number.MAX_SAFE_INTEGER);
  assert.throws(() => count("9007199254740992"), /not an exact integer/);
  assert.throws(() => count("1.5"), /not an exact integer/);
});
