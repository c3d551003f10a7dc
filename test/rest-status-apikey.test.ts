import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * The right status for the right mistake on /rest/v1 (issue 29, item 5), each engine, real HTTP:
 * a release `status` that is none of the statuses is 400 23514 naming the column, a real status the
 * account may not move to stays 409 BL002; a request without an apikey answers as Supabase's
 * gateway does (401 {"message":"No API key found in request"}), not with a PostgREST code.
 */

describeEachEngine("/rest/v1: malformed status and missing apikey", (t) => {
  let app: RunningApp;
  let anon: string;
  let token: string;
  let client: SupabaseClient;
  let releaseId: string;
  before(async () => {
    app = await startApp(t());
    const { keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    anon = keys.anon_key;
    client = createClient(app.url, anon, { auth: { persistSession: false, autoRefreshToken: false } });
    const { data, error } = await client.auth.signUp({
      email: `s-${randomUUID().slice(0, 8)}@example.com`,
      password: "Correct-Horse-7",
    });
    assert.equal(error, null);
    token = data.session?.access_token ?? "";
    const artist = await client.from("artist_profiles").insert({ name: "Ana" }).select().single();
    const release = await client
      .from("releases")
      .insert({ title: "Tide", artist_id: (artist.data as { id: string }).id })
      .select()
      .single();
    releaseId = (release.data as { id: string }).id;
  });
  after(async () => {
    await app?.close();
  });

  function patch(status: unknown) {
    return fetch(`${app.url}/rest/v1/releases?id=eq.${releaseId}`, {
      method: "PATCH",
      headers: {
        apikey: anon,
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        prefer: "return=representation",
      },
      body: JSON.stringify({ status }),
    });
  }

  async function status(): Promise<string> {
    const { data } = await client.from("releases").select("status").eq("id", releaseId).single();
    return (data as { status: string }).status;
  }

  for (const bad of ["bogus", "LIVE", "", "draft "]) {
    test(`PATCH status ${JSON.stringify(bad)}: 400 23514 naming the column, nothing changed`, async () => {
      const res = await patch(bad);
      assert.equal(res.status, 400);
      const body = (await res.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(body).sort(), ["code", "details", "hint", "message"]);
      assert.equal(body.code, "23514");
      assert.match(String(body.message), /releases_status_check/);
      assert.match(String(body.details), /^status: /);
      assert.equal(await status(), "draft");
    });
  }

  test("an insert with a status that is no status is 400 23514 too", async () => {
    const artist = await client.from("artist_profiles").insert({ name: "Bo" }).select().single();
    const res = await client
      .from("releases")
      .insert({ title: "X", artist_id: (artist.data as { id: string }).id, status: "published" });
    assert.equal(res.status, 400);
    assert.equal(res.error?.code, "23514");
  });

  test("a real status the account may not move to stays 409 BL002", async () => {
    const res = await patch("live");
    assert.equal(res.status, 409);
    assert.equal(((await res.json()) as { code: string }).code, "BL002");
    assert.equal(await status(), "draft");
  });

  test("a valid move still works", async () => {
    assert.equal((await patch("pending")).status, 200);
    assert.equal(await status(), "pending");
  });

  for (const [name, url, headers] of [
    ["no apikey", "/rest/v1/releases", {}],
    ["no apikey, with a bearer token", "/rest/v1/releases", { authorization: "Bearer x.y.z" }],
    ["an empty apikey", "/rest/v1/releases?apikey=", { apikey: "" }],
  ] as [string, string, Record<string, string>][]) {
    test(`${name}: 401 {"message":"No API key found in request"} as Supabase's gateway`, async () => {
      const res = await fetch(`${app.url}${url}`, { headers });
      assert.equal(res.status, 401);
      const body = (await res.json()) as Record<string, unknown>;
      assert.equal(body.message, "No API key found in request");
      assert.equal(body.code, undefined, "no PostgREST code");
    });
  }

  test("an apikey that is no key: 401 Invalid API key, no PostgREST code", async () => {
    const res = await fetch(`${app.url}/rest/v1/releases`, { headers: { apikey: "not-a-key" } });
    assert.equal(res.status, 401);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.message, "Invalid API key");
    assert.equal(body.code, undefined);
  });
});
