import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { Worker } from "../src/jobs/worker.ts";
import { ddexSettingsOf } from "../src/pipeline/ddex/adapter.ts";
import { choreographyErrors } from "../src/pipeline/ddex/choreography.ts";
import { buildNewReleaseMessage, type ErnMessageInput } from "../src/pipeline/ddex/ern.ts";
import { ERN_WRITERS } from "../src/pipeline/ddex/ern-writers.ts";
import { buildNewReleaseMessage382, ERN_382_NAMESPACE } from "../src/pipeline/ddex/ern382.ts";
import { reportDelivery } from "../src/pipeline/delivery.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { DeliveryConfigError } from "../src/pipeline/stores.ts";
import { LocalMedia } from "../src/storage/media.ts";
import { createAccount, createTenant } from "../src/tenancy/tenants.ts";
import { readErnMessage } from "../src/transfer/ern-read.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  all,
  at,
  configureDdexStore,
  ERN_CREATED,
  ERN_RELEASE_ID,
  ernTrack,
  gtin13,
  has,
  hashesOf,
  jpegBytes,
  kids,
  listFiles,
  parseXml,
  placeMedia,
  poll,
  RECIPIENT,
  SENDER,
  seedRelease,
  textAt,
  wavBytes,
  type XmlNode,
} from "./support/ddex.ts";
import { said43, said382, texts } from "./support/ern-said.ts";
import { ern382SchemaErrors, ern382SchemaSkip, schema382MissingFails } from "./support/ern-schema.ts";
import { tempDir } from "./support/process.ts";
import { FUTURE_DATE } from "./support/public-api.ts";
import { type SftpStoreFixture, startSftpStoreFixture } from "./support/sftp-server.ts";
import { SHARED_REQUIRED, sharedPath } from "./support/shared.ts";

/**
 * ERN 3.8.2 for the stores that take it (issue 41, docs/ddex.md "ERN versions"): the same
 * release written by both writers and read back from each message by its own paths — titles,
 * display artists, contributors and their roles, ISRCs, ICPN, catalogue and proprietary ids, P
 * and C lines, genres, parental warnings, files, deals and territories — must say the same; the
 * store setting that chooses the version; and real deliveries on each engine to a store set to
 * 3.8.2 — into a folder (new release, update, takedown) and over SFTP with the choreography's
 * ManifestMessage — whose messages are valid against DDEX's 3.8.2 schema (and the manifest
 * against the choreography's). Every kind of message against the schema, without a database:
 * test/ddex-schema.test.ts.
 */

const RELEASE_ID = ERN_RELEASE_ID;
const CREATED = ERN_CREATED;
const track = ernTrack;

/** Every role Backline has, on the first track; a featured artist; a role no store knows. */
const EVERY_ROLE = [
  "remixer",
  "composer",
  "lyricist",
  "songwriter",
  "producer",
  "co_producer",
  "mixing_engineer",
  "mastering_engineer",
  "recording_engineer",
  "arranger",
  "conductor",
  "orchestra",
  "performer",
  "publisher",
];

function input(over: Partial<ErnMessageInput> = {}): ErnMessageInput {
  const t1 = track(1, {
    contributors: [
      ...EVERY_ROLE.map((role, i) => ({ name: `Person ${i + 1}`, role })),
      { name: "Kai", role: "featured_artist" },
      { name: "Someone", role: "whistler" },
    ],
  });
  const t2 = track(2, { version: "Radio Edit", explicit: true, language: "fr", artist_name: "Luna & Kai" });
  const t3 = track(3, { disc_number: 2, track_number: 1, duration: 3725 });
  return {
    messageId: "0f0e0d0c-0000-4000-8000-000000000001",
    threadId: RELEASE_ID,
    createdAt: CREATED,
    sender: SENDER,
    recipient: RECIPIENT,
    test: false,
    release: {
      id: RELEASE_ID,
      title: "Night Drive & <Friends>",
      version: "Deluxe",
      release_type: "album",
      artist_name: "Luna Vale",
      primary_genre: "rnb-soul",
      secondary_genre: "hip-hop-rap",
      primary_genre_name: "R&B/Soul",
      secondary_genre_name: "Hip-Hop/Rap",
      release_date: "2026-09-01",
      original_release_date: "2001-02-03",
      upc: "4006381333931",
      label_name: "Night Owl Records",
      catalog_number: "NOR-001",
      licensed_territories_include: "WW",
      territories: [],
      territories_exclude: [],
      copyright: "2026 Night Owl Records",
      copyright_year: 2026,
      phonographic_copyright: "℗ 2025 Night Owl Records",
      phonographic_year: 2025,
      explicit: false,
      language: "en",
    },
    tracks: [t3, t2, t1],
    audio: new Map([
      [
        t1.id,
        {
          uri: "resources/QZDDX2600001.flac",
          md5: "a".repeat(32),
          bytes: 2048,
          codec: "FLAC" as const,
          channels: 2,
          sampleRate: 44_100,
          bitsPerSample: 16,
        },
      ],
      [t2.id, { uri: "resources/QZDDX2600002.wav", md5: "b".repeat(32), bytes: 1000, codec: "PCM" as const }],
    ]),
    artwork: {
      uri: "resources/cover.jpg",
      md5: "c".repeat(32),
      bytes: 1536,
      codec: "JPEG",
      width: 3000,
      height: 3000,
    },
    deals: [
      { commercialModel: "SubscriptionModel", useTypes: ["OnDemandStream", "NonInteractiveStream"] },
      { commercialModel: "PayAsYouGoModel", useTypes: ["PermanentDownload"] },
      { commercialModel: "FreeOfChargeModel", useTypes: ["Stream", "ConditionalDownload"] },
    ],
    genreMap: { "hip-hop-rap": "Rap" },
    ...over,
  };
}

const base = input();
const SHAPES: [string, ErnMessageInput][] = [
  ["an album on two discs: every role, featured artist, versions, explicit track, cover and audio", base],
  [
    "a single without media, UPC-A, no label, no genre, no dates, no P or C line",
    input({
      tracks: [track(1)],
      audio: new Map(),
      artwork: undefined,
      release: {
        ...base.release,
        release_type: "single",
        upc: "036000291452",
        label_name: null,
        catalog_number: null,
        primary_genre: null,
        secondary_genre: null,
        release_date: null,
        original_release_date: null,
        copyright: null,
        phonographic_copyright: null,
        version: null,
      },
    }),
  ],
  [
    "the world less exclusions, a test message",
    input({ test: true, release: { ...base.release, territories_exclude: ["KP", "CU"] } }),
  ],
  [
    "an explicit territory list, an explicit release",
    input({
      release: {
        ...base.release,
        licensed_territories_include: "US,CA",
        territories: ["MX"],
        explicit: true,
      },
    }),
  ],
];

describe("ERN 4.3 and ERN 3.8.2 say the same about a release", () => {
  for (const [name, message] of SHAPES) {
    test(name, () => {
      const in43 = said43(buildNewReleaseMessage(message));
      const in382 = said382(buildNewReleaseMessage382(message));
      assert.deepEqual(in382, in43);
      // Not two empty readings: each says what the release is.
      assert.equal(in43.tracks.length, message.tracks.length);
      assert.equal(in43.deals.length, message.deals.length);
      assert.equal(in43.header[1], message.messageId);
      assert.equal(in43.header[7], message.test ? "TestMessage" : "LiveMessage");
    });
  }

  test("what the album says, read from the 3.8.2 message", () => {
    const said = said382(buildNewReleaseMessage382(base));
    assert.deepEqual(said.release.title, [
      "Night Drive & <Friends>",
      "Deluxe",
      "Night Drive & <Friends> (Deluxe)",
    ]);
    assert.deepEqual(said.release.genre, ["R&B/Soul", "Rap"], "display names, the store's own where mapped");
    assert.deepEqual(
      said.release.pLine,
      ["2025", "℗ 2025 Night Owl Records"],
      "a line already marked stays so",
    );
    assert.deepEqual(said.release.cLine, ["2026", "(C) 2026 Night Owl Records"]);
    assert.deepEqual(
      [said.release.icpn, said.release.catalog, said.release.type, said.release.explicit],
      ["4006381333931", "NOR-001", "Album", "Explicit"],
    );
    assert.deepEqual(said.release.discs, [
      ["1", "1:A1", "2:A2"],
      ["2", "1:A3"],
    ]);
    assert.deepEqual(
      said.tracks.map((t) => [t.isrc, t.title, t.artistName, t.explicit, t.language, t.file]),
      [
        [
          "QZDDX2600001",
          ["Track 1", null, "Track 1"],
          "Luna Vale",
          "NotExplicit",
          "en",
          ["resources/QZDDX2600001.flac", "a".repeat(32), "FLAC"],
        ],
        [
          "QZDDX2600002",
          ["Track 2", "Radio Edit", "Track 2 (Radio Edit)"],
          "Luna & Kai",
          "Explicit",
          "fr",
          ["resources/QZDDX2600002.wav", "b".repeat(32), "PCM"],
        ],
        ["QZDDX2600003", ["Track 3", null, "Track 3"], "Luna Vale", "NotExplicit", "en", null],
      ],
    );
    assert.deepEqual((said.tracks[0] as { artists: unknown }).artists, [
      ["1", "Luna Vale", "MainArtist"],
      ["2", "Kai", "FeaturedArtist"],
    ]);
    assert.equal((said.tracks[0] as { contributors: unknown[] }).contributors.length, EVERY_ROLE.length);
    assert.deepEqual(said.deals[0], {
      releases: ["R0", "R1", "R2", "R3"],
      commercialModels: ["SubscriptionModel"],
      useTypes: ["OnDemandStream", "NonInteractiveStream"],
      territories: ["Worldwide"],
      excluded: [],
      start: "2026-09-01T00:00:00Z",
      end: null,
    });
  });

  test("recording roles are ResourceContributors, work roles IndirectResourceContributors; a role 3.8.2 lacks is UserDefined with 4.3's name", () => {
    const root = parseXml(buildNewReleaseMessage382(base));
    const first = kids(at(root, "ResourceList"), "SoundRecording")[0] as XmlNode;
    assert.equal(textAt(first, "SoundRecordingId/ISRC"), "QZDDX2600001");
    const d = at(first, "SoundRecordingDetailsByTerritory");
    const listed = (name: string, roleName: string) =>
      kids(d, name).map((c) => {
        const r = at(c, roleName);
        return [textAt(c, "PartyName/FullName"), r.text, r.attrs.UserDefinedValue ?? null];
      });
    assert.deepEqual(listed("ResourceContributor", "ResourceContributorRole"), [
      ["Person 1", "UserDefined", "Remixer"],
      ["Person 5", "Producer", null],
      ["Person 6", "UserDefined", "CoProducer"],
      ["Person 7", "UserDefined", "MixingEngineer"],
      ["Person 8", "UserDefined", "MasteringEngineer"],
      ["Person 9", "UserDefined", "RecordingEngineer"],
      ["Person 11", "Conductor", null],
      ["Person 12", "Orchestra", null],
      ["Person 13", "AssociatedPerformer", null],
    ]);
    assert.deepEqual(listed("IndirectResourceContributor", "IndirectResourceContributorRole"), [
      ["Person 2", "Composer", null],
      ["Person 3", "Lyricist", null],
      ["Person 4", "ComposerLyricist", null],
      ["Person 10", "Arranger", null],
      ["Person 14", "MusicPublisher", null],
    ]);
    assert.ok(!all(root, "FullName").some((n) => n.text === "Someone"), "a role no store knows is left out");
  });

  test("a takedown: 4.3 ends each deal, 3.8.2 sends each deal's TakeDown from the takedown's time; same models and territories", () => {
    for (const [when, endsAt] of [
      ["after the release date", "2026-10-01T08:30:00Z"],
      ["before the release date", "2026-09-01T00:00:00Z"],
    ] as const) {
      const takenDown = new Date(
        when === "after the release date" ? "2026-10-01T08:30:00Z" : "2026-06-01T08:30:00Z",
      );
      const message = input({ endDealsAt: takenDown });
      const in43 = said43(buildNewReleaseMessage(message));
      const in382 = said382(buildNewReleaseMessage382(message));
      assert.deepEqual({ ...in382, deals: [] }, { ...in43, deals: [] }, "the rest says the same");
      assert.equal(in382.deals.length, in43.deals.length);
      in43.deals.forEach((d43, i) => {
        assert.deepEqual([d43.start, d43.end], ["2026-09-01T00:00:00Z", endsAt], when);
        assert.deepEqual(in382.deals[i], {
          releases: d43.releases,
          commercialModels: d43.commercialModels,
          useTypes: [],
          territories: d43.territories,
          excluded: d43.excluded,
          start: takenDown.toISOString().replace(".000Z", "Z"),
          end: null,
          takeDown: "true",
        });
      });
    }
  });

  test("Backline's own ERN reader (transfer imports) reads the same release from both", () => {
    const options = {
      genres: {
        genres: [
          { code: "rnb-soul", name: "R&B/Soul" },
          { code: "hip-hop-rap", name: "Rap" },
        ],
      },
      source: "message.xml",
      dir: "/archive/release",
    };
    for (const [name, message] of SHAPES) {
      // 3.8.2 lists a recording's contributors before the work's: the same people, in another
      // order. A warning names the XML path where it was read, which differs by version.
      const read = (xml: string) => {
        const result = readErnMessage(xml, options);
        const release = result.release;
        if (release) {
          release.problems = release.problems.map(({ where: _where, ...p }) => ({ ...p, where: "" }));
          for (const t of release.tracks) {
            t.contributors.sort((x, y) => x.name.localeCompare(y.name) || x.role.localeCompare(y.role));
            t.problems = t.problems.map(({ where: _where, ...p }) => ({ ...p, where: "" }));
          }
        }
        return result;
      };
      const in43 = read(buildNewReleaseMessage(message));
      const in382 = read(buildNewReleaseMessage382(message));
      assert.deepEqual([in43.version, in382.version], ["43", "382"]);
      assert.deepEqual(in382.release, in43.release, name);
      assert.deepEqual(
        in382.release?.problems.filter((p) => p.severity === "error"),
        [],
        `${name}: no errors reading it back`,
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The store setting

describe("ddex.ern_version: the ERN version a store takes", () => {
  const ddex = {
    sender: SENDER,
    recipient: RECIPIENT,
    destination: { type: "directory", path: "/srv/drops" },
  };
  const settings = (extra: Record<string, unknown>) =>
    ddexSettingsOf({ code: "drop", settings: { adapter: "ddex", ddex: { ...ddex, ...extra } } });

  test("4.3 by default; 3.8.2 when set; each picks its writer", () => {
    assert.equal(settings({}).ern_version, "4.3");
    assert.equal(settings({ ern_version: "3.8.2" }).ern_version, "3.8.2");
    assert.equal(ERN_WRITERS["4.3"], buildNewReleaseMessage);
    assert.equal(ERN_WRITERS["3.8.2"], buildNewReleaseMessage382);
  });

  test("any other value is refused, naming the field and what it may be", () => {
    for (const bad of ["3.8", "4.2", 382, "", null]) {
      assert.throws(
        () => settings({ ern_version: bad }),
        (error: unknown) =>
          error instanceof DeliveryConfigError &&
          /ddex\.ern_version: /.test(error.message) &&
          error.message.includes('"4.3"') &&
          error.message.includes('"3.8.2"'),
        String(bad),
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Real deliveries to a store set to 3.8.2

async function rowsOf<T extends Record<string, unknown>>(db: Db, sql: string, params: unknown[] = []) {
  return db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
}

describeEachEngine("delivery to a store that takes ERN 3.8.2", (t) => {
  const db = () => t().db;
  const STORE = "ddex_ern382";
  let worker: Worker;
  let media: LocalMedia;
  let drops: string;
  let accountId: string;

  before(async () => {
    drops = tempDir("backline-ern382-drops-");
    media = new LocalMedia(tempDir("backline-ern382-media-"));
    const { tenant } = await createTenant(db(), {
      name: "ERN 3 Label",
      slug: `ern382-${randomUUID().slice(0, 8)}`,
      settings: { auto_review: true, require_media: false },
    });
    accountId = (await createAccount(db(), { tenantId: tenant.id, name: "Night Owl Records" })).id;
    await configureDdexStore(db(), STORE, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { type: "directory", path: drops },
      ern_version: "3.8.2",
    });
    worker = new Worker({ db: db(), handlers: pipelineHandlers(db(), { media }), pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    fs.rmSync(drops, { recursive: true, force: true });
    if (media) fs.rmSync(media.root, { recursive: true, force: true });
  });

  const rows = <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    rowsOf<T>(db(), sql, params);
  const deliveries = (releaseId: string, n: number) =>
    poll(
      `${n} deliveries dropped`,
      () =>
        rows<{ id: string; action: string; status: string; store_reference: string | null }>(
          `select id::text as id, action, status, store_reference from internal.release_deliveries
           where release_id = $1 order by created_at, id`,
          [releaseId],
        ),
      (ds) => ds.length === n && ds.every((d) => d.store_reference !== null),
      30_000,
    );

  /** The message of a dropped batch, checked: 3.8.2, schema-valid, every File in the batch with its MD5. */
  async function messageOf(reference: string, upc: string): Promise<XmlNode> {
    const files = listFiles(reference);
    assert.ok(files.includes(`${upc}/${upc}.xml`), `the message is in ${reference}: ${files.join(", ")}`);
    const xml = fs.readFileSync(path.join(reference, upc, `${upc}.xml`), "utf8");
    if (schema382MissingFails) assert.fail(String(ern382SchemaSkip));
    if (ern382SchemaSkip) console.log(`# 3.8.2 schema validation skipped: ${ern382SchemaSkip}`);
    else assert.deepEqual(await ern382SchemaErrors(xml), [], xml);
    const root = parseXml(xml);
    assert.equal(root.attrs["xmlns:ern"], ERN_382_NAMESPACE);
    const named = all(root, "File").map((f) => `${upc}/${textAt(f, "FilePath")}${textAt(f, "FileName")}`);
    assert.deepEqual(
      named.sort(),
      files.filter((f) => f.startsWith(`${upc}/resources/`)).sort(),
      "every file of the package is in the message, and no other",
    );
    for (const f of all(root, "File")) {
      const data = fs.readFileSync(path.join(reference, upc, textAt(f, "FilePath"), textAt(f, "FileName")));
      assert.equal(textAt(f, "HashSum/HashSumAlgorithmType"), "MD5");
      assert.equal(textAt(f, "HashSum/HashSum"), hashesOf(data).md5);
    }
    return root;
  }

  test("a new release, an update and a takedown reach the store as schema-valid ERN 3.8.2 messages", async () => {
    const upc = gtin13("400638300001");
    const release = await seedRelease(
      db(),
      accountId,
      {
        title: "Night Drive",
        release_type: "ep",
        artist_name: "Luna Vale",
        primary_genre: "electronic",
        release_date: FUTURE_DATE,
        label_name: "Night Owl Records",
        licensed_territories_include: "WW",
        territories_exclude: ["CU"],
        services: [STORE],
        copyright: "2026 Night Owl Records",
        copyright_year: 2026,
        phonographic_copyright: "2026 Night Owl Records",
        phonographic_year: 2026,
        language: "en",
        upc,
      },
      [
        {
          title: "Night Drive",
          isrc: "QZDDX2638201",
          duration: 205,
          track_number: 1,
          contributors: [
            { name: "Ada Moreno", role: "producer" },
            { name: "Sam Reyes", role: "songwriter" },
            { name: "Kai", role: "featured_artist" },
          ],
          audio_metadata: { channels: 2, sample_rate: 44_100, bit_depth: 16 },
        },
        {
          title: "Night Drive",
          version: "Extended Mix",
          isrc: "QZDDX2638202",
          duration: 372,
          track_number: 2,
          explicit: true,
          contributors: [{ name: "Ada Moreno", role: "remixer" }],
        },
      ],
    );
    placeMedia(media, accountId, release.id, {
      cover: jpegBytes(5),
      audio: release.tracks.map((tr, i) => ({ trackId: tr.id, ext: "wav" as const, data: wavBytes(i + 7) })),
    });
    await rows("update public.releases set status = 'submitted' where id = $1", [release.id]);
    worker.wake();

    const [insert] = await deliveries(release.id, 1);
    assert.ok(insert?.store_reference);
    const first = await messageOf(insert.store_reference, upc);
    assert.equal(textAt(first, "MessageHeader/MessageId"), insert.id);
    assert.equal(textAt(first, "MessageHeader/MessageControlType"), "LiveMessage");
    const main = kids(at(first, "ReleaseList"), "Release")[0] as XmlNode;
    assert.equal(textAt(main, "ReleaseId/ICPN"), upc);
    assert.equal(textAt(main, "ReleaseDetailsByTerritory/ParentalWarningType"), "Explicit");
    assert.deepEqual(
      kids(at(first, "ResourceList"), "SoundRecording").map((s) => textAt(s, "SoundRecordingId/ISRC")),
      ["QZDDX2638201", "QZDDX2638202"],
    );
    const dealTerms = all(first, "DealTerms");
    assert.equal(dealTerms.length, 3, "the store's three default deals");
    for (const d of dealTerms) {
      assert.deepEqual(texts(d, "ExcludedTerritoryCode"), ["CU"]);
      assert.equal(textAt(d, "ValidityPeriod/StartDateTime"), `${FUTURE_DATE}T00:00:00Z`);
      assert.equal(has(d, "TakeDown"), false);
    }
    await reportDelivery(db(), insert.id, { status: "live" });

    // A correction: the whole message again, with the new title.
    await rows("select internal.correct_release_metadata($1, $2::jsonb)", [
      release.id,
      JSON.stringify({ title: "Night Drive (Fixed)" }),
    ]);
    worker.wake();
    const update = (await deliveries(release.id, 2))[1];
    assert.equal(update?.action, "update");
    const second = await messageOf(update?.store_reference as string, upc);
    assert.equal(
      textAt(kids(at(second, "ReleaseList"), "Release")[0] as XmlNode, "ReferenceTitle/TitleText"),
      "Night Drive (Fixed)",
    );
    assert.equal(all(second, "TakeDown").length, 0);

    // The takedown: each deal's TakeDown, from now (before the release date).
    const before = Date.now();
    await rows("insert into public.takedown_requests (release_id, reason) values ($1, 'Rights ended')", [
      release.id,
    ]);
    worker.wake();
    const takedown = (await deliveries(release.id, 3))[2];
    assert.equal(takedown?.action, "takedown");
    const third = await messageOf(takedown?.store_reference as string, upc);
    const terms = all(third, "DealTerms");
    assert.equal(terms.length, 3);
    for (const d of terms) {
      assert.equal(textAt(d, "TakeDown"), "true");
      assert.equal(has(d, "Usage"), false);
      assert.deepEqual(texts(d, "ExcludedTerritoryCode"), ["CU"]);
      const from = Date.parse(textAt(d, "ValidityPeriod/StartDateTime"));
      assert.ok(from >= before - 1000 && from <= Date.now() + 1000, "the takedown starts now");
    }
  });
});

// The store's whole channel over SFTP: the 3.8.2 message and the choreography's ManifestMessage
// beside it, each valid against its own DDEX schema.
const ERNC_DIR = process.env.DDEX_ERNC_SCHEMA_DIR
  ? path.resolve(process.env.DDEX_ERNC_SCHEMA_DIR)
  : sharedPath("ddex", "ernc-sftp18");
const erncSkip =
  fs.existsSync(path.join(ERNC_DIR, "ern-choreography-sftp.xsd")) || SHARED_REQUIRED
    ? undefined
    : `DDEX's ERN choreography 1.8 schema is not at ${ERNC_DIR}`;

describeEachEngine("ERN 3.8.2 over SFTP, with the choreography's manifest", (t) => {
  const db = () => t().db;
  const STORE = `sftp382_${randomUUID().slice(0, 6)}`;
  let fixture: SftpStoreFixture;

  before(async () => {
    fixture = await startSftpStoreFixture(db(), {
      prefix: "ern382",
      tenant: "ERN 3 SFTP Label",
      account: "Owl",
    });
    await configureDdexStore(db(), STORE, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: fixture.server.settings(),
      ern_version: "3.8.2",
    });
    fixture.startWorker();
  });
  after(async () => {
    await fixture?.close();
  });

  test("a store set to 3.8.2 receives a schema-valid 3.8.2 message and a schema-valid ManifestMessage", {
    skip: erncSkip ?? (schema382MissingFails ? undefined : ern382SchemaSkip),
  }, async () => {
    const upc = gtin13("400638300002");
    const release = await seedRelease(
      db(),
      fixture.account.id,
      {
        title: "Night Drive",
        release_type: "single",
        artist_name: "Luna Vale",
        primary_genre: "electronic",
        release_date: FUTURE_DATE,
        label_name: "Night Owl Records",
        licensed_territories_include: "WW",
        services: [STORE],
        language: "en",
        upc,
      },
      [{ title: "Night Drive", isrc: "QZDDX2638203", duration: 200, track_number: 1 }],
    );
    const audio = wavBytes(11);
    placeMedia(fixture.media, fixture.account.id, release.id, {
      cover: jpegBytes(6),
      audio: [{ trackId: release.tracks[0]?.id as string, ext: "wav", data: audio }],
    });
    await rowsOf(db(), "update public.releases set status = 'submitted' where id = $1", [release.id]);
    fixture.wake();
    const [d] = await poll(
      "the delivery",
      () =>
        rowsOf<{ id: string; status: string; message: string | null; batch_id: string | null }>(
          db(),
          "select id::text as id, status, message, batch_id from internal.release_deliveries where release_id = $1",
          [release.id],
        ),
      (ds) => ds[0]?.status === "delivered" || ds[0]?.status === "error",
      30_000,
    );
    assert.equal(d?.status, "delivered", d?.message ?? "");
    const dir = path.join(fixture.server.root, "incoming", d?.batch_id ?? "");
    const files = listFiles(dir);
    assert.ok(files.includes(`${upc}/${upc}.xml`), files.join(", "));
    const xml = fs.readFileSync(path.join(dir, upc, `${upc}.xml`), "utf8");
    assert.deepEqual(await ern382SchemaErrors(xml), [], xml);
    const root = parseXml(xml);
    assert.equal(root.attrs["xmlns:ern"], ERN_382_NAMESPACE);
    assert.equal(textAt(root, "MessageHeader/MessageId"), d?.id);
    const file = at(
      root,
      "ResourceList/SoundRecording/SoundRecordingDetailsByTerritory/TechnicalSoundRecordingDetails/File",
    );
    assert.deepEqual(
      fs.readFileSync(path.join(dir, upc, textAt(file, "FilePath"), textAt(file, "FileName"))),
      audio,
      "the audio as uploaded, where the message says",
    );
    assert.equal(textAt(file, "HashSum/HashSum"), hashesOf(audio).md5);

    const manifest = fs.readFileSync(path.join(dir, `BatchComplete_${d?.batch_id}.xml`), "utf8");
    assert.deepEqual(await choreographyErrors(manifest, ERNC_DIR), []);
    assert.ok(manifest.includes(`<URL>${upc}/${upc}.xml</URL>`), manifest);
    assert.ok(manifest.includes(`<MessageId>${d?.id}</MessageId>`), manifest);
  });
});
