import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ibanIsValid,
  PAYOUT_METHOD_SCHEMA,
  payoutFile,
  routingNumberIsValid,
  WISE_COLUMNS,
} from "./providers.ts";
import type { PayoutLine, PayoutMethod } from "./types.ts";

const REF = "Moonlight Music royalties 2026-11";
const ID1 = "0b7e1c2a-4f1d-4c3e-9a7b-2d5e6f708192";
const ID2 = "1c8f2d3b-5a2e-4d4f-8b8c-3e6f7a819203";
/** The PayPal Customer ID of ID1 and ID2: no hyphens, 30 characters. */
const CID1 = "0b7e1c2a4f1d4c3e9a7b2d5e6f7081";
const CID2 = "1c8f2d3b5a2e4d4f8b8c3e6f7a8192";

const paypal = (receiver: string, wallet?: "PAYPAL" | "VENMO"): PayoutMethod =>
  wallet === undefined ? { provider: "paypal", receiver } : { provider: "paypal", receiver, wallet };

const EUR_WISE: PayoutMethod = {
  provider: "wise",
  name: "Ana Lima",
  email: "ana@example.org",
  receiver_type: "PERSON",
  iban: "DE89 3704 0044 0532 0130 00",
  bic: "cobadeffxxx",
};
const GBP_WISE: PayoutMethod = {
  provider: "wise",
  name: "Lantern Records Ltd",
  email: "pay@lantern.test",
  receiver_type: "BUSINESS",
  account_number: "12345678",
  sort_code: "123456",
};
const USD_WISE: PayoutMethod = {
  provider: "wise",
  name: "June Park",
  email: "june@lantern.test",
  receiver_type: "PERSON",
  account_number: "000123456789",
  routing_number: "021000021",
  account_type: "CHECKING",
  address: {
    country: "US",
    city: "New York",
    post_code: "10001",
    first_line: "1 Main St, Apt 2",
    state: "NY",
  },
};

function line(
  payout_id: string,
  method: PayoutMethod,
  currency: string,
  amount: string,
  reference = REF,
): PayoutLine {
  return {
    payout_id,
    payee_id: `payee-${payout_id}`,
    payee_name: "Payee",
    method,
    currency,
    amount,
    reference,
  };
}

const rows = (...r: string[]) => r.map((x) => `${x}\r\n`).join("");
const WISE_HEADER = WISE_COLUMNS.join(",");

describe("PayPal Payouts Web file", () => {
  const cases: {
    name: string;
    lines: PayoutLine[];
    body: string;
    fileName?: string;
    skipped?: { payout_id: string; reason: string }[];
  }[] = [
    {
      name: "no header; receiver, amount, currency, customer id, note, wallet per row",
      lines: [
        line(ID1, paypal("ana@example.org"), "USD", "1.40"),
        line(ID2, paypal("+14155550123", "VENMO"), "USD", "2.48"),
      ],
      body: rows(
        `ana@example.org,1.40,USD,${CID1},${REF},PAYPAL`,
        `4155550123,2.48,USD,${CID2},${REF},VENMO`,
      ),
      fileName: "paypal-payouts-USD.csv",
    },
    {
      name: "a note with a comma and quotes is quoted, quotes doubled",
      lines: [line("p1", paypal("ana@example.org"), "USD", "10", 'Royalties, "final" cut')],
      body: rows('ana@example.org,10,USD,p1,"Royalties, ""final"" cut",PAYPAL'),
    },
    {
      name: "a note a spreadsheet would run as a formula gets an apostrophe",
      lines: [
        line("p1", paypal("ana@example.org"), "USD", "1", '=HYPERLINK("http://x.test","pay")'),
        line("p2", paypal("ana@example.org"), "USD", "1", "-2+3"),
        line("p3", paypal("ana@example.org"), "USD", "1", "@SUM(A1)"),
        line("p4", paypal("ana@example.org"), "USD", "1", "+1"),
        line("p5", paypal("ana@example.org"), "USD", "1", "\tcmd"),
        line("p6", paypal("ana@example.org"), "USD", "1", "\rcmd"),
      ],
      body: rows(
        `ana@example.org,1,USD,p1,"'=HYPERLINK(""http://x.test"",""pay"")",PAYPAL`,
        "ana@example.org,1,USD,p2,'-2+3,PAYPAL",
        "ana@example.org,1,USD,p3,'@SUM(A1),PAYPAL",
        "ana@example.org,1,USD,p4,'+1,PAYPAL",
        "ana@example.org,1,USD,p5,'\tcmd,PAYPAL",
        `ana@example.org,1,USD,p6,"'\rcmd",PAYPAL`,
      ),
    },
    {
      name: "JPY has no decimals: whole amounts as given, zeros past the yen dropped, fractions refused",
      lines: [
        line("p1", paypal("ana@example.org"), "JPY", "1500"),
        line("p2", paypal("ana@example.org"), "JPY", "1500.00"),
        line("p3", paypal("ana@example.org"), "JPY", "1500.50"),
      ],
      body: rows(
        "ana@example.org,1500,JPY,p1,Moonlight Music royalties 2026-11,PAYPAL",
        `ana@example.org,1500,JPY,p2,${REF},PAYPAL`,
      ),
      fileName: "paypal-payouts-JPY.csv",
      skipped: [{ payout_id: "p3", reason: "amount 1500.50 has more decimals than JPY has (none)" }],
    },
    {
      name: "HUF takes no decimals at PayPal",
      lines: [line("p1", paypal("ana@example.org"), "HUF", "990.5")],
      body: "",
      fileName: "paypal-payouts.csv",
      skipped: [{ payout_id: "p1", reason: "amount 990.5 has more decimals than HUF has (none)" }],
    },
    {
      name: "lines for Wise, in a second currency, with bad amounts or over the limit are skipped",
      lines: [
        line("w1", EUR_WISE, "EUR", "5.00"),
        line("p1", paypal("ana@example.org"), "USD", "20000.00"),
        line("p2", paypal("ana@example.org"), "EUR", "3.00"),
        line("p3", paypal("ana@example.org"), "USD", "20000.01"),
        line("p4", paypal("ana@example.org"), "USD", "1.005"),
        line("p5", paypal("ana@example.org"), "USD", "0.00"),
        line("p6", paypal("ana@example.org"), "USD", "1e3"),
        line("p7", paypal("not-an-address"), "USD", "1.00"),
      ],
      body: rows(`ana@example.org,20000.00,USD,p1,${REF},PAYPAL`),
      skipped: [
        { payout_id: "w1", reason: "the payout method is Wise, not PayPal" },
        {
          payout_id: "p2",
          reason:
            "PayPal takes one currency per file and this one is USD: pay the EUR lines in a file of their own",
        },
        {
          payout_id: "p3",
          reason: "amount 20000.01 USD is over PayPal's limit of 20,000.00 USD for one payment",
        },
        { payout_id: "p4", reason: "amount 1.005 has more decimals than USD has (2)" },
        { payout_id: "p5", reason: "amount is zero" },
        { payout_id: "p6", reason: 'amount "1e3" is not a decimal like 12.34' },
        {
          payout_id: "p7",
          reason:
            "payout method receiver is not valid: an e-mail address, or a US mobile number in E.164 form (+1 and ten digits)",
        },
      ],
    },
    {
      name: "the note is cut to PayPal's 400 characters",
      lines: [line("p1", paypal("ana@example.org"), "USD", "1", "x".repeat(450))],
      body: rows(`ana@example.org,1,USD,p1,${"x".repeat(400)},PAYPAL`),
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const file = payoutFile("paypal", c.lines, {});
      assert.equal(file.body, c.body);
      assert.deepEqual(file.skipped, c.skipped ?? []);
      assert.equal(file.contentType, "text/csv; charset=utf-8");
      if (c.fileName !== undefined) assert.equal(file.fileName, c.fileName);
    });
  }
});

describe("Wise batch payment file", () => {
  const cases: {
    name: string;
    lines: PayoutLine[];
    sourceCurrency?: string;
    body: string;
    skipped?: { payout_id: string; reason: string }[];
  }[] = [
    {
      name: "a header of Wise's column names, then a row per transfer with the route's bank columns",
      lines: [
        line(ID1, EUR_WISE, "EUR", "12.30"),
        line(ID2, GBP_WISE, "GBP", "7.00"),
        line("w3", USD_WISE, "USD", "1.40"),
      ],
      body: rows(
        WISE_HEADER,
        "Ana Lima,ana@example.org,Moonlight Music royalties 2026-11,,PERSON,target,12.30,EUR,EUR,DE89370400440532013000,COBADEFFXXX,,,,,,,,,",
        // GBP's reference is cut to 18 characters, USD's to 10 (then the trailing space).
        "Lantern Records Ltd,pay@lantern.test,Moonlight Music ro,,BUSINESS,target,7.00,GBP,GBP,,,12345678,123456,,,,,,,",
        'June Park,june@lantern.test,Moonlight,,PERSON,target,1.40,USD,USD,,,000123456789,,021000021,CHECKING,US,New York,"1 Main St, Apt 2",NY,10001',
      ),
    },
    {
      name: "the source currency is the balance the batch is paid from",
      lines: [line("w1", EUR_WISE, "EUR", "5")],
      sourceCurrency: "GBP",
      body: rows(
        WISE_HEADER,
        "Ana Lima,ana@example.org,Moonlight Music royalties 2026-11,,PERSON,target,5,GBP,EUR,DE89370400440532013000,COBADEFFXXX,,,,,,,,,",
      ),
    },
    {
      name: "names and references are quoted and guarded",
      lines: [line("w1", { ...EUR_WISE, name: "=Lima, Ana" }, "EUR", "5", '@"x"')],
      body: rows(
        WISE_HEADER,
        `"'=Lima, Ana",ana@example.org,"'@""x""",,PERSON,target,5,EUR,EUR,DE89370400440532013000,COBADEFFXXX,,,,,,,,,`,
      ),
    },
    {
      name: "JPY amounts have no decimals",
      lines: [
        line("w1", { ...GBP_WISE, sort_code: undefined, bic: "MHCBJPJT" } as PayoutMethod, "JPY", "150000"),
        line("w2", { ...GBP_WISE, sort_code: undefined, bic: "MHCBJPJT" } as PayoutMethod, "JPY", "150000.5"),
      ],
      body: rows(
        WISE_HEADER,
        "Lantern Records Ltd,pay@lantern.test,Moonlight Music royalties 2026-11,,BUSINESS,target,150000,JPY,JPY,,MHCBJPJT,12345678,,,,,,,,",
      ),
      skipped: [{ payout_id: "w2", reason: "amount 150000.5 has more decimals than JPY has (none)" }],
    },
    {
      name: "lines for PayPal and lines missing the bank details or address their currency needs are skipped",
      lines: [
        line("p1", paypal("ana@example.org"), "USD", "1.00"),
        line("w1", { ...EUR_WISE, iban: undefined }, "EUR", "1.00"),
        line("w2", { ...USD_WISE, routing_number: undefined }, "USD", "1.00"),
        line("w3", { ...USD_WISE, address: undefined }, "USD", "1.00"),
        line("w4", { ...GBP_WISE, sort_code: undefined }, "GBP", "1.00"),
        line("w5", { ...USD_WISE, account_type: undefined, account_number: undefined }, "USD", "1.00"),
        line("w6", { ...EUR_WISE, iban: "DE89370400440532013001" }, "EUR", "1.00"),
        line("w7", EUR_WISE, "EUR", "1.001"),
      ],
      body: rows(WISE_HEADER),
      skipped: [
        { payout_id: "p1", reason: "the payout method is PayPal, not Wise" },
        { payout_id: "w1", reason: "EUR to Wise needs an IBAN" },
        { payout_id: "w2", reason: "USD to Wise needs a routing number" },
        { payout_id: "w3", reason: "USD to Wise needs the recipient's address" },
        { payout_id: "w4", reason: "GBP to Wise needs a sort code and an account number (or an IBAN)" },
        {
          payout_id: "w5",
          reason: "USD to Wise needs an account number and an account type (CHECKING or SAVINGS)",
        },
        {
          payout_id: "w6",
          reason:
            "payout method iban is not valid: an IBAN with a valid check (two letters, two check digits, the account; spaces allowed)",
        },
        { payout_id: "w7", reason: "amount 1.001 has more decimals than EUR has (2)" },
      ],
    },
    {
      name: "paying from USD needs the recipient's address whatever the target",
      lines: [line("w1", EUR_WISE, "EUR", "1.00")],
      sourceCurrency: "USD",
      body: rows(WISE_HEADER),
      skipped: [{ payout_id: "w1", reason: "paying from USD, Wise needs the recipient's address" }],
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const file = payoutFile(
        "wise",
        c.lines,
        c.sourceCurrency === undefined ? {} : { sourceCurrency: c.sourceCurrency },
      );
      assert.equal(file.body, c.body);
      assert.deepEqual(file.skipped, c.skipped ?? []);
      assert.equal(file.fileName, "wise-batch-payments.csv");
      assert.equal(file.contentType, "text/csv; charset=utf-8");
    });
  }

  test("a source currency that is not a code is a programming error", () => {
    assert.throws(() => payoutFile("wise", [], { sourceCurrency: "euro" }), /not an ISO 4217 code/);
  });
});

test("an unknown provider is refused", () => {
  assert.throws(() => payoutFile("stripe" as "paypal", [], {}), /unknown payout provider/);
});

describe("PAYOUT_METHOD_SCHEMA", () => {
  const accepted: { name: string; method: unknown }[] = [
    { name: "PayPal by e-mail", method: { provider: "paypal", receiver: "ana@example.org" } },
    {
      name: "PayPal by US mobile, PayPal wallet",
      method: { provider: "paypal", receiver: "+14155550123", wallet: "PAYPAL" },
    },
    { name: "Venmo by US mobile", method: { provider: "paypal", receiver: "+14155550123", wallet: "VENMO" } },
    { name: "Wise EUR, IBAN with spaces and an 11-character BIC", method: EUR_WISE },
    { name: "Wise GBP, sort code", method: GBP_WISE },
    { name: "Wise USD, routing number and address", method: USD_WISE },
    { name: "Wise, an 8-character BIC", method: { ...EUR_WISE, bic: "DEUTDEFF" } },
    { name: "Wise, a UK IBAN", method: { ...EUR_WISE, iban: "GB82WEST12345698765432" } },
  ];
  for (const c of accepted) {
    test(`accepts ${c.name}`, () => {
      const parsed = PAYOUT_METHOD_SCHEMA.safeParse(c.method);
      assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
    });
  }

  const rejected: { name: string; method: unknown; path: (string | number)[]; message: RegExp }[] = [
    {
      name: "an IBAN whose check digits are wrong",
      method: { ...EUR_WISE, iban: "DE89370400440532013001" },
      path: ["iban"],
      message: /IBAN/,
    },
    {
      name: "a routing number whose ABA checksum is wrong",
      method: { ...USD_WISE, routing_number: "021000022" },
      path: ["routing_number"],
      message: /ABA routing number/,
    },
    {
      name: "a routing number of eight digits",
      method: { ...USD_WISE, routing_number: "02100002" },
      path: ["routing_number"],
      message: /nine digits/,
    },
    {
      name: "a Wise e-mail that is not one",
      method: { ...EUR_WISE, email: "ana@" },
      path: ["email"],
      message: /e-mail/,
    },
    {
      name: "a Wise e-mail a spreadsheet would run",
      method: { ...EUR_WISE, email: "-ana@example.org" },
      path: ["email"],
      message: /does not start with/,
    },
    {
      name: "a PayPal receiver that is neither an e-mail nor a US mobile",
      method: { provider: "paypal", receiver: "ana.example.org" },
      path: ["receiver"],
      message: /e-mail address, or a US mobile number/,
    },
    {
      name: "a phone number that is not E.164",
      method: { provider: "paypal", receiver: "(415) 555-0123" },
      path: ["receiver"],
      message: /E\.164/,
    },
    {
      name: "Venmo to an e-mail address",
      method: { provider: "paypal", receiver: "ana@example.org", wallet: "VENMO" },
      path: ["receiver"],
      message: /Venmo pays a US mobile number/,
    },
    {
      name: "a BIC of nine characters",
      method: { ...EUR_WISE, bic: "DEUTDEFF5" },
      path: ["bic"],
      message: /8 or 11/,
    },
    {
      name: "a sort code with dashes",
      method: { ...GBP_WISE, sort_code: "12-34-56" },
      path: ["sort_code"],
      message: /six digits/,
    },
    {
      name: "a US address without its state",
      method: {
        ...USD_WISE,
        address: { country: "US", city: "New York", post_code: "10001", first_line: "1 Main St" },
      },
      path: ["address", "state"],
      message: /needs its state/,
    },
    {
      name: "an unknown receiver type",
      method: { ...EUR_WISE, receiver_type: "PRIVATE" },
      path: ["receiver_type"],
      message: /./,
    },
    {
      name: "an unknown provider",
      method: { provider: "stripe", receiver: "x" },
      path: ["provider"],
      message: /./,
    },
  ];
  for (const c of rejected) {
    test(`rejects ${c.name}, naming the field`, () => {
      const parsed = PAYOUT_METHOD_SCHEMA.safeParse(c.method);
      assert.equal(parsed.success, false);
      const issue = parsed.error?.issues.find((i) => i.path.join(".") === c.path.join("."));
      assert.ok(issue, `no issue at ${c.path.join(".")}: ${JSON.stringify(parsed.error?.issues)}`);
      assert.match(issue.message, c.message);
    });
  }

  test("the checksums on their own", () => {
    assert.equal(ibanIsValid("DE89370400440532013000"), true);
    assert.equal(ibanIsValid("de89 3704 0044 0532 0130 00"), true);
    assert.equal(ibanIsValid("DE88370400440532013000"), false);
    assert.equal(ibanIsValid("DE89"), false);
    assert.equal(routingNumberIsValid("021000021"), true);
    assert.equal(routingNumberIsValid("011000015"), true);
    assert.equal(routingNumberIsValid("021000022"), false);
    assert.equal(routingNumberIsValid("02100002a"), false);
  });

  test("is described in the OpenAPI document as PayoutMethod", () => {
    const meta = PAYOUT_METHOD_SCHEMA.meta();
    assert.equal(meta?.id, "PayoutMethod");
    assert.match(String(meta?.description), /IBAN/);
  });
});
