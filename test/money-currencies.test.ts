import assert from "node:assert/strict";
import { test } from "node:test";
import { minorUnits } from "../src/money/decimal.ts";
import { MoneyError } from "../src/money/errors.ts";
import { addRecoupable } from "../src/money/operator.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

/**
 * The database states and pays money in each currency's minor units (internal.minor_units: a
 * payout's amount, a statement's balances, an expense); the TypeScript that rounds statements
 * (src/money/decimal.ts minorUnits) must say the same for every currency, or a statement and the
 * payout asked from it would disagree by a fraction of a unit.
 */
const CODES = [
  ...["JPY", "KRW", "ISK", "CLP", "VND", "UGX", "XAF", "XOF", "PYG"],
  ...["BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD"],
  ...["USD", "EUR", "GBP", "BRL", "INR", "CHF", "SEK", "MXN", "ZAR", "AUD", "CAD", "NGN"],
];

describeEachEngine("money: a currency's minor units, the same in SQL and TypeScript", (t) => {
  test("internal.minor_units agrees with minorUnits for every currency either names", async () => {
    const rows = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ code: string; units: number }>(
            "select code, internal.minor_units(code::char(3)) as units from unnest($1::text[]) code",
            [CODES],
          )
        ).rows,
    );
    assert.deepEqual(
      Object.fromEntries(rows.map((r) => [r.code, Number(r.units)])),
      Object.fromEntries(CODES.map((c) => [c, minorUnits(c)])),
    );
  });

  test("an expense finer than its currency's minor unit: 422 from the service, refused by the table", async () => {
    const { db } = t();
    const tenant = await seedTenant(db);
    const account = await seedAccount(db, tenant);
    const expense = (currency: string, amount: string) => ({
      account_id: account.id,
      kind: "expense" as const,
      currency,
      amount,
      description: "Mastering",
    });
    for (const [currency, amount, ok] of [
      ["JPY", "1500", true],
      ["JPY", "1500.5", false],
      ["USD", "12.34", true],
      ["USD", "12.345", false],
      ["KWD", "12.345", true],
    ] as const) {
      const outcome = await addRecoupable(db, tenant.id, expense(currency, amount), "operator").then(
        (r) => r.amount,
        (e: unknown) => (e instanceof MoneyError ? `${e.code} ${e.param}` : e),
      );
      assert.equal(outcome, ok ? amount : "amount_precision amount", `${amount} ${currency}`);
    }
    // Whoever writes: the table's own check holds (23514), not only the service's.
    const direct = await db
      .asService((tx) =>
        tx.query(
          `insert into internal.recoupables (tenant_id, account_id, kind, currency, amount, description)
           values ($1, $2, 'expense', 'USD', 1.005, 'x')`,
          [tenant.id, account.id],
        ),
      )
      .then(
        () => "inserted",
        (e: { code?: string }) => e.code,
      );
    assert.equal(direct, "23514");
  });
});
