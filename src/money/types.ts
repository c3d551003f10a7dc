/**
 * The shapes the money model (docs/payouts.md) hands between the database, the documents made
 * from it (statement PDF and CSV, payout provider files) and the APIs. Every amount is a decimal
 * string (never a number): ledger amounts at the report's full precision, stated amounts rounded
 * to the currency's minor unit by the one rule of src/money/decimal.ts (largestRemainder).
 */

/** One row of a statement's earnings: a payee's share of one release, track, store and territory. */
export interface StatementEarning {
  release_id: string | null;
  release_title: string | null;
  track_id: string | null;
  track_title: string | null;
  isrc: string | null;
  store: string | null;
  territory: string | null;
  /** The statement's currency, which every figure of the row is in (repeated beside them). */
  currency: string;
  /** The currency the money was earned in, and the rate it was converted at (null when it is the statement's). */
  original_currency: string;
  rate: string | null;
  /** The payee's share of the store's net, the distributor's fee on it, what was recouped, and what remains. */
  earned: string;
  fees: string;
  recouped: string;
  net: string;
}

/** An advance or expense of the paying account, and what of it is still to be recouped. */
export interface StatementRecoupable {
  id: string;
  kind: "advance" | "expense";
  description: string;
  release_id: string | null;
  currency: string;
  amount: string;
  unrecouped: string;
}

/** Something the account bought in the period and was charged for (an add-on, migration 0051). */
export interface StatementCharge {
  kind: "add_on";
  order_id: string;
  /** The add-on's code and its name when bought. */
  add_on: string;
  name: string;
  release_id: string;
  release_title: string | null;
  /** The currency it was charged in (an expense in it is recouped from earnings in it). */
  currency: string;
  amount: string;
  at: string;
}

export interface StatementPayment {
  payout_id: string;
  status: "requested" | "paid" | "failed";
  /** The statement's currency. */
  currency: string;
  amount: string;
  withholding: string;
  at: string;
}

/** A payee's statement for one accounting period, as approved (and never changed after). */
export interface StatementDocument {
  id: string;
  object: "statement";
  tenant_name: string;
  account_id: string;
  account_name: string;
  payee: { id: string; name: string; email: string | null };
  /** YYYY-MM. */
  period: string;
  currency: string;
  status: "draft" | "approved";
  approved_at: string | null;
  opening_balance: string;
  earnings: StatementEarning[];
  /** Sums of the earnings columns. */
  totals: { currency: string; earned: string; fees: string; recouped: string; net: string };
  /** Payout requests, payments and failures in the period (negative amounts leave the balance). */
  payments: StatementPayment[];
  payments_total: string;
  /** Adjustments: conversions rounding nothing, corrections of earlier periods' imports (voids). */
  adjustments_total: string;
  closing_balance: string;
  recoupables: StatementRecoupable[];
  /** The account's own statement: add-ons bought in the period (absent when none, and before 1.2.0). */
  charges?: StatementCharge[];
  rates: { from: string; to: string; rate: string }[];
}

/** One line of a payout batch as a provider's bulk-upload file needs it. */
export interface PayoutLine {
  payout_id: string;
  payee_id: string;
  payee_name: string;
  /** Where the provider sends it: method.provider names the provider (paypal, wise). */
  method: PayoutMethod;
  currency: string;
  /** What the payee receives (the request minus withholding), in the currency's minor-unit precision. */
  amount: string;
  /** A reference the payee sees, e.g. "Moonlight Music royalties 2026-11". */
  reference: string;
}

export type PayoutMethod =
  | { provider: "paypal"; receiver: string; wallet?: "PAYPAL" | "VENMO" }
  | {
      provider: "wise";
      /** The account holder's name. */
      name: string;
      email: string;
      receiver_type: "PERSON" | "BUSINESS";
      /** IBAN for EUR and other IBAN countries; otherwise account_number and sort_code/routing. */
      iban?: string;
      bic?: string;
      account_number?: string;
      sort_code?: string;
      routing_number?: string;
      account_type?: "CHECKING" | "SAVINGS";
      address?: { country: string; city: string; post_code: string; first_line: string; state?: string };
    };
