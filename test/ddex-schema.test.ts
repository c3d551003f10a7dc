import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { buildNewReleaseMessage, type ErnMessageInput } from "../src/pipeline/ddex/ern.ts";
import { buildNewReleaseMessage382 } from "../src/pipeline/ddex/ern382.ts";
import { ERN_CREATED, ERN_RELEASE_ID, ernTrack, RECIPIENT, SENDER } from "./support/ddex.ts";
import {
  ERN_SCHEMA_DIR,
  ERN382_SCHEMA_DIR,
  ern382SchemaErrors,
  ern382SchemaSkip,
  ernSchemaErrors,
  ernSchemaSkip,
  schema382MissingFails,
  schemaMissingFails,
} from "./support/ern-schema.ts";

/**
 * Every kind of message Backline writes, validated against DDEX's own ERN 4.3 schema
 * (test/support/ern-schema.ts: the schema is read from DDEX_SCHEMA_DIR or ../shared/ddex/ern43,
 * never kept in the repository; absent, this suite is skipped — or fails under CI=true), and the
 * same messages as a store set to ERN 3.8.2 gets them, against DDEX's 3.8.2 schema
 * (../shared/ddex/ern382, the same rule).
 * Messages built directly here; the same kinds from real deliveries on each engine are in
 * test/ddex-identifiers.test.ts.
 */

const RELEASE_ID = ERN_RELEASE_ID;
const CREATED = ERN_CREATED;
const track = ernTrack;

function input(over: Partial<ErnMessageInput> = {}): ErnMessageInput {
  const t1 = track(1, {
    contributors: [
      { name: "Ada Moreno", role: "producer" },
      { name: "Sam Reyes", role: "songwriter" },
      { name: "Kai", role: "featured_artist" },
      { name: "Lee", role: "publisher" },
    ],
  });
  const t2 = track(2, { version: "Radio Edit", explicit: true, language: "fr" });
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
      release_date: "2026-09-01",
      original_release_date: null,
      upc: "4006381333931",
      label_name: "Night Owl Records",
      catalog_number: "NOR-001",
      licensed_territories_include: "WW",
      territories: [],
      territories_exclude: [],
      copyright: "2026 Night Owl Records",
      copyright_year: 2026,
      phonographic_copyright: "2026 Night Owl Records",
      phonographic_year: 2026,
      explicit: false,
      language: "en",
    },
    tracks: [t1, t2],
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
      {
        commercialModel: "AdvertisementSupportedModel",
        useTypes: ["OnDemandStream", "NonInteractiveStream"],
      },
      { commercialModel: "PayAsYouGoModel", useTypes: ["PermanentDownload"] },
      {
        commercialModel: "FreeOfChargeModel",
        useTypes: ["Stream", "ConditionalDownload", "TetheredDownload"],
      },
    ],
    ...over,
  };
}

const base = input();
/** Each kind of message, and the shapes a release can take. */
const MESSAGES: [string, ErnMessageInput][] = [
  ["new release (album, cover, audio, contributors)", base],
  [
    "update (the whole message again, a corrected title)",
    input({ release: { ...base.release, title: "Night Drive (Corrected)" } }),
  ],
  ["takedown after the release date", input({ endDealsAt: new Date("2026-10-01T08:30:00Z") })],
  ["takedown before the release date", input({ endDealsAt: new Date("2026-06-01T08:30:00Z") })],
  ["test message", input({ test: true })],
  [
    "single without media, UPC-A, no label, no genre, no release date",
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
        copyright: null,
        phonographic_copyright: null,
        version: null,
      },
    }),
  ],
  [
    "soundtrack on two discs, world less exclusions",
    input({
      tracks: [track(1), track(2), track(3, { disc_number: 2, track_number: 1 })],
      release: { ...base.release, release_type: "soundtrack", territories_exclude: ["CU", "KP"] },
    }),
  ],
  [
    "explicit territory list",
    input({ release: { ...base.release, licensed_territories_include: "US,CA", territories: ["MX"] } }),
  ],
];

describe("every message against the ERN 4.3 schema (release-notification.xsd)", {
  skip: schemaMissingFails ? false : ernSchemaSkip,
}, () => {
  if (schemaMissingFails) {
    test("the schema is there under CI", () => {
      assert.fail(`CI=true and the DDEX ERN 4.3 schema is missing at ${ERN_SCHEMA_DIR}: set DDEX_SCHEMA_DIR`);
    });
    return;
  }
  for (const [name, message] of MESSAGES) {
    test(name, async () => {
      const xml = buildNewReleaseMessage(message);
      assert.deepEqual(await ernSchemaErrors(xml), [], xml);
    });
  }

  test("the validator refuses what the schema refuses (no ICPN check digit pattern, a missing element, a bad value)", async () => {
    const xml = buildNewReleaseMessage(base);
    const broken = [
      xml.replace(
        "<MessageControlType>LiveMessage</MessageControlType>",
        "<MessageControlType>Live</MessageControlType>",
      ),
      xml.replace(/<MessageId>[^<]*<\/MessageId>/, ""),
      xml.replace(/<StartDateTime>([^<]*)<\/StartDateTime>/, "<StartDateTime>tomorrow</StartDateTime>"),
    ];
    for (const b of broken) assert.notDeepEqual(await ernSchemaErrors(b), [], "invalid");
  });
});

describe("every message against the ERN 3.8.2 schema (ern/382 release-notification.xsd)", {
  skip: schema382MissingFails ? false : ern382SchemaSkip,
}, () => {
  if (schema382MissingFails) {
    test("the schema is there under CI", () => {
      assert.fail(`CI=true and the DDEX ERN 3.8.2 schema is missing at ${ERN382_SCHEMA_DIR}`);
    });
    return;
  }
  for (const [name, message] of MESSAGES) {
    test(name, async () => {
      const xml = buildNewReleaseMessage382(message);
      assert.deepEqual(await ern382SchemaErrors(xml), [], xml);
    });
  }

  test("a message with every contributor role Backline has, a track without an ISRC, a BCP 47 language", async () => {
    const roles = [
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
      "featured_artist",
      "whistler",
    ];
    const xml = buildNewReleaseMessage382(
      input({
        tracks: [
          track(1, { contributors: roles.map((role, i) => ({ name: `Person ${i}`, role })) }),
          track(2, { isrc: null, language: "pt-BR" }),
        ],
        release: { ...base.release, language: "zh-Hant-TW" },
      }),
    );
    assert.deepEqual(await ern382SchemaErrors(xml), [], xml);
  });

  test("the validator refuses what the 3.8.2 schema refuses (a 4.3 message, a missing element, a bad value, a bad order)", async () => {
    const xml = buildNewReleaseMessage382(base);
    const broken = [
      buildNewReleaseMessage(base),
      xml.replace(
        "<MessageControlType>LiveMessage</MessageControlType>",
        "<MessageControlType>Live</MessageControlType>",
      ),
      xml.replace(/<MessageId>[^<]*<\/MessageId>/, ""),
      xml.replace(/<StartDateTime>([^<]*)<\/StartDateTime>/, "<StartDateTime>tomorrow</StartDateTime>"),
      xml.replace(
        /(<SoundRecordingType>[^<]*<\/SoundRecordingType>)(\s*)(<SoundRecordingId>[\s\S]*?<\/SoundRecordingId>)/,
        "$3$2$1",
      ),
      xml.replace("<UseType>OnDemandStream</UseType>", "<UseType>Streaming</UseType>"),
    ];
    for (const b of broken) {
      assert.notEqual(b, xml, "the change was made");
      assert.notDeepEqual(await ern382SchemaErrors(b), [], "invalid");
    }
  });
});
