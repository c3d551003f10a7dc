import { z } from "zod";

/**
 * How Backline writes a time, an amount of money and a count on /api/public/v1, /admin/v1 and in
 * webhook payloads (docs/public-api.md, "Formats"), once for all of them:
 *
 * - a time is RFC 3339 in UTC with milliseconds, `2026-11-26T03:45:12.345Z` (`Timestamp`); a
 *   request may send any RFC 3339 date-time with an offset (`TimestampInput`);
 * - money is a decimal string beside its ISO 4217 currency (`Money`, `Currency`), never a float;
 * - a count (lines, units, streams, attempts…) is a JSON integer (`Count`).
 *
 * Dates without a time (release_date, period_start…) stay `YYYY-MM-DD`, as seed 001 fixes for
 * release_date. /rest/v1, /auth/v1 and /storage/v1 keep PostgREST's, GoTrue's and Supabase
 * Storage's own formats and do not use these.
 *
 * `timestamp()` is the one serializer of times: both engines give a timestamptz column as a Date,
 * but a time inside jsonb (to_jsonb of a row, jsonb_build_object) comes as PostgreSQL's text —
 * microseconds, and an offset that follows the session's TimeZone — so it is normalised here.
 */

/** A time as answered: RFC 3339, UTC, exactly three fraction digits. */
export const Timestamp = z.iso.datetime({ precision: 3 }).meta({
  description: "RFC 3339 date-time in UTC with milliseconds.",
  example: "2026-11-26T03:45:12.345Z",
});

/** A time as a request may send it: any RFC 3339 date-time with `Z` or an offset. */
export const TimestampInput = z.iso.datetime({ offset: true }).meta({
  description:
    "RFC 3339 date-time, with Z or an offset (e.g. 2026-11-26T03:45:12Z, 2026-11-26T04:45:12+01:00).",
});

/** The decimal-string pattern of an amount: an optional minus, digits, optionally a fraction. */
export const MONEY_PATTERN = /^-?\d+(\.\d+)?$/;

/** An amount of money: a decimal string, exact, in the currency named beside it. */
export const Money = z.string().regex(MONEY_PATTERN).meta({
  description: "A decimal amount as a string (never a float), in the currency beside it.",
  example: "12.3456",
});

/** ISO 4217 currency code. */
export const Currency = z
  .string()
  .regex(/^[A-Z]{3}$/)
  .meta({ description: "ISO 4217 currency code.", example: "EUR" });

/** A count: a JSON integer (exact up to 2^53 − 1). */
export const Count = z.number().int();

// PostgreSQL's text of a timestamptz (`2026-11-26 03:45:12.345678+00`, DateStyle ISO) and its
// JSON text (`2026-11-26T03:45:12.345678+00:00`), and RFC 3339 itself: date, T or space, time,
// up to 9 fraction digits, then Z or an offset of hours[:minutes[:seconds]].
const TIME_TEXT =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?)$/i;

/**
 * A time as Backline answers it: `YYYY-MM-DDTHH:MM:SS.mmmZ`, from a Date or from PostgreSQL's
 * text of a timestamptz (any offset, any precision: digits past the millisecond are cut, as
 * node-postgres and PGlite cut them when they make a Date). null and undefined give null. A value
 * that is not a time with a zone is a bug in the caller, not a client's mistake: it throws.
 */
export function timestamp(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new Error("timestamp: an invalid Date");
    return value.toISOString();
  }
  const m = TIME_TEXT.exec(value);
  if (!m) throw new Error(`timestamp: ${JSON.stringify(value)} is not a time with a zone`);
  const [, y, mo, d, h, mi, s, fraction = "", zulu, sign, oh = "0", om = "0", os = "0"] = m;
  const ms = Number(fraction.padEnd(3, "0").slice(0, 3));
  const offset = zulu ? 0 : (sign === "-" ? -1 : 1) * (Number(oh) * 3600 + Number(om) * 60 + Number(os));
  const utc = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  return new Date(utc - offset * 1000).toISOString();
}

/** `timestamp()` for a value that is never null (a NOT NULL column). */
export function timestampOf(value: Date | string): string {
  return timestamp(value) as string;
}

/**
 * A count read from the database (count(*) and sums of bigint come as text, to stay exact) as a
 * JSON integer. Past 2^53 − 1 a JSON number would no longer be exact: that throws.
 */
export function count(value: number | string | bigint): number {
  const n = typeof value === "number" ? value : Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`count: ${String(value)} is not an exact integer`);
  return n;
}
