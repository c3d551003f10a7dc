import assert from "node:assert/strict";
import { test } from "node:test";
import type { Db } from "../db/db.ts";
import { ApiCallMeter } from "./api-calls.ts";
import { computeInvoice, type Plan } from "./invoices.ts";
import { decideTax } from "./tax.ts";

const DE = { country: "DE", vat_id: "DE999999999" };

test("the tax rule: every row of the table in src/billing/tax.ts", () => {
  const rule = (issuer: Parameters<typeof decideTax>[0], customer: Parameters<typeof decideTax>[1]) => {
    const d = decideTax(issuer, customer);
    return [d.rule, d.rate];
  };
  assert.deepEqual(rule(DE, { country: "DE", vat_id: "DE123456789" }), ["domestic", "19"]);
  assert.deepEqual(rule(DE, { country: "DE" }), ["domestic", "19"]);
  assert.deepEqual(rule(DE, { country: "FR", vat_id: "FR12345678901" }), ["eu_reverse_charge", "0"]);
  assert.deepEqual(rule(DE, { country: "FI" }), ["eu_consumer", "25.5"]);
  assert.deepEqual(rule(DE, { country: "US", vat_id: "US123" }), ["outside_eu", "0"]);
  assert.deepEqual(rule(DE, { country: "GB" }), ["outside_eu", "0"]);
  // The issuer's own rates win over the built-in table.
  assert.deepEqual(rule({ ...DE, tax_rates: { DE: "7", AT: "10" } }, { country: "AT" }), [
    "eu_consumer",
    "10",
  ]);
  assert.deepEqual(rule({ ...DE, tax_rates: { DE: "7" } }, { country: "DE" }), ["domestic", "7"]);
  // An issuer outside the EU: its own rate at home (0 without one), nothing abroad.
  assert.deepEqual(rule({ country: "US" }, { country: "US" }), ["domestic", "0"]);
  assert.deepEqual(rule({ country: "GB", tax_rates: { GB: "20" } }, { country: "GB" }), ["domestic", "20"]);
  assert.deepEqual(rule({ country: "GB", tax_rates: { GB: "20" } }, { country: "DE", vat_id: "DE1" }), [
    "not_applicable",
    "0",
  ]);
  assert.match(
    decideTax(DE, { country: "NL", vat_id: "NL123456789B01" }).note,
    /Article 196.*NL123456789B01/,
  );
});

const plan = (over: Partial<Plan>): Plan => ({
  id: "p",
  name: "P",
  currency: "EUR",
  monthly_fee: "0",
  included_accounts: 0,
  included_releases: 0,
  included_tracks: 0,
  included_storage_gb: 0,
  included_api_calls: 0,
  price_per_account: "0",
  price_per_release: "0",
  price_per_track: "0",
  price_per_storage_gb: "0",
  price_per_1000_api_calls: "0",
  created_at: "",
  ...over,
});
const usage = {
  month: "2026-10",
  accounts: 0,
  releases_delivered: 0,
  tracks: 0,
  storage_bytes: 0,
  api_calls: 0,
};

test("the rounding rule: lines rounded half away from zero, then the tax once on their sum", () => {
  // Three lines of 0.335, 0.335 and 0.01 EUR: each 0.34 (not 0.335 + 0.335 = 0.67 rounded once).
  const out = computeInvoice(
    plan({ monthly_fee: "0.01", price_per_account: "0.335", price_per_release: "0.335" }),
    { ...usage, accounts: 1, releases_delivered: 1 },
    DE,
    { country: "DE" },
    "October 2026",
  );
  assert.deepEqual(
    out.lines.map((l) => l.amount),
    ["0.01", "0.34", "0.34"],
  );
  assert.equal(out.subtotal, "0.69");
  // 0.69 x 19% = 0.1311: 0.13.
  assert.equal(out.tax, "0.13");
  assert.equal(out.total, "0.82");
  // Zero-decimal currencies are stated in whole units.
  const yen = computeInvoice(
    plan({ currency: "JPY", monthly_fee: "1000", price_per_track: "2.5" }),
    { ...usage, tracks: 3 },
    { country: "JP" },
    { country: "JP" },
    "October 2026",
  );
  assert.deepEqual(
    yen.lines.map((l) => l.amount),
    ["1000", "8"],
  );
  assert.equal(yen.total, "1008");
  // Storage in started GB (10^9 bytes), API calls in started thousands, past what is included.
  const metered = computeInvoice(
    plan({
      included_storage_gb: 1,
      price_per_storage_gb: "1",
      included_api_calls: 1000,
      price_per_1000_api_calls: "1",
    }),
    { ...usage, storage_bytes: 1_000_000_001, api_calls: 1001 },
    DE,
    { country: "US" },
    "October 2026",
  );
  assert.deepEqual(
    metered.lines.map((l) => [l.unit, l.quantity]),
    [
      ["month", "1"],
      ["GB", "1"],
      ["1000 calls", "1"],
    ],
  );
});

test("API calls: counted per tenant and day, one statement per flush, kept when a flush fails", async () => {
  const batches: unknown[][] = [];
  let fail = true;
  const db = {
    asService: async (fn: (tx: unknown) => Promise<unknown>) => {
      if (fail) {
        fail = false;
        throw new Error("database away");
      }
      return fn({ query: async (_sql: string, params: unknown[]) => batches.push(params) });
    },
  } as unknown as Db;
  const meter = new ApiCallMeter(db, 60_000);
  const day = new Date("2026-11-05T10:00:00Z");
  meter.count("t1", day);
  meter.count("t1", day);
  meter.count("t2", day);
  await assert.rejects(meter.flush(), /database away/);
  meter.count("t1", new Date("2026-11-06T00:00:00Z"));
  await meter.flush();
  assert.equal(batches.length, 1);
  const [ids, days, calls] = batches[0] as [string[], string[], number[]];
  const rows = ids.map((id, i) => `${id} ${days[i]} ${calls[i]}`).sort();
  assert.deepEqual(rows, ["t1 2026-11-05 2", "t1 2026-11-06 1", "t2 2026-11-05 1"]);
  await meter.flush();
  assert.equal(batches.length, 1, "nothing new: no statement");
});
