import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { memberToken, seedAccount } from "./support/seed.ts";

/**
 * `Accept: application/vnd.pgrst.plan` (postgrest-js's `explain()`): off unless REST_PLAN_ENABLED,
 * and then a service key's only; a tenant's plan has no estimates, which count every tenant's rows.
 */
describeEachEngine("rest: a statement's plan (explain)", (t) => {
  let on: RunningApp;
  let off: RunningApp;
  let keys: TenantKeys;
  let memberBearer: string;

  const client = (app: RunningApp, bearer: string): SupabaseClient =>
    createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { headers: { Authorization: `Bearer ${bearer}` } },
    });

  before(async () => {
    on = await startApp(t(), { REST_PLAN_ENABLED: "true" });
    off = await startApp(t());
    let tenant: Awaited<ReturnType<typeof tenantWithKeys>>["tenant"];
    ({ tenant, keys } = await tenantWithKeys(t(), { settings: UNLIMITED }));
    const account = await seedAccount(t().db, tenant);
    memberBearer = await memberToken(t().db, tenant, [account], `${on.url}/auth/v1`);
    const member = client(on, memberBearer);
    const artist = await member.from("artist_profiles").insert({ name: "Plan Artist" }).select().single();
    assert.equal(artist.error, null);
    const release = await member.from("releases").insert({ title: "Planned", artist_id: artist.data.id });
    assert.equal(release.error, null);
  });
  after(async () => {
    await on?.close();
    await off?.close();
  });

  test("a tenant's service key gets the text plan of the statement that would run", async () => {
    const res = await client(on, keys.service_role_key).from("releases").select("id,title").explain();
    assert.equal(res.error, null);
    assert.equal(res.status, 200);
    assert.equal(typeof res.data, "string");
    assert.match(res.data as unknown as string, /releases/);
    // No estimates: they come from statistics that count every tenant's rows.
    assert.doesNotMatch(res.data as unknown as string, /cost=|rows=/);
  });

  test("format json and verbose; the Content-Type says what the plan is for", async () => {
    const r = await fetch(`${on.url}/rest/v1/releases?select=id`, {
      headers: {
        apikey: keys.service_role_key,
        authorization: `Bearer ${keys.service_role_key}`,
        accept: 'application/vnd.pgrst.plan+json; for="application/json"; options=verbose',
      },
    });
    assert.equal(r.status, 200);
    assert.equal(
      r.headers.get("content-type"),
      'application/vnd.pgrst.plan+json; for="application/json"; options=verbose; charset=utf-8',
    );
    const plan = (await r.json()) as { Plan: { "Node Type": string; Output?: string[] } }[];
    assert.equal(typeof plan[0]?.Plan["Node Type"], "string");
    assert.ok(Array.isArray(plan[0]?.Plan.Output), "verbose lists each node's output");
    assert.equal(plan[0]?.Plan["Plan Rows" as "Node Type"], undefined, "no estimates");
  });

  // What analyze and buffers measure is the scan before row security filters it: "Rows Removed by
  // Filter" would count another tenant's rows. The installation's own service_role only.
  for (const options of ["analyze", "buffers", "verbose|analyze"]) {
    test(`a tenant's key asking options=${options} is refused (406 PGRST107), nothing runs`, async () => {
      const r = await fetch(`${on.url}/rest/v1/releases?select=id`, {
        method: "PATCH",
        headers: {
          apikey: keys.service_role_key,
          authorization: `Bearer ${keys.service_role_key}`,
          "content-type": "application/json",
          accept: `application/vnd.pgrst.plan+text; options=${options}`,
        },
        body: JSON.stringify({ title: "Changed by a plan" }),
      });
      assert.equal(r.status, 406);
      const body = (await r.json()) as { code: string; hint: string };
      assert.equal(body.code, "PGRST107");
      assert.match(body.hint, /other tenants' rows/);
    });
  }

  test("a write's plan changes nothing: the transaction is rolled back", async () => {
    const before = await client(on, keys.service_role_key)
      .from("releases")
      .select("id", { count: "exact", head: true });
    const res = await client(on, keys.service_role_key)
      .from("releases")
      .update({ title: "Changed by a plan" })
      .eq("title", "Planned")
      .explain();
    assert.equal(res.error, null);
    assert.match(res.data as unknown as string, /Update on/);
    const still = await client(on, keys.service_role_key)
      .from("releases")
      .select("title")
      .eq("title", "Planned");
    assert.equal(still.data?.length, 1);
    const after = await client(on, keys.service_role_key)
      .from("releases")
      .select("id", { count: "exact", head: true });
    assert.equal(after.count, before.count);
  });

  test("an embed's plan, with the text format by default", async () => {
    const r = await fetch(`${on.url}/rest/v1/releases?select=id,tracks(id)&limit=1`, {
      headers: {
        apikey: keys.service_role_key,
        authorization: `Bearer ${keys.service_role_key}`,
        accept: "application/vnd.pgrst.plan",
      },
    });
    assert.equal(r.status, 200);
    assert.match(
      r.headers.get("content-type") ?? "",
      /^application\/vnd\.pgrst\.plan\+text; for="application\/json"/,
    );
    assert.match(await r.text(), /Limit/);
  });

  const refused: [string, () => RunningApp, () => string][] = [
    ["a member, plans on", () => on, () => memberBearer],
    ["the anon key, plans on", () => on, () => keys.anon_key],
    ["a tenant's service key, plans off (the default)", () => off, () => keys.service_role_key],
  ];
  for (const [who, app, bearer] of refused) {
    test(`${who}: 406 PGRST107, as PostgREST without db-plan-enabled`, async () => {
      const res = await client(app(), bearer()).from("releases").select("id").explain();
      assert.equal(res.status, 406);
      assert.equal(res.error?.code, "PGRST107");
      assert.match(res.error?.message ?? "", /None of these media types are available/);
    });
  }

  test("a plan for a media type it cannot produce is 406", async () => {
    const r = await fetch(`${on.url}/rest/v1/releases`, {
      headers: {
        apikey: keys.service_role_key,
        authorization: `Bearer ${keys.service_role_key}`,
        accept: 'application/vnd.pgrst.plan+text; for="application/xml"',
      },
    });
    assert.equal(r.status, 406);
    assert.equal(((await r.json()) as { code: string }).code, "PGRST107");
  });
});
