/**
 * A statement (src/money/types.ts, StatementDocument) as CSV, for a payee's spreadsheet or
 * accounting tool. RFC 4180: records end with CRLF (the last one too), a field holding a comma, a
 * double quote, CR or LF is quoted and its quotes doubled, and there is no byte-order mark.
 *
 * Layout: one header record, then one record per row, all with the same columns:
 *
 *   row_type, period, payee_id, payee_name, currency,
 *   release_title, track_title, isrc, store, territory, original_currency, rate,
 *   earned, fees, recouped, net,
 *   payout_id, payout_status, payout_at, withholding, description
 *
 * `row_type` says what a record is, in this order:
 *
 * - `opening_balance`: the balance carried from the last period, in `net`;
 * - `earning`, one per earning of the statement, in its order: the release, track, store and
 *   territory columns, the currency it was earned in and the rate it was converted at (empty when
 *   it is the statement's currency), and `earned`, `fees`, `recouped` and `net`;
 * - `payment`, one per payout request, payment or failure of the period: the payout's id, status
 *   (requested, paid, failed), time (ISO 8601) and withholding, and its effect on the balance in
 *   `net` (negative when money left it);
 * - `charge`, one per add-on the account bought in the period (the account's own statement only,
 *   from 1.2.0): the release's title, the amount charged in `fees` (in `original_currency`, the
 *   currency it was charged in), the add-on in `description`, and `net` empty — the charge is an
 *   expense recouped from later earnings (their `recouped` column), not taken from the balance;
 * - `adjustments`: the period's adjustments in `net`;
 * - `closing_balance`: the balance carried to the next period, in `net`.
 *
 * Every record repeats the period (YYYY-MM), the payee and the statement's currency, so files of
 * several statements can be concatenated (minus their headers) and filtered. A column a record
 * type does not use is empty, and so is a null. The `net` of every record but `closing_balance`
 * adds up exactly to the `closing_balance` (the statement's rounding rule, src/money/statements.ts),
 * so a spreadsheet can check the statement with one SUM. The columns of the earnings add up to the
 * statement's totals; the advances, expenses and exchange-rate table are in the PDF and JSON only
 * (each earning row carries the rate it used).
 *
 * Amounts (`rate`, `earned`, `fees`, `recouped`, `net`, `withholding`) are copied verbatim from
 * the document, which states them already rounded ("-1.20"), and are never parsed into numbers.
 * Every other field is text and is guarded against spreadsheet formula injection: one that starts
 * with `=`, `+`, `-`, `@`, a tab or a CR gets a leading apostrophe, so `=HYPERLINK(…)` in a track
 * title stays text (a title such as "-5 Remix" then reads "'-5 Remix" in a plain text editor).
 * An amount column that does not hold a plain decimal (which would be a bug upstream) is guarded
 * like text rather than trusted.
 */
import type { StatementDocument } from "./types.ts";

export const STATEMENT_CSV_COLUMNS = [
  "row_type",
  "period",
  "payee_id",
  "payee_name",
  "currency",
  "release_title",
  "track_title",
  "isrc",
  "store",
  "territory",
  "original_currency",
  "rate",
  "earned",
  "fees",
  "recouped",
  "net",
  "payout_id",
  "payout_status",
  "payout_at",
  "withholding",
  "description",
] as const;

type Column = (typeof STATEMENT_CSV_COLUMNS)[number];
type RowType = "earning" | "opening_balance" | "payment" | "charge" | "adjustments" | "closing_balance";

/** The columns copied verbatim when they hold a plain decimal. */
const AMOUNT_COLUMNS: ReadonlySet<Column> = new Set([
  "rate",
  "earned",
  "fees",
  "recouped",
  "net",
  "withholding",
]);
const PLAIN_DECIMAL = /^-?[0-9]+(?:\.[0-9]+)?$/;
const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** The statement as CSV text (see the module comment for the layout). */
export function statementCsv(doc: StatementDocument): string {
  const common = {
    period: doc.period,
    payee_id: doc.payee.id,
    payee_name: doc.payee.name,
    currency: doc.currency,
  };
  const records: string[] = [STATEMENT_CSV_COLUMNS.map((c) => field(c)).join(",")];
  const push = (rowType: RowType, values: Partial<Record<Column, string | null>>) => {
    const row: Partial<Record<Column, string | null>> = { ...common, ...values, row_type: rowType };
    records.push(STATEMENT_CSV_COLUMNS.map((c) => cell(c, row[c])).join(","));
  };
  push("opening_balance", { net: doc.opening_balance });
  for (const e of doc.earnings) {
    push("earning", {
      release_title: e.release_title,
      track_title: e.track_title,
      isrc: e.isrc,
      store: e.store,
      territory: e.territory,
      original_currency: e.original_currency,
      rate: e.rate,
      earned: e.earned,
      fees: e.fees,
      recouped: e.recouped,
      net: e.net,
    });
  }
  for (const p of doc.payments) {
    push("payment", {
      net: p.amount,
      payout_id: p.payout_id,
      payout_status: p.status,
      payout_at: p.at,
      withholding: p.withholding,
    });
  }
  for (const c of doc.charges ?? []) {
    push("charge", {
      release_title: c.release_title,
      original_currency: c.currency,
      fees: c.amount,
      description: `Add-on: ${c.name}`,
    });
  }
  push("adjustments", { net: doc.adjustments_total });
  push("closing_balance", { net: doc.closing_balance });
  return `${records.join("\r\n")}\r\n`;
}

function cell(column: Column, value: string | null | undefined): string {
  if (value === null || value === undefined) return "";
  if (AMOUNT_COLUMNS.has(column) && PLAIN_DECIMAL.test(value)) return value;
  return field(value);
}

/** A text field: guarded against formulas, then quoted when RFC 4180 needs it. */
function field(value: string): string {
  const guarded = FORMULA_START.test(value) ? `'${value}` : value;
  return NEEDS_QUOTES.test(guarded) ? `"${guarded.replaceAll('"', '""')}"` : guarded;
}
