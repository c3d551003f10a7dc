import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { issueInvoice, parseCsv, previousMonth } from "../src/billing/invoices.ts";
import { INVOICE_JOB_KIND, invoiceHandlers, nextInvoiceRun } from "../src/billing/jobs.ts";
import type { Db } from "../src/db/db.ts";
import { add, compare, sum } from "../src/money/decimal.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedRelease } from "./support/ddex.ts";
import { seedAccount, seedStaffUser, userToken } from "./support/seed.ts";

/**
 * Plans and invoices for white-label tenants (migration 0050; docs/operator.md "Plans and
 * invoices"), over real HTTP on /admin/v1: platform staff set the issuer, make plans and give
 * them to tenants; a month's usage is metered from the tenant's records (and API calls from the
 * durable per-day counters); invoices are issued with gapless numbers even when issued at once,
 * carry the right tax rule (domestic, EU reverse charge, EU consumer, outside the EU), add up to
 * the cent with the rounding rule, come as PDF and CSV, take payments (by hand and from Stripe's
 * charges export), and show what is overdue; a tenant's admin sees only its own and cannot make
 * plans, issue or record anything.
 */

type Json = Record<string, unknown>;
type Invoice = Json & {
  id: string;
  number: string;
  subtotal: string;
  tax: string;
  total: string;
  tax_rate: string;
  tax_rule: string;
  tax_note: string;
  status: string;
  balance: string;
  lines: { description: string; quantity: string; amount: string; unit_price: string }[];
};

const MONTH = "2026-10";

describeEachEngine("white-label plans and invoices", (t) => {
  let app: RunningApp;
  const db = (): Db => t().db;
  const sql = async <T = Json>(text: string, params: unknown[] = []): Promise<T[]> =>
    db().asService(async (tx) => (await tx.query<T & Json>(text, params)).rows);

  let home: { tenant: Tenant; keys: TenantKeys };
  const customers: Record<"fr" | "de" | "us" | "at" | "none", { tenant: Tenant; keys: TenantKeys }> =
    {} as never;
  let platform = "";
  let adminFr = "";
  let adminDe = "";
  let growthId = "";
  let tinyId = "";

  /** Calls /admin/v1 as `who`: a staff token of the home tenant, or a tenant's service key. */
  async function call(
    who: { token: string; anon: string } | { key: string },
    method: string,
    path: string,
    options: { body?: unknown; tenant?: Tenant } = {},
  ): Promise<{ status: number; body: Json & { data?: Json[] }; text: string; raw: Buffer; type: string }> {
    const headers: Record<string, string> =
      "key" in who ? { apikey: who.key } : { apikey: who.anon, authorization: `Bearer ${who.token}` };
    if (options.tenant) headers["backline-tenant"] = options.tenant.id;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const raw = Buffer.from(await res.arrayBuffer());
    const text = raw.toString("utf8");
    const type = res.headers.get("content-type") ?? "";
    return { status: res.status, body: type.includes("json") ? JSON.parse(text) : {}, text, raw, type };
  }
  const asPlatform = (method: string, path: string, options: { body?: unknown; tenant?: Tenant } = {}) =>
    call({ token: platform, anon: home.keys.anon_key }, method, path, options);
  const asAdminOf = (which: "fr" | "de") => (method: string, path: string, body?: unknown) =>
    call(
      { token: which === "fr" ? adminFr : adminDe, anon: customers[which].keys.anon_key },
      method,
      path,
      body === undefined ? {} : { body },
    );

  before(async () => {
    app = await startApp(t());
    home = await tenantWithKeys(t());
    for (const k of ["fr", "de", "us", "at", "none"] as const) customers[k] = await tenantWithKeys(t());
    const issuer = `${app.url}/auth/v1`;
    const platformUser = await seedStaffUser(db(), home.tenant, [{ of: "platform", role: "admin" }]);
    platform = await userToken(db(), home.tenant, platformUser, issuer, "aal2");
    const fr = await seedStaffUser(db(), customers.fr.tenant, [{ of: customers.fr.tenant, role: "admin" }]);
    adminFr = await userToken(db(), customers.fr.tenant, fr, issuer, "aal2");
    const de = await seedStaffUser(db(), customers.de.tenant, [{ of: customers.de.tenant, role: "admin" }]);
    adminDe = await userToken(db(), customers.de.tenant, de, issuer, "aal2");

    // The FR tenant's October: 3 accounts (a sandbox one and one made in November left out), 2
    // releases delivered (one of them to two stores; a takedown and a September delivery left
    // out), 5 tracks, 2.2 GB stored (3 started GB), 12,345 API calls.
    const tenant = customers.fr.tenant;
    const accounts = [];
    for (let i = 0; i < 3; i++) accounts.push(await seedAccount(db(), tenant, `Label ${i}`));
    const sandbox = await seedAccount(db(), tenant, "Sandbox");
    const late = await seedAccount(db(), tenant, "Late");
    await sql("update internal.accounts set is_sandbox = true where id = $1", [sandbox.id]);
    await sql("update internal.accounts set created_at = '2026-10-05T10:00:00Z' where tenant_id = $1", [
      tenant.id,
    ]);
    await sql("update internal.accounts set created_at = '2026-11-02T10:00:00Z' where id = $1", [late.id]);
    const [a0, a1] = accounts;
    const track = (n: number) => ({
      title: `T${n}`,
      isrc: `QZBIL26000${n}${n}`,
      duration: 200,
      track_number: n,
    });
    const r1 = await seedRelease(db(), a0?.id ?? "", { title: "One" }, [track(1), track(2)]);
    const r2 = await seedRelease(db(), a0?.id ?? "", { title: "Two" }, [track(3)]);
    const r3 = await seedRelease(db(), a1?.id ?? "", { title: "Three" }, [track(4), track(5)]);
    await seedRelease(db(), late.id, { title: "Late" }, [track(6)]);
    await seedRelease(db(), sandbox.id, { title: "Sandboxed" }, [track(7)]);
    await sql(
      "update public.tracks set created_at = '2026-10-06T00:00:00Z' where account_id = any($1::uuid[])",
      [accounts.map((a) => a.id)],
    );
    await sql(
      "insert into internal.stores (code, name, sort, settings) values ('billtest', 'Bill test', 1000, '{}'), ('billtest2', 'Bill test 2', 1001, '{}') on conflict do nothing",
    );
    const deliver = (release: string, account: string, store: string, at: string, action = "insert") =>
      sql(
        `insert into internal.release_deliveries (release_id, account_id, tenant_id, store, action, status, delivered_at, taken_down_at, confirmed_by, confirmed_via)
         values ($1, $2, $3, $4, $5, $6, $7::timestamptz, $8::timestamptz, $9, $10)`,
        [
          release,
          account,
          tenant.id,
          store,
          action,
          action === "takedown" ? "taken_down" : "live",
          at,
          action === "takedown" ? at : null,
          action === "takedown" ? "store" : null,
          action === "takedown" ? "manual" : null,
        ],
      );
    await deliver(r1.id, a0?.id ?? "", "billtest", "2026-10-10T12:00:00Z");
    await deliver(r1.id, a0?.id ?? "", "billtest2", "2026-10-31T23:59:59Z");
    await deliver(r3.id, a1?.id ?? "", "billtest", "2026-10-01T00:00:00Z");
    await deliver(r2.id, a0?.id ?? "", "billtest", "2026-09-30T23:59:59Z");
    await deliver(r2.id, a0?.id ?? "", "billtest2", "2026-11-01T00:00:00Z");
    await sql("insert into storage.buckets (tenant_id, id) values ($1, 'files')", [tenant.id]);
    for (const [name, size, at] of [
      ["a.bin", "1500000000", "2026-10-03T00:00:00Z"],
      ["b.bin", "700000000", "2026-10-20T00:00:00Z"],
      ["c.bin", "999000000", "2026-11-03T00:00:00Z"],
    ] as const) {
      await sql(
        `insert into storage.objects (tenant_id, bucket_id, name, object_key, metadata, created_at)
         values ($1::uuid, 'files', $2, 'objects/' || $1::text || '/' || gen_random_uuid(), jsonb_build_object('size', $3::bigint), $4::timestamptz)`,
        [tenant.id, name, size, at],
      );
    }
    await sql(
      `insert into internal.tenant_api_calls (tenant_id, day, calls) values
         ($1, '2026-09-30', 999), ($1, '2026-10-01', 10000), ($1, '2026-10-31', 2345), ($1, '2026-11-01', 777)`,
      [tenant.id],
    );
  });
  after(async () => {
    await app?.close();
  });

  describe("plans and the issuer", () => {
    test("a tenant's admin and its service key cannot set the issuer or make plans; nothing is made", async () => {
      const fr = asAdminOf("fr");
      const plan = { name: "Sneaky", currency: "EUR", monthly_fee: "1.00" };
      let res = await fr("POST", "/billing/plans", plan);
      assert.equal(res.status, 403);
      assert.equal(res.body.code, "insufficient_role");
      res = await call({ key: customers.fr.keys.service_role_key }, "POST", "/billing/plans", { body: plan });
      assert.equal(res.status, 403);
      res = await fr("POST", "/billing/issuer", { legal_name: "X", address: "Y", country: "FR" });
      assert.equal(res.status, 403);
      res = await fr("GET", "/billing/plans");
      assert.equal(res.status, 403);
      assert.deepEqual(await sql("select id from internal.billing_plans"), []);
      assert.deepEqual(await sql("select id from internal.billing_issuer"), []);
    });

    test("issuing before the issuer and a plan are set is refused with what is missing", async () => {
      const res = await asPlatform("POST", "/invoices", {
        body: { month: MONTH },
        tenant: customers.fr.tenant,
      });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, "issuer_missing");
    });

    test("platform staff set the issuer and make plans; a bad plan lists every failing field", async () => {
      let res = await asPlatform("POST", "/billing/issuer", {
        body: {
          legal_name: "Backline Distribution GmbH",
          address: "Musterstrasse 1, 10115 Berlin",
          country: "DE",
          vat_id: "DE999999999",
          email: "billing@backline.test",
          invoice_prefix: "BL-",
          payment_terms_days: 14,
          bank_details: "IBAN DE00 1234 5678 9012 3456 78",
        },
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.country, "DE");
      res = await asPlatform("POST", "/billing/plans", {
        body: { name: "Bad", currency: "eur", monthly_fee: "1.234", included_accounts: -1 },
      });
      assert.equal(res.status, 400);
      assert.equal(res.body.code, "invalid_request");
      const params = ((res.body.errors as { param: string }[]) ?? []).map((e) => e.param).sort();
      assert.deepEqual(params, ["currency", "included_accounts", "monthly_fee"]);
      res = await asPlatform("POST", "/billing/plans", {
        body: {
          name: "Growth",
          currency: "EUR",
          monthly_fee: "99.00",
          included_accounts: 2,
          included_releases: 1,
          included_tracks: 3,
          included_storage_gb: 1,
          included_api_calls: 10000,
          price_per_account: "4.99",
          price_per_release: "1.25",
          price_per_track: "0.10",
          price_per_storage_gb: "0.3333",
          price_per_1000_api_calls: "0.0375",
        },
      });
      assert.equal(res.status, 201, res.text);
      growthId = res.body.id as string;
      assert.equal(res.body.price_per_storage_gb, "0.3333");
      res = await asPlatform("POST", "/billing/plans", {
        body: { name: "Tiny", currency: "EUR", monthly_fee: "7.50" },
      });
      assert.equal(res.status, 201);
      tinyId = res.body.id as string;
      res = await asPlatform("POST", "/billing/plans", {
        body: { name: "Tiny", currency: "EUR", monthly_fee: "1.00" },
      });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, "plan_exists");
      res = await asPlatform("POST", "/billing/plans", {
        body: { name: "Dinar", currency: "KWD", monthly_fee: "1.00" },
      });
      assert.equal(res.status, 422);
      assert.equal(res.body.code, "unsupported_currency");
      res = await asPlatform("GET", "/billing/plans");
      assert.deepEqual(
        (res.body.data ?? []).map((p) => p.name),
        ["Growth", "Tiny"],
      );
    });

    test("platform staff give tenants plans; a tenant's admin reads its own and cannot change it", async () => {
      const give = (k: keyof typeof customers, plan: string, country: string, vat_id: string | null) =>
        asPlatform("POST", "/billing/tenant", {
          body: {
            plan_id: plan,
            legal_name: `Customer ${k}`,
            address: `Street 1, ${country}`,
            country,
            vat_id,
          },
          tenant: customers[k].tenant,
        });
      assert.equal((await give("fr", growthId, "FR", "FR12345678901")).status, 200);
      assert.equal((await give("de", tinyId, "DE", "DE123456789")).status, 200);
      assert.equal((await give("us", growthId, "US", null)).status, 200);
      assert.equal((await give("at", growthId, "AT", null)).status, 200);
      const unknown = await asPlatform("POST", "/billing/tenant", {
        body: {
          plan_id: "00000000-0000-4000-8000-000000000000",
          legal_name: "X",
          address: "Y",
          country: "FR",
        },
        tenant: customers.none.tenant,
      });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.param, "plan_id");

      const mine = await asAdminOf("fr")("GET", "/billing/tenant");
      assert.equal(mine.status, 200);
      assert.equal((mine.body.plan as Json).name, "Growth");
      assert.equal((mine.body.customer as Json).vat_id, "FR12345678901");
      const change = await asAdminOf("fr")("POST", "/billing/tenant", {
        plan_id: tinyId,
        legal_name: "X",
        address: "Y",
        country: "FR",
      });
      assert.equal(change.status, 403);
      assert.equal(
        (
          await sql<{ plan_id: string }>(
            "select plan_id::text as plan_id from internal.tenant_billing where tenant_id = $1",
            [customers.fr.tenant.id],
          )
        )[0]?.plan_id,
        growthId,
      );
    });
  });

  describe("metering", () => {
    test("a month's usage is the tenant's own records of that month", async () => {
      const res = await asAdminOf("fr")("GET", `/billing/usage?month=${MONTH}`);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.usage, {
        month: MONTH,
        accounts: 3,
        releases_delivered: 2,
        tracks: 5,
        storage_bytes: 2200000000,
        api_calls: 12345,
      });
      assert.equal(res.body.subtotal, "106.22");
      const bad = await asAdminOf("fr")("GET", "/billing/usage?month=2026-13");
      assert.equal(bad.status, 400);
      assert.equal((bad.body.errors as { param: string }[])[0]?.param, "month");
    });

    test("API calls are counted per tenant and day, durably: a closed server has written them", async () => {
      const other = await startApp(t());
      let closed = false;
      try {
        const tenant = customers.us.tenant;
        const before = await sql<{ calls: string }>(
          "select coalesce(sum(calls), 0)::text as calls from internal.tenant_api_calls where tenant_id = $1 and day = (now() at time zone 'UTC')::date",
          [tenant.id],
        );
        for (let i = 0; i < 4; i++) {
          const ok = await fetch(`${other.url}/rest/v1/releases?select=id`, {
            headers: {
              apikey: customers.us.keys.service_role_key,
              authorization: `Bearer ${customers.us.keys.service_role_key}`,
            },
          });
          assert.equal(ok.status, 200, await ok.text());
        }
        // Refused requests are not counted: a bad key, and a route that is not found.
        const bad = await fetch(`${other.url}/rest/v1/releases?select=id`, {
          headers: { apikey: `${customers.us.keys.service_role_key}x` },
        });
        assert.equal(bad.status, 401);
        const missing = await fetch(`${other.url}/rest/v1/no_such_table`, {
          headers: {
            apikey: customers.us.keys.service_role_key,
            authorization: `Bearer ${customers.us.keys.service_role_key}`,
          },
        });
        assert.ok(missing.status >= 400);
        await other.close();
        closed = true;
        const after = await sql<{ calls: string }>(
          "select coalesce(sum(calls), 0)::text as calls from internal.tenant_api_calls where tenant_id = $1 and day = (now() at time zone 'UTC')::date",
          [tenant.id],
        );
        assert.equal(Number(after[0]?.calls) - Number(before[0]?.calls), 4);
      } finally {
        if (!closed) await other.close();
      }
    });
  });

  describe("issuing", () => {
    const invoices: Record<string, Invoice> = {};

    test("a tenant's admin cannot issue, and a month that is not over or a tenant without a plan is refused", async () => {
      let res = await asAdminOf("fr")("POST", "/invoices", { month: MONTH });
      assert.equal(res.status, 403);
      res = await asPlatform("POST", "/invoices", {
        body: { month: "2099-01" },
        tenant: customers.fr.tenant,
      });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, "month_not_over");
      res = await asPlatform("POST", "/invoices", { body: { month: MONTH }, tenant: customers.none.tenant });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, "no_plan");
      assert.deepEqual(await sql("select id from internal.invoices"), []);
      assert.deepEqual(
        await sql("select last_number::text as n from internal.invoice_counters where series = 'invoice'"),
        [{ n: "0" }],
      );
    });

    test("issued at once, numbers are sequential without gaps; a month is invoiced once", async () => {
      const keys = ["fr", "de", "us", "at"] as const;
      // Each tenant twice at the same moment, and the tenant without a plan among them.
      const results = await Promise.all([
        ...keys.flatMap((k) =>
          [0, 1].map(() =>
            asPlatform("POST", "/invoices", { body: { month: MONTH }, tenant: customers[k].tenant }),
          ),
        ),
        asPlatform("POST", "/invoices", { body: { month: MONTH }, tenant: customers.none.tenant }),
      ]);
      const created = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status === 409);
      assert.equal(created.length, 4, results.map((r) => r.text).join("\n"));
      assert.equal(refused.length, 5);
      assert.deepEqual(refused.map((r) => r.body.code).sort(), [
        "invoice_exists",
        "invoice_exists",
        "invoice_exists",
        "invoice_exists",
        "no_plan",
      ]);
      const numbers = created.map((r) => r.body.number as string).sort();
      assert.deepEqual(numbers, ["BL-000001", "BL-000002", "BL-000003", "BL-000004"]);
      assert.deepEqual(
        await sql("select last_number::text as n from internal.invoice_counters where series = 'invoice'"),
        [{ n: "4" }],
      );
      for (const r of created) {
        const k = keys.find((key) => customers[key].tenant.id === r.body.tenant_id);
        if (k) invoices[k] = r.body as Invoice;
      }
      const again = await asPlatform("POST", "/invoices", {
        body: { month: MONTH },
        tenant: customers.fr.tenant,
      });
      assert.equal(again.status, 409);
      assert.match(String(again.body.detail), /BL-00000\d/);
    });

    test("an EU customer with a VAT id in another member state: reverse charge, totals exact to the cent", () => {
      const inv = invoices.fr as Invoice;
      assert.equal(inv.tax_rule, "eu_reverse_charge");
      assert.equal(inv.tax_rate, "0.00");
      assert.equal(inv.tax, "0.00");
      assert.match(inv.tax_note, /Reverse charge/);
      assert.match(inv.tax_note, /FR12345678901/);
      assert.deepEqual(
        inv.lines.map((l) => [l.quantity, l.amount]),
        [
          ["1", "99.00"], // the plan
          ["1", "4.99"], // 3 accounts, 2 included
          ["1", "1.25"], // 2 releases, 1 included
          ["2", "0.20"], // 5 tracks, 3 included
          ["2", "0.67"], // 3 started GB, 1 included: 2 x 0.3333 = 0.6666
          ["3", "0.11"], // 2,345 calls past 10,000: 3 started thousands x 0.0375 = 0.1125
        ],
      );
      assert.equal(inv.subtotal, "106.22");
      assert.equal(inv.total, "106.22");
      assert.equal(compare(sum(inv.lines.map((l) => l.amount)), inv.subtotal), 0);
    });

    test("a customer in the issuer's country: domestic VAT, rounded half up once on the subtotal", () => {
      const inv = invoices.de as Invoice;
      assert.equal(inv.tax_rule, "domestic");
      assert.equal(inv.tax_rate, "19.00");
      // 7.50 x 19% = 1.425: 1.43 (half away from zero; a float 7.5 * 0.19 is 1.4249999… and rounds to 1.42).
      assert.equal(inv.subtotal, "7.50");
      assert.equal(inv.tax, "1.43");
      assert.equal(inv.total, "8.93");
    });

    test("outside the EU: no VAT; an EU consumer without a VAT id: their member state's rate", () => {
      const us = invoices.us as Invoice;
      assert.equal(us.tax_rule, "outside_eu");
      assert.equal(us.tax, "0.00");
      assert.equal(us.total, "99.00");
      assert.match(us.tax_note, /Outside the scope/);
      const at = invoices.at as Invoice;
      assert.equal(at.tax_rule, "eu_consumer");
      assert.equal(at.tax_rate, "20.00");
      assert.equal(at.tax, "19.80");
      assert.equal(at.total, "118.80");
    });

    test("an issued invoice never changes: the database refuses an update or a delete", async () => {
      for (const q of ["update internal.invoices set total = 0", "delete from internal.invoices"]) {
        await assert.rejects(
          sql(q),
          (e: Error & { code?: string }) => e.code === "55000" || /never changes/.test(e.message),
        );
      }
      assert.equal((await sql("select id from internal.invoices")).length, 4);
    });

    test("the PDF and the CSV: a PDF document, and CSV rows that add up to the totals", async () => {
      const inv = invoices.fr as Invoice;
      const pdf = await asAdminOf("fr")("GET", `/invoices/${inv.id}?format=pdf`);
      assert.equal(pdf.status, 200);
      assert.equal(pdf.type, "application/pdf");
      assert.equal(pdf.raw.subarray(0, 5).toString("latin1"), "%PDF-");
      assert.match(pdf.raw.subarray(-8).toString("latin1"), /%%EOF\s*$/);
      assert.ok(pdf.raw.toString("latin1").includes(`(Invoice ${inv.number})`));
      const csv = await asAdminOf("fr")("GET", `/invoices/${inv.id}?format=csv`);
      assert.equal(csv.status, 200);
      assert.match(csv.type, /^text\/csv/);
      const rows = parseCsv(csv.text);
      assert.deepEqual(rows[0], [
        "invoice_number",
        "row_type",
        "description",
        "quantity",
        "unit",
        "unit_price",
        "amount",
        "currency",
      ]);
      const of = (type: string) => rows.filter((r) => r[1] === type).map((r) => r[6] ?? "");
      assert.equal(of("line").length, inv.lines.length);
      assert.equal(compare(sum(of("line")), of("subtotal")[0] ?? ""), 0);
      assert.equal(compare(add(of("subtotal")[0] ?? "", of("tax")[0] ?? ""), of("total")[0] ?? ""), 0);
      assert.equal(of("total")[0], "106.22");
      const de = await asAdminOf("de")("GET", `/invoices/${invoices.de?.id}?format=csv`);
      const deRows = parseCsv(de.text);
      assert.deepEqual(
        deRows.slice(1).map((r) => [r[1], r[6]]),
        [
          ["line", "7.50"],
          ["subtotal", "7.50"],
          ["tax", "1.43"],
          ["total", "8.93"],
        ],
      );
    });

    test("a tenant's admin sees only its own invoices; every tenant's are platform staff's", async () => {
      const mine = await asAdminOf("fr")("GET", "/invoices");
      assert.equal(mine.status, 200);
      assert.deepEqual(
        (mine.body.data ?? []).map((i) => i.number),
        [invoices.fr?.number],
      );
      const key = await call({ key: customers.fr.keys.service_role_key }, "GET", "/invoices");
      assert.deepEqual(
        (key.body.data ?? []).map((i) => i.number),
        [invoices.fr?.number],
      );
      const theirs = await asAdminOf("fr")("GET", `/invoices/${invoices.de?.id}`);
      assert.equal(theirs.status, 404);
      assert.equal((await asAdminOf("fr")("GET", `/invoices/${invoices.de?.id}?format=pdf`)).status, 404);
      assert.equal((await asAdminOf("fr")("GET", `/invoices/${invoices.de?.id}/payments`)).status, 404);
      const all = await asAdminOf("fr")("GET", "/invoices?all=true");
      assert.equal(all.status, 403);
      // Another tenant named in Backline-Tenant: not staff there.
      const named = await call({ token: adminFr, anon: customers.fr.keys.anon_key }, "GET", "/invoices", {
        tenant: customers.de.tenant,
      });
      assert.equal(named.status, 403);
      const every = await asPlatform("GET", "/invoices?all=true");
      assert.equal((every.body.data ?? []).length, 4);
    });
  });

  describe("payments", () => {
    let fr: Invoice;
    before(async () => {
      const res = await asPlatform("GET", "/invoices?all=true");
      fr = (res.body.data ?? []).find((i) => i.tenant_id === customers.fr.tenant.id) as Invoice;
    });

    test("platform staff record a payment by hand; more than is due is refused; a tenant's admin cannot record", async () => {
      let res = await asAdminOf("fr")("POST", `/invoices/${fr.id}/payments`, { amount: "1.00" });
      assert.equal(res.status, 403);
      res = await asPlatform("POST", `/invoices/${fr.id}/payments`, {
        body: { amount: "50.00", external_ref: "BANK-1", paid_at: "2026-11-05T09:00:00Z" },
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.amount, "50.00");
      assert.equal(res.body.paid_at, "2026-11-05T09:00:00.000Z");
      res = await asPlatform("POST", `/invoices/${fr.id}/payments`, { body: { amount: "56.23" } });
      assert.equal(res.status, 422);
      assert.equal(res.body.code, "amount_exceeds_balance");
      res = await asPlatform("POST", `/invoices/${fr.id}/payments`, {
        body: { amount: "1.00", external_ref: "BANK-1" },
      });
      assert.equal(res.status, 409);
      res = await asPlatform("POST", `/invoices/${fr.id}/payments`, {
        body: { amount: "1.00", currency: "USD" },
      });
      assert.equal(res.status, 422);
      assert.equal(res.body.code, "currency_mismatch");
      res = await asPlatform("POST", `/invoices/${fr.id}/payments`, { body: { amount: "0.00" } });
      assert.equal(res.status, 400);
      const now = await asAdminOf("fr")("GET", `/invoices/${fr.id}`);
      assert.equal(now.body.paid, "50.00");
      assert.equal(now.body.balance, "56.22");
      assert.equal(now.body.status, "open");
    });

    test("Stripe's charges export: a paid charge naming the invoice is recorded once; the others are said why not", async () => {
      const csv = [
        "id,Description,Created date (UTC),Amount,Amount Refunded,Currency,Captured,Status,invoice_number (metadata)",
        `ch_1,"Backline invoice ${fr.number}",2026-11-20 10:11:12,56.22,0.00,eur,true,Paid,`,
        "ch_2,Something else,2026-11-20 10:11:12,10.00,0.00,eur,true,Paid,",
        `ch_3,Card declined,2026-11-20 10:11:12,56.22,0.00,eur,false,Failed,${fr.number}`,
      ].join("\r\n");
      const res = await asPlatform("POST", "/invoice-payments/import", {
        body: { format: "stripe_charges_csv", csv },
      });
      assert.equal(res.status, 200, res.text);
      const imported = res.body.imported as Json[];
      assert.equal(imported.length, 1);
      assert.equal(imported[0]?.external_ref, "ch_1");
      assert.equal(imported[0]?.amount, "56.22");
      assert.equal(imported[0]?.paid_at, "2026-11-20T10:11:12.000Z");
      assert.deepEqual(res.body.skipped, [
        { row: 3, reason: "names no invoice number" },
        { row: 4, reason: "status failed" },
      ]);
      const again = await asPlatform("POST", "/invoice-payments/import", {
        body: { format: "stripe_charges_csv", csv },
      });
      assert.equal((again.body.imported as Json[]).length, 0);
      assert.equal(again.body.duplicates, 1);
      const paid = await asAdminOf("fr")("GET", `/invoices/${fr.id}`);
      assert.equal(paid.body.status, "paid");
      assert.equal(paid.body.balance, "0.00");
      const payments = await asAdminOf("fr")("GET", `/invoices/${fr.id}/payments`);
      assert.deepEqual((payments.body.data ?? []).map((p) => p.amount).sort(), ["50.00", "56.22"]);
      const notCsv = await asPlatform("POST", "/invoice-payments/import", {
        body: { format: "stripe_charges_csv", csv: "a,b\n1,2" },
      });
      assert.equal(notCsv.status, 422);
      assert.equal(notCsv.body.code, "invalid_export");
    });

    test("what is past due and not paid in full is overdue", async () => {
      // September's invoice, issued 40 days ago with 14 days to pay.
      const issuedAt = new Date(Date.now() - 40 * 86_400_000);
      const late = await issueInvoice(db(), customers.us.tenant.id, "2026-09", { now: issuedAt });
      assert.equal(late.status, "overdue");
      const overdue = await asPlatform("GET", "/invoices?all=true&status=overdue");
      assert.deepEqual(
        (overdue.body.data ?? []).map((i) => i.number),
        [late.number],
      );
      const open = await asPlatform("GET", "/invoices?all=true&status=open");
      assert.ok((open.body.data ?? []).some((i) => i.number === late.number));
      assert.ok(!(open.body.data ?? []).some((i) => i.id === fr.id));
      const paid = await asPlatform("GET", "/invoices?all=true&status=paid");
      assert.deepEqual(
        (paid.body.data ?? []).map((i) => i.id),
        [fr.id],
      );
      const pay = await asPlatform("POST", `/invoices/${late.id}/payments`, { body: { amount: late.total } });
      assert.equal(pay.status, 201);
      const none = await asPlatform("GET", "/invoices?all=true&status=overdue");
      assert.deepEqual(none.body.data, []);
      // The numbers stay gapless across every way of issuing.
      const seqs = (
        await sql<{ seq: string }>("select seq::text as seq from internal.invoices order by seq")
      ).map((r) => Number(r.seq));
      assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
    });
  });

  describe("credit notes", () => {
    test("a correction credits a net amount at the invoice's rate, numbered on its own, and lowers what is due", async () => {
      const all = await asPlatform("GET", "/invoices?all=true");
      const de = (all.body.data ?? []).find((i) => i.tenant_id === customers.de.tenant.id) as Invoice;
      let res = await asAdminOf("de")("POST", `/invoices/${de.id}/credit-notes`, {
        amount: "1.00",
        reason: "x",
      });
      assert.equal(res.status, 403);
      res = await asPlatform("POST", `/invoices/${de.id}/credit-notes`, {
        body: { amount: "2.50", reason: "Plan changed mid-month" },
      });
      assert.equal(res.status, 201, res.text);
      // 2.50 x 19% = 0.475: 0.48.
      assert.deepEqual(
        [res.body.number, res.body.subtotal, res.body.tax, res.body.total, res.body.invoice_number],
        ["CN-000001", "2.50", "0.48", "2.98", de.number],
      );
      res = await asPlatform("POST", `/invoices/${de.id}/credit-notes`, {
        body: { amount: "5.01", reason: "Too much" },
      });
      assert.equal(res.status, 422);
      assert.equal(res.body.code, "credit_exceeds_invoice");
      const after = await asAdminOf("de")("GET", `/invoices/${de.id}`);
      assert.equal(after.body.credited, "2.98");
      assert.equal(after.body.balance, "5.95");
      const mine = await asAdminOf("de")("GET", `/invoices/${de.id}/credit-notes`);
      assert.deepEqual(
        (mine.body.data ?? []).map((n) => n.number),
        ["CN-000001"],
      );
      assert.equal((await asAdminOf("fr")("GET", `/invoices/${de.id}/credit-notes`)).status, 404);
      await assert.rejects(
        sql("update internal.credit_notes set total = 0"),
        (e: Error & { code?: string }) => e.code === "55000" || /never changes/.test(e.message),
      );
      const noteId = (mine.body.data ?? [])[0]?.id as string;
      const pdf = await asAdminOf("de")("GET", `/invoices/${de.id}/credit-notes/${noteId}?format=pdf`);
      assert.equal(pdf.status, 200);
      assert.equal(pdf.raw.subarray(0, 5).toString("latin1"), "%PDF-");
      assert.ok(pdf.raw.toString("latin1").includes("(Credit note CN-000001)"));
      const csv = parseCsv(
        (await asAdminOf("de")("GET", `/invoices/${de.id}/credit-notes/${noteId}?format=csv`)).text,
      );
      assert.deepEqual(
        csv.slice(1).map((r) => [r[0], r[1], r[6]]),
        [
          ["CN-000001", "line", "2.50"],
          ["CN-000001", "subtotal", "2.50"],
          ["CN-000001", "tax", "0.48"],
          ["CN-000001", "total", "2.98"],
        ],
      );
      assert.equal(
        (await asAdminOf("fr")("GET", `/invoices/${de.id}/credit-notes/${noteId}?format=pdf`)).status,
        404,
      );
      // The invoice itself is as it was issued.
      assert.equal(after.body.total, "8.93");
    });
  });

  describe("the monthly job", () => {
    test("issues last month's invoice for every tenant with a plan, once, and comes back on the 1st", async () => {
      const run = invoiceHandlers(db())[INVOICE_JOB_KIND];
      assert.ok(run);
      const before = (await sql("select id from internal.invoices")).length;
      const next = (await run({} as never, { signal: new AbortController().signal })) as Date;
      assert.equal(next.getTime(), nextInvoiceRun().getTime());
      assert.equal(next.getUTCDate(), 1);
      const month = previousMonth();
      const issued = await sql<{ tenant_id: string }>(
        "select tenant_id::text as tenant_id from internal.invoices where month = $1::date order by tenant_id",
        [`${month}-01`],
      );
      assert.deepEqual(
        issued.map((r) => r.tenant_id),
        (["fr", "de", "us", "at"] as const).map((k) => customers[k].tenant.id).sort(),
      );
      await run({} as never, { signal: new AbortController().signal });
      assert.equal((await sql("select id from internal.invoices")).length, before + 4);
    });
  });

  describe("backline invoices", () => {
    test("usage, list, show --csv and a refusal with its code", async () => {
      const slug = customers.fr.tenant.slug;
      const usage = await runCliOn(t(), ["--json", "invoices", "usage", "--tenant", slug, "--month", MONTH]);
      assert.equal(usage.code, 0, usage.stderr);
      assert.equal(JSON.parse(usage.stdout).subtotal, "106.22");
      const list = await runCliOn(t(), ["--json", "invoices", "list", "--tenant", slug, "--status", "paid"]);
      assert.equal(list.code, 0, list.stderr);
      const [paid] = JSON.parse(list.stdout) as Invoice[];
      assert.equal(paid?.total, "106.22");
      const dir = (await import("node:fs")).mkdtempSync(`${(await import("node:os")).tmpdir()}/invoice-`);
      const show = await runCliOn(t(), ["invoices", "show", paid?.id ?? "", "--csv", `${dir}/i.csv`]);
      assert.equal(show.code, 0, show.stderr);
      assert.match(show.stdout, /BL-00000\d/);
      const rows = parseCsv((await import("node:fs")).readFileSync(`${dir}/i.csv`, "utf8"));
      assert.equal(rows.at(-1)?.[6], "106.22");
      const credit = await runCliOn(t(), [
        "invoices",
        "credit",
        paid?.id ?? "",
        "--amount",
        "1.00",
        "--reason",
        "Goodwill",
        "--pdf",
        `${dir}/cn.pdf`,
      ]);
      assert.equal(credit.code, 0, credit.stderr);
      assert.match(credit.stdout, /^CN-000002 credits 1\.00 EUR on BL-/);
      assert.equal(
        (await import("node:fs")).readFileSync(`${dir}/cn.pdf`).subarray(0, 5).toString("latin1"),
        "%PDF-",
      );
      const again = await runCliOn(t(), ["invoices", "issue", "--tenant", slug, "--month", MONTH]);
      assert.notEqual(again.code, 0);
      assert.match(again.stderr, /already invoiced/);
    });
  });
});
