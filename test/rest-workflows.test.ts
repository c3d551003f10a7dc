import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient, type User } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { forceReleaseStatus } from "./support/seed.ts";

/**
 * Seed 000's workflows at /rest/v1, end to end: the real server on a socket, the real
 * @supabase/supabase-js client (postgrest-js under `from(...)`), a real database per engine.
 * The release workflow, the takedown workflow and notifications are followed literally, in the
 * seed's order, with the operator's part done on the service path as its backend would.
 */

const PASSWORD = "Correct-Horse-7";
const newEmail = () => `user-${randomUUID().slice(0, 8)}@example.com`;

interface PgError {
  code: string;
  message: string;
  details: string | null;
  hint: string | null;
}

/** What a test asserts about an error postgrest-js reports. */
function assertPgError(
  result: { error: PgError | null; status: number },
  expected: { status: number; code: string },
): void {
  assert.ok(result.error, `expected ${expected.status} ${expected.code}, got no error (${result.status})`);
  assert.deepEqual(
    { status: result.status, code: result.error.code },
    { status: expected.status, code: expected.code },
    result.error.message,
  );
  // PostgREST's error body: exactly these four members.
  assert.deepEqual(Object.keys(result.error).sort(), ["code", "details", "hint", "message"]);
  assert.equal(typeof result.error.message, "string");
}

function assertOk<T>(result: { data: T | null; error: PgError | null; status: number }): T {
  assert.equal(result.error, null, `unexpected error: ${JSON.stringify(result.error)}`);
  assert.ok(result.data !== null, `no data (status ${result.status})`);
  return result.data;
}

describeEachEngine("rest: seed 000 workflows with supabase-js", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  /** A tenant without e-mail confirmation, and supabase-js clients on its anon key. */
  async function tenant() {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const client = (): SupabaseClient =>
      createClient(app.url, keys.anon_key, { auth: { persistSession: false, autoRefreshToken: false } });
    return { tenant, keys, client };
  }
  type Env = Awaited<ReturnType<typeof tenant>>;

  /** Signs a new user up; the client holds the session, so every request carries the user's token. */
  async function signedUp(env: Env): Promise<{ client: SupabaseClient; user: User; accessToken: string }> {
    const client = env.client();
    const { data, error } = await client.auth.signUp({ email: newEmail(), password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.session && data.user, "sign-up without confirmation returns a session");
    return { client, user: data.user, accessToken: data.session.access_token };
  }

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  /** A raw request to /rest/v1, for what the client hides (status, headers). */
  function raw(
    env: Env,
    path: string,
    init: { method?: string; bearer?: string | null; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    return fetch(`${app.url}/rest/v1${path}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: {
        apikey: env.keys.anon_key,
        ...(init.bearer ? { authorization: `Bearer ${init.bearer}` } : {}),
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
  }

  interface Catalog {
    artist: { id: string; account_id: string };
    release: { id: string; status: string };
    tracks: { id: string; title: string; isrc: string | null }[];
  }

  /** Steps 1-3 of the release workflow: an artist, a draft release linked to it, two tracks. */
  async function catalog(client: SupabaseClient, title = "Midnight Signals"): Promise<Catalog> {
    const artist = assertOk(
      await client
        .from("artist_profiles")
        .insert({
          name: "Mira Vale",
          bio: "Synth-pop from Lisbon.",
          streamingA_id: "3WrFJ7ztbogyGnTHbHJFl2",
          streamingB_id: "1147483647",
        })
        .select()
        .single(),
    ) as Catalog["artist"];
    const release = assertOk(
      await client
        .from("releases")
        .insert({ title, artist_id: artist.id, release_date: "2026-09-18", status: "draft" })
        .select()
        .single(),
    ) as Catalog["release"];
    const tracks = assertOk(
      await client
        .from("tracks")
        .insert([
          { release_id: release.id, title: "Neon Tide", isrc: "PT-AB1-26-00001", duration: 214 },
          { release_id: release.id, title: "Static Bloom", isrc: "PTAB12600002", duration: 187 },
        ])
        .select(),
    ) as Catalog["tracks"];
    return { artist, release, tracks };
  }

  // ---------------------------------------------------------------------------------------------
  // The release workflow

  test("release workflow: sign up, artist, draft release, tracks, list, edit, submit", async () => {
    const env = await tenant();
    const { client, user } = await signedUp(env);
    const [account] = await rows<{ account_id: string }>(
      "select account_id from internal.memberships where user_id = $1",
      [user.id],
    );
    assert.ok(account, "sign-up gives the user a personal account");

    // 1. Create an artist.
    const created = await client
      .from("artist_profiles")
      .insert({
        name: "Mira Vale",
        bio: "Synth-pop from Lisbon.",
        streamingA_id: "3WrFJ7ztbogyGnTHbHJFl2",
        streamingB_id: "1147483647",
      })
      .select()
      .single();
    assert.equal(created.status, 201);
    const artist = assertOk(created) as Record<string, unknown>;
    assert.equal(typeof artist.id, "string");
    assert.deepEqual(
      {
        name: artist.name,
        bio: artist.bio,
        streamingA_id: artist.streamingA_id,
        streamingB_id: artist.streamingB_id,
        account_id: artist.account_id,
        created_by: artist.created_by,
      },
      {
        name: "Mira Vale",
        bio: "Synth-pop from Lisbon.",
        streamingA_id: "3WrFJ7ztbogyGnTHbHJFl2",
        streamingB_id: "1147483647",
        account_id: account.account_id,
        created_by: user.id,
      },
    );
    const listed = assertOk(await client.from("artist_profiles").select());
    assert.deepEqual(
      listed.map((a) => a.id),
      [artist.id],
    );

    // 2. Create a release linked to that artist.
    const releaseResult = await client
      .from("releases")
      .insert({
        title: "Midnight Signals",
        artist_id: artist.id,
        release_date: "2026-09-18",
        status: "draft",
      })
      .select()
      .single();
    assert.equal(releaseResult.status, 201);
    const release = assertOk(releaseResult) as Record<string, unknown>;
    assert.deepEqual(
      {
        title: release.title,
        artist_id: release.artist_id,
        release_date: release.release_date,
        status: release.status,
        account_id: release.account_id,
        artist_name: release.artist_name,
      },
      {
        title: "Midnight Signals",
        artist_id: artist.id,
        release_date: "2026-09-18",
        status: "draft",
        account_id: account.account_id,
        artist_name: "Mira Vale",
      },
    );
    const releaseId = release.id as string;

    // 3. Add tracks linked to the release (one at a time, as the seed's POST /tracks does).
    const trackIds: string[] = [];
    for (const [i, body] of [
      { release_id: releaseId, title: "Neon Tide", isrc: "PT-AB1-26-00001", duration: 214 },
      { release_id: releaseId, title: "Static Bloom", isrc: "ptab12600002", duration: 187 },
    ].entries()) {
      const r = await client.from("tracks").insert(body).select().single();
      assert.equal(r.status, 201, `track ${i}`);
      const track = assertOk(r) as Record<string, unknown>;
      assert.equal(track.release_id, releaseId);
      assert.equal(track.duration, body.duration);
      trackIds.push(track.id as string);
    }

    // Listing: releases of the artist, tracks of the release.
    const releases = assertOk(
      await client
        .from("releases")
        .select()
        .eq("artist_id", artist.id as string),
    );
    assert.deepEqual(
      releases.map((r) => [r.id, r.title, r.status]),
      [[releaseId, "Midnight Signals", "draft"]],
    );
    const tracks = assertOk(
      await client.from("tracks").select().eq("release_id", releaseId).order("title", { ascending: true }),
    );
    assert.deepEqual(
      tracks.map((tr) => [tr.id, tr.title, tr.isrc, tr.duration]),
      [
        [trackIds[0], "Neon Tide", "PTAB12600001", 214],
        [trackIds[1], "Static Bloom", "PTAB12600002", 187],
      ],
      "ISRCs are stored normalised",
    );

    // PATCH a track's title: no representation asked for, so 204 and no body.
    const renamed = await client
      .from("tracks")
      .update({ title: "Neon Tide (Radio Edit)" })
      .eq("id", trackIds[0] as string);
    assert.equal(renamed.error, null);
    assert.equal(renamed.status, 204);
    assert.equal(renamed.data, null);
    const [track0] = assertOk(
      await client
        .from("tracks")
        .select("title")
        .eq("id", trackIds[0] as string),
    );
    assert.equal(track0?.title, "Neon Tide (Radio Edit)");

    // 5. Update the release status to submitted.
    const submitted = await client.from("releases").update({ status: "submitted" }).eq("id", releaseId);
    assert.equal(submitted.error, null);
    assert.ok(submitted.status === 200 || submitted.status === 204, `status ${submitted.status}`);
    const [afterSubmit] = assertOk(
      await client.from("releases").select("status, submitted_at").eq("id", releaseId),
    );
    assert.equal(afterSubmit?.status, "submitted");
    assert.ok(afterSubmit?.submitted_at, "submitted_at is set");

    // The release is no longer editable: not its fields, not its status, not its tracks.
    assertPgError(await client.from("releases").update({ title: "Changed" }).eq("id", releaseId), {
      status: 409,
      code: "BL001",
    });
    assertPgError(await client.from("releases").update({ status: "draft" }).eq("id", releaseId), {
      status: 409,
      code: "BL001",
    });
    assertPgError(
      await client
        .from("tracks")
        .update({ title: "Changed" })
        .eq("id", trackIds[1] as string),
      { status: 409, code: "BL001" },
    );
    assertPgError(
      await client.from("tracks").insert({ release_id: releaseId, title: "Bonus", isrc: "PTAB12600003" }),
      { status: 409, code: "BL001" },
    );
    const [unchanged] = assertOk(await client.from("releases").select("title, status").eq("id", releaseId));
    assert.deepEqual(unchanged, { title: "Midnight Signals", status: "submitted" });

    // 6. The operator's backend takes it from here: a review job and a release.submitted event.
    const jobs = await rows<{ kind: string; status: string }>(
      "select kind, status from internal.jobs where payload ->> 'release_id' = $1",
      [releaseId],
    );
    assert.deepEqual(jobs, [{ kind: "release.review", status: "queued" }]);
    const events = await rows<{ type: string; account_id: string; tenant_id: string; status: string }>(
      `select type, account_id, tenant_id, data -> 'object' ->> 'status' as status from internal.events
       where data -> 'object' ->> 'id' = $1 order by created_at`,
      [releaseId],
    );
    assert.deepEqual(events, [
      {
        type: "release.submitted",
        account_id: account.account_id,
        tenant_id: env.tenant.id,
        status: "submitted",
      },
    ]);
    const history = await rows<{ from_status: string | null; to_status: string; actor_user_id: string }>(
      "select from_status, to_status, actor_user_id from internal.release_history where release_id = $1 order by id",
      [releaseId],
    );
    assert.deepEqual(history, [
      { from_status: null, to_status: "draft", actor_user_id: user.id },
      { from_status: "draft", to_status: "submitted", actor_user_id: user.id },
    ]);
  });

  test("release workflow over raw HTTP: PATCH status submitted, then a further PATCH is 409 BL001", async () => {
    const env = await tenant();
    const { client, accessToken } = await signedUp(env);
    const { release } = await catalog(client);

    const submit = await raw(env, `/releases?id=eq.${release.id}`, {
      method: "PATCH",
      bearer: accessToken,
      body: { status: "submitted" },
      headers: { prefer: "return=representation" },
    });
    assert.equal(submit.status, 200);
    const [row] = (await submit.json()) as { id: string; status: string }[];
    assert.deepEqual([row?.id, row?.status], [release.id, "submitted"]);

    const again = await raw(env, `/releases?id=eq.${release.id}`, {
      method: "PATCH",
      bearer: accessToken,
      body: { title: "Changed" },
    });
    assert.equal(again.status, 409);
    assert.match(again.headers.get("content-type") ?? "", /^application\/json/);
    const body = (await again.json()) as PgError;
    assert.equal(body.code, "BL001");
    assert.deepEqual(Object.keys(body).sort(), ["code", "details", "hint", "message"]);
    assert.deepEqual(JSON.parse(body.details ?? "{}"), { release_id: release.id, status: "submitted" });
  });

  test("DELETE: a draft release goes, with its tracks; a delivered one is 409 BL001 and stays", async () => {
    const env = await tenant();
    const { client } = await signedUp(env);
    const draft = await catalog(client, "Draft to delete");
    const removed = await client.from("releases").delete().eq("id", draft.release.id);
    assert.equal(removed.error, null);
    assert.equal(removed.status, 204);
    assert.deepEqual(assertOk(await client.from("releases").select("id").eq("id", draft.release.id)), []);
    assert.deepEqual(
      assertOk(await client.from("tracks").select("id").eq("release_id", draft.release.id)),
      [],
    );
    const [last] = await rows<{ to_status: string }>(
      "select to_status from internal.release_history where release_id = $1 order by id desc limit 1",
      [draft.release.id],
    );
    assert.equal(last?.to_status, "deleted");

    const kept = await catalog(client, "Delivered, kept");
    await forceReleaseStatus(t().db, kept.release.id, "delivered");
    assertPgError(await client.from("releases").delete().eq("id", kept.release.id), {
      status: 409,
      code: "BL001",
    });
    assertPgError(
      await client
        .from("tracks")
        .delete()
        .eq("id", kept.tracks[0]?.id as string),
      { status: 409, code: "BL001" },
    );
    assert.deepEqual(assertOk(await client.from("releases").select("id, status").eq("id", kept.release.id)), [
      { id: kept.release.id, status: "delivered" },
    ]);
    assert.equal(
      assertOk(await client.from("tracks").select("id").eq("release_id", kept.release.id)).length,
      2,
    );
  });

  // ---------------------------------------------------------------------------------------------
  // Analytics

  test("analytics: rows the operator fills are read by the user by release_id and track_id", async () => {
    const env = await tenant();
    const { client } = await signedUp(env);
    const { artist, release, tracks } = await catalog(client);
    const track = tracks[0];
    assert.ok(track);
    await forceReleaseStatus(t().db, release.id, "live");

    // 7. Analytics appear: the operator's backend writes them.
    await t().db.asService(async (tx) => {
      await tx.query(
        `insert into public.release_analytics (release_id, account_id, period_start, period_end, store, streams, downloads, revenue, currency)
         values ($1, $2, '2026-10-01', '2026-10-31', 'streamingA', 15230, 12, 61.234567, 'EUR'),
                ($1, $2, '2026-10-01', '2026-10-31', 'streamingB', 4200, 0, 16.8, 'EUR')`,
        [release.id, artist.account_id],
      );
      await tx.query(
        `insert into public.track_analytics (track_id, release_id, account_id, period_start, period_end, store, streams, revenue, currency)
         values ($1, $2, $3, '2026-10-01', '2026-10-31', 'streamingA', 9000, 36.0, 'EUR')`,
        [track.id, release.id, artist.account_id],
      );
    });

    const byRelease = assertOk(
      await client.from("release_analytics").select().eq("release_id", release.id).order("store"),
    );
    assert.deepEqual(
      byRelease.map((r) => [r.store, Number(r.streams), Number(r.downloads), Number(r.revenue), r.currency]),
      [
        ["streamingA", 15230, 12, 61.234567, "EUR"],
        ["streamingB", 4200, 0, 16.8, "EUR"],
      ],
    );
    const byTrack = assertOk(await client.from("track_analytics").select().eq("track_id", track.id));
    assert.deepEqual(
      byTrack.map((r) => [r.track_id, r.release_id, r.store, Number(r.streams)]),
      [[track.id, release.id, "streamingA", 9000]],
    );
    // The other track has none.
    assert.deepEqual(
      assertOk(
        await client
          .from("track_analytics")
          .select()
          .eq("track_id", tracks[1]?.id as string),
      ),
      [],
    );

    // Analytics are the operator's: a user can neither write nor change them.
    assertPgError(
      await client.from("release_analytics").insert({
        release_id: release.id,
        period_start: "2026-11-01",
        period_end: "2026-11-30",
        store: "x",
        currency: "EUR",
      }),
      { status: 403, code: "42501" },
    );
    assertPgError(
      await client.from("release_analytics").update({ streams: 1 }).eq("release_id", release.id),
      {
        status: 403,
        code: "42501",
      },
    );
    assertPgError(await client.from("track_analytics").delete().eq("track_id", track.id), {
      status: 403,
      code: "42501",
    });
    const [count] = await rows<{ n: string }>(
      "select count(*)::int as n from public.release_analytics where release_id = $1 and streams > 1",
      [release.id],
    );
    assert.equal(Number(count?.n), 2);
  });

  // ---------------------------------------------------------------------------------------------
  // The takedown workflow

  test("takedown workflow: pending request on a delivered release, operator moves it to completed", async () => {
    const env = await tenant();
    const { client, user } = await signedUp(env);
    const { release } = await catalog(client);
    assert.equal(
      (await client.from("releases").update({ status: "submitted" }).eq("id", release.id)).error,
      null,
    );
    // A release that was never delivered cannot be taken down.
    assertPgError(
      await client
        .from("takedown_requests")
        .insert({ release_id: release.id, reason: "Too early", status: "pending" }),
      { status: 409, code: "BL003" },
    );

    await forceReleaseStatus(t().db, release.id, "delivered");

    // A record is created in takedown_requests with a reason and status pending.
    const requested = await client
      .from("takedown_requests")
      .insert({ release_id: release.id, reason: "Rights dispute with the co-writer", status: "pending" })
      .select()
      .single();
    assert.equal(requested.status, 201);
    const request = assertOk(requested) as Record<string, unknown>;
    assert.deepEqual(
      [request.release_id, request.reason, request.status, request.created_by],
      [release.id, "Rights dispute with the co-writer", "pending", user.id],
    );

    const listed = assertOk(await client.from("takedown_requests").select());
    assert.deepEqual(
      listed.map((r) => [r.id, r.release_id, r.status]),
      [[request.id, release.id, "pending"]],
    );
    const [moved] = assertOk(
      await client.from("releases").select("status, status_reason").eq("id", release.id),
    );
    assert.deepEqual(moved, {
      status: "takedown_requested",
      status_reason: "Rights dispute with the co-writer",
    });
    const jobs = await rows<{ kind: string }>(
      "select kind from internal.jobs where payload ->> 'takedown_request_id' = $1",
      [request.id],
    );
    assert.deepEqual(jobs, [{ kind: "takedown.process" }]);

    // A second open request for the same release conflicts; the user cannot move the request on.
    assertPgError(
      await client
        .from("takedown_requests")
        .insert({ release_id: release.id, reason: "Again", status: "pending" }),
      { status: 409, code: "23505" },
    );
    assertPgError(
      await client
        .from("takedown_requests")
        .update({ status: "completed" })
        .eq("id", request.id as string),
      { status: 403, code: "42501" },
    );

    // The operator updates its status: processing, then completed.
    for (const status of ["processing", "completed"]) {
      await t().db.asService((tx) =>
        tx.query("update public.takedown_requests set status = $2 where id = $1", [request.id, status]),
      );
      const [seen] = assertOk(
        await client
          .from("takedown_requests")
          .select("status, completed_at")
          .eq("id", request.id as string),
      );
      assert.equal(seen?.status, status);
      assert.equal(seen?.completed_at === null, status !== "completed", "completed_at is set on completion");
    }
  });

  test("takedown requests: a status other than pending is the operator's (403 BL004)", async () => {
    const env = await tenant();
    const { client } = await signedUp(env);
    const { release } = await catalog(client);
    await forceReleaseStatus(t().db, release.id, "delivered");
    assertPgError(
      await client
        .from("takedown_requests")
        .insert({ release_id: release.id, reason: "Skip the queue", status: "completed" }),
      { status: 403, code: "BL004" },
    );
    const [still] = assertOk(await client.from("releases").select("status").eq("id", release.id));
    assert.equal(still?.status, "delivered", "the refused request changed nothing");
  });

  // ---------------------------------------------------------------------------------------------
  // Notifications

  test("notifications: the user lists theirs by user_id, marks one read; read_at is set; nothing else changes", async () => {
    const env = await tenant();
    const { client, user } = await signedUp(env);
    const { release } = await catalog(client);
    const ids = await t().db.asService(async (tx) => {
      const r = await tx.query<{ id: string }>(
        `insert into public.notifications (user_id, kind, title, body, data)
         values ($1, 'release.approved', 'Midnight Signals was approved', 'Delivery starts today.', $2),
                ($1, 'takedown.completed', 'Takedown completed', null, $2)
         returning id`,
        [user.id, JSON.stringify({ release_id: release.id })],
      );
      return r.rows.map((x) => x.id);
    });
    const [first, second] = ids as [string, string];

    const listed = assertOk(
      await client.from("notifications").select().eq("user_id", user.id).order("created_at").order("id"),
    );
    assert.deepEqual(listed.map((n) => n.id).sort(), [...ids].sort());
    for (const n of listed) {
      assert.equal(n.read, false);
      assert.equal(n.read_at, null);
      assert.equal(n.user_id, user.id);
      assert.equal(n.tenant_id, env.tenant.id);
    }

    const marked = await client
      .from("notifications")
      .update({ read: true })
      .eq("id", first)
      .select()
      .single();
    assert.equal(marked.status, 200);
    const row = assertOk(marked) as Record<string, unknown>;
    assert.equal(row.read, true);
    assert.ok(row.read_at, "read_at is set when read becomes true");
    const plain = await client.from("notifications").update({ read: true }).eq("id", second);
    assert.equal(plain.error, null);
    assert.equal(plain.status, 204);
    const after = assertOk(
      await client.from("notifications").select("id, read, read_at").eq("user_id", user.id),
    );
    assert.ok(after.every((n) => n.read === true && n.read_at !== null));

    // Only read may change: any other column is 403, and the row stays as it was.
    for (const change of [{ title: "Edited" }, { read: false, title: "Edited" }, { user_id: randomUUID() }]) {
      assertPgError(await client.from("notifications").update(change).eq("id", first), {
        status: 403,
        code: "42501",
      });
    }
    assertPgError(
      await client.from("notifications").insert({ user_id: user.id, kind: "x", title: "Self-made" }),
      { status: 403, code: "42501" },
    );
    assertPgError(await client.from("notifications").delete().eq("id", first), {
      status: 403,
      code: "42501",
    });
    const [stored] = await rows<{ title: string; read: boolean }>(
      "select title, read from public.notifications where id = $1",
      [first],
    );
    assert.deepEqual(stored, { title: "Midnight Signals was approved", read: true });
  });

  // ---------------------------------------------------------------------------------------------
  // The seed's error table

  test("errors: 401 without a token or with a bad apikey, 400 for a malformed UUID or a missing field", async () => {
    const env = await tenant();
    const { client, accessToken } = await signedUp(env);
    const { artist } = await catalog(client);

    const noToken = await raw(env, "/releases");
    assert.equal(noToken.status, 401);
    assert.equal(((await noToken.json()) as PgError).code, "PGRST302");
    const noKey = await fetch(`${app.url}/rest/v1/releases`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    assert.equal(noKey.status, 401);
    const badKey = await fetch(`${app.url}/rest/v1/releases`, {
      headers: { apikey: "not-a-key", authorization: `Bearer ${accessToken}` },
    });
    assert.equal(badKey.status, 401);
    const badToken = await raw(env, "/releases", { bearer: `${accessToken.slice(0, -4)}AAAA` });
    assert.equal(badToken.status, 401);
    // No key, an unknown key: the gateway's answer, as Supabase's (no PostgREST code); a bad token
    // behind a good key: PostgREST's.
    assert.deepEqual(await noKey.json(), {
      message: "No API key found in request",
      hint: "No `apikey` request header or url param was found.",
    });
    assert.deepEqual(Object.keys((await badKey.json()) as object).sort(), ["hint", "message"]);
    assert.deepEqual(Object.keys((await badToken.json()) as object).sort(), [
      "code",
      "details",
      "hint",
      "message",
    ]);

    assertPgError(await client.from("releases").select().eq("id", "not-a-uuid"), {
      status: 400,
      code: "22P02",
    });
    assertPgError(await client.from("releases").insert({ artist_id: artist.id, status: "draft" }), {
      status: 400,
      code: "23502",
    });
    assertPgError(await client.from("releases").insert({ title: "No artist", status: "draft" }), {
      status: 400,
      code: "23502",
    });
    assertPgError(await client.from("tracks").insert({ title: "No release" }), {
      status: 400,
      code: "23502",
    });
    assertPgError(await client.from("no_such_table").select(), { status: 404, code: "PGRST205" });
  });
});
