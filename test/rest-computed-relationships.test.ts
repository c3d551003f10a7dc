import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { memberToken, seedAccount } from "./support/seed.ts";

/**
 * Computed relationships (PostgREST 12+): a function taking one table's row and returning
 * another's rows embeds like a foreign key, by the function's name — to-many for `setof`, to-one
 * for a single row or `rows 1` — with filters, order, limits, !inner and spreads as any embed, and
 * the caller's row security inside the function.
 */
const FIXTURE = `
create table public.cr_channels (id int primary key, slug text not null);
create table public.cr_messages (id int primary key, channel_id int not null, body text not null);
insert into public.cr_channels values (1, 'public'), (2, 'random'), (3, 'empty');
insert into public.cr_messages values (1, 1, 'hello'), (2, 1, 'again'), (3, 2, 'elsewhere');
create function public.channel_posts(public.cr_channels) returns setof public.cr_messages
  language sql stable as $$ select * from public.cr_messages where channel_id = $1.id $$;
create function public.posted_in(public.cr_messages) returns public.cr_channels
  language sql stable as $$ select * from public.cr_channels where id = $1.channel_id $$;
create function public.latest_post(public.cr_channels) returns setof public.cr_messages rows 1
  language sql stable as $$ select * from public.cr_messages where channel_id = $1.id order by id desc limit 1 $$;
create function public.every_artist(public.releases) returns setof public.artist_profiles
  language sql stable as $$ select * from public.artist_profiles $$;
grant select on public.cr_channels, public.cr_messages to authenticated;
grant execute on function public.channel_posts(public.cr_channels), public.posted_in(public.cr_messages),
  public.latest_post(public.cr_channels), public.every_artist(public.releases) to authenticated;
`;

describeEachEngine("rest: computed relationships", (t) => {
  let app: RunningApp;
  let keys: TenantKeys;
  let a: SupabaseClient;
  let b: SupabaseClient;

  before(async () => {
    await t().owner.transaction(
      async (tx) => {
        for (const statement of FIXTURE.split(/;\n/)) if (statement.trim()) await tx.query(statement);
      },
      { readOnly: false },
    );
    app = await startApp(t());
    const seeded = await tenantWithKeys(t(), { settings: UNLIMITED });
    keys = seeded.keys;
    const client = async (name: string) =>
      createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false },
        global: {
          headers: {
            Authorization: `Bearer ${await memberToken(
              t().db,
              seeded.tenant,
              [await seedAccount(t().db, seeded.tenant, name)],
              `${app.url}/auth/v1`,
            )}`,
          },
        },
      });
    a = await client("A");
    b = await client("B");
    for (const [c, name] of [
      [a, "Artist A"],
      [b, "Artist B"],
    ] as const) {
      const artist = await c.from("artist_profiles").insert({ name }).select().single();
      assert.equal(artist.error, null);
      assert.equal(
        (await c.from("releases").insert({ title: `${name} EP`, artist_id: artist.data.id })).error,
        null,
      );
    }
  });
  after(async () => {
    await app?.close();
  });

  test("to-many (setof) embeds as an array, to-one as an object, rows 1 as an object", async () => {
    const res = await a
      .from("cr_channels")
      .select("slug, channel_posts(id, body), latest_post(id)")
      .order("id");
    assert.equal(res.error, null);
    assert.deepEqual(res.data, [
      {
        slug: "public",
        channel_posts: [
          { id: 1, body: "hello" },
          { id: 2, body: "again" },
        ],
        latest_post: { id: 2 },
      },
      { slug: "random", channel_posts: [{ id: 3, body: "elsewhere" }], latest_post: { id: 3 } },
      { slug: "empty", channel_posts: [], latest_post: null },
    ]);
    const up = await a.from("cr_messages").select("body, channel:posted_in(slug)").eq("id", 3).single();
    assert.deepEqual(up.data, { body: "elsewhere", channel: { slug: "random" } });
  });

  test("filters, order and limits on the embed; !inner filters the parents; spreads", async () => {
    const res = await a
      .from("cr_channels")
      .select("slug, channel_posts!inner(body)")
      .eq("channel_posts.body", "again")
      .order("id", { referencedTable: "channel_posts", ascending: false });
    assert.deepEqual(res.data, [{ slug: "public", channel_posts: [{ body: "again" }] }]);
    const limited = await a
      .from("cr_channels")
      .select("slug, channel_posts(id)")
      .eq("id", 1)
      .order("id", { referencedTable: "channel_posts", ascending: false })
      .limit(1, { referencedTable: "channel_posts" });
    assert.deepEqual(limited.data, [{ slug: "public", channel_posts: [{ id: 2 }] }]);
    const spread = await a.from("cr_messages").select("body, ...posted_in(slug)").eq("id", 1);
    assert.deepEqual(spread.data, [{ body: "hello", slug: "public" }]);
  });

  test("the function runs under the caller's row security: an account sees its own artists only", async () => {
    const res = await a.from("releases").select("title, every_artist(name)");
    assert.equal(res.error, null);
    assert.deepEqual(res.data, [{ title: "Artist A EP", every_artist: [{ name: "Artist A" }] }]);
    const other = await b.from("releases").select("title, every_artist(name)");
    assert.deepEqual(other.data, [{ title: "Artist B EP", every_artist: [{ name: "Artist B" }] }]);
  });

  test("a function's name is its embed's only name; the foreign keys' embeds are unchanged", async () => {
    // cr_messages has no foreign key to cr_channels: only the function relates them.
    const missing = await a.from("cr_channels").select("cr_messages(*)");
    assert.equal(missing.error?.code, "PGRST200");
    const artist = await a.from("releases").select("title, artist_profiles(name)");
    assert.deepEqual(artist.data, [{ title: "Artist A EP", artist_profiles: { name: "Artist A" } }]);
  });
});
