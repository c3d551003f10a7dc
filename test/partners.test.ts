import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedAccount, seedStaffUser, userToken } from "./support/seed.ts";

/**
 * Partners of the installation (docs/operator.md, "Partners"): platform admins manage them
 * through /admin/v1/partners over real HTTP, attach the tenants each referred, and a month's
 * statement credits the partner its share of those tenants' distributor fees, exactly. A tenant's
 * admin, its service-role key or a platform operator may not touch them.
 */

type Json = Record<string, unknown>;

describeEachEngine("partners", (t) => {
  let running: RunningApp;
  let a: { tenant: Tenant; keys: TenantKeys };
  let b: { tenant: Tenant; keys: TenantKeys };
  let c: { tenant: Tenant; keys: TenantKeys };
  let platform: { anonKey: string; token: string };
  before(async () => {
    running = await startApp(t());
    a = await tenantWithKeys(t());
    b = await tenantWithKeys(t());
    c = await tenantWithKeys(t());
    const user = await seedStaffUser(t().db, a.tenant, [{ of: "platform", role: "admin" }]);
    platform = {
      anonKey: a.keys.anon_key,
      token: await userToken(t().db, a.tenant, user, `${running.url}/auth/v1`, "aal2"),
    };
  });
  after(() => running.close());

  type Who = { serviceKey: string } | { anonKey: string; token: string };
  async function call(who: Who, method: string, url: string, body?: unknown) {
    const headers: Record<string, string> =
      "serviceKey" in who
        ? { apikey: who.serviceKey }
        : { apikey: who.anonKey, authorization: `Bearer ${who.token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${running.url}/admin/v1${url}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Json };
  }

  /** A balanced allocation in the ledger: `fees` to the distributor, the rest from the store. */
  async function fees(tenant: Tenant, month: string, currency: string, amount: string, sandbox = false) {
    const account = await seedAccount(t().db, tenant, `Label ${randomUUID().slice(0, 6)}`);
    await t().db.asService(async (tx) => {
      if (sandbox)
        await tx.query("update internal.accounts set is_sandbox = true where id = $1", [account.id]);
      const txn = randomUUID();
      await tx.query(
        `insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, currency, amount, period)
         values ($1, $2, 'allocation', 'fees', $3, $4, $5::numeric, $6::date),
                ($1, $2, 'allocation', 'store', $3, $4, -($5::numeric), $6::date)`,
        [tenant.id, txn, account.id, currency, amount, `${month}-01`],
      );
    });
  }

  test("platform admins add, change and remove partners; every field checked; changes audited", async () => {
    const made = await call(platform, "POST", "/partners", {
      name: "North Referrals",
      contact_email: "Pay@North.example",
      revenue_share: "12.50",
    });
    assert.equal(made.status, 201);
    assert.equal(made.body.object, "partner");
    assert.equal(made.body.kind, "reseller");
    assert.equal(made.body.revenue_share, "12.5");
    assert.equal(made.body.contact_email, "pay@north.example");
    assert.deepEqual(made.body.tenants, []);
    const id = made.body.id as string;

    const bad = await call(platform, "POST", "/partners", {
      name: " ",
      kind: "friend",
      contact_email: "nobody",
      revenue_share: 12.5,
    });
    assert.equal(bad.status, 400);
    assert.deepEqual(((bad.body.errors as { param: string }[]) ?? []).map((e) => e.param).sort(), [
      "contact_email",
      "kind",
      "name",
      "revenue_share",
    ]);
    for (const share of ["100.01", "-1", "1.234", "abc"]) {
      const r = await call(platform, "POST", "/partners", { name: "X", revenue_share: share });
      assert.equal(r.status, 400, share);
      assert.equal(r.body.param, "revenue_share", share);
    }
    assert.equal((await call(platform, "PATCH", `/partners/${id}`, {})).status, 400);
    assert.equal((await call(platform, "GET", `/partners/${randomUUID()}`)).status, 404);

    const changed = await call(platform, "PATCH", `/partners/${id}`, { revenue_share: "100", name: "North" });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.revenue_share, "100");
    assert.equal(changed.body.name, "North");
    assert.ok(((await call(platform, "GET", "/partners")).body.data as Json[]).some((p) => p.id === id));

    assert.deepEqual((await call(platform, "DELETE", `/partners/${id}`)).body, {
      id,
      object: "partner",
      deleted: true,
    });
    assert.equal((await call(platform, "GET", `/partners/${id}`)).status, 404);
    const logged = await t().db.asService((tx) =>
      tx.query<{ action: string }>(
        "select action from internal.audit_log where object_table = 'internal.partners' and object_id = $1 order by id",
        [id],
      ),
    );
    assert.deepEqual(
      logged.rows.map((r) => r.action),
      ["insert", "update", "delete"],
    );
  });

  test("nobody but platform admins: a tenant's service key, its admin and a platform operator are refused", async () => {
    const tenantAdmin = await seedStaffUser(t().db, a.tenant, [{ of: a.tenant, role: "admin" }]);
    const operator = await seedStaffUser(t().db, a.tenant, [{ of: "platform", role: "operator" }]);
    const callers: Who[] = [
      { serviceKey: a.keys.service_role_key },
      {
        anonKey: a.keys.anon_key,
        token: await userToken(t().db, a.tenant, tenantAdmin, `${running.url}/auth/v1`, "aal2"),
      },
      {
        anonKey: a.keys.anon_key,
        token: await userToken(t().db, a.tenant, operator, `${running.url}/auth/v1`, "aal2"),
      },
    ];
    for (const who of callers) {
      for (const [method, url, body] of [
        ["GET", "/partners", undefined],
        ["POST", "/partners", { name: "Sneaky", revenue_share: "50" }],
      ] as const) {
        const r = await call(who, method, url, body);
        assert.equal(r.status, 403, `${method} ${url} by ${JSON.stringify(Object.keys(who))}`);
      }
    }
    const rows = await t().db.asService((tx) =>
      tx.query("select 1 from internal.partners where name = 'Sneaky'"),
    );
    assert.equal(rows.rows.length, 0);
  });

  test("by distributor fees: each referred tenant's fees from its month on, the share exact and rounded once", async () => {
    const p = (await call(platform, "POST", "/partners", { name: "Referrer", revenue_share: "12.5" })).body;
    const id = p.id as string;
    // Tenant A from March: 100.005 EUR (two allocations) and 33.33 USD in March; 999 EUR in February
    // (before since); 50 EUR of a sandbox account.
    await fees(a.tenant, "2026-03", "EUR", "60.004");
    await fees(a.tenant, "2026-03", "EUR", "40.001");
    await fees(a.tenant, "2026-03", "USD", "33.33");
    await fees(a.tenant, "2026-02", "EUR", "999");
    await fees(a.tenant, "2026-03", "EUR", "50", true);
    // Tenant B from January: 7 JPY... as 1001 JPY in March; tenant C is not attached: 500 EUR.
    await fees(b.tenant, "2026-03", "JPY", "1001");
    await fees(c.tenant, "2026-03", "EUR", "500");

    const attach = await call(platform, "POST", `/partners/${id}/tenants`, {
      tenant: a.tenant.slug,
      since: "2026-03",
    });
    assert.equal(attach.status, 200);
    assert.deepEqual(attach.body.tenants, [
      { tenant_id: a.tenant.id, slug: a.tenant.slug, name: a.tenant.name, since: "2026-03" },
    ]);
    assert.equal(
      (await call(platform, "POST", `/partners/${id}/tenants`, { tenant: b.tenant.id, since: "2026-01" }))
        .status,
      200,
    );
    assert.equal(
      (await call(platform, "POST", `/partners/${id}/tenants`, { tenant: "no-such-tenant" })).status,
      404,
    );
    assert.equal(
      (await call(platform, "POST", `/partners/${id}/tenants`, { tenant: a.tenant.id, since: "2026-13" }))
        .status,
      400,
    );
    // A tenant has one partner at a time.
    const other = (await call(platform, "POST", "/partners", { name: "Other", revenue_share: "5" })).body;
    const taken = await call(platform, "POST", `/partners/${other.id}/tenants`, { tenant: a.tenant.id });
    assert.equal(taken.status, 409);
    assert.equal(taken.body.code, "tenant_has_partner");

    const march = await call(
      platform,
      "GET",
      `/partners/${id}/statement?month=2026-03&basis=distributor_fees`,
    );
    assert.equal(march.status, 200);
    const lines = march.body.lines as Json[];
    const line = (tenant: Tenant, currency: string) =>
      lines.find((l) => l.tenant_id === tenant.id && l.currency === currency);
    // 100.005 × 12.5% = 12.500625 → 12.50; 33.33 × 12.5% = 4.16625 → 4.17; 1001 × 12.5% = 125.125 → 125 (JPY).
    assert.deepEqual(line(a.tenant, "EUR"), {
      tenant_id: a.tenant.id,
      slug: a.tenant.slug,
      currency: "EUR",
      base: "100.005",
      share: "12.50",
    });
    assert.equal(line(a.tenant, "USD")?.share, "4.17");
    assert.equal(line(b.tenant, "JPY")?.share, "125");
    assert.equal(lines.length, 3, "no sandbox account, no unattached tenant");
    assert.deepEqual(march.body.totals, [
      { currency: "EUR", base: "100.005", share: "12.50" },
      { currency: "JPY", base: "1001", share: "125" },
      { currency: "USD", base: "33.33", share: "4.17" },
    ]);
    assert.equal(march.body.basis, "distributor_fees");
    // These tenants have no invoices: the default basis finds nothing to share.
    const invoiced = await call(platform, "GET", `/partners/${id}/statement?month=2026-03`);
    assert.equal(invoiced.body.basis, "invoices");
    assert.deepEqual(invoiced.body.lines, []);
    assert.equal(
      (await call(platform, "GET", `/partners/${id}/statement?month=2026-03&basis=gross`)).status,
      400,
    );

    // February: A was not yet credited; B has nothing that month.
    const feb = await call(platform, "GET", `/partners/${id}/statement?month=2026-02&basis=distributor_fees`);
    assert.deepEqual(feb.body.lines, []);
    assert.equal((await call(platform, "GET", `/partners/${id}/statement?month=March`)).status, 400);

    // A partner with tenants is not removed; detached, it is.
    assert.equal((await call(platform, "DELETE", `/partners/${id}`)).status, 409);
    assert.equal((await call(platform, "DELETE", `/partners/${id}/tenants/${a.tenant.id}`)).status, 200);
    assert.equal((await call(platform, "DELETE", `/partners/${id}/tenants/${a.tenant.id}`)).status, 404);
    const after = await call(
      platform,
      "GET",
      `/partners/${id}/statement?month=2026-03&basis=distributor_fees`,
    );
    assert.deepEqual(
      (after.body.lines as Json[]).map((l) => l.currency),
      ["JPY"],
    );
  });

  test("by invoices (the default): each referred tenant's invoice of the month, net of tax and credit notes", async () => {
    const d = await tenantWithKeys(t());
    const e = await tenantWithKeys(t());
    const f = await tenantWithKeys(t());
    let seq = 900_000 + Math.floor(Math.random() * 1000) * 10;
    /** An issued invoice of `tenant` for `month`, as the billing run writes one; optionally credited. */
    async function invoice(
      tenant: Tenant,
      month: string,
      currency: string,
      subtotal: string,
      credited?: string,
    ) {
      await t().db.asService(async (tx) => {
        seq += 1;
        const id = (
          await tx.query<{ id: string }>(
            `insert into internal.invoices (tenant_id, seq, number, month, due_on, currency, subtotal, tax_rate, tax, total,
               tax_rule, issuer, customer, plan, usage, lines)
             values ($1, $2::bigint, 'INV-' || $2::text, $3::date, $3::date + 30, $4, $5::numeric, 20, round($5::numeric * 0.2, 2),
               $5::numeric + round($5::numeric * 0.2, 2), 'domestic', '{}', '{}', '{}', '{}', '[]') returning id`,
            [tenant.id, seq, `${month}-01`, currency, subtotal],
          )
        ).rows[0]?.id;
        if (credited) {
          seq += 1;
          await tx.query(
            `insert into internal.credit_notes (tenant_id, invoice_id, seq, number, currency, subtotal, tax_rate, tax, total, reason)
             values ($1, $2, $3::bigint, 'CN-' || $3::text, $4, $5::numeric, 20, round($5::numeric * 0.2, 2),
               $5::numeric + round($5::numeric * 0.2, 2), 'a release billed twice')`,
            [tenant.id, id, seq, currency, credited],
          );
        }
      });
    }
    await invoice(d.tenant, "2026-05", "EUR", "200.00", "20.05");
    await invoice(d.tenant, "2026-04", "EUR", "500.00");
    await invoice(e.tenant, "2026-05", "USD", "99.99");
    await invoice(f.tenant, "2026-05", "EUR", "1000.00");

    const p = (await call(platform, "POST", "/partners", { name: "Invoice referrer", revenue_share: "12.5" }))
      .body;
    const id = p.id as string;
    for (const tenant of [d.tenant, e.tenant]) {
      const r = await call(platform, "POST", `/partners/${id}/tenants`, {
        tenant: tenant.slug,
        since: "2026-05",
      });
      assert.equal(r.status, 200);
    }
    const may = await call(platform, "GET", `/partners/${id}/statement?month=2026-05`);
    assert.equal(may.status, 200);
    assert.equal(may.body.basis, "invoices");
    // (200.00 − 20.05) × 12.5% = 22.49375 → 22.49; 99.99 × 12.5% = 12.49875 → 12.50; tax never counts.
    assert.deepEqual(
      (may.body.lines as Json[]).map((l) => [l.slug, l.currency, l.base, l.share]),
      [
        [d.tenant.slug, "EUR", "179.95", "22.49"],
        [e.tenant.slug, "USD", "99.99", "12.50"],
      ].sort((x, y) => String(x[0]).localeCompare(String(y[0]))),
    );
    assert.deepEqual(may.body.totals, [
      { currency: "EUR", base: "179.95", share: "22.49" },
      { currency: "USD", base: "99.99", share: "12.50" },
    ]);
    // April is before `since`; tenant f (not attached) never counts.
    assert.deepEqual((await call(platform, "GET", `/partners/${id}/statement?month=2026-04`)).body.lines, []);
  });
});
