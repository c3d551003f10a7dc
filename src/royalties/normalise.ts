import { gtinIsValid, normaliseIsrc } from "../catalog/identifiers.ts";
import { LineError, type RawLine, USAGE_TYPES, type UsageType } from "./formats/types.ts";

/**
 * The checks every format's lines pass (docs/royalties.md, "Lines"): periods, store and territory
 * codes, identifiers, usage type, units, amounts and currency. A failure is a LineError naming
 * the field; the import reports it with the line number.
 */

/** Decimal places kept for money (the columns are numeric(24, 12)). */
export const SCALE = 12;
const TEN_SCALE = 10n ** BigInt(SCALE);

export interface NormalLine {
  line: number;
  reportingPeriod: string; // YYYY-MM-01
  periodStart: string; // YYYY-MM-01
  periodEnd: string; // last day of the month
  store: string;
  territory: string | null;
  upc: string | null;
  isrc: string | null;
  usageType: UsageType;
  units: number;
  /** Decimal text as the database takes it, and the same value scaled by 10^SCALE for sums. */
  gross: string;
  fees: string;
  net: string;
  grossScaled: bigint;
  feesScaled: bigint;
  netScaled: bigint;
  currency: string;
  /** The store's own ids of what was sold, for matching only (not stored): null when not given. */
  storeResourceId: string | null;
  storeReleaseId: string | null;
}

export interface Codes {
  stores: ReadonlySet<string>;
  territories: ReadonlySet<string>;
}

const MONTH = /^(\d{4})-(0[1-9]|1[0-2])$/;
/** Up to 12 integer digits: |amount| < 10^12, what numeric(24, 12) holds (more is "too large"). */
const AMOUNT = /^(-?)(\d+)(?:\.(\d{1,12}))?$/;
const MAX_INTEGER_DIGITS = 12;

/** Months before this year are refused (no store reports on them; PostgreSQL refuses year 0). */
export const MIN_YEAR = 1950;
let maxYear = { year: 0, until: 0 };
/** The latest year a period may name: next year (recomputed as the clock passes a year's end). */
export function maxPeriodYear(now = Date.now()): number {
  if (now >= maxYear.until || now < maxYear.until - 366 * 86_400_000) {
    const y = new Date(now).getUTCFullYear();
    maxYear = { year: y + 1, until: Date.UTC(y + 1, 0, 1) };
  }
  return maxYear.year;
}

/** YYYY-MM with a year from MIN_YEAR to next year; else why not. */
export function monthProblem(text: string): string | undefined {
  if (!MONTH.test(text)) return "is not a month (YYYY-MM)";
  const year = Number(text.slice(0, 4));
  const max = maxPeriodYear();
  if (year < MIN_YEAR || year > max) return `is not a month from ${MIN_YEAR} to ${max}`;
  return undefined;
}
const USAGE = new Set<string>(USAGE_TYPES);

/** Days in each month, memoised: periods repeat on every line. */
const monthEnds = new Map<string, string>();
function monthEnd(month: string): string {
  let end = monthEnds.get(month);
  if (!end) {
    const [y, m] = month.split("-").map(Number) as [number, number];
    const days = new Date(Date.UTC(y, m, 0)).getUTCDate();
    end = `${month}-${String(days).padStart(2, "0")}`;
    monthEnds.set(month, end);
  }
  return end;
}

/** Decimal text to an integer scaled by 10^SCALE; undefined when it is not a plain decimal. */
export function parseAmount(text: string): bigint | undefined {
  const m = AMOUNT.exec(text);
  if (!m || (m[2] ?? "").replace(/^0+(?=\d)/, "").length > MAX_INTEGER_DIGITS) return undefined;
  const v = BigInt((m[2] ?? "") + (m[3] ?? "").padEnd(SCALE, "0"));
  return m[1] ? -v : v;
}

/** A scaled integer back to decimal text, without trailing zeros ("12.5", "0", "-0.000001"). */
export function formatAmount(scaled: bigint): string {
  const negative = scaled < 0n;
  const abs = negative ? -scaled : scaled;
  const int = abs / TEN_SCALE;
  const frac = (abs % TEN_SCALE).toString().padStart(SCALE, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${int}${frac ? `.${frac}` : ""}`;
}

/**
 * A line's checks. `warn` receives what is read past rather than refused: a UPC that fails its check
 * digit on a line that has another identifier (an ISRC, or the store's own id) — left off the line,
 * which is matched by the others.
 */
export function normalise(
  raw: RawLine,
  line: number,
  codes: Codes,
  warn?: (message: string) => void,
): NormalLine {
  const reportingProblem = monthProblem(raw.reportingPeriod);
  if (reportingProblem) {
    throw new LineError(
      raw.reportingPeriod
        ? `reporting period ${JSON.stringify(raw.reportingPeriod)} ${reportingProblem}`
        : "no reporting period (give it in the file or with --period)",
    );
  }
  const saleProblem = monthProblem(raw.salePeriod);
  if (saleProblem) throw new LineError(`sale period ${JSON.stringify(raw.salePeriod)} ${saleProblem}`);
  const store = raw.store.toLowerCase();
  if (!codes.stores.has(store)) throw new LineError(`unknown store ${JSON.stringify(raw.store)}`);
  let territory: string | null = null;
  if (raw.territory !== "") {
    territory = raw.territory.toUpperCase();
    if (!codes.territories.has(territory)) {
      throw new LineError(`territory ${JSON.stringify(raw.territory)} is not an ISO 3166-1 alpha-2 code`);
    }
  }
  let isrc: string | null = null;
  if (raw.isrc !== "") {
    isrc = normaliseIsrc(raw.isrc) ?? null;
    if (!isrc) throw new LineError(`ISRC ${JSON.stringify(raw.isrc)} is malformed`);
  }
  const storeResourceId = raw.storeResourceId || null;
  const storeReleaseId = raw.storeReleaseId || null;
  let upc: string | null = null;
  if (raw.upc !== "") {
    // A spreadsheet drops a UPC's leading zeros: pad back to 12 digits.
    const digits = /^\d{8,14}$/.test(raw.upc) ? raw.upc.padStart(12, "0") : raw.upc;
    if (gtinIsValid(digits)) upc = digits;
    else if (warn && (isrc || storeResourceId || storeReleaseId)) {
      // Stores send codes with wrong check digits: the line stays, matched by what else it carries.
      warn(
        `UPC ${JSON.stringify(raw.upc)} is not a valid UPC or EAN (check digit): left off the line, which is matched by ${
          isrc ? "its ISRC" : "the store's own id"
        }`,
      );
    } else throw new LineError(`UPC ${JSON.stringify(raw.upc)} is not a valid UPC or EAN`);
  }
  if (!upc && !isrc && !storeResourceId && !storeReleaseId) {
    throw new LineError("the line has neither an ISRC nor a UPC");
  }
  if (!USAGE.has(raw.usageType)) {
    throw new LineError(
      `usage type ${JSON.stringify(raw.usageType)} is not one of ${USAGE_TYPES.join(", ")}`,
    );
  }
  if (!/^\d{1,15}$/.test(raw.units)) {
    throw new LineError(`units ${JSON.stringify(raw.units)} is not a whole number of 0 or more`);
  }
  const grossScaled = amount(raw.gross, "gross");
  const feesScaled = amount(raw.fees, "fees");
  const netScaled = amount(raw.net, "net");
  const currency = raw.currency.toUpperCase();
  if (!/^[A-Z]{3}$/.test(currency)) {
    throw new LineError(`currency ${JSON.stringify(raw.currency)} is not an ISO 4217 code`);
  }
  return {
    line,
    reportingPeriod: `${raw.reportingPeriod}-01`,
    periodStart: `${raw.salePeriod}-01`,
    periodEnd: monthEnd(raw.salePeriod),
    store,
    territory,
    upc,
    isrc,
    usageType: raw.usageType as UsageType,
    units: Number(raw.units),
    gross: raw.gross,
    fees: raw.fees,
    net: raw.net,
    grossScaled,
    feesScaled,
    netScaled,
    currency,
    storeResourceId,
    storeReleaseId,
  };
}

function amount(text: string, field: string): bigint {
  const v = parseAmount(text);
  if (v === undefined) {
    if (AMOUNT.test(text)) {
      throw new LineError(
        `${field} ${JSON.stringify(text)} is too large (at most ${MAX_INTEGER_DIGITS} digits before the point)`,
      );
    }
    throw new LineError(
      `${field} ${JSON.stringify(text)} is not an amount (digits with a decimal point, at most ${SCALE} decimals)`,
    );
  }
  return v;
}
