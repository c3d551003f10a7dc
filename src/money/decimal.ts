/**
 * Exact decimal arithmetic on decimal strings, for the royalty ledger (docs/payouts.md). Amounts
 * come from PostgreSQL `numeric` as text and are worked on as BigInt units with a scale (the
 * number of digits after the point), never as JavaScript numbers, so nothing is ever lost to
 * binary floating point. Every function takes decimal strings; the arithmetic returns canonical
 * ones (no trailing zeros after the point, "0" for zero, never "-0", "0.5" rather than ".5"),
 * `format` and `largestRemainder` fixed-place ones ("12.30").
 *
 * Input is plain digits with an optional leading minus and an optional fraction ("-12.3400",
 * "7"); exponent forms ("1e3"), "NaN", "Infinity", a plus sign, spaces and a bare point are
 * rejected with an Error, because a ledger amount in any of those forms is a bug upstream.
 *
 * The rounding rule. Ledger amounts keep the full precision of the store's report; money is
 * rounded only where it is stated (a statement, a payout file), to the currency's minor unit
 * (`minorUnits`: 2 for most, 0 for JPY and the like, 3 for BHD and the like). A single amount
 * is rounded half away from zero, as PostgreSQL's `round()` does: 0.995 becomes 1.00 and -0.005
 * becomes -0.01 (`roundHalfUp`). A column of amounts stated together (the lines of a statement,
 * the shares of a split) is rounded by the largest-remainder method (`largestRemainder`), so the
 * rounded lines add up exactly to the rounded total: each amount is first cut down to the minor
 * unit (toward negative infinity, so -0.013 becomes -0.02), then the minor units still missing
 * to reach the rounded total are handed out one each to the amounts that lost the most in the
 * cut, the earlier line first when two lost the same. No line moves by a whole minor unit or
 * more, and amounts that are already rounded are left as they are.
 */

/** An exact decimal: `units / 10^scale`. */
export interface Decimal {
  units: bigint;
  scale: number;
}

const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?$/;
const EXPONENT = /^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+$/;
/** PostgreSQL's largest display scale for numeric; a larger `places` is a bug, not a request. */
const MAX_PLACES = 16383;

/**
 * Reads a decimal string into units and scale, keeping the scale as written: "12.30" is
 * `{ units: 1230n, scale: 2 }`, "-0.5" is `{ units: -5n, scale: 1 }`. Throws on anything that is
 * not plain digits with an optional minus and fraction (see the module comment).
 */
export function parseDecimal(s: string): Decimal {
  if (typeof s !== "string") {
    throw new Error(`expected a decimal string, got ${typeof s}`);
  }
  const m = DECIMAL.exec(s);
  if (m === null) {
    if (EXPONENT.test(s)) {
      throw new Error(`exponent form is not accepted in a decimal: "${s}" (write the digits out)`);
    }
    if (/^[+-]?(?:nan|infinity|inf)$/i.test(s)) {
      throw new Error(`not a finite decimal: "${s}"`);
    }
    throw new Error(`not a decimal number: "${s}" (expected digits, an optional "-" and fraction)`);
  }
  const [, minus = "", whole = "", fraction = ""] = m;
  const magnitude = BigInt(whole + fraction);
  return { units: minus === "-" ? -magnitude : magnitude, scale: fraction.length };
}

/** The canonical decimal string of `units / 10^scale` (the inverse of `parseDecimal`). */
export function toDecimal(units: bigint, scale: number): string {
  checkPlaces(scale, "scale");
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(scale + 1, "0");
  const whole = digits.slice(0, digits.length - scale);
  const fraction = digits.slice(digits.length - scale).replace(/0+$/, "");
  if (units === 0n) return "0";
  return `${negative ? "-" : ""}${whole}${fraction === "" ? "" : `.${fraction}`}`;
}

/** `a + b`, exactly. */
export function add(a: string, b: string): string {
  const [x, y, scale] = aligned(parseDecimal(a), parseDecimal(b));
  return toDecimal(x + y, scale);
}

/** `a - b`, exactly. */
export function sub(a: string, b: string): string {
  const [x, y, scale] = aligned(parseDecimal(a), parseDecimal(b));
  return toDecimal(x - y, scale);
}

/** `-a`. */
export function neg(a: string): string {
  const { units, scale } = parseDecimal(a);
  return toDecimal(-units, scale);
}

/** The exact sum of `values` ("0" for none); the order does not matter. */
export function sum(values: readonly string[]): string {
  const parsed = values.map(parseDecimal);
  const scale = parsed.reduce((s, d) => Math.max(s, d.scale), 0);
  let total = 0n;
  for (const d of parsed) total += rescale(d, scale);
  return toDecimal(total, scale);
}

/** `a × b`, exactly (the result has as many decimals as `a` and `b` together, at most). */
export function mul(a: string, b: string): string {
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  return toDecimal(x.units * y.units, x.scale + y.scale);
}

/** -1, 0 or 1 as `a` is less than, equal to or greater than `b` ("1.50" equals "1.5"). */
export function compare(a: string, b: string): -1 | 0 | 1 {
  const [x, y] = aligned(parseDecimal(a), parseDecimal(b));
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Whether `a` is zero ("0", "-0.000", …). */
export function isZero(a: string): boolean {
  return parseDecimal(a).units === 0n;
}

/** -1, 0 or 1 as `a` is negative, zero or positive. */
export function sign(a: string): -1 | 0 | 1 {
  const { units } = parseDecimal(a);
  return units < 0n ? -1 : units > 0n ? 1 : 0;
}

const ZERO_DECIMALS = new Set(["JPY", "KRW", "ISK", "CLP", "VND", "UGX", "XAF", "XOF", "PYG"]);
const THREE_DECIMALS = new Set(["BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD"]);

/**
 * The ISO 4217 minor units of a currency: how many decimals its amounts are stated and paid
 * in (0 for JPY, 3 for KWD, 2 for anything else). Throws unless `currency` is three capital
 * letters, the form the database stores.
 */
export function minorUnits(currency: string): number {
  if (typeof currency !== "string" || !/^[A-Z]{3}$/.test(currency)) {
    throw new Error(`not an ISO 4217 currency code: "${String(currency)}" (expected three capital letters)`);
  }
  if (ZERO_DECIMALS.has(currency)) return 0;
  if (THREE_DECIMALS.has(currency)) return 3;
  return 2;
}

/**
 * `value` rounded to `places` decimals, half away from zero (as PostgreSQL's `round()`):
 * "0.995" → "1" and "-0.005" → "-0.01" at 2 places. Returns a canonical string; use `format`
 * for fixed places.
 */
export function roundHalfUp(value: string, places: number): string {
  checkPlaces(places);
  const d = parseDecimal(value);
  if (d.scale <= places) return toDecimal(d.units, d.scale);
  const divisor = 10n ** BigInt(d.scale - places);
  const magnitude = d.units < 0n ? -d.units : d.units;
  let q = magnitude / divisor;
  if (2n * (magnitude % divisor) >= divisor) q += 1n;
  return toDecimal(d.units < 0n ? -q : q, places);
}

/** `value` cut down to `places` decimals, toward negative infinity: "-0.011" → "-0.02" at 2. */
export function floorTo(value: string, places: number): string {
  checkPlaces(places);
  const d = parseDecimal(value);
  if (d.scale <= places) return toDecimal(d.units, d.scale);
  return toDecimal(floorDiv(d.units, 10n ** BigInt(d.scale - places)), places);
}

/**
 * `value` written with exactly `places` decimals ("12.3" → "12.30", "-7" → "-7.00", "5" → "5"
 * at 0). A value with more decimals is first rounded half away from zero, as `roundHalfUp`
 * ("12.345" → "12.35"); a column that must add up goes through `largestRemainder` instead.
 */
export function format(value: string, places: number): string {
  const d = parseDecimal(roundHalfUp(value, places));
  const fixed = rescale(d, places);
  const negative = fixed < 0n;
  const digits = (negative ? -fixed : fixed).toString().padStart(places + 1, "0");
  const whole = digits.slice(0, digits.length - places);
  const fraction = digits.slice(digits.length - places);
  return `${negative ? "-" : ""}${whole}${places > 0 ? `.${fraction}` : ""}`;
}

/**
 * The one rule for stating money: `values` rounded to `places` decimals so that they add up
 * exactly to `roundHalfUp(sum(values), places)`. Each value is floored to `places`, then the
 * minor units missing to that total (between 0 and `values.length`) go one each to the values
 * with the largest remainders, the earlier index first on a tie. Works for negative and mixed
 * signs; each result is within one minor unit of its value, and already-rounded values are
 * unchanged. Returns fixed-place strings (as `format`).
 */
export function largestRemainder(values: readonly string[], places: number): string[] {
  checkPlaces(places);
  if (values.length === 0) return [];
  const parsed = values.map(parseDecimal);
  const scale = parsed.reduce((s, d) => Math.max(s, d.scale), places);
  const unit = 10n ** BigInt(scale - places);
  const exact = parsed.map((d) => rescale(d, scale));
  const floors = exact.map((u) => floorDiv(u, unit));
  const remainders = exact.map((u, i) => u - (floors[i] as bigint) * unit);

  const total = exact.reduce((s, u) => s + u, 0n);
  const target = parseDecimal(roundHalfUp(toDecimal(total, scale), places));
  let missing = rescale(target, places) - floors.reduce((s, f) => s + f, 0n);
  if (missing < 0n || missing > BigInt(values.length)) {
    // Impossible (the floors lose less than one unit each, the total rounds by at most half).
    throw new Error(`largestRemainder: ${missing} minor units missing for ${values.length} values`);
  }

  const order = remainders
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (a.r === b.r ? a.i - b.i : a.r > b.r ? -1 : 1));
  for (const { i } of order) {
    if (missing === 0n) break;
    floors[i] = (floors[i] as bigint) + 1n;
    missing -= 1n;
  }
  return floors.map((f) => format(toDecimal(f, places), places));
}

/**
 * `amount × percent / 100`, exactly: a payee's share of an amount at a split's percentage
 * ("12.5" percent of "3.20" is "0.4"). Dividing by 100 only moves the point, so nothing rounds.
 */
export function shareOf(amount: string, percent: string): string {
  const a = parseDecimal(amount);
  const p = parseDecimal(percent);
  return toDecimal(a.units * p.units, a.scale + p.scale + 2);
}

/** Both values' units at their common (larger) scale. */
function aligned(a: Decimal, b: Decimal): [bigint, bigint, number] {
  const scale = Math.max(a.scale, b.scale);
  return [rescale(a, scale), rescale(b, scale), scale];
}

/** `d`'s units at `scale`, flooring when `scale` is smaller than `d.scale`. */
function rescale(d: Decimal, scale: number): bigint {
  if (scale >= d.scale) return d.units * 10n ** BigInt(scale - d.scale);
  return floorDiv(d.units, 10n ** BigInt(d.scale - scale));
}

/** `a / b` rounded toward negative infinity (BigInt division truncates toward zero); `b > 0`. */
function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b < 0n ? q - 1n : q;
}

function checkPlaces(places: number, what = "places"): void {
  if (!Number.isInteger(places) || places < 0 || places > MAX_PLACES) {
    throw new RangeError(`${what} must be an integer from 0 to ${MAX_PLACES}, got ${places}`);
  }
}
