import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedAccount } from "./support/seed.ts";

/**
 * The operator's money acts through /admin/v1 (src/money/admin.ts) over a real socket: each leaves
 * its row in the audit log (migration 0041, docs/operator.md "The audit log"), with who did it;
 * another tenant's service-role key finds none of this tenant's money; a bad amount is refused
 * with the field at fault and changes nothing.
 */

type Obj = Record<string, unknown>;
interface Answer {
  status: number;
  body: Obj;
}

describeEachEngine("admin API: money acts are audited and stay in their tenant", (t) => {
  let app: RunningApp;
  const teams: { tenant: Tenant; keys: TenantKeys; accountId: string }[] = [];

  before(async () => {
    app = await startApp(t());
    for (let i = 0; i < 2; i++) {
      const { tenant, keys } = await tenantWithKeys(t());
      const account = await seedAccount(t().db, tenant, `Money Label ${i}`);
      teams.push({ tenant, keys, accountId: account.id });
    }
  });
  after(async () => {
    await app?.close();
  });

  const call = async (key: string, method: string, path: string, body?: unknown): Promise<Answer> => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { apikey: key, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Obj };
  };
  const rows = <T = Obj>(sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<T & Obj>(sql, params)).rows as T[]);
  const auditOf = (tenantId: string, table: string) =>
    rows<{
      actor_type: string;
      action: string;
      object_id: string | null;
      after: Obj | null;
      before: Obj | null;
    }>(
      `select actor_type, action, object_id, after, before from internal.audit_log
       where tenant_id = $1 and object_table = $2 order by id`,
      [tenantId, table],
    );

  test("each act of the operator's leaves an audit row naming who did it and what they set", async () => {
    const [a] = teams;
    assert.ok(a);
    const key = a.keys.service_role_key;
    const month = new Date().toISOString().slice(0, 7);
    const expect = async (r: Promise<Answer>, status: number) => {
      const answer = await r;
      assert.equal(answer.status, status, JSON.stringify(answer.body));
      return answer.body;
    };
    await expect(call(key, "PATCH", "/money/settings", { payout_threshold: "25.00" }), 200);
    await expect(call(key, "POST", "/money/fees", { account_id: a.accountId, rate: "12.5" }), 200);
    await expect(
      call(key, "POST", "/money/exchange-rates", { period: month, from: "EUR", to: "USD", rate: "1.0825" }),
      200,
    );
    const advance = await expect(
      call(key, "POST", "/money/recoupables", {
        account_id: a.accountId,
        kind: "advance",
        currency: "USD",
        amount: "500.00",
        description: "Album advance",
      }),
      201,
    );
    await expect(call(key, "POST", `/money/periods/${month}/approve`, {}), 200);

    const settings = await auditOf(a.tenant.id, "internal.money_settings");
    assert.equal(settings.length, 1, JSON.stringify(settings));
    assert.notEqual(settings[0]?.actor_type, "system");
    assert.equal(Number(settings[0]?.after?.payout_threshold), 25);
    const fees = await auditOf(a.tenant.id, "internal.distribution_fees");
    assert.equal(fees.at(-1)?.action, "insert");
    assert.equal(Number(fees.at(-1)?.after?.rate), 12.5);
    const rates = await auditOf(a.tenant.id, "internal.exchange_rates");
    assert.equal(rates.at(-1)?.after?.rate, 1.0825);
    const recoupables = await auditOf(a.tenant.id, "internal.recoupables");
    assert.equal(recoupables.at(-1)?.object_id, advance.id);
    assert.equal(recoupables.at(-1)?.after?.amount, 500);
    const periods = await auditOf(a.tenant.id, "internal.money_periods");
    assert.deepEqual(periods.at(-1)?.after?.status, "approved");
    assert.deepEqual(periods.at(-1)?.before?.status, "open");
    for (const row of [...fees, ...rates, ...recoupables, ...periods])
      assert.notEqual(row.actor_type, "system");
  });

  test("a payee's tax review and erasure are named acts that carry no personal data", async () => {
    const [a] = teams;
    assert.ok(a);
    const key = a.keys.service_role_key;
    const [payee] = await rows<{ id: string }>(
      `insert into internal.payees (tenant_id, account_id, kind, email, name, currency, tax_form, tax_status, tax_name, tax_id_last4)
       values ($1, $2, 'person', 'erase.me@example.com', 'Erase Me', 'USD', 'W-8BEN', 'pending', 'Erase Me Ltd', '6789')
       returning id`,
      [a.tenant.id, a.accountId],
    );
    assert.ok(payee);
    const reviewed = await call(key, "POST", `/money/payees/${payee.id}/tax-review`, { status: "verified" });
    assert.equal(reviewed.status, 200, JSON.stringify(reviewed.body));
    const erased = await call(key, "POST", `/money/payees/${payee.id}/erase`, {});
    assert.equal(erased.status, 200, JSON.stringify(erased.body));
    const acts = await rows<{ action: string; actor_type: string; after: Obj | null; text: string }>(
      `select action, actor_type, after, row_to_json(l)::text as text from internal.audit_log l
       where tenant_id = $1 and object_table = 'internal.payees' and object_id = $2 order by id`,
      [a.tenant.id, payee.id],
    );
    assert.deepEqual(
      acts.map((x) => x.action),
      ["money.tax_review", "money.payee_erased"],
    );
    assert.deepEqual(acts[0]?.after, { tax_form: "W-8BEN", tax_status: "verified", withholding_rate: 30 });
    for (const act of acts) {
      assert.notEqual(act.actor_type, "system");
      for (const personal of ["erase.me@example.com", "Erase Me", "6789"])
        assert.equal(act.text.includes(personal), false, `${act.action} holds ${personal}`);
    }
  });

  test("another tenant's service-role key finds none of this tenant's money, and changes none of it", async () => {
    const [a, b] = teams;
    assert.ok(a && b);
    const [payee] = await rows<{ id: string }>(
      `insert into internal.payees (tenant_id, account_id, kind, email, currency, tax_form, tax_status)
       values ($1, $2, 'person', 'kept@example.com', 'USD', 'W-9', 'pending') returning id`,
      [a.tenant.id, a.accountId],
    );
    assert.ok(payee);
    const other = b.keys.service_role_key;
    const listed = await call(other, "GET", "/money/payees");
    assert.equal(listed.status, 200);
    assert.equal(JSON.stringify(listed.body).includes(payee.id), false);
    for (const [method, path, body] of [
      ["POST", `/money/payees/${payee.id}/tax-review`, { status: "verified" }],
      ["POST", `/money/payees/${payee.id}/erase`, {}],
      [
        "POST",
        "/money/recoupables",
        { account_id: a.accountId, kind: "expense", currency: "USD", amount: "5.00", description: "x" },
      ],
      ["POST", "/money/fees", { account_id: a.accountId, rate: "99" }],
    ] as const) {
      const r = await call(other, method, path, body);
      assert.equal(r.status, 404, `${method} ${path}: ${JSON.stringify(r.body)}`);
    }
    const [kept] = await rows<{ tax_status: string; email: string | null }>(
      "select tax_status, email from internal.payees where id = $1",
      [payee.id],
    );
    assert.deepEqual(kept, { tax_status: "pending", email: "kept@example.com" });
    assert.equal(
      (
        await rows("select 1 from internal.recoupables where account_id = $1 and kind = 'expense'", [
          a.accountId,
        ])
      ).length,
      0,
    );
    assert.equal(
      (
        await rows("select 1 from internal.distribution_fees where account_id = $1 and rate = 99", [
          a.accountId,
        ])
      ).length,
      0,
    );
  });

  test("an amount finer than its currency's minor unit is refused with the field at fault, and nothing is recorded", async () => {
    const [a] = teams;
    assert.ok(a);
    const before = (await rows("select 1 from internal.recoupables where account_id = $1", [a.accountId]))
      .length;
    const r = await call(a.keys.service_role_key, "POST", "/money/recoupables", {
      account_id: a.accountId,
      kind: "expense",
      currency: "JPY",
      amount: "10.5",
      description: "Mastering",
    });
    assert.equal(r.status, 422, JSON.stringify(r.body));
    assert.equal(r.body.param ?? (r.body.errors as Obj[] | undefined)?.[0]?.param, "amount");
    assert.equal(
      (await rows("select 1 from internal.recoupables where account_id = $1", [a.accountId])).length,
      before,
    );
  });
});
