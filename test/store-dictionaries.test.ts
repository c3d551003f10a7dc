import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { Worker } from "../src/jobs/worker.ts";
import { DICTIONARY_IDS, dictionary, storeGenreMapColumn } from "../src/pipeline/dictionaries.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { refreshStoreGenreMaps } from "../src/pipeline/stores.ts";
import { LocalMedia } from "../src/storage/media.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  all,
  configureDdexStore,
  listFiles,
  parseXml,
  poll,
  RECIPIENT,
  SENDER,
  textAt,
  type XmlNode,
} from "./support/ddex.ts";
import {
  ern382SchemaErrors,
  ern382SchemaSkip,
  ernSchemaErrors,
  ernSchemaSkip,
  schema382MissingFails,
  schemaMissingFails,
} from "./support/ern-schema.ts";
import { tempDir } from "./support/process.ts";
import {
  type ApiResponse,
  assertProblem,
  completeRelease,
  expectStatus,
  isrcs,
  issueTestKey,
  publicApi,
} from "./support/public-api.ts";
import { seedAccount, seedStaffUser, userToken } from "./support/seed.ts";

/**
 * Store dictionaries (issue 41, item 4; docs/ddex.md "Store dictionaries"): a store set to Apple
 * Music's dictionary receives Apple's genre and role names in its ERN 4.3 and 3.8.2 messages, both
 * schema-valid, while a store without one keeps today's display names; a release whose genre a
 * dictionary store cannot name is refused at submit (422, the problem naming the store), changing
 * nothing, until platform staff map it; staff see and change a store's dictionary through
 * /admin/v1 and `backline stores dictionary` (422 naming the field; tenant admins and non-staff
 * refused).
 */

// biome-ignore lint/suspicious/noExplicitAny: JSON answers
type Any = any;

const APPLE = "dict_apple";
const APPLE_382 = "dict_apple_ern3";
const BEATPORT = "dict_beatport";
const PLAIN = "dict_plain";

describeEachEngine("store dictionaries", (t) => {
  const db = () => t().db;
  let app: RunningApp;
  let worker: Worker;
  let tenant: Tenant;
  let keys: TenantKeys;
  let api: ReturnType<typeof publicApi>;
  let platform: string;
  let platformAal1: string;
  let tenantAdmin: string;
  const drops: Record<string, string> = {};
  const nextIsrc = isrcs("QZDIC");

  before(async () => {
    app = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t(), { settings: { auto_review: true } }));
    const account = await seedAccount(db(), tenant, "Night Owl Records");
    api = publicApi(app.url, (await issueTestKey(db(), account)).secret);
    for (const [code, extra] of [
      [APPLE, { dictionary: "apple-music" }],
      [APPLE_382, { dictionary: "apple-music", ern_version: "3.8.2" }],
      [BEATPORT, { dictionary: "beatport" }],
      [PLAIN, {}],
    ] as const) {
      drops[code] = tempDir(`backline-dict-${code}-`);
      await configureDdexStore(db(), code, {
        sender: SENDER,
        recipient: RECIPIENT,
        destination: { type: "directory", path: drops[code] },
        ...extra,
      });
    }
    const issuer = `${app.url}/auth/v1`;
    const admin = await seedStaffUser(db(), tenant, [{ of: "platform", role: "admin" }]);
    platform = await userToken(db(), tenant, admin, issuer, "aal2");
    platformAal1 = await userToken(db(), tenant, admin, issuer, "aal1");
    const own = await seedStaffUser(db(), tenant, [{ of: tenant, role: "admin" }]);
    tenantAdmin = await userToken(db(), tenant, own, issuer, "aal2");
    worker = new Worker({
      db: db(),
      handlers: pipelineHandlers(db(), { media: new LocalMedia(tempDir("backline-dict-media-")) }),
      pollMs: 20,
    });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    for (const dir of Object.values(drops)) fs.rmSync(dir, { recursive: true, force: true });
  });

  const rows = async <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);

  async function admin<T = Any>(
    token: string | { service: string },
    method: string,
    p: string,
    body?: unknown,
  ) {
    const headers: Record<string, string> =
      typeof token === "string"
        ? { apikey: keys.anon_key, authorization: `Bearer ${token}` }
        : { apikey: token.service };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${app.url}/admin/v1${p}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** A draft with one track of two credited contributors, to `services`. */
  async function draft(services: string[], genres: { primary_genre: string; secondary_genre?: string }) {
    const release = expectStatus(
      await api<Any>("POST", "/releases", completeRelease({ services, ...genres })),
      201,
    );
    expectStatus(
      await api("POST", `/releases/${release.id}/tracks`, {
        title: "Night Drive",
        isrc: nextIsrc(),
        duration: 200,
        track_number: 1,
        contributors: [
          { name: "Ada Moreno", role: "producer" },
          { name: "Sam Reyes", role: "mixing_engineer" },
        ],
      }),
      201,
    );
    return release.id as string;
  }

  /** The message each store received for the release, checked against its version's schema. */
  async function messages(releaseId: string, stores: string[]): Promise<Record<string, XmlNode>> {
    const ds = await poll(
      "a delivery to each store",
      () =>
        rows<{ store: string; status: string; store_reference: string | null; message: string | null }>(
          "select store, status, store_reference, message from internal.release_deliveries where release_id = $1",
          [releaseId],
        ),
      (list) => list.length === stores.length && list.every((d) => d.store_reference || d.status === "error"),
      30_000,
    );
    const out: Record<string, XmlNode> = {};
    for (const d of ds) {
      assert.ok(d.store_reference, `${d.store}: ${d.status} ${d.message ?? ""}`);
      const file = listFiles(d.store_reference).find((f) => /^[^/]+\/[^/]+\.xml$/.test(f));
      assert.ok(file, `${d.store}: a message in ${listFiles(d.store_reference).join(", ")}`);
      const xml = fs.readFileSync(path.join(d.store_reference, file), "utf8");
      if (d.store === APPLE_382) {
        if (schema382MissingFails) assert.fail(String(ern382SchemaSkip));
        if (!ern382SchemaSkip) assert.deepEqual(await ern382SchemaErrors(xml), [], xml);
      } else {
        if (schemaMissingFails) assert.fail(String(ernSchemaSkip));
        if (!ernSchemaSkip) assert.deepEqual(await ernSchemaErrors(xml), [], xml);
      }
      out[d.store] = parseXml(xml);
    }
    return out;
  }

  test("the built-in dictionaries: every mapping names one of the store's genres and a Backline genre", async () => {
    const backline = new Set(
      (await rows<{ code: string }>("select code from internal.genres")).map((g) => g.code),
    );
    for (const id of DICTIONARY_IDS) {
      const d = dictionary(id);
      assert.equal(d.id, id);
      assert.ok(
        d.source.document && d.source.version && /check/.test(d.source.transcribed),
        `${id}: its source`,
      );
      const names = new Set(d.genres.map((g) => g.name));
      for (const [code, name] of Object.entries(d.genre_map)) {
        assert.ok(backline.has(code), `${id}: ${code} is a Backline genre`);
        assert.ok(names.has(name), `${id}: ${name} is in its genre list`);
      }
    }
    // Apple's and Amazon's lists name every Backline genre; Beatport's only the electronic ones.
    assert.equal(Object.keys(dictionary("apple-music").genre_map).length, backline.size);
    assert.equal(Object.keys(dictionary("amazon-music").genre_map).length, backline.size);
    assert.equal(dictionary("beatport").genre_map.country, undefined);
  });

  test("Apple Music's dictionary: the store's genre and role names, in schema-valid ERN 4.3 and 3.8.2; a store without one keeps display names", async () => {
    const id = await draft([APPLE, APPLE_382, PLAIN], {
      primary_genre: "indie",
      secondary_genre: "reggaeton",
    });
    expectStatus(await api("POST", `/releases/${id}/submit`), 200);
    const m = await messages(id, [APPLE, APPLE_382, PLAIN]);

    const apple = m[APPLE] as XmlNode;
    for (const release of all(apple, "Release")) {
      assert.equal(textAt(release, "Genre/GenreText"), "Indie Pop");
      assert.equal(textAt(release, "Genre/SubGenre"), "Urbano latino");
    }
    const roles = all(apple, "Contributor").map((c) => at(c, "Role"));
    assert.deepEqual(
      roles.map((r) => [r.text, r.attrs.UserDefinedValue, r.attrs.Namespace]),
      [
        ["UserDefined", "Producer", RECIPIENT.dpid],
        ["UserDefined", "Mixing Engineer", RECIPIENT.dpid],
      ],
    );

    const apple382 = m[APPLE_382] as XmlNode;
    const details = all(apple382, "ReleaseDetailsByTerritory");
    assert.ok(details.length > 0);
    for (const d of details) {
      assert.equal(textAt(d, "Genre/GenreText"), "Indie Pop");
      assert.equal(textAt(d, "Genre/SubGenre"), "Urbano latino");
    }
    // 3.8.2's own Producer is Apple's name already; the mixing engineer goes as Apple names it.
    assert.deepEqual(
      all(apple382, "ResourceContributorRole").map((r) => [r.text, r.attrs.UserDefinedValue]),
      [
        ["Producer", undefined],
        ["UserDefined", "Mixing Engineer"],
      ],
    );

    // The store without a dictionary: Backline's display names and DDEX's roles, as before.
    const plain = m[PLAIN] as XmlNode;
    for (const release of all(plain, "Release")) {
      assert.equal(textAt(release, "Genre/GenreText"), "Indie");
      assert.equal(textAt(release, "Genre/SubGenre"), "Reggaeton");
    }
    assert.deepEqual(
      all(plain, "Contributor").map((c) => [at(c, "Role").text, at(c, "Role").attrs.UserDefinedValue]),
      [
        ["StudioProducer", undefined],
        ["MixingEngineer", undefined],
      ],
    );
  });

  test("a genre a dictionary store cannot name blocks submit, naming the store, and changes nothing; mapped by staff, it passes", async () => {
    const id = await draft([BEATPORT, PLAIN], { primary_genre: "country", secondary_genre: "house" });
    const before = await rows("select status, updated_at from public.releases where id = $1", [id]);
    const res = await api<Any>("POST", `/releases/${id}/submit`);
    const problem = assertProblem(res, 422, "release_incomplete");
    const unmapped = (problem.errors ?? []).filter((e) => e.code === "unmapped_genre");
    assert.equal(unmapped.length, 1, JSON.stringify(problem.errors));
    assert.equal(unmapped[0]?.param, "primary_genre");
    assert.match(
      unmapped[0]?.message ?? "",
      /country \(Country\) has no genre at Store dict_beatport \(store dict_beatport\)/,
    );
    // Nothing changed: still a draft, no job, no delivery.
    assert.deepEqual(
      await rows("select status, updated_at from public.releases where id = $1", [id]),
      before,
    );
    assert.deepEqual(await rows("select 1 from internal.release_deliveries where release_id = $1", [id]), []);
    assert.deepEqual(await rows("select 1 from internal.jobs where payload ->> 'release_id' = $1", [id]), []);
    // The problems list says the same before submitting.
    const problems = expectStatus(await api<Any>("GET", `/releases/${id}/problems`), 200);
    assert.equal(problems.ready, false);
    assert.ok(
      problems.errors.some((e: Any) => e.code === "unmapped_genre" && /dict_beatport/.test(e.message)),
    );

    // Only to the store without a dictionary, the same genre is no problem (today's behaviour).
    const plainOnly = await draft([PLAIN], { primary_genre: "country" });
    const plainProblems = expectStatus(await api<Any>("GET", `/releases/${plainOnly}/problems`), 200);
    assert.deepEqual(plainProblems.errors, []);

    // Staff map it to one of Beatport's genres: the release can be submitted.
    expectStatus(
      await admin(platform, "PATCH", `/stores/${BEATPORT}/dictionary`, {
        genres: { country: "Dance / Pop" },
      }),
      200,
    );
    expectStatus(await api("POST", `/releases/${id}/submit`), 200);
    const m = await messages(id, [BEATPORT, PLAIN]);
    assert.equal(
      textAt(all(m[BEATPORT] as XmlNode, "Release")[0] as XmlNode, "Genre/GenreText"),
      "Dance / Pop",
    );
    assert.equal(textAt(all(m[BEATPORT] as XmlNode, "Release")[0] as XmlNode, "Genre/SubGenre"), "House");
    assert.equal(textAt(all(m[PLAIN] as XmlNode, "Release")[0] as XmlNode, "Genre/GenreText"), "Country");
  });

  test("staff see and change a store's dictionary over /admin/v1; bad fields are 422 by name and change nothing; others are refused", async () => {
    const view = expectStatus(await admin(platform, "GET", `/stores/${APPLE}/dictionary`), 200);
    assert.equal(view.dictionary.id, "apple-music");
    assert.match(view.dictionary.source.document, /Music genres/);
    assert.equal(view.checks_genres, true);
    const indie = view.genres.find((g: Any) => g.genre === "indie");
    assert.deepEqual(indie, { genre: "indie", name: "Indie", store_genre: "Indie Pop", from: "dictionary" });
    assert.deepEqual(
      view.roles.find((r: Any) => r.role === "mixing_engineer"),
      {
        role: "mixing_engineer",
        ddex_role: "MixingEngineer",
        store_role: "Mixing Engineer",
        from: "dictionary",
      },
    );
    const plain = expectStatus(await admin(platform, "GET", `/stores/${PLAIN}/dictionary`), 200);
    assert.equal(plain.dictionary, null);
    assert.equal(plain.checks_genres, false);
    const listed = expectStatus(await admin(platform, "GET", "/dictionaries"), 200);
    assert.deepEqual(listed.data.map((d: Any) => d.id).sort(), [...DICTIONARY_IDS].sort());

    const settingsOf = async () =>
      (
        await rows<{ settings: Any; genre_map: Any }>(
          "select settings, genre_map from internal.stores where code = $1",
          [APPLE],
        )
      )[0];
    const stored = await settingsOf();
    for (const [body, param, code] of [
      [{ dictionary: "spotify-genres" }, "dictionary", "unknown_dictionary"],
      [{ genres: { indie: "Not An Apple Genre" } }, "genres.indie", "invalid_dictionary"],
      [{ genres: { "no-such-genre": "Pop" } }, "genres.no-such-genre", "unknown_genre"],
      [{ roles: { whistler: "Whistler" } }, "roles.whistler", "unknown_role"],
      [{ roles: { arranger: "  " } }, "roles.arranger", "blank"],
    ] as const) {
      const res: ApiResponse<Any> = await admin(platform, "PATCH", `/stores/${APPLE}/dictionary`, body);
      assertProblem(res, 422, "invalid_dictionary");
      assert.equal(res.body.param, param, JSON.stringify(res.body));
      assert.ok(
        res.body.errors.some((e: Any) => e.param === param && e.code === code),
        JSON.stringify(res.body.errors),
      );
    }
    assert.deepEqual(await settingsOf(), stored, "nothing changed");

    // An override, and a role named the store's way: kept in the settings, the genre map follows.
    const changed = expectStatus(
      await admin(platform, "PATCH", `/stores/${APPLE}/dictionary`, {
        genres: { indie: "Alternative" },
        roles: { producer: "Executive Producer" },
      }),
      200,
    );
    assert.deepEqual(
      changed.genres.find((g: Any) => g.genre === "indie"),
      {
        genre: "indie",
        name: "Indie",
        store_genre: "Alternative",
        from: "override",
      },
    );
    assert.equal(changed.roles.find((r: Any) => r.role === "producer").store_role, "Executive Producer");
    const now = (await settingsOf()) as Any;
    assert.equal(now.settings.ddex.genres.indie, "Alternative");
    assert.equal(now.settings.ddex.roles.producer, "Executive Producer");
    assert.equal(now.genre_map.indie, "Alternative");
    // null removes the override: back to the dictionary's.
    const reverted = expectStatus(
      await admin(platform, "PATCH", `/stores/${APPLE}/dictionary`, {
        genres: { indie: null },
        roles: { producer: null },
      }),
      200,
    );
    assert.equal(reverted.genres.find((g: Any) => g.genre === "indie").from, "dictionary");
    assert.equal((await settingsOf())?.genre_map.indie, "Indie Pop");

    // A store that does not deliver through ddex has no dictionary to choose.
    assertProblem(
      await admin(platform, "PATCH", "/stores/spotify/dictionary", { dictionary: "apple-music" }),
      409,
      "not_ddex",
    );
    assertProblem(await admin(platform, "GET", "/stores/no_such_store/dictionary"), 404, "not_found");

    // Stores belong to the installation: a tenant's admin (key or person) reads and changes nothing,
    // and platform staff change them only from a session with a second factor.
    for (const who of [tenantAdmin, { service: keys.service_role_key }]) {
      assertProblem(await admin(who, "GET", `/stores/${APPLE}/dictionary`), 403, "insufficient_role");
      assertProblem(
        await admin(who, "PATCH", `/stores/${APPLE}/dictionary`, { genres: { indie: "Alternative" } }),
        403,
        "insufficient_role",
      );
    }
    assertProblem(
      await admin(platformAal1, "PATCH", `/stores/${APPLE}/dictionary`, { genres: { indie: "Alternative" } }),
      403,
      "aal2_required",
    );
    const nobody = await fetch(`${app.url}/admin/v1/stores/${APPLE}/dictionary`, {
      method: "PATCH",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ genres: { indie: "Alternative" } }),
    });
    // Without a user's token the anon key is no staff at all.
    assert.equal(nobody.status, 403);
    assert.equal((await settingsOf())?.settings.ddex.genres.indie, undefined, "nothing changed");
  });

  test("backline stores dictionary shows and changes a store's dictionary; stores dictionaries lists them", async () => {
    const listed = await runCliOn(t(), ["stores", "dictionaries", "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(
      JSON.parse(listed.stdout)
        .map((d: Any) => d.id)
        .sort(),
      [...DICTIONARY_IDS].sort(),
    );

    const shown = await runCliOn(t(), ["stores", "dictionary", PLAIN]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /no dictionary: genres go as Backline's display names/);

    const set = await runCliOn(t(), [
      "stores",
      "dictionary",
      PLAIN,
      "--use",
      "amazon-music",
      "--genre",
      "indie=Alternative Rock",
      "--json",
    ]);
    assert.equal(set.code, 0, set.stderr);
    const view = JSON.parse(set.stdout);
    assert.equal(view.dictionary.id, "amazon-music");
    assert.equal(view.checks_genres, true);
    assert.deepEqual(
      view.genres.find((g: Any) => g.genre === "indie"),
      {
        genre: "indie",
        name: "Indie",
        store_genre: "Alternative Rock",
        from: "override",
      },
    );

    const bad = await runCliOn(t(), ["stores", "dictionary", PLAIN, "--genre", "indie=Nope"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /genres\.indie: "Nope" is not a genre of the amazon-music dictionary/);
    const unknown = await runCliOn(t(), ["stores", "dictionary", PLAIN, "--use", "tidal"]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no dictionary "tidal"/);

    const none = await runCliOn(t(), [
      "stores",
      "dictionary",
      PLAIN,
      "--use",
      "none",
      "--unset-genre",
      "indie",
      "--json",
    ]);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(JSON.parse(none.stdout).dictionary, null);
    assert.equal(JSON.parse(none.stdout).checks_genres, false);
    assert.equal(
      (
        await rows<{ genre_map: unknown }>("select genre_map from internal.stores where code = $1", [PLAIN])
      )[0]?.genre_map,
      null,
    );
  });

  test("at start every store's genre map is written again from its settings and today's dictionary files", async () => {
    // As if an older Backline had written them: Apple's map short of genres, a map left on a
    // store without a dictionary.
    await rows("update internal.stores set genre_map = $2 where code = $1", [
      APPLE,
      JSON.stringify({ pop: "Pop" }),
    ]);
    await rows("update internal.stores set genre_map = $2 where code = $1", [
      PLAIN,
      JSON.stringify({ pop: "Pop" }),
    ]);
    assert.deepEqual((await refreshStoreGenreMaps(db())).sort(), [APPLE, PLAIN].sort());
    for (const { code, settings, genre_map } of await rows<{
      code: string;
      settings: Any;
      genre_map: unknown;
    }>("select code, settings, genre_map from internal.stores")) {
      assert.deepEqual(genre_map, storeGenreMapColumn(settings), code);
    }
    assert.equal(
      Object.keys(
        (await rows<{ genre_map: Any }>("select genre_map from internal.stores where code = $1", [APPLE]))[0]
          ?.genre_map,
      ).length,
      38,
    );
    assert.deepEqual(await refreshStoreGenreMaps(db()), [], "nothing to write the second time");
  });
});

function at(node: XmlNode, name: string): XmlNode {
  const found = node.children.find((c) => c.name === name);
  assert.ok(found, `${node.name} has ${name}`);
  return found;
}
