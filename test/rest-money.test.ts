import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { hashPassword } from "../src/auth/passwords.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import { seedAccount, seedUser } from "./support/seed.ts";

/**
 * A payee's money at /rest/v1 (docs/payouts.md, "Who sees what"), through supabase-js as a label's
 * own app would read it: the views payees, payee_balances, statements and payouts answer each
 * caller's rows by row security. On a tenant that confirms sign-ups without mail, whoever signs up
 * with a payee's address sees nothing of the money until they prove the address; then they see
 * their own figures and no one else's. The account's owner sees the account's payees; another
 * account's owner sees none; no one writes a money view.
 */

const PASSWORD = "Correct-Horse-7";

describeEachEngine("rest: a payee's money through supabase-js", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let label: Account;
  let anon: string;
  const payeeEmail = `ana-${randomUUID().slice(0, 8)}@example.org`;
  const otherEmail = `june-${randomUUID().slice(0, 8)}@example.org`;

  const client = (): SupabaseClient =>
    createClient(app.url, anon, { auth: { persistSession: false, autoRefreshToken: false } });
  const rows = <T>(sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);

  async function signedIn(email: string): Promise<SupabaseClient> {
    const c = client();
    const { error } = await c.auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(error, null, email);
    return c;
  }

  before(async () => {
    app = await startApp(t());
    const made = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    tenant = made.tenant;
    anon = made.keys.anon_key;
    label = await seedAccount(t().db, tenant, "Lantern Records");
    const release = await seedDeliveredRelease(
      t().db,
      label.id,
      { title: "Night Drive", upc: "012345000010" },
      [{ title: "Night Drive", isrc: "QZABC2600001", duration: 200, track_number: 1 }],
    );
    await rows("update public.tracks set splits = $2 where id = $1", [
      release.tracks[0]?.id,
      JSON.stringify([
        { name: "Ana Lima", email: payeeEmail, share: "62.5" },
        { name: "June Park", email: otherEmail, share: 37.5 },
      ]),
    ]);
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(
        [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          "2026-11,2026-10,spotify,US,012345000010,QZABC2600001,stream,1000,5.00,1.00,4.00,USD",
          "",
        ].join("\n"),
      ),
    });
    assert.equal(r.status, "completed");
  });
  after(async () => {
    await app?.close();
  });

  test("an address confirmed without proof sees nothing; proven, the payee sees their own figures only", async () => {
    const signUp = await client().auth.signUp({ email: payeeEmail, password: PASSWORD });
    assert.equal(signUp.error, null);
    const ana = await signedIn(payeeEmail);
    for (const view of ["payees", "payee_balances", "statements", "payouts"]) {
      const { data, error } = await ana.from(view).select("*");
      assert.equal(error, null, view);
      assert.deepEqual(data, [], `${view}: nothing before the address is proven`);
    }

    // She uses a link mailed to the address (the recovery flow does it as well as confirmation).
    await rows("update internal.users set email_proven_at = now() where email = $1 and tenant_id = $2", [
      payeeEmail,
      tenant.id,
    ]);
    const payees = await ana.from("payees").select("id, email, kind");
    assert.equal(payees.error, null);
    assert.deepEqual(
      payees.data?.map((p) => [p.email, p.kind]),
      [[payeeEmail, "person"]],
    );
    const balances = await ana.from("payee_balances").select("payee_id, currency, balance");
    assert.equal(balances.error, null);
    // 62.5% of 4.00, exact: nothing else, June's 1.5 is not hers to see.
    assert.deepEqual(
      balances.data?.map((b) => [b.payee_id, b.currency, String(b.balance)]),
      [[payees.data?.[0]?.id, "USD", "2.5"]],
    );
  });

  test("the account's owner sees its payees; another account's owner and a viewer see none", async () => {
    const owner = await seedUser(t().db, tenant, [{ account: label, role: "owner" }]);
    const viewer = await seedUser(t().db, tenant, [{ account: label, role: "viewer" }]);
    const elsewhere = await seedUser(t().db, tenant, [
      { account: await seedAccount(t().db, tenant, "Other"), role: "owner" },
    ]);
    const hash = await hashPassword(PASSWORD);
    for (const u of [owner, viewer, elsewhere]) {
      await rows("update internal.users set encrypted_password = $2 where id = $1", [u.id, hash]);
    }
    const seen = async (email: string) => {
      const { data, error } = await (await signedIn(email))
        .from("payee_balances")
        .select("payee_id, balance")
        .order("balance");
      assert.equal(error, null);
      return data?.map((b) => String(b.balance));
    };
    assert.deepEqual(await seen(owner.email), ["1.5", "2.5"]);
    assert.deepEqual(await seen(viewer.email), []);
    assert.deepEqual(await seen(elsewhere.email), []);
  });

  test("no one writes a money view through /rest/v1", async () => {
    const ana = await signedIn(payeeEmail);
    const [payee] = await rows<{ id: string }>("select id from internal.payees where email = $1", [
      payeeEmail,
    ]);
    const insert = await ana.from("payouts").insert({ payee_id: payee?.id, amount: "1.00", currency: "USD" });
    assert.ok(insert.error, "an insert is refused");
    const update = await ana
      .from("payees")
      .update({ email: "thief@example.org" })
      .eq("id", payee?.id)
      .select();
    assert.ok(update.error || (update.data ?? []).length === 0, "an update changes nothing");
    const [still] = await rows<{ email: string }>("select email from internal.payees where id = $1", [
      payee?.id,
    ]);
    assert.equal(still?.email, payeeEmail);
    const entries = await rows<{ n: string }>(
      "select count(*)::text as n from internal.payouts where payee_id = $1",
      [payee?.id],
    );
    assert.equal(entries[0]?.n, "0");
  });
});
