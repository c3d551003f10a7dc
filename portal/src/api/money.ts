/**
 * The portal's money calls (docs/payouts.md, docs/portal.md "Money"): a person's own payees,
 * balances, statements and payouts under /me (their own access token, no Backline-Account: a
 * payee need not be a member of the account that pays them), and, for an account's owners and
 * admins, the account's payees and balances. Amounts are decimal strings and stay strings.
 * Refusals of a payout request come out in plain words (`moneyWords`), never as codes.
 */
import { accessToken, PlainError } from "./portal.ts";
import { call, failure } from "./public.ts";

export type TaxFormKind = "W-9" | "W-8BEN" | "W-8BEN-E";

export type PayoutMethod =
  | { provider: "paypal"; receiver: string; wallet?: "PAYPAL" | "VENMO" }
  | {
      provider: "wise";
      name: string;
      email: string;
      receiver_type: "PERSON" | "BUSINESS";
      iban?: string;
      bic?: string;
      account_number?: string;
      sort_code?: string;
      routing_number?: string;
      account_type?: "CHECKING" | "SAVINGS";
      address?: { country: string; city: string; post_code: string; first_line: string; state?: string };
    };

export interface Payee {
  id: string;
  account_id: string;
  kind: "account" | "person";
  name: string | null;
  email: string | null;
  claimed: boolean;
  currency: string;
  tax: {
    form: TaxFormKind | null;
    status: "missing" | "pending" | "verified" | "rejected";
    country: string | null;
    tax_id_last4: string | null;
    withholding_rate: string;
  };
  payout_method: PayoutMethod | null;
  created_at: string;
}

export interface Balance {
  payee_id: string;
  account_id: string;
  currency: string;
  balance: string;
  available: string;
  pending_payouts: string;
}

export interface StatementSummary {
  id: string;
  account_id: string;
  payee_id: string;
  period: string;
  currency: string;
  status: "draft" | "approved";
  approved_at: string | null;
  opening_balance: string;
  earnings_total: string;
  payments_total: string;
  adjustments_total: string;
  closing_balance: string;
}

export interface Statement {
  id: string;
  tenant_name: string;
  account_id: string;
  account_name: string;
  payee: { id: string; name: string; email: string | null };
  period: string;
  currency: string;
  status: "draft" | "approved";
  approved_at: string | null;
  opening_balance: string;
  earnings: {
    release_id: string | null;
    release_title: string | null;
    track_id: string | null;
    track_title: string | null;
    isrc: string | null;
    store: string | null;
    territory: string | null;
    original_currency: string;
    rate: string | null;
    earned: string;
    fees: string;
    recouped: string;
    net: string;
  }[];
  totals: { earned: string; fees: string; recouped: string; net: string };
  payments: {
    payout_id: string;
    status: "requested" | "paid" | "failed";
    amount: string;
    withholding: string;
    at: string;
  }[];
  payments_total: string;
  adjustments_total: string;
  closing_balance: string;
  recoupables: {
    id: string;
    kind: "advance" | "expense";
    description: string;
    currency: string;
    amount: string;
    unrecouped: string;
  }[];
  rates: { from: string; to: string; rate: string }[];
}

export interface Payout {
  id: string;
  payee_id: string;
  account_id: string;
  status: "requested" | "approved" | "paid" | "failed";
  currency: string;
  amount: string;
  withholding: string;
  net_amount: string;
  requested_at: string;
  settled_at: string | null;
  failure_reason: string | null;
}

interface ListOf<T> {
  data: T[];
  has_more: boolean;
}

/** Every item of a /me or account list (pages of 100; a person has few). */
async function all<T>(account: string | null, path: string): Promise<T[]> {
  const out: T[] = [];
  for (let offset = 0; offset < 1000; offset += 100) {
    const sep = path.includes("?") ? "&" : "?";
    const page = await call<ListOf<T>>(account, "GET", `${path}${sep}limit=100&offset=${offset}`);
    out.push(...page.data);
    if (!page.has_more) break;
  }
  return out;
}

// A person's own: /me
export const myPayees = () => all<Payee>(null, "/me/payees");
export const myBalances = () => all<Balance>(null, "/me/balances");
export const myStatements = () => all<StatementSummary>(null, "/me/statements");
export const myPayouts = () => all<Payout>(null, "/me/payouts");
export const myStatement = (id: string) => call<Statement>(null, "GET", `/me/statements/${id}`);

/** The payee's draft statement (its open period), or null when everything is in an approved one. */
export async function myDraftStatement(payeeId: string): Promise<Statement | null> {
  try {
    return await call<Statement>(null, "GET", `/me/payees/${payeeId}/draft-statement`);
  } catch (e) {
    if (e instanceof PlainError && e.status === 404) return null;
    throw e;
  }
}

export const fileTaxForm = (
  payeeId: string,
  form: { form: TaxFormKind; name: string; country: string; tax_id: string },
) => call<Payee>(null, "POST", `/me/payees/${payeeId}/tax-form`, form);
export const setPayoutMethod = (payeeId: string, method: PayoutMethod) =>
  call<Payee>(null, "POST", `/me/payees/${payeeId}/payout-method`, { method });
export const requestPayout = (payeeId: string) =>
  call<Payout>(null, "POST", `/me/payees/${payeeId}/payouts`, {});

// An account's, for its owners and admins (the API refuses anyone else: payouts:read)
export const accountPayees = (accountId: string) => all<Payee>(accountId, "/payees");
export const accountBalances = (accountId: string) => all<Balance>(accountId, "/balances");

/** A statement's file: an approved one by its id, or a payee's draft. */
export type StatementRef = { id: string } | { draftOf: string };

const filePath = (ref: StatementRef, format: "pdf" | "csv") =>
  "id" in ref ? `/me/statements/${ref.id}/${format}` : `/me/payees/${ref.draftOf}/draft-statement/${format}`;

/**
 * Downloads a statement as PDF or CSV with the person's own token (an address alone would not
 * carry it), saved under the name the server gives it.
 */
export async function downloadStatement(ref: StatementRef, format: "pdf" | "csv"): Promise<void> {
  let response: Response;
  try {
    response = await fetch(`/api/public/v1${filePath(ref, format)}`, {
      headers: { authorization: `Bearer ${await accessToken()}` },
    });
  } catch {
    throw new PlainError("The server could not be reached. Check your connection and try again.", {
      code: "network",
    });
  }
  if (!response.ok) {
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      body = undefined;
    }
    throw failure(response.status, body);
  }
  const blob = await response.blob();
  const disposition = response.headers.get("content-disposition") ?? "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? `statement.${format}`;
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * A payout request's refusal in words a person acts on, by the API's code; `payee` says which
 * step is missing. Undefined for a failure that is not one of these (its own words then).
 */
export function moneyWords(error: unknown, payee?: Payee): string | undefined {
  if (!(error instanceof PlainError)) return undefined;
  switch (error.code) {
    case "tax_form_required":
      if (payee?.tax.status === "pending")
        return "Your tax form is still being checked. You can ask to be paid once it is verified.";
      if (payee?.tax.status === "rejected")
        return "Your tax form was not accepted. File it again below, then ask to be paid once it is verified.";
      return "File your tax form first (below). You can ask to be paid once it is verified.";
    case "payout_method_required":
      return "Say where to send the money first: a PayPal address or a bank account (below).";
    case "below_threshold": {
      const m = /threshold \(([\d.]+) ([A-Z]{3})\)/.exec(error.message);
      return m
        ? `Your available balance is below the least that can be paid out (${m[1]} ${m[2]}). Ask again once it reaches that.`
        : "Your available balance is below the least that can be paid out. Ask again once it is more.";
    }
    case "payout_open":
      return "You already asked to be paid and that payment is not made yet. You can ask again once it is.";
    case "aal2_required":
      return "Confirm it is you: enter the code your authenticator app shows, then ask again.";
    case "person_required":
    case "payout_needs_person":
      return "Only you, signed in with your own password, can ask to be paid.";
  }
  return undefined;
}
