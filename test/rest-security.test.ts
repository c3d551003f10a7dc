import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { EXPOSED_TABLES, forceReleaseStatus } from "./support/seed.ts";

/**
 * /rest/v1 isolation, end to end. User A and user B signed up on one tenant (each got a personal
 * account); user C signed up on another tenant. For each exposed table and each method,
 * neither B nor C can read, count, change or delete A's rows — and no answer tells them A's rows
 * exist: a request naming A's ids is answered exactly as the same request naming random ids.
 * A tenant's service-role key reaches every account of its tenant and nothing of another.
 */

const PASSWORD = "Correct-Horse-7";
const TABLES = EXPOSED_TABLES;
type Table = (typeof TABLES)[number];

const OBJECT = "application/vnd.pgrst.object+json";
/** Until when the uploads the tests ask for take their bytes (one value, so that answers compare). */
const UPLOAD_EXPIRES_AT = new Date(Date.now() + 24 * 3600_000).toISOString();

/** Per table: a change a client would try, and embeds that reach related tables. */
const SPEC: Record<Table, { patch: Record<string, unknown>; embeds: string[] }> = {
  artist_profiles: {
    patch: { name: "hijacked", bio: "hijacked" },
    embeds: [
      "*,releases(*)",
      "*,releases(*,tracks(*,track_analytics(*)))",
      "*,releases!inner(*,tracks!inner(*))",
    ],
  },
  releases: {
    patch: { title: "hijacked" },
    embeds: [
      "*,tracks!inner(*)",
      "*,artist_profiles(*)",
      "*,artist_profiles!inner(*)",
      "*,tracks(*),takedown_requests(*),release_analytics(*)",
    ],
  },
  tracks: {
    patch: { title: "hijacked" },
    embeds: ["*,releases(*)", "*,releases!inner(*,artist_profiles(*))", "*,track_analytics(*)"],
  },
  takedown_requests: {
    patch: { reason: "hijacked" },
    embeds: ["*,releases(*)", "*,releases!inner(*,tracks(*))"],
  },
  release_analytics: { patch: { streams: 0 }, embeds: ["*,releases(*)", "*,releases!inner(*,tracks(*))"] },
  track_analytics: { patch: { streams: 0 }, embeds: ["*,tracks(*)", "*,tracks!inner(*,releases(*))"] },
  notifications: { patch: { read: true }, embeds: [] },
  media_assets: {
    patch: { status: "valid", filename: "hijacked.jpg" },
    embeds: [
      "*,releases(*)",
      "*,tracks(*)",
      "*,releases!inner(*,tracks(*))",
      "*,tracks!inner(*,releases(*))",
    ],
  },
};

interface Actor {
  name: string;
  apikey: string;
  bearer: string;
}

interface Party {
  name: string;
  tenant: Tenant;
  keys: TenantKeys;
  userId: string;
  accountId: string;
  actor: Actor;
  /** A word in every text field of this party's rows. */
  marker: string;
  ids: Record<Table, string[]>;
  /** The parent ids a client names when creating rows. */
  artistId: string;
  draftReleaseId: string;
  deliveredReleaseId: string;
}

interface Observed {
  status: number;
  contentType: string | null;
  contentRange: string | null;
  location: string | null;
  text: string;
}

function replaceAll(s: string, from: string[], to: (i: number) => string): string {
  return from.reduce((acc, id, i) => acc.split(id).join(to(i)), s);
}

describeEachEngine("rest security: accounts and tenants are isolated at /rest/v1", (t) => {
  let app: RunningApp;
  let a: Party;
  let b: Party;
  let c: Party;
  /** A's and C's rows as the database holds them before any attack (service path). */
  let before0: Record<string, unknown[]>;

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  function assertOk<T>(result: { data: T | null; error: unknown }): T {
    assert.equal(result.error, null, JSON.stringify(result.error));
    assert.ok(result.data !== null);
    return result.data;
  }

  async function signUp(tenant: { keys: TenantKeys }): Promise<{
    client: SupabaseClient;
    userId: string;
    token: string;
  }> {
    const client = createClient(app.url, tenant.keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({
      email: `user-${randomUUID().slice(0, 8)}@example.com`,
      password: PASSWORD,
    });
    assert.equal(error, null);
    assert.ok(data.session && data.user);
    return { client, userId: data.user.id, token: data.session.access_token };
  }

  /**
   * A user with a row in every table: an artist, a draft and a delivered release with tracks, a
   * takedown, analytics, a notification, and uploads asked for on the draft (its cover, its track's
   * audio).
   */
  async function party(name: string, env: { tenant: Tenant; keys: TenantKeys }): Promise<Party> {
    const { client, userId, token } = await signUp(env);
    const marker = `${name}secret${randomUUID().slice(0, 8)}`;
    const artist = assertOk(
      await client
        .from("artist_profiles")
        .insert({ name: `${marker} artist`, bio: marker, streamingA_id: marker, streamingB_id: marker })
        .select()
        .single(),
    ) as { id: string; account_id: string };
    const releases = assertOk(
      await client
        .from("releases")
        .insert([
          { title: `${marker} draft`, artist_id: artist.id, release_date: "2026-09-18", status: "draft" },
          { title: `${marker} delivered`, artist_id: artist.id, release_date: "2026-05-01", status: "draft" },
        ])
        .select()
        .order("title"),
    ) as { id: string; title: string }[];
    const delivered = releases.find((r) => r.title.endsWith("delivered"));
    const draft = releases.find((r) => r.title.endsWith("draft"));
    assert.ok(delivered && draft);
    const tracks = assertOk(
      await client
        .from("tracks")
        .insert([
          { release_id: draft.id, title: `${marker} one`, isrc: "QZAAA2600001", duration: 200 },
          { release_id: delivered.id, title: `${marker} two`, isrc: "QZAAA2600002", duration: 180 },
        ])
        .select(),
    ) as { id: string; release_id: string }[];
    const deliveredTrack = tracks.find((tr) => tr.release_id === delivered.id);
    const draftTrack = tracks.find((tr) => tr.release_id === draft.id);
    assert.ok(deliveredTrack && draftTrack);
    const media = assertOk(
      await client
        .from("media_assets")
        .insert([
          {
            release_id: draft.id,
            kind: "artwork",
            filename: `${marker}.jpg`,
            content_type: "image/jpeg",
            max_bytes: 52428800,
            upload_expires_at: UPLOAD_EXPIRES_AT,
          },
          {
            release_id: draft.id,
            track_id: draftTrack.id,
            kind: "audio",
            filename: `${marker}.wav`,
            content_type: "audio/wav",
            max_bytes: 1073741824,
            upload_expires_at: UPLOAD_EXPIRES_AT,
          },
        ])
        .select(),
    ) as { id: string }[];
    assert.equal(
      (await client.from("releases").update({ status: "submitted" }).eq("id", delivered.id)).error,
      null,
    );
    await forceReleaseStatus(t().db, delivered.id, "delivered");
    const takedown = assertOk(
      await client
        .from("takedown_requests")
        .insert({ release_id: delivered.id, reason: `${marker} reason`, status: "pending" })
        .select()
        .single(),
    ) as { id: string };
    const operator = await t().db.asService(async (tx) => {
      const ra = await tx.query<{ id: string }>(
        `insert into public.release_analytics (release_id, account_id, period_start, period_end, store, streams, revenue, currency)
         values ($1, $2, '2026-06-01', '2026-06-30', $3, 1000, 4.2, 'USD') returning id`,
        [delivered.id, artist.account_id, marker],
      );
      const ta = await tx.query<{ id: string }>(
        `insert into public.track_analytics (track_id, release_id, account_id, period_start, period_end, store, streams, currency)
         values ($1, $2, $3, '2026-06-01', '2026-06-30', $4, 900, 'USD') returning id`,
        [deliveredTrack.id, delivered.id, artist.account_id, marker],
      );
      const n = await tx.query<{ id: string }>(
        `insert into public.notifications (user_id, account_id, kind, title, body, data)
         values ($1, $2, 'release.approved', $3, $3, $4) returning id`,
        [userId, artist.account_id, `${marker} notice`, JSON.stringify({ release_id: delivered.id })],
      );
      return { ra: ra.rows.map((r) => r.id), ta: ta.rows.map((r) => r.id), n: n.rows.map((r) => r.id) };
    });
    return {
      name,
      tenant: env.tenant,
      keys: env.keys,
      userId,
      accountId: artist.account_id,
      actor: { name, apikey: env.keys.anon_key, bearer: token },
      marker,
      artistId: artist.id,
      draftReleaseId: draft.id,
      deliveredReleaseId: delivered.id,
      ids: {
        artist_profiles: [artist.id],
        releases: releases.map((r) => r.id),
        tracks: tracks.map((tr) => tr.id),
        takedown_requests: [takedown.id],
        release_analytics: operator.ra,
        track_analytics: operator.ta,
        notifications: operator.n,
        media_assets: media.map((m) => m.id),
      },
    };
  }

  /** Every identifier and word of a party's rows: what must never reach anyone else. */
  function secrets(p: Party): string[] {
    return [p.marker, p.userId, p.accountId, ...Object.values(p.ids).flat()];
  }

  async function snapshot(): Promise<Record<string, unknown[]>> {
    const out: Record<string, unknown[]> = {};
    for (const p of [a, c]) {
      for (const table of TABLES) {
        // By owner, not by id: a row added to the victim's account shows up too.
        const owner = table === "notifications" ? "user_id" : "account_id";
        out[`${p.name}.${table}`] = (
          await rows<{ r: unknown }>(
            `select to_jsonb(x) as r from public.${table} x where ${owner} = $1 or id = any($2) order by id`,
            [table === "notifications" ? p.userId : p.accountId, p.ids[table]],
          )
        ).map((x) => x.r);
      }
    }
    return out;
  }

  /** A's and C's rows are exactly as they were. */
  async function assertUntouched(): Promise<void> {
    assert.deepEqual(await snapshot(), before0, "the victims' rows are unchanged");
  }

  async function send(
    actor: Actor,
    method: string,
    path: string,
    init: { body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Observed> {
    const res = await fetch(`${app.url}/rest/v1${path}`, {
      method,
      headers: {
        apikey: actor.apikey,
        authorization: `Bearer ${actor.bearer}`,
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    return {
      status: res.status,
      contentType: res.headers.get("content-type"),
      contentRange: res.headers.get("content-range"),
      location: res.headers.get("location"),
      text: await res.text(),
    };
  }

  function assertNoSecret(o: Observed, victim: Party, what: string, allowed: string[] = []): void {
    const text = JSON.stringify(o);
    for (const s of secrets(victim)) {
      if (allowed.includes(s)) continue;
      assert.ok(
        !text.includes(s),
        `${what}: the answer reveals ${victim.name}'s ${s}: ${o.status} ${o.text}`,
      );
    }
  }

  function assertNoServerError(o: Observed, what: string): void {
    assert.ok(o.status < 500, `${what}: ${o.status} ${o.text}`);
    if (o.status >= 400) {
      const body = JSON.parse(o.text) as Record<string, unknown>;
      assert.deepEqual(
        Object.keys(body).sort(),
        ["code", "details", "hint", "message"],
        `${what}: ${o.text}`,
      );
    }
  }

  /**
   * Sends the request naming the victim's ids, then the same request naming fresh random ids: the
   * two answers must be the same (with each id replaced by a placeholder), so the first reveals
   * nothing the second does not. Returns the first answer.
   */
  async function indistinguishable(
    actor: Actor,
    victim: Party,
    targets: string[],
    build: (ids: string[]) => {
      method: string;
      path: string;
      body?: unknown;
      headers?: Record<string, string>;
    },
  ): Promise<Observed> {
    const fakes = targets.map(() => randomUUID());
    const real = build(targets);
    const fake = build(fakes);
    const what = `${actor.name} ${real.method} ${real.path} ${JSON.stringify(real.headers ?? {})}`;
    const r = await send(actor, real.method, real.path, real);
    const f = await send(actor, fake.method, fake.path, fake);
    const norm = (o: Observed, ids: string[]): Observed => ({
      ...o,
      text: replaceAll(o.text, ids, (i) => `<target ${i}>`),
      location: o.location && replaceAll(o.location, ids, (i) => `<target ${i}>`),
    });
    assert.deepEqual(
      norm(r, targets),
      norm(f, fakes),
      `${what}: the answer differs from one about random ids`,
    );
    assertNoServerError(r, what);
    assertNoSecret(norm(r, targets), victim, what);
    return r;
  }

  /** The rows of `table` the party itself reaches, from the database. */
  async function ownIds(p: Party, table: Table): Promise<string[]> {
    const column = table === "notifications" ? "user_id" : "account_id";
    const value = table === "notifications" ? p.userId : p.accountId;
    return (
      await rows<{ id: string }>(`select id::text from public.${table} where ${column} = $1 order by id`, [
        value,
      ])
    ).map((r) => r.id);
  }

  function idsIn(text: string): string[] {
    return [...text.matchAll(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g)].map(
      (m) => m[0],
    );
  }

  before(async () => {
    app = await startApp(t());
    const t1 = await tenantWithKeys(t(), { auth: { email_confirmation: false }, settings: UNLIMITED });
    const t2 = await tenantWithKeys(t(), { auth: { email_confirmation: false }, settings: UNLIMITED });
    a = await party("A", t1);
    b = await party("B", t1);
    c = await party("C", t2);
    assert.notEqual(a.accountId, b.accountId, "each sign-up gets its own personal account");
    assert.equal(a.tenant.id, b.tenant.id);
    assert.notEqual(a.tenant.id, c.tenant.id);
    before0 = await snapshot();
  });
  after(async () => {
    await app?.close();
  });

  test("setup: each user reaches exactly their own rows in every table", async () => {
    for (const p of [a, b, c]) {
      for (const table of TABLES) {
        const o = await send(p.actor, "GET", `/${table}?select=id&order=id`);
        assert.equal(o.status, 200, `${p.name} ${table}: ${o.text}`);
        const got = (JSON.parse(o.text) as { id: string }[]).map((r) => r.id);
        assert.deepEqual(got, await ownIds(p, table), `${p.name} ${table}`);
        assert.ok(got.length >= 1, `${p.name} has a row in ${table}`);
      }
    }
  });

  const attackers = [
    { name: "B (same tenant, other account)", get: () => b },
    { name: "C (other tenant)", get: () => c },
  ];

  for (const attacker of attackers) {
    for (const table of TABLES) {
      test(`${table}: ${attacker.name} cannot read or count A's rows`, async () => {
        const me = attacker.get();
        const actor = me.actor;
        const target = a.ids[table];
        const own = await ownIds(me, table);
        const ownOne = own[0] as string;
        const first = target[0] as string;
        const inList = (ids: string[]) => `(${ids.join(",")})`;

        // Plain filters on A's ids, alone and in lists.
        for (const filter of [
          (ids: string[]) => `id=eq.${ids[0]}`,
          (ids: string[]) => `id=in.${inList(ids)}`,
          (ids: string[]) => `id=not.neq.${ids[0]}`,
          (ids: string[]) => `id=eq(any).{${ids.join(",")}}`,
          (ids: string[]) => `id=gte.${ids[0]}&id=lte.${ids[0]}`,
        ]) {
          const o = await indistinguishable(actor, a, target, (ids) => ({
            method: "GET",
            path: `/${table}?${filter(ids)}`,
            headers: { prefer: "count=exact" },
          }));
          assert.equal(o.status, 200, o.text);
          assert.equal(o.text, "[]");
          assert.equal(o.contentRange, "*/0");
        }

        // or= and and= trees naming A's ids next to the attacker's own row: only the own row.
        for (const tree of [
          (ids: string[]) => `or=(id.eq.${ids[0]},id.eq.${ownOne})`,
          (ids: string[]) => `or=(id.in.${inList(ids)},and(id.eq.${ownOne},id.not.in.${inList(ids)}))`,
          (ids: string[]) => `not.and=(id.neq.${ids[0]},id.neq.${ownOne})`,
          (ids: string[]) =>
            `or=(id.eq.${ids[0]},or(id.eq.${ownOne},not.and(id.neq.${ids[0]},id.not.is.null)))`,
        ]) {
          const o = await indistinguishable(actor, a, target, (ids) => ({
            method: "GET",
            path: `/${table}?select=id&${tree(ids)}`,
            headers: { prefer: "count=exact" },
          }));
          assert.equal(o.status, 200, o.text);
          assert.deepEqual(JSON.parse(o.text), [{ id: ownOne }]);
          assert.equal(o.contentRange, "0-0/1");
        }

        // Filters on A's account, user and words.
        for (const query of [
          `account_id=eq.${a.accountId}`,
          table === "notifications"
            ? `user_id=eq.${a.userId}`
            : `account_id=in.(${a.accountId},${me.accountId})`,
          `id=not.is.null&account_id=neq.${me.accountId}`,
        ]) {
          const o = await send(actor, "GET", `/${table}?${query}`, { headers: { prefer: "count=exact" } });
          assert.equal(o.status, 200, `${query}: ${o.text}`);
          if (query.includes("neq")) assert.equal(o.text, "[]", query);
          assertNoSecret(o, a, query, [a.accountId, a.userId]);
          assert.ok(
            idsIn(o.text).every((id) => !target.includes(id)),
            `${query} returned A's rows`,
          );
        }

        // count=exact: the total is the attacker's own count, whatever the page.
        const all = await send(actor, "GET", `/${table}?select=id&order=id`, {
          headers: { prefer: "count=exact" },
        });
        assert.equal(all.status, 200);
        assert.deepEqual(
          (JSON.parse(all.text) as { id: string }[]).map((r) => r.id),
          own,
        );
        assert.equal(all.contentRange, `0-${own.length - 1}/${own.length}`);
        assertNoSecret(all, a, "count=exact");

        // HEAD: no body, and the same count.
        const head = await send(actor, "HEAD", `/${table}`, { headers: { prefer: "count=exact" } });
        assert.equal(head.status, 200);
        assert.equal(head.text, "");
        assert.equal(head.contentRange, `0-${own.length - 1}/${own.length}`);
        const headA = await indistinguishable(actor, a, target, (ids) => ({
          method: "HEAD",
          path: `/${table}?id=in.${inList(ids)}`,
          headers: { prefer: "count=exact" },
        }));
        assert.equal(headA.contentRange, "*/0");

        // Range: a wide window holds only the attacker's rows; one past them holds nothing.
        const wide = await send(actor, "GET", `/${table}?select=id`, {
          headers: { range: "0-999", prefer: "count=exact" },
        });
        assert.equal(wide.status, 200);
        assert.equal(wide.contentRange, `0-${own.length - 1}/${own.length}`);
        assertNoSecret(wide, a, "Range 0-999");
        for (const range of [`${own.length}-${own.length + 50}`, `${own.length}-`]) {
          const past = await send(actor, "GET", `/${table}?select=id`, { headers: { range } });
          assert.ok(past.status === 200 || past.status === 416, `Range ${range}: ${past.status}`);
          if (past.status === 200) assert.equal(past.text, "[]", `Range ${range}`);
          assertNoSecret(past, a, `Range ${range}`);
          const limited = await send(actor, "GET", `/${table}?select=id&offset=${own.length}&limit=50`);
          assert.equal(limited.text, "[]", "offset past the attacker's rows");
        }

        // The object representation: 406 with "0 rows", exactly as for an id that does not exist.
        const object = await indistinguishable(actor, a, target, (ids) => ({
          method: "GET",
          path: `/${table}?id=eq.${ids[0]}`,
          headers: { accept: OBJECT },
        }));
        assert.equal(object.status, 406);
        const err = JSON.parse(object.text) as { code: string; details: string };
        assert.equal(err.code, "PGRST116");
        assert.match(err.details, /\b0 rows\b/);
        const objectOr = await indistinguishable(actor, a, target, (ids) => ({
          method: "GET",
          path: `/${table}?or=(id.eq.${ids[0]},id.eq.${ownOne})`,
          headers: { accept: OBJECT },
        }));
        assert.equal(objectOr.status, 200, "only the attacker's own row matches");
        assert.equal((JSON.parse(objectOr.text) as { id: string }).id, ownOne);

        // CSV: the same rows.
        const csv = await send(actor, "GET", `/${table}?select=id&id=eq.${first}`, {
          headers: { accept: "text/csv" },
        });
        assert.equal(csv.status, 200);
        assertNoSecret(csv, a, "text/csv", [first]);

        // Embedding reaches only the attacker's related rows.
        for (const select of SPEC[table].embeds) {
          const o = await send(actor, "GET", `/${table}?select=${encodeURIComponent(select)}`, {
            headers: { prefer: "count=exact" },
          });
          assert.equal(o.status, 200, `select=${select}: ${o.text}`);
          assertNoSecret(o, a, `select=${select}`);
          const top = JSON.parse(o.text) as { id: string }[];
          assert.ok(
            top.every((r) => own.includes(r.id)),
            `select=${select}`,
          );
          // An embed filter naming A's ids finds nothing.
          const relation = /^\*,(\w+)/.exec(select)?.[1] as string;
          const filtered = await indistinguishable(actor, a, [...a.ids[relation as Table]], (ids) => ({
            method: "GET",
            path: `/${table}?select=${encodeURIComponent(`*,${relation}!inner(*)`)}&${relation}.id=in.(${ids.join(",")})`,
            headers: { prefer: "count=exact" },
          }));
          assert.equal(filtered.text, "[]", `${relation}!inner filtered to A's ids`);
        }
        if (table === "artist_profiles") {
          // From B's side, A's releases never appear under B's artists.
          const o = await send(actor, "GET", "/artist_profiles?select=*,releases(*)");
          const artists = JSON.parse(o.text) as { releases: { id: string }[] }[];
          const releaseIds = artists.flatMap((x) => x.releases.map((r) => r.id));
          assert.deepEqual(releaseIds.sort(), [...me.ids.releases].sort());
        }
        if (table === "releases") {
          const o = await send(actor, "GET", "/releases?select=*,tracks!inner(*)");
          const releases = JSON.parse(o.text) as { id: string; tracks: { id: string }[] }[];
          assert.deepEqual(releases.map((r) => r.id).sort(), [...me.ids.releases].sort());
          assert.deepEqual(
            releases.flatMap((r) => r.tracks.map((tr) => tr.id)).sort(),
            [...me.ids.tracks].sort(),
          );
        }

        await assertUntouched();
      });

      test(`${table}: ${attacker.name} cannot change or delete A's rows`, async () => {
        const me = attacker.get();
        const actor = me.actor;
        const target = a.ids[table];
        const { patch } = SPEC[table];
        const inList = (ids: string[]) => `(${ids.join(",")})`;
        const representations: Record<string, string>[] = [
          { prefer: "return=representation,count=exact" },
          { prefer: "return=minimal,count=exact" },
          { prefer: "return=representation", accept: OBJECT },
        ];

        // PATCH and DELETE aimed at A's rows: the same answer as for random ids, and nothing changes.
        for (const headers of representations) {
          for (const where of [
            (ids: string[]) => `id=eq.${ids[0]}`,
            (ids: string[]) => `id=in.${inList(ids)}`,
            (ids: string[]) => `or=(id.eq.${ids[0]},id.in.${inList(ids)})`,
          ]) {
            await indistinguishable(actor, a, target, (ids) => ({
              method: "PATCH",
              path: `/${table}?${where(ids)}`,
              body: patch,
              headers,
            }));
            await indistinguishable(actor, a, target, (ids) => ({
              method: "DELETE",
              path: `/${table}?${where(ids)}`,
              headers,
            }));
          }
        }
        // Filters on A's account or user rather than ids.
        const column = table === "notifications" ? "user_id" : "account_id";
        const victimKey = table === "notifications" ? a.userId : a.accountId;
        for (const method of ["PATCH", "DELETE"]) {
          await indistinguishable(actor, a, [victimKey], (ids) => ({
            method,
            path: `/${table}?${column}=eq.${ids[0]}`,
            headers: { prefer: "return=representation,count=exact" },
            ...(method === "PATCH" ? { body: patch } : {}),
          }));
        }

        // Upserts aimed at A's primary key must not overwrite A's row.
        const body = await insertBody(table, me);
        for (const resolution of ["merge-duplicates", "ignore-duplicates"]) {
          for (const path of [`/${table}`, `/${table}?on_conflict=id`]) {
            for (const id of target) {
              const o = await send(actor, "POST", path, {
                body: { ...body, id },
                headers: { prefer: `resolution=${resolution},return=representation` },
              });
              const what = `${actor.name} POST ${path} ${resolution} on A's ${table} ${id}`;
              assertNoServerError(o, what);
              assertNoSecret(o, a, what, [id]);
              if (o.status < 300) assert.ok(idsIn(o.text).every((x) => x !== id) || o.text === "[]", what);
            }
          }
          // Several rows at once, A's among the attacker's own.
          const ownId = (await ownIds(me, table))[0] as string;
          const bulk = await send(actor, "POST", `/${table}?on_conflict=id`, {
            body: [
              { ...body, id: ownId },
              { ...body, id: target[0] },
            ],
            headers: { prefer: `resolution=${resolution},return=representation` },
          });
          assertNoServerError(bulk, `bulk upsert ${resolution}`);
          assertNoSecret(bulk, a, `bulk upsert ${resolution}`, [target[0] as string]);
        }

        // PUT on A's id: a replace is an upsert on the primary key, and must not replace A's row.
        for (const id of target) {
          const o = await send(actor, "PUT", `/${table}?id=eq.${id}`, {
            body: { ...body, id },
            headers: { prefer: "return=representation" },
          });
          assertNoServerError(o, `PUT ${table} ${id}`);
          assertNoSecret(o, a, `PUT ${table}`, [id]);
          assert.ok(o.status >= 400 || !o.text.includes(a.marker), `PUT ${table}: ${o.status} ${o.text}`);
        }

        await assertUntouched();
      });
    }

    test(`${attacker.name}: rows cannot be attached to A's parents or put into A's account`, async () => {
      const me = attacker.get();
      const actor = me.actor;
      const cases: { table: Table; target: string; body: (id: string) => Record<string, unknown> }[] = [
        {
          table: "releases",
          target: a.artistId,
          body: (id) => ({ title: "Squat", artist_id: id, status: "draft" }),
        },
        {
          table: "tracks",
          target: a.draftReleaseId,
          body: (id) => ({ title: "Squat", release_id: id, isrc: "QZBBB2600001", duration: 60 }),
        },
        {
          table: "takedown_requests",
          target: a.deliveredReleaseId,
          body: (id) => ({ release_id: id, reason: "Squat", status: "pending" }),
        },
        { table: "artist_profiles", target: a.accountId, body: (id) => ({ name: "Squat", account_id: id }) },
        {
          table: "releases",
          target: a.accountId,
          body: (id) => ({ title: "Squat", artist_id: me.artistId, account_id: id, status: "draft" }),
        },
        {
          table: "tracks",
          target: a.accountId,
          body: (id) => ({ title: "Squat", release_id: me.draftReleaseId, account_id: id }),
        },
        {
          table: "notifications",
          target: a.userId,
          body: (id) => ({ user_id: id, kind: "release.approved", title: "Phish" }),
        },
        { table: "media_assets", target: a.draftReleaseId, body: artworkOf },
        {
          table: "media_assets",
          target: a.ids.tracks[0] as string,
          body: (id) => ({
            ...artworkOf(me.draftReleaseId),
            track_id: id,
            kind: "audio",
            content_type: "audio/wav",
          }),
        },
        {
          table: "media_assets",
          target: a.accountId,
          body: (id) => ({ ...artworkOf(me.draftReleaseId), account_id: id }),
        },
      ];
      for (const k of cases) {
        for (const prefer of ["return=representation", "return=minimal"]) {
          const o = await indistinguishable(actor, a, [k.target], (ids) => ({
            method: "POST",
            path: `/${k.table}`,
            body: k.body(ids[0] as string),
            headers: { prefer },
          }));
          assert.ok(
            o.status >= 400 && o.status < 500,
            `${k.table} ${JSON.stringify(k.body(k.target))}: ${o.status}`,
          );
        }
        // The same through PATCH of the attacker's own row, moving it under A's parent or account.
        const ownId = (await ownIds(me, k.table))[0] as string;
        const move = k.body(k.target);
        delete move.title;
        delete move.name;
        const o = await send(actor, "PATCH", `/${k.table}?id=eq.${ownId}`, {
          body: move,
          headers: { prefer: "return=representation" },
        });
        assertNoServerError(o, `PATCH ${k.table} onto A`);
        assert.ok(o.status >= 400, `PATCH ${k.table} ${JSON.stringify(move)}: ${o.status} ${o.text}`);
      }
      // The attacker's own release, still draft: its artist cannot be swapped for A's.
      const swap = await send(actor, "PATCH", `/releases?id=eq.${me.draftReleaseId}`, {
        body: { artist_id: a.artistId },
      });
      assert.ok(swap.status >= 400 && swap.status < 500, `artist swap: ${swap.status}`);
      assertNoSecret(swap, a, "artist swap", [a.artistId]);
      await assertUntouched();
    });
  }

  /** A body the party may insert into `table` (or as close as the grants allow). */
  async function insertBody(table: Table, p: Party): Promise<Record<string, unknown>> {
    switch (table) {
      case "artist_profiles":
        return { name: "hijacked" };
      case "releases":
        return { title: "hijacked", artist_id: p.artistId, status: "draft" };
      case "tracks":
        return { title: "hijacked", release_id: p.draftReleaseId };
      case "takedown_requests":
        return { release_id: p.deliveredReleaseId, reason: "hijacked", status: "pending" };
      case "release_analytics":
        return {
          release_id: p.deliveredReleaseId,
          period_start: "2026-01-01",
          period_end: "2026-01-31",
          store: "hijacked",
          currency: "EUR",
        };
      case "track_analytics":
        return {
          track_id: p.ids.tracks[1],
          release_id: p.deliveredReleaseId,
          period_start: "2026-01-01",
          period_end: "2026-01-31",
          store: "hijacked",
          currency: "EUR",
        };
      case "notifications":
        return { user_id: p.userId, kind: "x", title: "hijacked" };
      case "media_assets":
        return artworkOf(p.draftReleaseId);
    }
  }

  /** What a client names when it asks for an upload of a release's cover. */
  function artworkOf(releaseId: string): Record<string, unknown> {
    return {
      release_id: releaseId,
      kind: "artwork",
      filename: "hijacked.jpg",
      content_type: "image/jpeg",
      max_bytes: 1000,
      upload_expires_at: UPLOAD_EXPIRES_AT,
    };
  }

  // -----------------------------------------------------------------------------------------------
  // Keys and tokens across tenants

  test("a user's token of one tenant with another tenant's key is 401, and reaches nothing", async () => {
    const mixes: Actor[] = [
      { name: "A's token, tenant 2's anon key", apikey: c.keys.anon_key, bearer: a.actor.bearer },
      { name: "C's token, tenant 1's anon key", apikey: a.keys.anon_key, bearer: c.actor.bearer },
      { name: "A's token, tenant 2's service key", apikey: c.keys.service_role_key, bearer: a.actor.bearer },
      {
        name: "tenant 1's service key, tenant 2's anon key",
        apikey: c.keys.anon_key,
        bearer: a.keys.service_role_key,
      },
      {
        name: "tenant 2's anon key as bearer, tenant 1's anon key",
        apikey: a.keys.anon_key,
        bearer: c.keys.anon_key,
      },
    ];
    for (const actor of mixes) {
      for (const table of TABLES) {
        for (const method of ["GET", "HEAD", "POST", "PATCH", "DELETE"]) {
          const o = await send(actor, method, `/${table}?id=eq.${c.ids[table][0]}`, {
            ...(method === "POST" || method === "PATCH" ? { body: SPEC[table].patch } : {}),
          });
          assert.equal(o.status, 401, `${actor.name} ${method} ${table}: ${o.status} ${o.text}`);
          if (method !== "HEAD") {
            const err = JSON.parse(o.text) as { code: string };
            assert.equal(err.code, "PGRST301", `${actor.name}: ${o.text}`);
          }
          assertNoSecret(o, a, actor.name);
          assertNoSecret(o, c, actor.name);
        }
      }
    }
    await assertUntouched();
  });

  test("the anon key alone reaches no row of any table", async () => {
    const anon: Actor = { name: "anon", apikey: a.keys.anon_key, bearer: a.keys.anon_key };
    for (const table of TABLES) {
      const o = await send(anon, "GET", `/${table}`, { headers: { prefer: "count=exact" } });
      assert.ok(o.status === 401 || (o.status === 200 && o.text === "[]"), `${table}: ${o.status} ${o.text}`);
      assertNoSecret(o, a, `anon GET ${table}`);
      const patch = await send(anon, "PATCH", `/${table}?id=eq.${a.ids[table][0]}`, {
        body: SPEC[table].patch,
      });
      assert.ok(patch.status === 401 || patch.status === 204, `${table}: ${patch.status}`);
      const del = await send(anon, "DELETE", `/${table}?id=eq.${a.ids[table][0]}`);
      assert.ok(del.status === 401 || del.status === 204, `${table}: ${del.status}`);
    }
    await assertUntouched();
  });

  test("the tenant's service-role key reads every account of its tenant and no row of the other", async () => {
    const service: Actor = {
      name: "tenant 1 service key",
      apikey: a.keys.service_role_key,
      bearer: a.keys.service_role_key,
    };
    for (const table of TABLES) {
      const expected = [...a.ids[table], ...b.ids[table]].sort();
      const tenantIds = (
        await rows<{ id: string }>(
          table === "notifications"
            ? "select id::text from public.notifications where tenant_id = $1 order by id"
            : `select x.id::text from public.${table} x join internal.accounts ac on ac.id = x.account_id where ac.tenant_id = $1 order by x.id`,
          [a.tenant.id],
        )
      ).map((r) => r.id);
      const o = await send(service, "GET", `/${table}?select=id&order=id`, {
        headers: { prefer: "count=exact" },
      });
      assert.equal(o.status, 200, `${table}: ${o.text}`);
      const got = (JSON.parse(o.text) as { id: string }[]).map((r) => r.id);
      assert.deepEqual(got, tenantIds, table);
      for (const id of expected)
        assert.ok(got.includes(id), `${table}: the service key sees ${id} of A or B`);
      assert.equal(o.contentRange, `0-${got.length - 1}/${got.length}`);
      assertNoSecret(o, c, `service GET ${table}`);

      // The other tenant's rows: not by id, not in a tree, not by embedding, not by count.
      const byId = await indistinguishable(service, c, c.ids[table], (ids) => ({
        method: "GET",
        path: `/${table}?or=(id.in.(${ids.join(",")}),id.eq.${a.ids[table][0]})&select=id`,
        headers: { prefer: "count=exact" },
      }));
      assert.deepEqual(JSON.parse(byId.text), [{ id: a.ids[table][0] }]);
      for (const select of SPEC[table].embeds) {
        const e = await send(service, "GET", `/${table}?select=${encodeURIComponent(select)}`);
        assert.equal(e.status, 200, `${table} select=${select}: ${e.text}`);
        assertNoSecret(e, c, `service select=${select}`);
      }
      for (const method of ["PATCH", "DELETE"]) {
        await indistinguishable(service, c, c.ids[table], (ids) => ({
          method,
          path: `/${table}?id=in.(${ids.join(",")})`,
          headers: { prefer: "return=representation,count=exact" },
          ...(method === "PATCH" ? { body: SPEC[table].patch } : {}),
        }));
      }
      const object = await indistinguishable(service, c, c.ids[table], (ids) => ({
        method: "GET",
        path: `/${table}?id=eq.${ids[0]}`,
        headers: { accept: OBJECT },
      }));
      assert.equal(object.status, 406);
    }
    // Upserts and PUT on the other tenant's ids do not overwrite them.
    const put = await send(service, "PUT", `/artist_profiles?id=eq.${c.artistId}`, {
      body: { id: c.artistId, name: "hijacked", account_id: a.accountId },
    });
    assertNoServerError(put, "service PUT");
    const upsert = await send(service, "POST", "/artist_profiles?on_conflict=id", {
      body: { id: c.artistId, name: "hijacked", account_id: a.accountId },
      headers: { prefer: "resolution=merge-duplicates,return=representation" },
    });
    assertNoServerError(upsert, "service upsert");
    assertNoSecret(upsert, c, "service upsert", [c.artistId]);
    // Nor can it send the other tenant's user a notification.
    const phish = await indistinguishable(service, c, [c.userId], (ids) => ({
      method: "POST",
      path: "/notifications",
      body: { user_id: ids[0], kind: "release.approved", title: "Phish" },
    }));
    assert.ok(
      phish.status >= 400 && phish.status < 500,
      `notification to another tenant's user: ${phish.status}`,
    );
    await assertUntouched();
  });

  test("the service-role key only as apikey, without Authorization, is 401 (a token is required)", async () => {
    const res = await fetch(`${app.url}/rest/v1/releases`, { headers: { apikey: a.keys.service_role_key } });
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { code: string }).code, "PGRST302");
  });
});
