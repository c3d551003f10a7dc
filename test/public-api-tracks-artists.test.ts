import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  assertFieldErrors,
  assertProblem,
  completeRelease,
  expectStatus,
  isrcs,
  keyedAccount,
  type List,
  publicApi,
} from "./support/public-api.ts";
import { forceReleaseStatus } from "./support/seed.ts";

/**
 * /api/public/v1 tracks, artists and Official Artist Channel requests (seed 001) end to end: the
 * real server on a socket, fetch with real API keys, a real database per engine. Happy paths,
 * validation (every failing field at once), state conflicts, and security: another account's ids,
 * in the same tenant and in another, answer 404 like ids that do not exist.
 * Releases: test/public-api-releases.test.ts.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

const nextIsrc = isrcs("GBTRK");

const A_UUID = "00000000-0000-4000-8000-000000000000";
const MALFORMED_IDS = ["not-a-uuid", "42", "00000000-0000-0000-0000-00000000000g"];

describeEachEngine("public api: tracks, artists and OAC requests", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  async function newTenant(): Promise<Tenant> {
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    return (await tenantWithKeys(t(), { settings })).tenant;
  }

  async function keyed(tenant?: Tenant): Promise<{ tenant: Tenant; account: Account; api: Api }> {
    const k = await keyedAccount(t().db, { tenant: tenant ?? (await newTenant()) });
    return { tenant: k.tenant, account: k.account, api: publicApi(app.url, k.key.secret) };
  }

  async function rows<T extends Obj>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  }

  async function createRelease(
    api: Api,
    overrides: Obj = {},
  ): Promise<Obj & { id: string; artist_id: string }> {
    const res = await api<Obj & { id: string; artist_id: string }>(
      "POST",
      "/releases",
      completeRelease(overrides),
    );
    return expectStatus(res, 201);
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

  async function createArtist(api: Api, body: Obj = {}): Promise<Obj & { id: string }> {
    return expectStatus(
      await api<Obj & { id: string }>("POST", "/artists", { name: "Luna Vale", ...body }),
      201,
    );
  }

  // =============================================================================================
  // Tracks

  test("POST /releases/{id}/tracks: adds a track; ISRC normalised, numbers default to the next free one", async () => {
    const { api, account } = await keyed();
    const release = await createRelease(api, { release_type: "album" });
    const first = await addTrack(api, release.id, {
      title: "Neon Tide",
      isrc: "us-bkl-26-90001",
      duration: 214,
      explicit: true,
      language: "pt-BR",
      contributors: [
        { name: "Luna Vale", role: "primary_artist", artist_id: release.artist_id },
        { name: "Sam Reyes", role: "composer" },
      ],
      splits: [
        { name: "Luna Vale", share: 50.5, email: "luna@example.com" },
        { name: "Sam Reyes", share: 49.5, role: "composer" },
      ],
    });
    assert.deepEqual(
      {
        object: first.object,
        release_id: first.release_id,
        account_id: first.account_id,
        title: first.title,
        isrc: first.isrc,
        track_number: first.track_number,
        disc_number: first.disc_number,
        duration: first.duration,
        explicit: first.explicit,
        language: first.language,
        contributors: first.contributors,
        splits: first.splits,
        audio_metadata: first.audio_metadata,
      },
      {
        object: "track",
        release_id: release.id,
        account_id: account.id,
        title: "Neon Tide",
        isrc: "USBKL2690001",
        track_number: 1,
        disc_number: 1,
        duration: 214,
        explicit: true,
        language: "pt-BR",
        contributors: [
          { name: "Luna Vale", role: "primary_artist", artist_id: release.artist_id },
          { name: "Sam Reyes", role: "composer" },
        ],
        splits: [
          { name: "Luna Vale", share: 50.5, email: "luna@example.com" },
          { name: "Sam Reyes", share: 49.5, role: "composer" },
        ],
        audio_metadata: {},
      },
    );
    assert.equal((await addTrack(api, release.id)).track_number, 2);
    assert.equal((await addTrack(api, release.id, { track_number: 7 })).track_number, 7);
    assert.equal((await addTrack(api, release.id)).track_number, 8);
    const disc2 = await addTrack(api, release.id, { disc_number: 2 });
    assert.deepEqual([disc2.disc_number, disc2.track_number], [2, 1]);
  });

  test("POST /releases/{id}/tracks: spaces in an ISRC are forgiven like hyphens and case", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const track = await addTrack(api, release.id, { isrc: "us bkl 26 90042" });
    assert.equal(track.isrc, "USBKL2690042");
  });

  test("POST /releases/{id}/tracks: tracks added at once without numbers get the next free ones", async () => {
    const { api } = await keyed();
    const release = await createRelease(api, { release_type: "album" });
    const results = await Promise.all(
      ["A", "B", "C", "D"].map((title) =>
        api<Obj>("POST", `/releases/${release.id}/tracks`, { title, isrc: nextIsrc() }),
      ),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      [201, 201, 201, 201],
      JSON.stringify(results.map((r) => r.body)),
    );
    assert.deepEqual(results.map((r) => r.body.track_number).sort(), [1, 2, 3, 4]);
  });

  const trackCases: { name: string; body: Obj; errors: [string, string][] }[] = [
    { name: "missing title", body: { isrc: "USBKL2600001" }, errors: [["title", "required"]] },
    { name: "bad ISRC", body: { title: "x", isrc: "US-BKL-26" }, errors: [["isrc", "invalid_value"]] },
    {
      name: "splits not totalling 100",
      body: {
        title: "x",
        splits: [
          { name: "A", share: 60 },
          { name: "B", share: 30 },
        ],
      },
      errors: [["splits", "splits_total"]],
    },
    {
      name: "splits over 100",
      body: {
        title: "x",
        splits: [
          { name: "A", share: 60 },
          { name: "B", share: 40.01 },
        ],
      },
      errors: [["splits", "splits_total"]],
    },
    {
      name: "a share with five decimals (a number, and a decimal string)",
      body: {
        title: "x",
        splits: [
          { name: "A", share: 33.33333 },
          { name: "B", share: "66.66667" },
        ],
      },
      errors: [
        ["splits[0].share", "invalid_value"],
        ["splits[1].share", "invalid_format"],
      ],
    },
    { name: "unknown field", body: { title: "x", bpm: 120 }, errors: [["bpm", "unknown_field"]] },
    {
      name: "read-only fields",
      body: { title: "x", release_id: A_UUID, audio_metadata: {} },
      errors: [
        ["release_id", "unknown_field"],
        ["audio_metadata", "unknown_field"],
      ],
    },
    { name: "zero duration", body: { title: "x", duration: 0 }, errors: [["duration", "out_of_range"]] },
    {
      name: "track number 0",
      body: { title: "x", track_number: 0 },
      errors: [["track_number", "out_of_range"]],
    },
    {
      name: "unknown contributor role",
      body: { title: "x", contributors: [{ name: "A", role: "kazoo" }] },
      errors: [["contributors[0].role", "invalid_choice"]],
    },
    {
      name: "every failing field at once",
      body: {
        isrc: "nope",
        duration: -1,
        language: "English",
        contributors: [{ role: "composer" }],
        splits: [{ name: "A", share: 50 }],
        bpm: 120,
      },
      errors: [
        ["title", "required"],
        ["isrc", "invalid_value"],
        ["duration", "out_of_range"],
        ["language", "invalid_format"],
        ["contributors[0].name", "required"],
        ["splits", "splits_total"],
        ["bpm", "unknown_field"],
      ],
    },
  ];
  for (const c of trackCases) {
    test(`POST /releases/{id}/tracks: ${c.name} is 422 validation_failed and adds nothing`, async () => {
      const { api } = await keyed();
      const release = await createRelease(api);
      assertFieldErrors(await api("POST", `/releases/${release.id}/tracks`, c.body), c.errors);
      assert.equal(expectStatus(await api<List>("GET", `/releases/${release.id}/tracks`), 200).total, 0);
    });
  }

  test("tracks: the same disc and track number twice is 409 track_number_taken (POST and PATCH)", async () => {
    const { api } = await keyed();
    const release = await createRelease(api, { release_type: "ep" });
    await addTrack(api, release.id, { title: "One", track_number: 1 });
    const two = await addTrack(api, release.id, { title: "Two", track_number: 2 });
    const dup = await api("POST", `/releases/${release.id}/tracks`, {
      title: "Also One",
      isrc: nextIsrc(),
      track_number: 1,
    });
    assert.equal(assertProblem(dup, 409, "track_number_taken").param, "track_number");
    assertProblem(
      await api("PATCH", `/releases/${release.id}/tracks/${two.id}`, { track_number: 1 }),
      409,
      "track_number_taken",
    );
    // The same number on another disc is another position.
    expectStatus(
      await api("PATCH", `/releases/${release.id}/tracks/${two.id}`, { track_number: 1, disc_number: 2 }),
      200,
    );
    const list = expectStatus(await api<List>("GET", `/releases/${release.id}/tracks`), 200);
    assert.deepEqual(
      list.data.map((x) => [x.title, x.disc_number, x.track_number]),
      [
        ["One", 1, 1],
        ["Two", 2, 1],
      ],
    );
  });

  test("tracks: an ISRC names one recording per account (isrc_in_use for another title; same title is fine)", async () => {
    const { api } = await keyed();
    const single = await createRelease(api, { title: "Neon Tide" });
    const album = await createRelease(api, { title: "The Album", release_type: "album" });
    await addTrack(api, single.id, { title: "Neon Tide", isrc: "USBKL2677777" });

    // The single's recording on the album: same ISRC, same title (case and spaces forgiven).
    const onAlbum = await addTrack(api, album.id, { title: " neon tide ", isrc: "us-bkl-26-77777" });
    assert.equal(onAlbum.isrc, "USBKL2677777");

    // Another recording with that ISRC (on a third release): refused, in the API's words.
    const ep = await createRelease(api, { title: "The EP", release_type: "ep" });
    const other = await api("POST", `/releases/${ep.id}/tracks`, {
      title: "Static Bloom",
      isrc: "USBKL2677777",
    });
    assert.equal(assertProblem(other, 409, "isrc_in_use").param, "isrc");
    const remix = await api("POST", `/releases/${ep.id}/tracks`, {
      title: "Neon Tide",
      version: "Remix",
      isrc: "USBKL2677777",
    });
    assertProblem(remix, 409, "isrc_in_use");
    // Renaming a track that shares the ISRC would make it another recording.
    assertProblem(
      await api("PATCH", `/releases/${album.id}/tracks/${onAlbum.id}`, { title: "Renamed" }),
      409,
      "isrc_in_use",
    );
    // Twice on the same release is a duplicate.
    assertProblem(
      await api("POST", `/releases/${album.id}/tracks`, { title: "Neon Tide", isrc: "USBKL2677777" }),
      409,
      "duplicate_isrc",
    );

    // Another account is another catalogue.
    const elsewhere = await keyed();
    const theirs = await createRelease(elsewhere.api);
    const reused = await addTrack(elsewhere.api, theirs.id, { title: "Unrelated", isrc: "USBKL2677777" });
    assert.equal(reused.isrc, "USBKL2677777");
    assert.deepEqual(
      (
        await rows("select title from public.tracks where release_id = $1 order by track_number", [album.id])
      ).map((r) => r.title),
      ["neon tide"],
    );
  });

  test("GET /releases/{id}/tracks: disc and track order, paginated", async () => {
    const { api } = await keyed();
    const release = await createRelease(api, { release_type: "album" });
    await addTrack(api, release.id, { title: "D2T1", disc_number: 2, track_number: 1 });
    await addTrack(api, release.id, { title: "D1T3", track_number: 3 });
    await addTrack(api, release.id, { title: "D1T1", track_number: 1 });
    await addTrack(api, release.id, { title: "D1T2", track_number: 2 });
    const all = expectStatus(await api<List>("GET", `/releases/${release.id}/tracks`), 200);
    assert.deepEqual(
      all.data.map((x) => x.title),
      ["D1T1", "D1T2", "D1T3", "D2T1"],
    );
    assert.deepEqual([all.object, all.total, all.limit, all.offset, all.has_more], ["list", 4, 20, 0, false]);
    const page = expectStatus(await api<List>("GET", `/releases/${release.id}/tracks?limit=2&offset=1`), 200);
    assert.deepEqual(
      page.data.map((x) => x.title),
      ["D1T2", "D1T3"],
    );
    assert.deepEqual([page.total, page.has_more], [4, true]);
    assertFieldErrors(
      await api("GET", `/releases/${release.id}/tracks?limit=101`),
      [["limit", "out_of_range"]],
      "invalid_parameter",
      400,
    );
    assertFieldErrors(
      await api("GET", `/releases/${release.id}/tracks?status=draft`),
      [["status", "unknown_field"]],
      "invalid_parameter",
      400,
    );
  });

  test("GET /releases/{id}/tracks/{trackId}: the track, only under its own release", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const sibling = await createRelease(api, { title: "Sibling" });
    const track = await addTrack(api, release.id, { title: "Neon Tide" });
    const got = expectStatus(await api<Obj>("GET", `/releases/${release.id}/tracks/${track.id}`), 200);
    assert.deepEqual(got, { ...track, audio: null }, "the track as created, and no audio uploaded yet");
    assertProblem(await api("GET", `/releases/${sibling.id}/tracks/${track.id}`), 404, "resource_missing");
    assertProblem(
      await api("PATCH", `/releases/${sibling.id}/tracks/${track.id}`, { title: "x" }),
      404,
      "resource_missing",
    );
    assertProblem(await api("DELETE", `/releases/${sibling.id}/tracks/${track.id}`), 404, "resource_missing");
    assert.equal(
      (await rows("select title from public.tracks where id = $1", [track.id]))[0]?.title,
      "Neon Tide",
    );
  });

  test("PATCH /releases/{id}/tracks/{trackId}: changes metadata and splits; every failing field at once", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const track = await addTrack(api, release.id);
    const patched = expectStatus(
      await api<Obj>("PATCH", `/releases/${release.id}/tracks/${track.id}`, {
        title: "Neon Tide (Edit)",
        isrc: "gb-trk-26-99999",
        splits: [
          { name: "A", share: 33.33 },
          { name: "B", share: 33.33 },
          { name: "C", share: 33.34 },
        ],
        contributors: [{ name: "Sam Reyes", role: "producer" }],
      }),
      200,
    );
    assert.deepEqual(
      [patched.title, patched.isrc, (patched.splits as Obj[]).length, patched.duration],
      ["Neon Tide (Edit)", "GBTRK2699999", 3, 200],
    );
    assertFieldErrors(
      await api("PATCH", `/releases/${release.id}/tracks/${track.id}`, {
        title: "",
        isrc: "bad",
        splits: [{ name: "A", share: 99 }],
        release_id: A_UUID,
      }),
      [
        ["title", "out_of_range"],
        ["isrc", "invalid_value"],
        ["splits", "splits_total"],
        ["release_id", "unknown_field"],
      ],
    );
    const [row] = await rows("select title, isrc from public.tracks where id = $1", [track.id]);
    assert.deepEqual(row, { title: "Neon Tide (Edit)", isrc: "GBTRK2699999" });
  });

  test("DELETE /releases/{id}/tracks/{trackId}: removes the track; then 404", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const track = await addTrack(api, release.id);
    const res = expectStatus(await api<Obj>("DELETE", `/releases/${release.id}/tracks/${track.id}`), 200);
    assert.deepEqual(res, { id: track.id, object: "track", deleted: true });
    assertProblem(await api("GET", `/releases/${release.id}/tracks/${track.id}`), 404, "resource_missing");
    assertProblem(await api("DELETE", `/releases/${release.id}/tracks/${track.id}`), 404, "resource_missing");
  });

  for (const status of ["submitted", "approved", "live"]) {
    test(`tracks of a ${status} release cannot be added, changed or removed (409 release_not_editable)`, async () => {
      const { api } = await keyed();
      const release = await createRelease(api);
      const track = await addTrack(api, release.id, { title: "Neon Tide" });
      await forceReleaseStatus(t().db, release.id, status);
      const base = `/releases/${release.id}/tracks`;
      assertProblem(
        await api("POST", base, { title: "Late", isrc: nextIsrc() }),
        409,
        "release_not_editable",
      );
      assertProblem(
        await api("PATCH", `${base}/${track.id}`, { title: "Changed" }),
        409,
        "release_not_editable",
      );
      assertProblem(await api("DELETE", `${base}/${track.id}`), 409, "release_not_editable");
      assert.deepEqual(await rows("select title from public.tracks where release_id = $1", [release.id]), [
        { title: "Neon Tide" },
      ]);
      // Reading still works.
      assert.equal(expectStatus(await api<List>("GET", base), 200).total, 1);
    });
  }

  test("a contributor naming another account's artist does not reveal that artist", async () => {
    const mine = await keyed();
    const other = await keyed(mine.tenant);
    const secret = await createArtist(other.api, { name: "Hidden Artist", bio: "Not yours" });
    const release = await createRelease(mine.api);
    await addTrack(mine.api, release.id, {
      contributors: [{ name: "Someone", role: "featured_artist", artist_id: secret.id }],
    });
    const detail = expectStatus(await mine.api<Obj>("GET", `/releases/${release.id}`), 200);
    assert.deepEqual(
      (detail.artists as Obj[]).map((a) => a.id),
      [release.artist_id],
    );
    assert.doesNotMatch(JSON.stringify(detail), /Hidden Artist|Not yours/);
  });

  // =============================================================================================
  // Artists

  test("POST /artists: creates a profile with names, links and store identifiers", async () => {
    const { api, account } = await keyed();
    const artist = await createArtist(api, {
      name: "Mira Vale",
      bio: "Synth-pop from Lisbon.",
      store_ids: { spotify: "3WrFJ7ztbogyGnTHbHJFl2", apple_music: "1147483647" },
      platform_links: { website: "https://miravale.example", instagram: "https://instagram.com/miravale" },
      localized_names: { ja: "ミラ・ヴェイル", "pt-BR": "Mira Vale" },
    });
    assert.deepEqual(
      {
        object: artist.object,
        account_id: artist.account_id,
        name: artist.name,
        bio: artist.bio,
        store_ids: artist.store_ids,
        platform_links: artist.platform_links,
        localized_names: artist.localized_names,
      },
      {
        object: "artist",
        account_id: account.id,
        name: "Mira Vale",
        bio: "Synth-pop from Lisbon.",
        store_ids: { spotify: "3WrFJ7ztbogyGnTHbHJFl2", apple_music: "1147483647" },
        platform_links: { website: "https://miravale.example", instagram: "https://instagram.com/miravale" },
        localized_names: { ja: "ミラ・ヴェイル", "pt-BR": "Mira Vale" },
      },
    );
    assert.deepEqual(expectStatus(await api<Obj>("GET", `/artists/${artist.id}`), 200), artist);
    const minimal = await createArtist(api, { name: "Solo" });
    assert.deepEqual(
      [minimal.bio, minimal.store_ids, minimal.platform_links, minimal.localized_names],
      [null, {}, {}, {}],
    );
  });

  const artistCases: { name: string; body: Obj; errors: [string, string][] }[] = [
    { name: "missing name", body: { bio: "x" }, errors: [["name", "required"]] },
    { name: "blank name", body: { name: "  " }, errors: [["name", "out_of_range"]] },
    {
      name: "unknown store in store_ids",
      body: { name: "A", store_ids: { spotify: "1", napster: "2" } },
      errors: [["store_ids.napster", "invalid_service"]],
    },
    {
      name: "a link that is not https",
      body: { name: "A", platform_links: { website: "http://a.example" } },
      errors: [["platform_links.website", "invalid_format"]],
    },
    { name: "unknown field", body: { name: "A", genre: "pop" }, errors: [["genre", "unknown_field"]] },
    {
      name: "every failing field at once",
      body: {
        bio: 42,
        store_ids: { napster: "2", zune: "3" },
        platform_links: { website: "ftp://a.example" },
        localized_names: { ja: "" },
        genre: "pop",
      },
      errors: [
        ["name", "required"],
        ["bio", "invalid_type"],
        ["store_ids.napster", "invalid_service"],
        ["store_ids.zune", "invalid_service"],
        ["platform_links.website", "invalid_format"],
        ["localized_names.ja", "out_of_range"],
        ["genre", "unknown_field"],
      ],
    },
  ];
  for (const c of artistCases) {
    test(`POST /artists: ${c.name} is 422 validation_failed and creates nothing`, async () => {
      const { api } = await keyed();
      assertFieldErrors(await api("POST", "/artists", c.body), c.errors);
      assert.equal(expectStatus(await api<List>("GET", "/artists"), 200).total, 0);
    });
  }

  test("GET /artists: the account's artists by name, paginated; limit over 100 is 400", async () => {
    const { api } = await keyed();
    for (const name of ["Zed", "Aria", "Mira", "Bo"]) await createArtist(api, { name });
    const all = expectStatus(await api<List>("GET", "/artists"), 200);
    assert.deepEqual(
      all.data.map((a) => a.name),
      ["Aria", "Bo", "Mira", "Zed"],
    );
    assert.deepEqual([all.object, all.total, all.limit, all.has_more], ["list", 4, 20, false]);
    const page = expectStatus(await api<List>("GET", "/artists?limit=2&offset=2"), 200);
    assert.deepEqual(
      page.data.map((a) => a.name),
      ["Mira", "Zed"],
    );
    assert.deepEqual([page.total, page.offset, page.has_more], [4, 2, false]);
    assert.equal(expectStatus(await api<List>("GET", "/artists?limit=1"), 200).has_more, true);
    assertFieldErrors(
      await api("GET", "/artists?limit=101"),
      [["limit", "out_of_range"]],
      "invalid_parameter",
      400,
    );
    assertFieldErrors(
      await api("GET", "/artists?name=Aria"),
      [["name", "unknown_field"]],
      "invalid_parameter",
      400,
    );
  });

  test("PATCH /artists/{id}: changes names, links and identifiers; every failing field at once", async () => {
    const { api } = await keyed();
    const artist = await createArtist(api, { bio: "Old bio", store_ids: { spotify: "1" } });
    const patched = expectStatus(
      await api<Obj>("PATCH", `/artists/${artist.id}`, {
        name: "Luna Vale & The Tides",
        store_ids: { spotify: "1", deezer: "27" },
        platform_links: { website: "https://luna.example" },
      }),
      200,
    );
    assert.deepEqual(
      [patched.name, patched.bio, patched.store_ids, patched.platform_links],
      [
        "Luna Vale & The Tides",
        "Old bio",
        { spotify: "1", deezer: "27" },
        { website: "https://luna.example" },
      ],
    );
    assertFieldErrors(
      await api("PATCH", `/artists/${artist.id}`, {
        name: "",
        store_ids: { myspace: "1" },
        platform_links: { website: "not a url" },
        id: A_UUID,
      }),
      [
        ["name", "out_of_range"],
        ["store_ids.myspace", "invalid_service"],
        ["platform_links.website", "invalid_format"],
        ["id", "unknown_field"],
      ],
    );
    assert.equal(
      expectStatus(await api<Obj>("GET", `/artists/${artist.id}`), 200).name,
      "Luna Vale & The Tides",
    );
  });

  test("DELETE /artists/{id}: an unlinked artist is deleted; one a release names is 409 artist_in_use", async () => {
    const { api } = await keyed();
    const loose = await createArtist(api, { name: "Loose" });
    const res = expectStatus(await api<Obj>("DELETE", `/artists/${loose.id}`), 200);
    assert.deepEqual(res, { id: loose.id, object: "artist", deleted: true });
    assertProblem(await api("GET", `/artists/${loose.id}`), 404, "resource_missing");
    assertProblem(await api("DELETE", `/artists/${loose.id}`), 404, "resource_missing");

    const release = await createRelease(api);
    assertProblem(await api("DELETE", `/artists/${release.artist_id}`), 409, "artist_in_use");
    assert.equal(
      expectStatus(await api<Obj>("GET", `/artists/${release.artist_id}`), 200).id,
      release.artist_id,
    );
    expectStatus(await api<Obj>("GET", `/releases/${release.id}`), 200);

    // Once the release is gone, so can the artist be.
    expectStatus(await api("DELETE", `/releases/${release.id}`), 200);
    expectStatus(await api("DELETE", `/artists/${release.artist_id}`), 200);
  });

  // =============================================================================================
  // Official Artist Channel requests

  test("OAC: an artist with a delivered release gets a request; one open request at a time", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    const artistId = release.artist_id;
    assertProblem(await api("GET", `/artists/${artistId}/oac-request`), 404, "resource_missing");
    await forceReleaseStatus(t().db, release.id, "delivered");

    const res = await api<Obj>("POST", `/artists/${artistId}/oac-request`, {
      channel_url: "https://www.youtube.com/@lunavale",
      note: "Please merge the topic channel.",
    });
    const request = expectStatus(res, 201);
    assert.deepEqual(
      {
        object: request.object,
        artist_id: request.artist_id,
        store: request.store,
        channel_url: request.channel_url,
        note: request.note,
        status: request.status,
        status_reason: request.status_reason,
        completed_at: request.completed_at,
      },
      {
        object: "oac_request",
        artist_id: artistId,
        store: "youtube_music",
        channel_url: "https://www.youtube.com/@lunavale",
        note: "Please merge the topic channel.",
        status: "requested",
        status_reason: null,
        completed_at: null,
      },
    );
    const jobs = await rows("select kind from internal.jobs where payload ->> 'oac_request_id' = $1", [
      request.id,
    ]);
    assert.deepEqual(jobs, [{ kind: "oac.request" }]);
    assert.deepEqual(expectStatus(await api<Obj>("GET", `/artists/${artistId}/oac-request`), 200), request);

    assertProblem(await api("POST", `/artists/${artistId}/oac-request`), 409, "oac_already_requested");
    await t().db.asService((tx) =>
      tx.query("update internal.oac_requests set status = 'processing' where id = $1", [request.id]),
    );
    assertProblem(await api("POST", `/artists/${artistId}/oac-request`, {}), 409, "oac_already_requested");

    // The operator refuses it: the status shows why, and the artist may ask again.
    await t().db.asService((tx) =>
      tx.query(
        "update internal.oac_requests set status = 'rejected', status_reason = 'Not enough releases' where id = $1",
        [request.id],
      ),
    );
    const refused = expectStatus(await api<Obj>("GET", `/artists/${artistId}/oac-request`), 200);
    assert.deepEqual([refused.status, refused.status_reason], ["rejected", "Not enough releases"]);
    assert.equal(typeof refused.completed_at, "string");
    const again = expectStatus(await api<Obj>("POST", `/artists/${artistId}/oac-request`), 201);
    assert.equal(expectStatus(await api<Obj>("GET", `/artists/${artistId}/oac-request`), 200).id, again.id);
  });

  test("OAC: two requests at once make one (one 201, one 409 oac_already_requested)", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    await forceReleaseStatus(t().db, release.id, "live");
    const path = `/artists/${release.artist_id}/oac-request`;
    const results = await Promise.all([api("POST", path), api("POST", path)]);
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 409]);
    const conflict = results.find((r) => r.status === 409);
    assert.ok(conflict);
    assertProblem(conflict, 409, "oac_already_requested");
  });

  const eligibility: [string, number][] = [
    ["draft", 409],
    ["submitted", 409],
    ["approved", 409],
    ["delivering", 409],
    ["delivered", 201],
    ["live", 201],
    ["takedown_requested", 201],
    ["taken_down", 409],
  ];
  for (const [status, expected] of eligibility) {
    test(`OAC: an artist whose only release is ${status} answers ${expected === 201 ? "201" : "409 oac_not_eligible"}`, async () => {
      const { api } = await keyed();
      const release = await createRelease(api);
      if (status !== "draft") await forceReleaseStatus(t().db, release.id, status);
      const res = await api("POST", `/artists/${release.artist_id}/oac-request`);
      if (expected === 201) expectStatus(res, 201);
      else {
        assertProblem(res, 409, "oac_not_eligible");
        assert.deepEqual(
          await rows("select 1 from internal.oac_requests where artist_id = $1", [release.artist_id]),
          [],
        );
      }
    });
  }

  test("OAC: an artist without any release is 409 oac_not_eligible", async () => {
    const { api } = await keyed();
    const artist = await createArtist(api);
    assertProblem(await api("POST", `/artists/${artist.id}/oac-request`), 409, "oac_not_eligible");
  });

  test("OAC: every failing field at once is 422, and nothing is requested", async () => {
    const { api } = await keyed();
    const release = await createRelease(api);
    await forceReleaseStatus(t().db, release.id, "live");
    assertFieldErrors(
      await api("POST", `/artists/${release.artist_id}/oac-request`, {
        channel_url: "http://www.youtube.com/@lunavale",
        note: "x".repeat(2001),
        store: "spotify",
      }),
      [
        ["channel_url", "invalid_format"],
        ["note", "out_of_range"],
        ["store", "unknown_field"],
      ],
    );
    assert.deepEqual(
      await rows("select 1 from internal.oac_requests where artist_id = $1", [release.artist_id]),
      [],
    );
  });

  // =============================================================================================
  // Security: another account's artists are not there

  test("another account's artist (same tenant, other tenant) is 404 on every endpoint, and untouched", async () => {
    const mine = await keyed();
    const neighbour = await keyed(mine.tenant);
    const stranger = await keyed();
    for (const owner of [neighbour, stranger]) {
      const loose = await createArtist(owner.api, { name: "Loose", bio: "Private bio" });
      const release = await createRelease(owner.api);
      await forceReleaseStatus(t().db, release.id, "live");
      const eligible = release.artist_id;
      const attempts: [string, string, unknown?][] = [
        ["GET", `/artists/${loose.id}`],
        ["PATCH", `/artists/${loose.id}`, { name: "Hijacked" }],
        ["DELETE", `/artists/${loose.id}`],
        ["GET", `/artists/${eligible}`],
        ["DELETE", `/artists/${eligible}`],
        ["POST", `/artists/${eligible}/oac-request`, { note: "Hijacked" }],
        ["GET", `/artists/${eligible}/oac-request`],
      ];
      for (const [method, path, body] of attempts) {
        const res = await mine.api(method, path, body);
        assertProblem(res, 404, "resource_missing");
        assert.doesNotMatch(JSON.stringify(res.body), /Loose|Private bio|Luna Vale/);
      }
      assert.deepEqual(await rows("select name, bio from public.artist_profiles where id = $1", [loose.id]), [
        { name: "Loose", bio: "Private bio" },
      ]);
      assert.deepEqual(
        await rows("select 1 from internal.oac_requests where artist_id = $1", [eligible]),
        [],
      );

      // With a request of their own, its status is still not ours to read.
      expectStatus(await owner.api("POST", `/artists/${eligible}/oac-request`), 201);
      assertProblem(await mine.api("GET", `/artists/${eligible}/oac-request`), 404, "resource_missing");
      assertProblem(await mine.api("POST", `/artists/${eligible}/oac-request`), 404, "resource_missing");
    }
    assert.equal(expectStatus(await mine.api<List>("GET", "/artists"), 200).total, 0);
  });

  test("malformed and unknown artist ids are 404 on every endpoint", async () => {
    const { api } = await keyed();
    for (const id of [...MALFORMED_IDS, A_UUID]) {
      const attempts: [string, string, unknown?][] = [
        ["GET", `/artists/${id}`],
        ["PATCH", `/artists/${id}`, { name: "x" }],
        ["DELETE", `/artists/${id}`],
        ["POST", `/artists/${id}/oac-request`],
        ["GET", `/artists/${id}/oac-request`],
      ];
      for (const [method, path, body] of attempts) {
        assertProblem(await api(method, path, body), 404, "resource_missing");
      }
    }
  });
});
