import { z } from "zod";
import { compare, minorUnits } from "./decimal.ts";
import type { PayoutLine, PayoutMethod } from "./types.ts";

/**
 * The payout providers' bulk-upload files (docs/payout-providers.md): the operator exports an
 * approved batch as the file its provider's dashboard takes, uploads it there, and settles the
 * batch when the provider reports back.
 *
 * - PayPal: the Payouts Web CSV. No header row; one row per payment, columns by position.
 *   One currency per file, at most 5,000 rows.
 * - Wise: the batch payment CSV ("Send to bank accounts" template). A header row of Wise's column
 *   names; one row per transfer, at most 1,000 rows.
 *
 * Each line whose payout method names the provider becomes a row; every other line comes back in
 * `skipped` with a plain reason, and so does a line the provider would refuse (an amount with more
 * decimals than the currency has, a Wise line missing the bank details its currency needs). Amounts
 * are decimal strings and stay strings: copied as given, except that zeros after the currency's
 * minor unit are dropped ("1500.00" JPY is written 1500), since the providers refuse decimals a
 * currency does not have. Fields are written as RFC 4180 says (quoted when they hold a comma, a
 * quote or a line break; CRLF line ends), and a text field a spreadsheet would run as a formula
 * (leading = + - @, tab or CR) is prefixed with an apostrophe.
 */

export const PAYOUT_PROVIDERS = ["paypal", "wise"] as const;

type Provider = (typeof PAYOUT_PROVIDERS)[number];

export interface PayoutFile {
  fileName: string;
  contentType: string;
  body: string;
  skipped: { payout_id: string; reason: string }[];
}

const CONTENT_TYPE = "text/csv; charset=utf-8";
const LABEL: Record<string, string> = { paypal: "PayPal", wise: "Wise" };

/** The provider a line's method names, for the reason it is skipped. */
function named(method: unknown): string {
  const provider = (method as { provider?: unknown } | null)?.provider;
  return typeof provider === "string" ? (LABEL[provider] ?? provider) : "not set";
}

// ---------------------------------------------------------------------------------------------
// The payout method: what a payee enters, checked before it is stored and again when it is paid.

/** A leading = + - @ makes a spreadsheet run the cell; an address the file must copy verbatim cannot start so. */
const FORMULA_START = /^[=+\-@\t\r]/;

const Email = z
  .email("an e-mail address")
  .max(254)
  .refine((v) => !FORMULA_START.test(v), "an e-mail address that does not start with = + - or @");

/** PayPal pays mobile numbers in the US only: +1 and the ten digits of a North American number. */
const US_MOBILE = /^\+1[2-9][0-9]{2}[2-9][0-9]{6}$/;

/** An IBAN as written, with or without the spaces between its groups of four. */
export function ibanIsValid(value: string): boolean {
  const iban = value.replaceAll(" ", "").toUpperCase();
  if (!/^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$/.test(iban)) return false;
  // ISO 13616: the first four characters moved to the end, letters as 10 to 35, mod 97 is 1.
  let rest = 0;
  for (const ch of iban.slice(4) + iban.slice(0, 4)) {
    const digits = /[0-9]/.test(ch) ? ch : String(ch.charCodeAt(0) - 55);
    for (const d of digits) rest = (rest * 10 + Number(d)) % 97;
  }
  return rest === 1;
}

/** An ABA routing number: nine digits whose weighted sum (3, 7, 1, 3, 7, 1, 3, 7, 1) ends in 0. */
export function routingNumberIsValid(value: string): boolean {
  if (!/^[0-9]{9}$/.test(value)) return false;
  const weights = [3, 7, 1, 3, 7, 1, 3, 7, 1];
  let total = 0;
  for (let i = 0; i < 9; i++) total += Number(value[i]) * (weights[i] as number);
  return total % 10 === 0;
}

const PaypalMethod = z
  .object({
    provider: z.literal("paypal"),
    receiver: z
      .string()
      .max(127)
      .refine(
        (v) => US_MOBILE.test(v) || Email.safeParse(v).success,
        "an e-mail address, or a US mobile number in E.164 form (+1 and ten digits)",
      )
      .meta({
        description: "The payee's PayPal e-mail address, or a US mobile number in E.164 (+14155550123).",
      }),
    wallet: z
      .enum(["PAYPAL", "VENMO"])
      .optional()
      .meta({ description: "PAYPAL (the default) or VENMO; Venmo pays US mobile numbers only." }),
  })
  .superRefine((m, ctx) => {
    if (m.wallet === "VENMO" && !US_MOBILE.test(m.receiver)) {
      ctx.addIssue({
        code: "custom",
        path: ["receiver"],
        message: "Venmo pays a US mobile number (+1 and ten digits)",
      });
    }
  });

const STATE_REQUIRED = new Set(["US", "CA", "BR"]);

const Address = z
  .object({
    country: z
      .string()
      .regex(/^[A-Z]{2}$/, "an ISO 3166-1 alpha-2 code, e.g. US")
      .meta({ description: "ISO 3166-1 alpha-2." }),
    city: z.string().trim().min(1).max(100),
    post_code: z.string().trim().min(1).max(20),
    first_line: z.string().trim().min(1).max(200),
    state: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .optional()
      .meta({ description: "Needed for US, CA and BR addresses." }),
  })
  .superRefine((a, ctx) => {
    if (STATE_REQUIRED.has(a.country) && a.state === undefined) {
      ctx.addIssue({ code: "custom", path: ["state"], message: `a ${a.country} address needs its state` });
    }
  });

const WiseMethod = z.object({
  provider: z.literal("wise"),
  name: z
    .string()
    .trim()
    .min(1)
    .max(140)
    .meta({ description: "The account holder's name, as the bank has it." }),
  email: Email,
  receiver_type: z.enum(["PERSON", "BUSINESS"]),
  iban: z
    .string()
    .max(42)
    .refine(
      ibanIsValid,
      "an IBAN with a valid check (two letters, two check digits, the account; spaces allowed)",
    )
    .optional()
    .meta({ description: "For EUR and the other IBAN currencies (ISO 13616, checked mod 97)." }),
  bic: z
    .string()
    .regex(
      /^[A-Za-z]{6}[A-Za-z0-9]{2}([A-Za-z0-9]{3})?$/,
      "a BIC of 8 or 11 letters and digits, e.g. DEUTDEFF",
    )
    .optional()
    .meta({ description: "SWIFT/BIC, 8 or 11 characters." }),
  account_number: z
    .string()
    .regex(/^[A-Za-z0-9]{4,34}$/, "an account number of 4 to 34 letters and digits")
    .optional(),
  sort_code: z
    .string()
    .regex(/^[0-9]{6}$/, "a sort code of six digits, no dashes")
    .optional()
    .meta({ description: "UK sort code (GBP), six digits." }),
  routing_number: z
    .string()
    .refine(routingNumberIsValid, "an ABA routing number: nine digits with a valid check digit")
    .optional()
    .meta({ description: "US ABA routing number (USD), nine digits." }),
  account_type: z.enum(["CHECKING", "SAVINGS"]).optional().meta({ description: "Needed for USD." }),
  address: Address.optional().meta({
    description:
      "The recipient's address: Wise needs it to pay USD, PHP, THB or TRY, or from a USD or AUD balance.",
  }),
});

/** A payee's payout method (src/money/types.ts PayoutMethod), as it is entered and stored. */
export const PAYOUT_METHOD_SCHEMA = z.discriminatedUnion("provider", [PaypalMethod, WiseMethod]).meta({
  id: "PayoutMethod",
  description:
    "Where a payee's payouts go. PayPal: an e-mail address or a US mobile number, and the wallet. Wise: the account " +
    "holder, their e-mail and the bank details the payout currency needs: an IBAN for EUR and the other IBAN " +
    "currencies, a sort code and account number for GBP, a routing number, account number and account type for " +
    "USD (docs/payout-providers.md).",
});

// ---------------------------------------------------------------------------------------------
// The files.

/** A spreadsheet runs a cell starting with one of these; the apostrophe makes it text. */
function guard(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** At most `max` characters (code points, so no emoji is cut in half). */
function truncate(text: string, max: number): string {
  const chars = Array.from(text);
  return chars.length <= max ? text : chars.slice(0, max).join("").trimEnd();
}

function field(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

function csv(rows: readonly (readonly string[])[]): string {
  return rows.map((row) => `${row.map(field).join(",")}\r\n`).join("");
}

/** Currencies PayPal refuses decimals in though ISO 4217 gives them two (PayPal's currency codes). */
const PAYPAL_NO_DECIMALS = new Set(["HUF", "TWD"]);

/**
 * The amount as the file writes it, or why it cannot be: a positive decimal with at most the
 * currency's decimals (zeros past them are dropped: "1500.00" JPY → "1500").
 */
function amountFor(
  amount: string,
  currency: string,
  places: number,
): { amount: string } | { reason: string } {
  const m = /^(0|[1-9][0-9]*)(?:\.([0-9]+))?$/.exec(amount);
  if (m === null) return { reason: `amount ${JSON.stringify(amount)} is not a decimal like 12.34` };
  const whole = m[1] as string;
  const fraction = m[2] ?? "";
  if (/[1-9]/.test(fraction.slice(places))) {
    return {
      reason: `amount ${amount} has more decimals than ${currency} has (${places === 0 ? "none" : places})`,
    };
  }
  const kept = fraction.slice(0, places);
  const written = kept.length > 0 ? `${whole}.${kept}` : whole;
  if (!/[1-9]/.test(written)) return { reason: "amount is zero" };
  return { amount: written };
}

function methodProblem(method: unknown): string | null {
  const parsed = PAYOUT_METHOD_SCHEMA.safeParse(method);
  if (parsed.success) return null;
  const issue = parsed.error.issues[0];
  const path = issue?.path.join(".") ?? "";
  return `payout method ${path === "" ? "" : `${path} `}is not valid: ${issue?.message ?? "unknown"}`;
}

// PayPal Payouts Web ------------------------------------------------------------------------------

const PAYPAL_MAX_ROWS = 5000;
const PAYPAL_CUSTOMER_ID_MAX = 30;
const PAYPAL_NOTE_MAX = 400;
/** PayPal's documented most for one payment from a US account. */
const PAYPAL_USD_ITEM_MAX = "20000.00";

function paypalFile(lines: readonly PayoutLine[]): PayoutFile {
  const rows: string[][] = [];
  const skipped: PayoutFile["skipped"] = [];
  let currency: string | null = null;
  for (const line of lines) {
    const skip = (reason: string) => skipped.push({ payout_id: line.payout_id, reason });
    const method = line.method as PayoutMethod;
    if (method?.provider !== "paypal") {
      skip(`the payout method is ${named(method)}, not PayPal`);
      continue;
    }
    const problem = methodProblem(method);
    if (problem !== null) {
      skip(problem);
      continue;
    }
    if (!/^[A-Z]{3}$/.test(line.currency)) {
      skip(`currency ${JSON.stringify(line.currency)} is not an ISO 4217 code`);
      continue;
    }
    const places = PAYPAL_NO_DECIMALS.has(line.currency) ? 0 : minorUnits(line.currency);
    const amount = amountFor(line.amount, line.currency, places);
    if ("reason" in amount) {
      skip(amount.reason);
      continue;
    }
    if (line.currency === "USD" && compare(amount.amount, PAYPAL_USD_ITEM_MAX) > 0) {
      skip(`amount ${amount.amount} USD is over PayPal's limit of 20,000.00 USD for one payment`);
      continue;
    }
    currency ??= line.currency;
    if (line.currency !== currency) {
      skip(
        `PayPal takes one currency per file and this one is ${currency}: pay the ${line.currency} lines in a file of their own`,
      );
      continue;
    }
    if (rows.length >= PAYPAL_MAX_ROWS) {
      skip(`a PayPal file holds at most ${PAYPAL_MAX_ROWS} payments`);
      continue;
    }
    // Payouts Web wants a domestic mobile number: a +1 number without its country code.
    const receiver = US_MOBILE.test(method.receiver) ? method.receiver.slice(2) : method.receiver;
    const customerId = truncate(guard(line.payout_id.replaceAll(/[\s-]/g, "")), PAYPAL_CUSTOMER_ID_MAX);
    rows.push([
      receiver,
      amount.amount,
      line.currency,
      customerId,
      truncate(guard(line.reference), PAYPAL_NOTE_MAX),
      method.wallet ?? "PAYPAL",
    ]);
  }
  return {
    fileName: currency === null ? "paypal-payouts.csv" : `paypal-payouts-${currency}.csv`,
    contentType: CONTENT_TYPE,
    body: csv(rows),
    skipped,
  };
}

// Wise batch payments -----------------------------------------------------------------------------

const WISE_MAX_ROWS = 1000;

export const WISE_COLUMNS = [
  "name",
  "recipientEmail",
  "paymentReference",
  "referenceNumber",
  "receiverType",
  "amountCurrency",
  "amount",
  "sourceCurrency",
  "targetCurrency",
  "IBAN",
  "BIC",
  "accountNumber",
  "sortCode",
  "abartn",
  "accountType",
  "addressCountryCode",
  "addressCity",
  "addressFirstLine",
  "addressState",
  "addressPostCode",
] as const;

type WiseColumn = (typeof WISE_COLUMNS)[number];

/** The currencies Wise pays to an IBAN (GBP takes an IBAN too, or a sort code and account number). */
const WISE_IBAN_CURRENCIES = new Set(["BGN", "CHF", "DKK", "EUR", "GEL", "NOK", "PKR", "PLN", "RON", "SEK"]);
/** Wise wants the recipient's address for these target currencies, and when paying from USD or AUD. */
const WISE_ADDRESS_TARGETS = new Set(["USD", "PHP", "THB", "TRY"]);
const WISE_ADDRESS_SOURCES = new Set(["USD", "AUD"]);

/**
 * The longest reference Wise passes on, by target currency (Wise's help: "Tips for paying
 * invoices"); 35, the Swift field's, for the currencies it does not list.
 */
const WISE_REFERENCE_MAX: Record<string, number> = {
  GBP: 18,
  USD: 10,
  EUR: 35,
  INR: 16,
  PLN: 35,
  CHF: 50,
  DKK: 35,
  NOK: 35,
  SEK: 12,
  AUD: 18,
  NZD: 12,
  CAD: 50,
  BGN: 35,
  CZK: 25,
  GEL: 35,
  HUF: 35,
  RON: 30,
  HKD: 50,
  IDR: 35,
  KRW: 35,
  MYR: 35,
  PHP: 35,
  SGD: 25,
  THB: 50,
  AED: 35,
  LKR: 35,
  MAD: 50,
  MXN: 100,
  NGN: 14,
  ZAR: 18,
};
const WISE_REFERENCE_DEFAULT = 35;

type WiseBank = Partial<Record<WiseColumn, string>>;

/** The bank columns of the route the target currency takes, or why the method cannot be paid. */
function wiseBank(
  method: Extract<PayoutMethod, { provider: "wise" }>,
  currency: string,
): WiseBank | { reason: string } {
  const iban = method.iban?.replaceAll(" ", "").toUpperCase();
  const bic = method.bic?.toUpperCase();
  if (WISE_IBAN_CURRENCIES.has(currency)) {
    if (iban === undefined) return { reason: `${currency} to Wise needs an IBAN` };
    return { IBAN: iban, BIC: bic ?? "" };
  }
  if (currency === "GBP") {
    if (method.sort_code !== undefined && method.account_number !== undefined) {
      return { accountNumber: method.account_number, sortCode: method.sort_code };
    }
    if (iban !== undefined) return { IBAN: iban, BIC: bic ?? "" };
    return { reason: "GBP to Wise needs a sort code and an account number (or an IBAN)" };
  }
  if (currency === "USD") {
    const missing = [
      method.routing_number === undefined ? "a routing number" : null,
      method.account_number === undefined ? "an account number" : null,
      method.account_type === undefined ? "an account type (CHECKING or SAVINGS)" : null,
    ].filter((m) => m !== null);
    if (missing.length > 0) {
      const list =
        missing.length === 1 ? missing[0] : `${missing.slice(0, -1).join(", ")} and ${missing.at(-1)}`;
      return { reason: `USD to Wise needs ${list}` };
    }
    return {
      accountNumber: method.account_number as string,
      abartn: method.routing_number as string,
      accountType: method.account_type as string,
    };
  }
  if (iban !== undefined) return { IBAN: iban, BIC: bic ?? "" };
  if (method.account_number !== undefined && bic !== undefined)
    return { accountNumber: method.account_number, BIC: bic };
  return { reason: `${currency} to Wise needs an IBAN, or an account number and a BIC` };
}

function wiseFile(lines: readonly PayoutLine[], sourceCurrency: string | undefined): PayoutFile {
  if (sourceCurrency !== undefined && !/^[A-Z]{3}$/.test(sourceCurrency)) {
    throw new Error(`sourceCurrency ${JSON.stringify(sourceCurrency)} is not an ISO 4217 code`);
  }
  const rows: string[][] = [[...WISE_COLUMNS]];
  const skipped: PayoutFile["skipped"] = [];
  for (const line of lines) {
    const skip = (reason: string) => skipped.push({ payout_id: line.payout_id, reason });
    const method = line.method as PayoutMethod;
    if (method?.provider !== "wise") {
      skip(`the payout method is ${named(method)}, not Wise`);
      continue;
    }
    const problem = methodProblem(method);
    if (problem !== null) {
      skip(problem);
      continue;
    }
    if (!/^[A-Z]{3}$/.test(line.currency)) {
      skip(`currency ${JSON.stringify(line.currency)} is not an ISO 4217 code`);
      continue;
    }
    const amount = amountFor(line.amount, line.currency, minorUnits(line.currency));
    if ("reason" in amount) {
      skip(amount.reason);
      continue;
    }
    const bank = wiseBank(method, line.currency);
    if ("reason" in bank) {
      skip(bank.reason);
      continue;
    }
    const source = sourceCurrency ?? line.currency;
    if (
      method.address === undefined &&
      (WISE_ADDRESS_TARGETS.has(line.currency) || WISE_ADDRESS_SOURCES.has(source))
    ) {
      skip(
        WISE_ADDRESS_TARGETS.has(line.currency)
          ? `${line.currency} to Wise needs the recipient's address`
          : `paying from ${source}, Wise needs the recipient's address`,
      );
      continue;
    }
    if (rows.length - 1 >= WISE_MAX_ROWS) {
      skip(`a Wise batch holds at most ${WISE_MAX_ROWS} transfers`);
      continue;
    }
    const values: Partial<Record<WiseColumn, string>> = {
      name: guard(method.name),
      recipientEmail: method.email,
      paymentReference: truncate(
        guard(line.reference),
        WISE_REFERENCE_MAX[line.currency] ?? WISE_REFERENCE_DEFAULT,
      ),
      receiverType: method.receiver_type,
      // The amount is what the payee receives; Wise's fee is the operator's.
      amountCurrency: "target",
      amount: amount.amount,
      sourceCurrency: source,
      targetCurrency: line.currency,
      ...bank,
    };
    if (method.address !== undefined) {
      values.addressCountryCode = method.address.country;
      values.addressCity = guard(method.address.city);
      values.addressFirstLine = guard(method.address.first_line);
      values.addressState = guard(method.address.state ?? "");
      values.addressPostCode = guard(method.address.post_code);
    }
    rows.push(WISE_COLUMNS.map((c) => values[c] ?? ""));
  }
  return { fileName: "wise-batch-payments.csv", contentType: CONTENT_TYPE, body: csv(rows), skipped };
}

/**
 * The provider's bulk-upload file for the lines of a batch (docs/payout-providers.md).
 * `sourceCurrency` is the Wise balance the batch is paid from (the line's own currency when left
 * out); PayPal pays from the balance in the file's currency and ignores it.
 */
export function payoutFile(
  provider: Provider,
  lines: PayoutLine[],
  options: { sourceCurrency?: string } = {},
): PayoutFile {
  if (provider === "paypal") return paypalFile(lines);
  if (provider === "wise") return wiseFile(lines, options.sourceCurrency);
  throw new Error(
    `unknown payout provider ${JSON.stringify(provider)} (expected ${PAYOUT_PROVIDERS.join(" or ")})`,
  );
}
