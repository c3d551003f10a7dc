import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type Account, getTenantKeys, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  assertFieldErrors,
  assertProblem,
  completeRelease,
  expectStatus,
  FUTURE_DATE,
  inDays,
  isrcs,
  issueTestKey,
  keyedAccount,
  type List,
  publicApi,
} from "./support/public-api.ts";
import { forceReleaseStatus, memberToken, seedAccount } from "./support/seed.ts";

/**
 * /api/public/v1 releases (seed 001) end to end: the real server on a socket, fetch with real API
 * keys, a real database per engine. Each endpoint's happy path, its validation errors (every
 * failing field at once), its state conflicts and its security (another account's ids, in the
 * same tenant and in another, answer 404 like ids that do not exist). The operator's pipeline
 * does not exist yet: releases reach delivered and live on the service path (forceReleaseStatus).
 * Tracks, artists and OAC requests: test/public-api-tracks-artists.test.ts.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

const nextIsrc = isrcs("USBKL");

const A_UUID = "00000000-0000-4000-8000-000000000000";

describeEachEngine("public api: releases", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  /** A tenant whose rate limits do not get in the way of a suite's hundreds of requests. */
  async function newTenant(): Promise<Tenant> {
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    return (await tenantWithKeys(t(), { settings })).tenant;
  }

  /** An account with a live key (catalog:read and catalog:write) and a client for it. */
  async function keyed(tenant?: Tenant): Promise<{ tenant: Tenant; account: Account; api: Api }> {
    const k = await keyedAccount(t().db, { tenant: tenant ?? (await newTenant()) });
    return { tenant: k.tenant, account: k.account, api: publicApi(app.url, k.key.secret) };
  }

  async function rows<T extends Obj>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  }

  async function createRelease(api: Api, overrides: Obj = {}): Promise<Obj & { id: string }> {
    return expectStatus(
      await api<Obj & { id: string }>("POST", "/releases", completeRelease(overrides)),
      201,
    );
  }

  async function addTrack(api: Api, releaseId: string, body: Obj = {}): Promise<Obj & { id: string }> {
    const res = await api<Obj & { id: string }>("POST", `/releases/${releaseId}/tracks`, {
      title: "Night Drive",
      isrc: nextIsrc(),
      duration: 200,
      ...body,
    });
    return expectStatus(res, 201);
  }

  /** A release that passes submit (complete fields, one track with an ISRC), moved to `status`. */
  async function releaseIn(api: Api, status = "draft", overrides: Obj = {}): Promise<string> {
    const release = await createRelease(api, overrides);
    await addTrack(api, release.id);
    if (status !== "draft") await forceReleaseStatus(t().db, release.id, status);
    return release.id;
  }

  async function statusOf(id: string): Promise<string | undefined> {
    return (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]
      ?.status;
  }

  // ---------------------------------------------------------------------------------------------
  // GET /rules

  test("GET /rules: territories (250, with XK), stores, genres and the 7-day lead time", async () => {
    const { api } = await keyed();
    const rules = expectStatus(await api<Obj>("GET", "/rules"), 200);
    assert.equal(rules.object, "rules");
    const territories = rules.territories as { code: string; name: string }[];
    assert.equal(territories.length, 250);
    assert.deepEqual(
      territories.find((x) => x.code === "XK"),
      { code: "XK", name: "Kosovo" },
    );
    assert.ok(territories.some((x) => x.code === "US"));
    assert.equal(new Set(territories.map((x) => x.code)).size, 250);
    const stores = rules.stores as { code: string; offers_oac: boolean; kind: string }[];
    assert.deepEqual(
      ["spotify", "apple_music", "youtube_music"].map((code) => stores.some((s) => s.code === code)),
      [true, true, true],
    );
    assert.equal(stores.find((s) => s.code === "youtube_music")?.offers_oac, true);
    const genres = rules.genres as { code: string }[];
    assert.ok(genres.some((g) => g.code === "electronic"));
    assert.equal(rules.release_lead_days, 7);
    assert.equal(rules.worldwide, "WW");
    assert.deepEqual(rules.page_size, { default: 20, max: 100 });
    assert.deepEqual(rules.release_statuses_on_create, ["draft", "pending"]);
  });

  // ---------------------------------------------------------------------------------------------
  // POST /releases

  test("POST /releases: creates a draft (or pending) release with the fields sent", async () => {
    const { api, account } = await keyed();
    const res = await api<Obj>(
      "POST",
      "/releases",
      completeRelease({
        genres: ["electronic", "ambient"],
        territories: ["XK"],
        territories_exclude: ["CU"],
        copyright: "2026 Night Owl Records",
        upc: "036000291452",
      }),
    );
    const release = expectStatus(res, 201);
    assert.equal(typeof release.id, "string");
    assert.deepEqual(
      {
        object: release.object,
        account_id: release.account_id,
        title: release.title,
        release_type: release.release_type,
        artist_name: release.artist_name,
        primary_genre: release.primary_genre,
        genres: release.genres,
        release_date: release.release_date,
        licensed_territories_include: release.licensed_territories_include,
        territories: release.territories,
        territories_exclude: release.territories_exclude,
        services: release.services,
        copyright: release.copyright,
        upc: release.upc,
        status: release.status,
        submitted_at: release.submitted_at,
      },
      {
        object: "release",
        account_id: account.id,
        title: "Night Drive",
        release_type: "single",
        artist_name: "Luna Vale",
        primary_genre: "electronic",
        genres: ["electronic", "ambient"],
        release_date: FUTURE_DATE,
        licensed_territories_include: "WW",
        territories: ["XK"],
        territories_exclude: ["CU"],
        services: ["spotify", "apple_music"],
        copyright: "2026 Night Owl Records",
        upc: "036000291452",
        status: "draft",
        submitted_at: null,
      },
    );
    const pending = await createRelease(api, { status: "pending" });
    assert.equal(pending.status, "pending");
  });

  test("POST /releases: artist_name creates the artist profile once and reuses it by name", async () => {
    const { api } = await keyed();
    const first = await createRelease(api, { artist_name: "Luna Vale" });
    const second = await createRelease(api, { artist_name: "Luna Vale", title: "Second" });
    const other = await createRelease(api, { artist_name: "Orion Fox", title: "Third" });
    assert.equal(second.artist_id, first.artist_id);
    assert.notEqual(other.artist_id, first.artist_id);
    const artists = expectStatus(await api<List>("GET", "/artists"), 200);
    assert.deepEqual(
      artists.data.map((a) => [a.name, a.id]),
      [
        ["Luna Vale", first.artist_id],
        ["Orion Fox", other.artist_id],
      ],
    );

    // artist_id alone: the display artist comes from the profile.
    const byId = await createRelease(api, { artist_name: undefined, artist_id: other.artist_id });
    assert.equal(byId.artist_id, other.artist_id);
    assert.equal(byId.artist_name, "Orion Fox");
  });

  test("POST /releases: artist_name never reuses another account's artist of that name", async () => {
    const mine = await keyed();
    const neighbour = await keyed(mine.tenant);
    const theirs = await createRelease(neighbour.api, { artist_name: "Luna Vale" });
    const ours = await createRelease(mine.api, { artist_name: "Luna Vale" });
    assert.notEqual(ours.artist_id, theirs.artist_id);
    const [profile] = await rows("select account_id from public.artist_profiles where id = $1", [
      ours.artist_id,
    ]);
    assert.deepEqual(profile, { account_id: mine.account.id });
  });

  test("POST /releases: concurrent creates naming one new artist share one artist profile", async () => {
    const { api } = await keyed();
    const created = await Promise.all(
      [1, 2, 3, 4].map((i) => createRelease(api, { artist_name: "Echo Park", title: `Take ${i}` })),
    );
    assert.equal(new Set(created.map((r) => r.artist_id)).size, 1, "one artist_id for all four releases");
    const artists = expectStatus(await api<List>("GET", "/artists"), 200);
    assert.deepEqual(
      artists.data.map((a) => a.name),
      ["Echo Park"],
    );
  });

  test("POST /releases: an artist_id of another account (same or other tenant) is 422 invalid_reference", async () => {
    const mine = await keyed();
    const neighbour = await keyed(mine.tenant);
    const stranger = await keyed();
    for (const owner of [neighbour, stranger]) {
      const theirs = await createRelease(owner.api);
      const res = await mine.api("POST", "/releases", {
        ...completeRelease({ artist_name: undefined }),
        artist_id: theirs.artist_id,
      });
      assertFieldErrors(res, [["artist_id", "invalid_reference"]]);
    }
    const none = await mine.api("POST", "/releases", {
      ...completeRelease({ artist_name: undefined }),
      artist_id: A_UUID,
    });
    assertFieldErrors(none, [["artist_id", "invalid_reference"]]);
    assert.equal(expectStatus(await mine.api<List>("GET", "/releases"), 200).total, 0);
  });

  const createCases: { name: string; body: Obj; errors: [string, string][] }[] = [
    { name: "missing title", body: { artist_name: "Luna Vale" }, errors: [["title", "required"]] },
    { name: "blank title", body: completeRelease({ title: "   " }), errors: [["title", "out_of_range"]] },
    { name: "missing artist", body: { title: "Night Drive" }, errors: [["artist_name", "required"]] },
    {
      name: "missing title and artist",
      body: { release_type: "single" },
      errors: [
        ["title", "required"],
        ["artist_name", "required"],
      ],
    },
    {
      name: "unknown territory",
      body: completeRelease({ territories: ["XX", "US"] }),
      errors: [["territories[0]", "invalid_territory"]],
    },
    {
      name: "malformed territory",
      body: completeRelease({ territories: ["US", "usa"] }),
      errors: [["territories[1]", "invalid_format"]],
    },
    {
      name: "unknown territory in licensed_territories_include",
      body: completeRelease({ licensed_territories_include: "US,QQ" }),
      errors: [["licensed_territories_include", "invalid_territory"]],
    },
    {
      name: "unknown territory in territories_exclude",
      body: completeRelease({ territories_exclude: ["ZZ"] }),
      errors: [["territories_exclude[0]", "invalid_territory"]],
    },
    {
      name: "unknown store",
      body: completeRelease({ services: ["spotify", "napster"] }),
      errors: [["services[1]", "invalid_service"]],
    },
    {
      name: "unknown primary genre",
      body: completeRelease({ primary_genre: "polka-core" }),
      errors: [["primary_genre", "invalid_genre"]],
    },
    {
      name: "unknown genre in genres",
      body: completeRelease({ genres: ["pop", "vaporwave-core"] }),
      errors: [["genres[1]", "invalid_genre"]],
    },
    {
      name: "UPC with a wrong check digit",
      body: completeRelease({ upc: "036000291453" }),
      errors: [["upc", "invalid_value"]],
    },
    {
      name: "UPC with letters",
      body: completeRelease({ upc: "03600029145X" }),
      errors: [["upc", "invalid_format"]],
    },
    {
      name: "impossible date",
      body: completeRelease({ release_date: "2026-02-30" }),
      errors: [["release_date", "invalid_format"]],
    },
    {
      name: "date in another format",
      body: completeRelease({ release_date: "18/09/2026" }),
      errors: [["release_date", "invalid_format"]],
    },
    { name: "unknown field", body: completeRelease({ mood: "dreamy" }), errors: [["mood", "unknown_field"]] },
    {
      name: "status other than draft or pending",
      body: completeRelease({ status: "submitted" }),
      errors: [["status", "invalid_choice"]],
    },
    {
      name: "unknown release type",
      body: completeRelease({ release_type: "boxset" }),
      errors: [["release_type", "invalid_choice"]],
    },
    {
      name: "wrong types",
      body: completeRelease({ explicit: "yes", genres: "pop" }),
      errors: [
        ["explicit", "invalid_type"],
        ["genres", "invalid_type"],
      ],
    },
    {
      name: "every failing field at once",
      body: {
        release_type: "boxset",
        artist_name: "Luna Vale",
        primary_genre: "polka-core",
        release_date: "2026-02-30",
        upc: "036000291453",
        licensed_territories_include: "US,QQ",
        territories: ["XX"],
        services: ["napster", "spotify", "zune"],
        mood: "dreamy",
      },
      errors: [
        ["title", "required"],
        ["release_type", "invalid_choice"],
        ["primary_genre", "invalid_genre"],
        ["release_date", "invalid_format"],
        ["upc", "invalid_value"],
        ["licensed_territories_include", "invalid_territory"],
        ["territories[0]", "invalid_territory"],
        ["services[0]", "invalid_service"],
        ["services[2]", "invalid_service"],
        ["mood", "unknown_field"],
      ],
    },
  ];

  for (const c of createCases) {
    test(`POST /releases: ${c.name} is 422 validation_failed and creates nothing`, async () => {
      const { api } = await keyed();
      assertFieldErrors(await api("POST", "/releases", c.body), c.errors);
      assert.equal(expectStatus(await api<List>("GET", "/releases"), 200).total, 0);
      assert.equal(expectStatus(await api<List>("GET", "/artists"), 200).total, 0);
    });
  }

  test("POST /releases: a body that is not a JSON object is 400", async () => {
    const { api } = await keyed();
    assertProblem(await api("POST", "/releases", "[1, 2]"), 400, "invalid_body");
    assertProblem(await api("POST", "/releases", "{not json"), 400, "invalid_json");
  });

  // ---------------------------------------------------------------------------------------------
  // GET /releases

  test("GET /releases: limit/offset pages, total and has_more; newest first; default 20, max 100", async () => {
    const { api } = await keyed();
    const created: string[] = [];
    for (let i = 0; i < 23; i++) created.push((await createRelease(api, { title: `Release ${i}` })).id);
    const newestFirst = [...created].reverse();

    const first = expectStatus(await api<List>("GET", "/releases"), 200);
    assert.deepEqual(
      { object: first.object, total: first.total, limit: first.limit, offset: first.offset },
      { object: "list", total: 23, limit: 20, offset: 0 },
    );
    assert.equal(first.has_more, true);
    assert.deepEqual(
      first.data.map((r) => r.id),
      newestFirst.slice(0, 20),
    );
    assert.ok(first.data.every((r) => r.object === "release"));

    const rest = expectStatus(await api<List>("GET", "/releases?limit=20&offset=20"), 200);
    assert.deepEqual(
      rest.data.map((r) => r.id),
      newestFirst.slice(20),
    );
    assert.deepEqual([rest.total, rest.has_more, rest.offset], [23, false, 20]);

    const middle = expectStatus(await api<List>("GET", "/releases?limit=5&offset=10"), 200);
    assert.deepEqual(
      middle.data.map((r) => r.id),
      newestFirst.slice(10, 15),
    );
    assert.equal(middle.has_more, true);

    const max = expectStatus(await api<List>("GET", "/releases?limit=100"), 200);
    assert.deepEqual([max.data.length, max.limit, max.has_more], [23, 100, false]);

    const beyond = expectStatus(await api<List>("GET", "/releases?offset=50"), 200);
    assert.deepEqual([beyond.data.length, beyond.total, beyond.has_more], [0, 23, false]);
  });

  const badQueries: { query: string; errors: [string, string][] }[] = [
    { query: "limit=101", errors: [["limit", "out_of_range"]] },
    { query: "limit=0", errors: [["limit", "out_of_range"]] },
    { query: "limit=ten", errors: [["limit", "invalid_type"]] },
    { query: "limit=2.5", errors: [["limit", "invalid_type"]] },
    { query: "offset=-1", errors: [["offset", "out_of_range"]] },
    { query: "status=bogus", errors: [["status", "invalid_value"]] },
    { query: "status=draft,bogus", errors: [["status", "invalid_value"]] },
    { query: "sort=title", errors: [["sort", "unknown_field"]] },
    {
      query: "limit=101&status=bogus",
      errors: [
        ["limit", "out_of_range"],
        ["status", "invalid_value"],
      ],
    },
  ];
  for (const c of badQueries) {
    test(`GET /releases?${c.query} is 400 invalid_parameter`, async () => {
      const { api } = await keyed();
      assertFieldErrors(await api("GET", `/releases?${c.query}`), c.errors, "invalid_parameter", 400);
    });
  }

  test("GET /releases?status= filters by one status or a comma-separated list", async () => {
    const { api } = await keyed();
    const draft = (await createRelease(api, { title: "Draft" })).id;
    const pending = (await createRelease(api, { title: "Pending", status: "pending" })).id;
    const live = await releaseIn(api, "live");
    const ids = async (query: string) =>
      expectStatus(await api<List>("GET", `/releases${query}`), 200)
        .data.map((r) => r.id)
        .sort();
    assert.deepEqual(await ids("?status=draft"), [draft]);
    assert.deepEqual(await ids("?status=pending"), [pending]);
    assert.deepEqual(await ids("?status=draft,pending"), [draft, pending].sort());
    assert.deepEqual(await ids("?status=live,pending"), [live, pending].sort());
    assert.deepEqual(await ids("?status=rejected"), []);
    assert.deepEqual(await ids(""), [draft, pending, live].sort());
    const filtered = expectStatus(await api<List>("GET", "/releases?status=draft,live&limit=1"), 200);
    assert.deepEqual([filtered.total, filtered.data.length, filtered.has_more], [2, 1, true]);
  });

  // ---------------------------------------------------------------------------------------------
  // GET /releases/{id}

  test("GET /releases/{id}: the release with its tracks in disc and track order, and its artists", async () => {
    const { api } = await keyed();
    const release = await createRelease(api, { release_type: "ep", artist_name: "Luna Vale" });
    const guest = expectStatus(
      await api<Obj & { id: string }>("POST", "/artists", { name: "Aria Kent" }),
      201,
    );
    await addTrack(api, release.id, { title: "Two", track_number: 2 });
    await addTrack(api, release.id, { title: "Disc Two", disc_number: 2, track_number: 1 });
    await addTrack(api, release.id, {
      title: "One",
      track_number: 1,
      contributors: [{ name: "Aria Kent", role: "featured_artist", artist_id: guest.id }],
    });

    const detail = expectStatus(await api<Obj>("GET", `/releases/${release.id}`), 200);
    assert.equal(detail.object, "release");
    assert.equal(detail.id, release.id);
    assert.equal(detail.title, release.title);
    const tracks = detail.tracks as Obj[];
    assert.deepEqual(
      tracks.map((x) => [x.title, x.disc_number, x.track_number, x.object]),
      [
        ["One", 1, 1, "track"],
        ["Two", 1, 2, "track"],
        ["Disc Two", 2, 1, "track"],
      ],
    );
    const artists = detail.artists as Obj[];
    assert.deepEqual(
      artists.map((a) => [a.id, a.name, a.object]),
      [
        [release.artist_id, "Luna Vale", "artist"],
        [guest.id, "Aria Kent", "artist"],
      ],
    );
  });

  test("GET /releases/{id}: a release without tracks has tracks [] and its one artist", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const detail = expectStatus(await api<Obj>("GET", `/releases/${release.id}`), 200);
    assert.deepEqual(detail.tracks, []);
    assert.deepEqual(
      (detail.artists as Obj[]).map((a) => a.id),
      [release.artist_id],
    );
  });

  // ---------------------------------------------------------------------------------------------
  // PATCH /releases/{id}

  test("PATCH /releases/{id}: changes the fields sent, leaves the rest", async () => {
    const { api } = await keyed();
    const release = await createRelease(api, { copyright: "2026 Night Owl" });
    const patched = expectStatus(
      await api<Obj>("PATCH", `/releases/${release.id}`, {
        title: "Night Drive (Deluxe)",
        services: ["deezer"],
        territories: ["XK", "RS"],
        status: "pending",
        upc: null,
      }),
      200,
    );
    assert.deepEqual(
      [patched.title, patched.services, patched.territories, patched.status, patched.copyright],
      ["Night Drive (Deluxe)", ["deezer"], ["XK", "RS"], "pending", "2026 Night Owl"],
    );
    const read = expectStatus(await api<Obj>("GET", `/releases/${release.id}`), 200);
    assert.equal(read.title, "Night Drive (Deluxe)");
    // An empty body changes nothing and answers the release.
    const same = expectStatus(await api<Obj>("PATCH", `/releases/${release.id}`, {}), 200);
    assert.equal(same.title, "Night Drive (Deluxe)");
  });

  test("PATCH /releases/{id}: every failing field at once, and the release is unchanged", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const res = await api("PATCH", `/releases/${release.id}`, {
      title: "",
      territories: ["XX"],
      services: ["napster"],
      primary_genre: "polka-core",
      upc: "036000291453",
      release_date: "tomorrow",
      status: "submitted",
      mood: "dreamy",
    });
    assertFieldErrors(res, [
      ["title", "out_of_range"],
      ["territories[0]", "invalid_territory"],
      ["services[0]", "invalid_service"],
      ["primary_genre", "invalid_genre"],
      ["upc", "invalid_value"],
      ["release_date", "invalid_format"],
      ["status", "invalid_choice"],
      ["mood", "unknown_field"],
    ]);
    const read = expectStatus(await api<Obj>("GET", `/releases/${release.id}`), 200);
    assert.deepEqual([read.title, read.services], [release.title, release.services]);
  });

  test("PATCH /releases/{id}: an artist_id of another account is 422 invalid_reference", async () => {
    const mine = await keyed();
    const other = await keyed(mine.tenant);
    const release = await createRelease(mine.api);
    const theirs = await createRelease(other.api);
    assertFieldErrors(await mine.api("PATCH", `/releases/${release.id}`, { artist_id: theirs.artist_id }), [
      ["artist_id", "invalid_reference"],
    ]);
    assert.equal(
      (await rows("select artist_id from public.releases where id = $1", [release.id]))[0]?.artist_id,
      release.artist_id,
    );
  });

  for (const status of [
    "submitted",
    "in_review",
    "approved",
    "delivering",
    "delivered",
    "live",
    "taken_down",
  ]) {
    test(`PATCH /releases/{id} of a ${status} release is 409 release_not_editable`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      assertProblem(await api("PATCH", `/releases/${id}`, { title: "Changed" }), 409, "release_not_editable");
      const [row] = await rows("select title, status from public.releases where id = $1", [id]);
      assert.deepEqual(row, { title: "Night Drive", status });
    });
  }

  test("PATCH /releases/{id} of a rejected release works again (it can be resubmitted)", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "rejected");
    const patched = expectStatus(await api<Obj>("PATCH", `/releases/${id}`, { title: "Fixed" }), 200);
    assert.deepEqual([patched.title, patched.status], ["Fixed", "rejected"]);
  });

  // ---------------------------------------------------------------------------------------------
  // DELETE /releases/{id}

  for (const status of ["draft", "pending", "submitted", "in_review", "approved", "rejected"]) {
    test(`DELETE /releases/{id} of a never-delivered ${status} release deletes it and its tracks`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      const res = expectStatus(await api<Obj>("DELETE", `/releases/${id}`), 200);
      assert.deepEqual(res, { id, object: "release", deleted: true });
      assertProblem(await api("GET", `/releases/${id}`), 404, "resource_missing");
      assert.deepEqual(await rows("select id from public.tracks where release_id = $1", [id]), []);
      const history = await rows<{ to_status: string }>(
        "select to_status from internal.release_history where release_id = $1 order by id desc limit 1",
        [id],
      );
      assert.equal(history[0]?.to_status, "deleted");
      assertProblem(await api("DELETE", `/releases/${id}`), 404, "resource_missing");
    });
  }

  for (const status of ["delivering", "delivered", "live", "takedown_requested", "taken_down"]) {
    test(`DELETE /releases/{id} of a ${status} release is 409 release_delivered`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      assertProblem(await api("DELETE", `/releases/${id}`), 409, "release_delivered");
      assert.equal(await statusOf(id), status);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // POST /releases/{id}/submit

  test("submit: a complete release becomes submitted, with its event, review job and history", async () => {
    const { api, account } = await keyed();
    const id = await releaseIn(api);
    const submitted = expectStatus(await api<Obj>("POST", `/releases/${id}/submit`), 200);
    assert.deepEqual([submitted.id, submitted.object, submitted.status], [id, "release", "submitted"]);
    assert.equal(typeof submitted.submitted_at, "string");

    const events = await rows<{ type: string; account_id: string; data: { object: Obj } }>(
      "select type, account_id, data from internal.events where data -> 'object' ->> 'id' = $1",
      [id],
    );
    assert.deepEqual(
      events.map((e) => [e.type, e.account_id, e.data.object.status]),
      [["release.submitted", account.id, "submitted"]],
    );
    const jobs = await rows<{ kind: string; payload: Obj; status: string }>(
      "select kind, payload, status from internal.jobs where payload ->> 'release_id' = $1",
      [id],
    );
    assert.deepEqual(jobs, [{ kind: "release.review", payload: { release_id: id }, status: "queued" }]);
    const history = await rows<{ from_status: string; to_status: string; actor_api_key_id: string | null }>(
      "select from_status, to_status, actor_api_key_id from internal.release_history where release_id = $1 order by id",
      [id],
    );
    assert.deepEqual(
      history.map((h) => [h.from_status, h.to_status]),
      [
        [null, "draft"],
        ["draft", "submitted"],
      ],
    );
    assert.equal(typeof history[1]?.actor_api_key_id, "string");

    // Submitting again is a conflict, and queues nothing more.
    assertProblem(await api("POST", `/releases/${id}/submit`), 409, "invalid_status_transition");
    assert.equal(
      (await rows("select 1 from internal.jobs where payload ->> 'release_id' = $1", [id])).length,
      1,
    );
  });

  test("submit: a pending release and a rejected one (resubmission clears the reason) submit", async () => {
    const { api } = await keyed();
    const pending = await releaseIn(api, "pending");
    assert.equal(
      expectStatus(await api<Obj>("POST", `/releases/${pending}/submit`), 200).status,
      "submitted",
    );
    const rejected = await releaseIn(api);
    await t().db.asService((tx) =>
      tx.query(
        "update public.releases set status = 'rejected', status_reason = 'Blurry artwork' where id = $1",
        [rejected],
      ),
    );
    const resubmitted = expectStatus(await api<Obj>("POST", `/releases/${rejected}/submit`), 200);
    assert.deepEqual([resubmitted.status, resubmitted.status_reason], ["submitted", null]);
  });

  for (const status of ["submitted", "in_review", "approved", "delivered", "live", "takedown_requested"]) {
    test(`submit: a ${status} release is 409 invalid_status_transition`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      assertProblem(await api("POST", `/releases/${id}/submit`), 409, "invalid_status_transition");
      assert.equal(await statusOf(id), status);
    });
  }

  test("submit: a bare release lists every problem at once (422 release_incomplete)", async () => {
    const { api } = await keyed();
    const bare = expectStatus(
      await api<{ id: string }>("POST", "/releases", { title: "Sketch", artist_name: "Luna Vale" }),
      201,
    );
    assertFieldErrors(
      await api("POST", `/releases/${bare.id}/submit`),
      [
        ["release_date", "required"],
        ["primary_genre", "required"],
        ["licensed_territories_include", "no_territories"],
        ["tracks", "no_tracks"],
      ],
      "release_incomplete",
    );
    assert.equal(await statusOf(bare.id), "draft");
  });

  test("GET /releases/{id}/problems: the list submit would give, without submitting; ready once complete", async () => {
    const { api, account } = await keyed();
    const bare = expectStatus(
      await api<{ id: string }>("POST", "/releases", { title: "Sketch", artist_name: "Luna Vale" }),
      201,
    );
    const listed = expectStatus(
      await api<{ object: string; ready: boolean; submittable_status: boolean; errors: Obj[] }>(
        "GET",
        `/releases/${bare.id}/problems`,
      ),
      200,
    );
    assert.equal(listed.object, "release_problems");
    assert.equal(listed.ready, false);
    assert.equal(listed.submittable_status, true);
    const refused = await api<{ errors: Obj[] }>("POST", `/releases/${bare.id}/submit`);
    assert.equal(refused.status, 422);
    assert.deepEqual(listed.errors, refused.body.errors, "the same problems, in the same order, as submit's");
    assert.equal(await statusOf(bare.id), "draft", "asking changes nothing");

    const complete = await releaseIn(api);
    const ready = expectStatus(
      await api<{ ready: boolean; errors: Obj[] }>("GET", `/releases/${complete}/problems`),
      200,
    );
    assert.deepEqual([ready.ready, ready.errors], [true, []]);
    expectStatus(await api("POST", `/releases/${complete}/submit`), 200);
    const submitted = expectStatus(
      await api<{ ready: boolean; submittable_status: boolean }>("GET", `/releases/${complete}/problems`),
      200,
    );
    assert.deepEqual([submitted.ready, submitted.submittable_status], [false, false]);

    // Another account's release is not found, as everywhere else; a key of this account without
    // catalog:read is refused.
    const other = await keyed();
    assertProblem(await other.api("GET", `/releases/${bare.id}/problems`), 404, "resource_missing");
    const royaltiesOnly = await issueTestKey(t().db, account, { scopes: ["royalties:read"] });
    assertProblem(
      await publicApi(app.url, royaltiesOnly.secret)("GET", `/releases/${bare.id}/problems`),
      403,
      "insufficient_scope",
    );
  });

  test("submit: date too soon, no territory, bad service, track without ISRC: all listed, nothing changes", async () => {
    const { api } = await keyed();
    const release = await createRelease(api, {
      release_date: inDays(2),
      licensed_territories_include: "US",
      territories_exclude: ["US"],
    });
    await addTrack(api, release.id, { title: "Has ISRC" });
    await addTrack(api, release.id, { title: "No ISRC", isrc: undefined });
    // A store code the API would refuse, as the table interface (or an old row) may hold.
    await t().db.asService((tx) =>
      tx.query("update public.releases set services = array['spotify', 'napster'] where id = $1", [
        release.id,
      ]),
    );
    const before = await rows("select * from public.releases where id = $1", [release.id]);

    const errors = assertFieldErrors(
      await api("POST", `/releases/${release.id}/submit`),
      [
        ["release_date", "too_soon"],
        ["licensed_territories_include", "no_territories"],
        ["services", "invalid_service"],
        ["tracks[1].isrc", "required"],
      ],
      "release_incomplete",
    );
    assert.match(errors.find((e) => e.code === "too_soon")?.message ?? "", /7 days/);

    assert.deepEqual(await rows("select * from public.releases where id = $1", [release.id]), before);
    assert.deepEqual(
      await rows("select kind from internal.jobs where payload ->> 'release_id' = $1", [release.id]),
      [],
    );
    assert.deepEqual(
      await rows("select type from internal.events where data -> 'object' ->> 'id' = $1", [release.id]),
      [],
    );
  });

  test("submit: a single with four tracks and splits that do not add up (as /rest/v1 may store them)", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const first = await addTrack(api, release.id, { title: "A" });
    for (const title of ["B", "C", "D"]) await addTrack(api, release.id, { title });
    await t().db.asService((tx) =>
      tx.query(`update public.tracks set splits = '[{"name": "A", "share": 60}]' where id = $1`, [first.id]),
    );
    assertFieldErrors(
      await api("POST", `/releases/${release.id}/submit`),
      [
        ["release_type", "too_many_tracks"],
        ["tracks[0].splits", "splits_total"],
      ],
      "release_incomplete",
    );
    assert.equal(await statusOf(release.id), "draft");
  });

  test("submit: two at once submit the release once (one 200, one 409), with one job and one event", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api);
    const results = await Promise.all([
      api("POST", `/releases/${id}/submit`),
      api("POST", `/releases/${id}/submit`),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 409]);
    const conflict = results.find((r) => r.status === 409);
    assert.ok(conflict);
    assertProblem(conflict, 409, "invalid_status_transition");
    assert.equal(
      (await rows("select 1 from internal.jobs where payload ->> 'release_id' = $1", [id])).length,
      1,
    );
    assert.equal(
      (await rows("select 1 from internal.events where data -> 'object' ->> 'id' = $1", [id])).length,
      1,
    );
  });

  // ---------------------------------------------------------------------------------------------
  // GET /releases/{id}/status

  const approvals: [string, string][] = [
    ["draft", "not_submitted"],
    ["pending", "not_submitted"],
    ["submitted", "in_review"],
    ["in_review", "in_review"],
    ["approved", "approved"],
    ["delivering", "approved"],
    ["delivered", "approved"],
  ];
  for (const [status, approval] of approvals) {
    test(`GET /releases/{id}/status of a ${status} release: approval ${approval}`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      const report = expectStatus(await api<Obj>("GET", `/releases/${id}/status`), 200);
      assert.deepEqual(
        {
          object: report.object,
          id: report.id,
          status: report.status,
          approval: report.approval,
          rejection_reason: report.rejection_reason,
          live: report.live,
          stores: report.stores,
          takedown: report.takedown,
        },
        {
          object: "release_status",
          id,
          status,
          approval,
          rejection_reason: null,
          live: false,
          stores: [],
          takedown: null,
        },
      );
    });
  }

  test("GET /releases/{id}/status: a rejection shows its reason", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "submitted");
    await t().db.asService((tx) =>
      tx.query(
        "update public.releases set status = 'rejected', status_reason = 'The artwork contains a URL' where id = $1",
        [id],
      ),
    );
    const report = expectStatus(await api<Obj>("GET", `/releases/${id}/status`), 200);
    assert.deepEqual(
      [report.status, report.approval, report.rejection_reason, report.live],
      ["rejected", "rejected", "The artwork contains a URL", false],
    );
    assert.equal(typeof report.submitted_at, "string");
  });

  test("GET /releases/{id}/status: live, with per-store delivery states, then the takedown", async () => {
    const { api, account } = await keyed();
    const id = await releaseIn(api, "live");
    await t().db.asService(async (tx) => {
      await tx.query(
        `insert into internal.release_deliveries (release_id, account_id, store, status, delivered_at, live_at)
         values ($1, $2, 'spotify', 'live', now(), now())`,
        [id, account.id],
      );
      await tx.query(
        `insert into internal.release_deliveries (release_id, account_id, store, status, message, created_at)
         values ($1, $2, 'apple_music', 'delivered', null, now() - interval '1 hour'),
                ($1, $2, 'apple_music', 'error', 'Artwork rejected by the store', now())`,
        [id, account.id],
      );
    });
    const report = expectStatus(await api<Obj>("GET", `/releases/${id}/status`), 200);
    assert.deepEqual([report.status, report.approval, report.live], ["live", "approved", true]);
    const stores = report.stores as Obj[];
    assert.deepEqual(
      stores.map((s) => [s.store, s.action, s.status, s.message]),
      [
        ["apple_music", "insert", "error", "Artwork rejected by the store"],
        ["spotify", "insert", "live", null],
      ],
    );
    assert.equal(typeof stores[1]?.live_at, "string");
    assert.equal(stores[0]?.delivered_at, null);
    assert.equal(report.takedown, null);

    const takedown = expectStatus(
      await api<Obj>("POST", `/releases/${id}/takedown`, { reason: "Rights dispute" }),
      202,
    );
    const after = expectStatus(await api<Obj>("GET", `/releases/${id}/status`), 200);
    assert.equal(after.status, "takedown_requested");
    const shown = after.takedown as Obj;
    assert.deepEqual(
      [shown.id, shown.object, shown.status, shown.reason, shown.release_id],
      [takedown.id, "takedown_request", "pending", "Rights dispute", id],
    );
  });

  // ---------------------------------------------------------------------------------------------
  // PATCH /releases/{id}/metadata

  for (const status of ["delivered", "live"]) {
    test(`PATCH /releases/{id}/metadata of a ${status} release corrects it and queues an update delivery`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      const res = await api<Obj>("PATCH", `/releases/${id}/metadata`, {
        title: "Night Drive (2026 Mix)",
        primary_genre: "pop",
        genres: ["pop", "dance"],
        label_name: "Night Owl Records",
        explicit: true,
      });
      const corrected = expectStatus(res, 200);
      assert.deepEqual(
        [
          corrected.title,
          corrected.primary_genre,
          corrected.genres,
          corrected.label_name,
          corrected.explicit,
          corrected.status,
        ],
        ["Night Drive (2026 Mix)", "pop", ["pop", "dance"], "Night Owl Records", true, status],
      );
      // Fields not sent keep their values.
      assert.deepEqual(
        [corrected.release_date, corrected.services, corrected.artist_name],
        [FUTURE_DATE, ["spotify", "apple_music"], "Luna Vale"],
      );
      assert.equal(
        expectStatus(await api<Obj>("GET", `/releases/${id}`), 200).title,
        "Night Drive (2026 Mix)",
      );
      const jobs = await rows<{ kind: string; payload: Obj }>(
        "select kind, payload from internal.jobs where kind = 'release.update_delivery' and payload ->> 'release_id' = $1",
        [id],
      );
      assert.deepEqual(jobs, [{ kind: "release.update_delivery", payload: { release_id: id } }]);
    });
  }

  test("PATCH /releases/{id}/metadata: non-metadata fields are unknown_field, listed with every other error", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "live");
    assertFieldErrors(await api("PATCH", `/releases/${id}/metadata`, { release_date: FUTURE_DATE }), [
      ["release_date", "unknown_field"],
    ]);
    assertFieldErrors(
      await api("PATCH", `/releases/${id}/metadata`, {
        title: "",
        primary_genre: "polka-core",
        services: ["spotify"],
        upc: "036000291452",
        status: "draft",
      }),
      [
        ["title", "out_of_range"],
        ["primary_genre", "invalid_genre"],
        ["services", "unknown_field"],
        ["upc", "unknown_field"],
        ["status", "unknown_field"],
      ],
    );
    const [row] = await rows("select title, status from public.releases where id = $1", [id]);
    assert.deepEqual(row, { title: "Night Drive", status: "live" });
    assert.deepEqual(
      await rows(
        "select 1 from internal.jobs where kind = 'release.update_delivery' and payload ->> 'release_id' = $1",
        [id],
      ),
      [],
    );
  });

  for (const status of ["draft", "submitted", "approved", "takedown_requested"]) {
    test(`PATCH /releases/{id}/metadata of a ${status} release is 409 release_not_delivered`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      assertProblem(
        await api("PATCH", `/releases/${id}/metadata`, { title: "Changed" }),
        409,
        "release_not_delivered",
      );
      const [row] = await rows("select title, status from public.releases where id = $1", [id]);
      assert.deepEqual(row, { title: "Night Drive", status });
    });
  }

  // ---------------------------------------------------------------------------------------------
  // POST /releases/{id}/takedown

  test("takedown of a live release: 202, the release is takedown_requested, a takedown job is queued", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "live");
    const res = await api<Obj>("POST", `/releases/${id}/takedown`, { reason: "Rights dispute" });
    const request = expectStatus(res, 202);
    assert.deepEqual(
      [request.object, request.release_id, request.status, request.reason, request.completed_at],
      ["takedown_request", id, "pending", "Rights dispute", null],
    );
    const [release] = await rows("select status, status_reason from public.releases where id = $1", [id]);
    assert.deepEqual(release, { status: "takedown_requested", status_reason: "Rights dispute" });
    assert.equal(expectStatus(await api<Obj>("GET", `/releases/${id}`), 200).status, "takedown_requested");
    const jobs = await rows("select kind from internal.jobs where payload ->> 'takedown_request_id' = $1", [
      request.id,
    ]);
    assert.deepEqual(jobs, [{ kind: "takedown.process" }]);

    assertProblem(
      await api("POST", `/releases/${id}/takedown`, { reason: "Again" }),
      409,
      "takedown_already_requested",
    );
    assert.equal(
      (await rows("select 1 from public.takedown_requests where release_id = $1", [id])).length,
      1,
    );
  });

  test("takedown of a delivered release needs no body", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "delivered");
    const request = expectStatus(await api<Obj>("POST", `/releases/${id}/takedown`), 202);
    assert.deepEqual([request.status, request.reason], ["pending", null]);
    assert.equal(await statusOf(id), "takedown_requested");
  });

  test("takedown: an unknown field or an empty reason is 422, and nothing is requested", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "live");
    assertFieldErrors(await api("POST", `/releases/${id}/takedown`, { reason: "", stores: ["spotify"] }), [
      ["reason", "out_of_range"],
      ["stores", "unknown_field"],
    ]);
    assert.equal(await statusOf(id), "live");
  });

  for (const status of ["draft", "pending", "submitted", "approved", "rejected", "taken_down"]) {
    test(`takedown of a ${status} release is 409 takedown_not_allowed`, async () => {
      const { api } = await keyed();
      const id = await releaseIn(api, status);
      assertProblem(
        await api("POST", `/releases/${id}/takedown`, { reason: "x" }),
        409,
        "takedown_not_allowed",
      );
      assert.equal(await statusOf(id), status);
      assert.deepEqual(await rows("select 1 from public.takedown_requests where release_id = $1", [id]), []);
    });
  }

  test("takedown: two at once make one request (one 202, one 409 takedown_already_requested)", async () => {
    const { api } = await keyed();
    const id = await releaseIn(api, "live");
    const results = await Promise.all([
      api("POST", `/releases/${id}/takedown`, { reason: "One" }),
      api("POST", `/releases/${id}/takedown`, { reason: "Two" }),
    ]);
    assert.deepEqual(results.map((r) => r.status).sort(), [202, 409]);
    const conflict = results.find((r) => r.status === 409);
    assert.ok(conflict);
    assertProblem(conflict, 409, "takedown_already_requested");
    assert.equal(
      (await rows("select 1 from public.takedown_requests where release_id = $1", [id])).length,
      1,
    );
  });

  // ---------------------------------------------------------------------------------------------
  // Security: another account's releases are not there

  test("another account's release (same tenant, other tenant) is 404 on every endpoint, and untouched", async () => {
    const mine = await keyed();
    const neighbour = await keyed(mine.tenant);
    const stranger = await keyed();
    for (const owner of [neighbour, stranger]) {
      const draft = await releaseIn(owner.api);
      const live = await releaseIn(owner.api, "live");
      const [track] = await rows<{ id: string }>("select id from public.tracks where release_id = $1", [
        draft,
      ]);
      assert.ok(track);
      const attempts: [string, string, unknown?][] = [
        ["GET", `/releases/${draft}`],
        ["PATCH", `/releases/${draft}`, { title: "Hijacked" }],
        ["POST", `/releases/${draft}/submit`],
        ["GET", `/releases/${draft}/status`],
        ["GET", `/releases/${live}/status`],
        ["POST", `/releases/${live}/takedown`, { reason: "Hijacked" }],
        ["PATCH", `/releases/${live}/metadata`, { title: "Hijacked" }],
        ["GET", `/releases/${draft}/tracks`],
        ["POST", `/releases/${draft}/tracks`, { title: "Hijacked", isrc: nextIsrc() }],
        ["GET", `/releases/${draft}/tracks/${track.id}`],
        ["PATCH", `/releases/${draft}/tracks/${track.id}`, { title: "Hijacked" }],
        ["DELETE", `/releases/${draft}/tracks/${track.id}`],
        ["DELETE", `/releases/${draft}`],
        ["DELETE", `/releases/${live}`],
      ];
      for (const [method, path, body] of attempts) {
        const res = await mine.api(method, path, body);
        assertProblem(res, 404, "resource_missing");
        assert.doesNotMatch(
          JSON.stringify(res.body),
          /Night Drive|Luna Vale/,
          `${method} ${path} leaks nothing`,
        );
      }
      const state = await rows<{ id: string; title: string; status: string }>(
        "select id, title, status from public.releases where id = any ($1::uuid[]) order by status",
        [[draft, live]],
      );
      assert.deepEqual(
        state.map((r) => [r.id, r.title, r.status]),
        [
          [draft, "Night Drive", "draft"],
          [live, "Night Drive", "live"],
        ],
      );
      assert.deepEqual(await rows("select title from public.tracks where release_id = $1", [draft]), [
        { title: "Night Drive" },
      ]);
      assert.deepEqual(
        await rows("select 1 from public.takedown_requests where release_id = $1", [live]),
        [],
      );
      // The owner's own key still reaches them.
      expectStatus(await owner.api("GET", `/releases/${draft}`), 200);
    }
    assert.equal(expectStatus(await mine.api<List>("GET", "/releases"), 200).total, 0);
    assert.equal(expectStatus(await mine.api<List>("GET", "/artists"), 200).total, 0);
  });

  test("a catalog:read key reads releases but every write is 403 insufficient_scope", async () => {
    const { account, api } = await keyed();
    const readOnly = publicApi(
      app.url,
      (await issueTestKey(t().db, account, { scopes: ["catalog:read"] })).secret,
    );
    const draft = await releaseIn(api);
    const live = await releaseIn(api, "live");
    expectStatus(await readOnly("GET", `/releases/${draft}`), 200);
    expectStatus(await readOnly("GET", `/releases/${live}/status`), 200);
    expectStatus(await readOnly("GET", "/releases"), 200);
    const writes: [string, string, unknown?][] = [
      ["POST", "/releases", completeRelease()],
      ["PATCH", `/releases/${draft}`, { title: "x" }],
      ["DELETE", `/releases/${draft}`],
      ["POST", `/releases/${draft}/submit`],
      ["POST", `/releases/${live}/takedown`],
      ["PATCH", `/releases/${live}/metadata`, { title: "x" }],
    ];
    for (const [method, path, body] of writes) {
      assertProblem(await readOnly(method, path, body), 403, "insufficient_scope");
    }
    assert.deepEqual(
      (
        await rows("select status from public.releases where account_id = $1 order by status", [account.id])
      ).map((r) => r.status),
      ["draft", "live"],
    );
  });

  const malformedIds = ["not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g", "%27%20or%201%3D1--"];
  test("malformed and unknown release ids are 404 on every endpoint", async () => {
    const { api } = await keyed();
    const own = await releaseIn(api);
    for (const id of [...malformedIds, A_UUID]) {
      const attempts: [string, string, unknown?][] = [
        ["GET", `/releases/${id}`],
        ["PATCH", `/releases/${id}`, { title: "x" }],
        ["DELETE", `/releases/${id}`],
        ["POST", `/releases/${id}/submit`],
        ["GET", `/releases/${id}/status`],
        ["POST", `/releases/${id}/takedown`],
        ["PATCH", `/releases/${id}/metadata`, { title: "x" }],
        ["GET", `/releases/${id}/tracks`],
        ["POST", `/releases/${id}/tracks`, { title: "x" }],
        ["GET", `/releases/${own}/tracks/${id}`],
        ["PATCH", `/releases/${own}/tracks/${id}`, { title: "x" }],
        ["DELETE", `/releases/${own}/tracks/${id}`],
      ];
      for (const [method, path, body] of attempts) {
        assertProblem(await api(method, path, body), 404, "resource_missing");
      }
    }
  });

  // ---------------------------------------------------------------------------------------------
  // The same rows as /rest/v1

  async function rest(
    tenant: Tenant,
    token: string,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: unknown }> {
    const keys = await getTenantKeys(t().db, tenant.id);
    assert.ok(keys);
    const res = await fetch(`${app.url}/rest/v1${path}`, {
      method,
      headers: {
        apikey: keys.anon_key,
        authorization: `Bearer ${token}`,
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", prefer: "return=representation" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  test("a release created through the API is the member's release at /rest/v1, and vice versa", async () => {
    const { tenant, account, api } = await keyed();
    const member = await memberToken(t().db, tenant, [account], `${app.url}/auth/v1`);

    // API -> /rest/v1
    const id = await releaseIn(api);
    const seen = await rest(tenant, member, "GET", `/releases?id=eq.${id}&select=id,title,status,account_id`);
    assert.equal(seen.status, 200);
    assert.deepEqual(seen.body, [{ id, title: "Night Drive", status: "draft", account_id: account.id }]);
    const tracks = await rest(tenant, member, "GET", `/tracks?release_id=eq.${id}&select=title`);
    assert.deepEqual(tracks.body, [{ title: "Night Drive" }]);

    // /rest/v1 -> API
    const artistId = (
      await rows<{ artist_id: string }>("select artist_id from public.releases where id = $1", [id])
    )[0]?.artist_id;
    const created = await rest(tenant, member, "POST", "/releases", {
      title: "Made at the Table",
      artist_id: artistId,
      release_date: FUTURE_DATE,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const restId = (created.body as { id: string }[])[0]?.id;
    assert.ok(restId);
    const viaApi = expectStatus(await api<Obj>("GET", `/releases/${restId}`), 200);
    assert.deepEqual(
      [viaApi.title, viaApi.account_id, viaApi.artist_id, viaApi.artist_name, viaApi.status],
      ["Made at the Table", account.id, artistId, "Luna Vale", "draft"],
    );
    const listed = expectStatus(await api<List>("GET", "/releases"), 200);
    assert.deepEqual(listed.data.map((r) => r.id).sort(), [id, restId].sort());

    // One lifecycle: once submitted through the API, the table interface cannot edit it either.
    expectStatus(await api("POST", `/releases/${id}/submit`), 200);
    const edit = await rest(tenant, member, "PATCH", `/releases?id=eq.${id}`, { title: "Changed" });
    assert.equal(edit.status, 409, JSON.stringify(edit.body));
    assert.equal((edit.body as { code: string }).code, "BL001");
  });

  test("/rest/v1 and the API keep accounts apart: a member of another account sees neither side", async () => {
    const { tenant, api } = await keyed();
    const elsewhere = await seedAccount(t().db, tenant, "Elsewhere");
    const outsider = await memberToken(t().db, tenant, [elsewhere], `${app.url}/auth/v1`);
    const id = await releaseIn(api);
    const seen = await rest(tenant, outsider, "GET", `/releases?id=eq.${id}&select=id`);
    assert.deepEqual([seen.status, seen.body], [200, []]);

    const artist = await rest(tenant, outsider, "POST", "/artist_profiles", { name: "Elsewhere Artist" });
    assert.equal(artist.status, 201, JSON.stringify(artist.body));
    const artistId = (artist.body as { id: string }[])[0]?.id;
    const theirs = await rest(tenant, outsider, "POST", "/releases", {
      title: "Theirs",
      artist_id: artistId,
    });
    assert.equal(theirs.status, 201, JSON.stringify(theirs.body));
    const theirId = (theirs.body as { id: string }[])[0]?.id;
    assertProblem(await api("GET", `/releases/${theirId}`), 404, "resource_missing");
    assertProblem(await api("GET", `/artists/${artistId}`), 404, "resource_missing");
    assert.deepEqual(
      expectStatus(await api<List>("GET", "/releases"), 200).data.map((r) => r.id),
      [id],
    );
  });
});
