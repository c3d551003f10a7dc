import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import type { Account } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { expectStatus, issueTestKey, publicApi } from "./support/public-api.ts";

/**
 * One artist, one set of store ids (issue 29, item 4; migration 0025): "streamingA_id" and
 * "streamingB_id" on /rest/v1 (supabase-js, a signed-in user) are the `spotify` and `apple_music`
 * entries of `store_ids` on /api/public/v1 (an API key of the same account): each write is read
 * back through the other, on each engine, over real HTTP.
 */

type Obj = Record<string, unknown>;

describeEachEngine("artist store ids: one source of truth for /rest/v1 and the public API", (t) => {
  let app: RunningApp;
  let client: SupabaseClient;
  let api: ReturnType<typeof publicApi>;
  before(async () => {
    app = await startApp(t());
    const { keys } = await tenantWithKeys(t(), {
      auth: { email_confirmation: false },
      settings: { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } },
    });
    client = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({
      email: `artist-${randomUUID().slice(0, 8)}@example.com`,
      password: "Correct-Horse-7",
    });
    assert.equal(error, null);
    const accountId = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ account_id: string }>(
            "select account_id from internal.memberships where user_id = $1",
            [data.user?.id],
          )
        ).rows[0]?.account_id,
    );
    const key = await issueTestKey(t().db, { id: accountId } as Account);
    api = publicApi(app.url, key.secret);
  });
  after(async () => {
    await app?.close();
  });

  async function restArtist(id: string): Promise<Obj> {
    const { data, error } = await client.from("artist_profiles").select("*").eq("id", id).single();
    assert.equal(error, null);
    return data as Obj;
  }

  test("written on /rest/v1 (streamingA_id, streamingB_id): read on the public API as store_ids", async () => {
    const { data, error } = await client
      .from("artist_profiles")
      .insert({ name: "Mira Vale", streamingA_id: "3WrFJ7ztbogyGnTHbHJFl2", streamingB_id: "1147483647" })
      .select()
      .single();
    assert.equal(error, null);
    const artist = data as Obj & { id: string };
    assert.deepEqual(artist.store_ids, { spotify: "3WrFJ7ztbogyGnTHbHJFl2", apple_music: "1147483647" });
    const viaApi = expectStatus(await api<Obj>("GET", `/artists/${artist.id}`), 200);
    assert.deepEqual(viaApi.store_ids, { spotify: "3WrFJ7ztbogyGnTHbHJFl2", apple_music: "1147483647" });

    // A change, and a removal (null), on /rest/v1.
    const upd = await client
      .from("artist_profiles")
      .update({ streamingA_id: "0TnOYISbd1XYRBk9myaseg", streamingB_id: null })
      .eq("id", artist.id);
    assert.equal(upd.error, null);
    const after = expectStatus(await api<Obj>("GET", `/artists/${artist.id}`), 200);
    assert.deepEqual(after.store_ids, { spotify: "0TnOYISbd1XYRBk9myaseg" });
  });

  test("written on the public API (store_ids): read on /rest/v1 as streamingA_id and streamingB_id", async () => {
    const created = expectStatus(
      await api<Obj & { id: string }>("POST", "/artists", {
        name: "Luna Vale",
        store_ids: { spotify: "4Z8W4fKeB5YxbusRsdQVPb", apple_music: "909253", deezer: "27" },
      }),
      201,
    );
    let row = await restArtist(created.id);
    assert.equal(row.streamingA_id, "4Z8W4fKeB5YxbusRsdQVPb");
    assert.equal(row.streamingB_id, "909253");
    assert.deepEqual(row.store_ids, {
      spotify: "4Z8W4fKeB5YxbusRsdQVPb",
      apple_music: "909253",
      deezer: "27",
    });

    // store_ids is replaced whole by a PATCH: the stores it no longer names are gone on both sides.
    expectStatus(await api("PATCH", `/artists/${created.id}`, { store_ids: { apple_music: "111" } }), 200);
    row = await restArtist(created.id);
    assert.equal(row.streamingA_id, null);
    assert.equal(row.streamingB_id, "111");

    // store_ids written on /rest/v1 too: the columns follow.
    await client
      .from("artist_profiles")
      .update({ store_ids: { spotify: "abc" } })
      .eq("id", created.id);
    row = await restArtist(created.id);
    assert.deepEqual([row.streamingA_id, row.streamingB_id], ["abc", null]);
    const viaApi = expectStatus(await api<Obj>("GET", `/artists/${created.id}`), 200);
    assert.deepEqual(viaApi.store_ids, { spotify: "abc" });
  });

  test("one update naming a column and the same store in store_ids: the column wins, both sides agree", async () => {
    const created = expectStatus(await api<Obj & { id: string }>("POST", "/artists", { name: "Both" }), 201);
    const { error } = await client
      .from("artist_profiles")
      .update({ streamingA_id: "from-column", store_ids: { spotify: "from-json", deezer: "9" } })
      .eq("id", created.id);
    assert.equal(error, null);
    const row = await restArtist(created.id);
    assert.equal(row.streamingA_id, "from-column");
    assert.deepEqual(row.store_ids, { spotify: "from-column", deezer: "9" });
  });

  test("a store id too long for the column is refused on either side and changes nothing", async () => {
    const created = expectStatus(await api<Obj & { id: string }>("POST", "/artists", { name: "Long" }), 201);
    const res = await client
      .from("artist_profiles")
      .update({ store_ids: { spotify: "x".repeat(201) } })
      .eq("id", created.id);
    assert.equal(res.status, 400);
    assert.equal(res.error?.code, "23514");
    assert.deepEqual((await restArtist(created.id)).store_ids, {});
    const viaApi = await api("PATCH", `/artists/${created.id}`, { store_ids: { spotify: "x".repeat(201) } });
    assert.equal(viaApi.status, 422);
  });
});
