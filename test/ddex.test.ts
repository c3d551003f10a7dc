import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import fc from "fast-check";
import type { Db } from "../src/db/db.ts";
import { Worker } from "../src/jobs/worker.ts";
import { ddexSettingsOf, ddexStore } from "../src/pipeline/ddex/adapter.ts";
import {
  buildNewReleaseMessage,
  dealTerritories,
  ERN_NAMESPACE,
  type ErnMessageInput,
  type ErnRelease,
  type ErnTrack,
  isoDuration,
} from "../src/pipeline/ddex/ern.ts";
import { reportDelivery, sendDelivery } from "../src/pipeline/delivery.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { DeliveryConfigError } from "../src/pipeline/stores.ts";
import { LocalMedia } from "../src/storage/media.ts";
import { createAccount, createTenant } from "../src/tenancy/tenants.ts";
import { createTestDb, describeEachEngine, ENGINES, type TestDb } from "./support/db.ts";
import {
  all,
  assertErn43,
  assertReferences,
  at,
  configureDdexStore,
  gtin13,
  has,
  hashesOf,
  jpegBytes,
  kids,
  listFiles,
  names,
  parseXml,
  placeMedia,
  poll,
  RECIPIENT,
  SENDER,
  seedRelease,
  textAt,
  wavBytes,
  XML_CHARS,
  type XmlNode,
  XS_DURATION,
} from "./support/ddex.ts";
import { tempDir } from "./support/process.ts";
import { FUTURE_DATE } from "./support/public-api.ts";
import { type RunningS3rver, startS3rver } from "./support/s3rver.ts";

/**
 * The `ddex` store adapter (src/pipeline/ddex, docs/ddex.md): the ERN 4.3 NewReleaseMessage read
 * back and checked against the parts of the schema it uses (order, required elements, IDs and
 * references, escaping), then whole deliveries run by a Worker on each engine — a batch dropped
 * into a directory with its media, manifest and BatchComplete file, the store's live report, a
 * takedown batch, a release without media, a resend, bad settings — and a drop into a real
 * S3-compatible server (s3rver).
 */

// ---------------------------------------------------------------------------------------------
// The message, without a database

const RELEASE_ID = "6b1f6f0e-1d1c-4c57-9a0e-0d3c6c1f5a01";
const T1 = "11111111-1111-4111-8111-111111111111";
const T2 = "22222222-2222-4222-8222-222222222222";
const T3 = "33333333-3333-4333-8333-333333333333";
const UPC = "4006381333931";
const CREATED = new Date("2026-05-01T12:00:00.123Z");
const MD5 = (c: string) => c.repeat(32);

function ernRelease(over: Partial<ErnRelease> = {}): ErnRelease {
  return {
    id: RELEASE_ID,
    title: "Night Drive",
    version: "Deluxe",
    release_type: "album",
    artist_name: "Luna Vale",
    primary_genre: "electronic",
    secondary_genre: "house",
    primary_genre_name: "Electronic",
    secondary_genre_name: "House",
    release_date: "2026-09-01",
    original_release_date: null,
    upc: UPC,
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
    ...over,
  };
}

function ernTrack(id: string, over: Partial<ErnTrack> = {}): ErnTrack {
  return {
    id,
    title: "Intro",
    version: null,
    isrc: `QZDDX26${id.slice(0, 5).replace(/\D/g, "0")}`,
    duration: 185,
    track_number: 1,
    disc_number: 1,
    artist_name: null,
    explicit: false,
    language: null,
    contributors: [],
    ...over,
  };
}

const TRACK_1 = ernTrack(T1, {
  isrc: "QZDDX2600001",
  contributors: [
    { name: "Ada Moreno", role: "producer" },
    { name: "Sam Reyes", role: "songwriter" },
    { name: "Kai", role: "featured_artist" },
    { name: "Luna Vale", role: "performer" },
  ],
});
const TRACK_2 = ernTrack(T2, {
  title: "Night Drive",
  version: "Radio Edit",
  isrc: "QZDDX2600002",
  duration: 3725,
  track_number: 2,
  explicit: true,
  contributors: [{ name: "Someone", role: "whistler" }],
});

const DEFAULT_DEALS = [
  { commercialModel: "SubscriptionModel", useTypes: ["OnDemandStream", "NonInteractiveStream"] },
  { commercialModel: "AdvertisementSupportedModel", useTypes: ["OnDemandStream", "NonInteractiveStream"] },
  { commercialModel: "PayAsYouGoModel", useTypes: ["PermanentDownload"] },
];

function ernInput(over: Partial<ErnMessageInput> = {}): ErnMessageInput {
  return {
    messageId: "0f0e0d0c-0000-4000-8000-000000000001",
    threadId: RELEASE_ID,
    createdAt: CREATED,
    sender: SENDER,
    recipient: RECIPIENT,
    test: false,
    release: ernRelease(),
    // Given out of order: the message sorts them by disc and track number.
    tracks: [TRACK_2, TRACK_1],
    audio: new Map([
      [
        T1,
        {
          uri: "resources/QZDDX2600001.flac",
          md5: MD5("a"),
          bytes: 2048,
          codec: "FLAC" as const,
          channels: 2,
          sampleRate: 44_100,
          bitsPerSample: 16,
        },
      ],
      [T2, { uri: "resources/QZDDX2600002.wav", md5: MD5("b"), bytes: 1000, codec: "PCM" as const }],
    ]),
    artwork: { uri: "resources/cover.jpg", md5: MD5("c"), bytes: 1536, codec: "JPEG" },
    deals: DEFAULT_DEALS,
    ...over,
  };
}

/** Builds, parses and checks a message: well-formed, ERN 4.3 order and requiredness, references. */
function message(input: ErnMessageInput = ernInput()): XmlNode {
  const xml = buildNewReleaseMessage(input);
  assert.ok(XML_CHARS.test(xml), "only XML characters");
  const root = parseXml(xml);
  assertErn43(root);
  assertReferences(root);
  return root;
}

const partyName = (root: XmlNode, ref: string) => {
  const party = kids(at(root, "PartyList"), "Party").find((p) => textAt(p, "PartyReference") === ref);
  assert.ok(party, `party ${ref}`);
  return textAt(party, "PartyName/FullName");
};
const soundRecordings = (root: XmlNode) => kids(at(root, "ResourceList"), "SoundRecording");
const deals = (root: XmlNode) => all(root, "Deal");
const displayArtists = (node: XmlNode, root: XmlNode) =>
  kids(node, "DisplayArtist").map((d) => [
    d.attrs.SequenceNumber,
    textAt(d, "DisplayArtistRole"),
    partyName(root, textAt(d, "ArtistPartyReference")),
  ]);

describe("ERN 4.3 NewReleaseMessage (buildNewReleaseMessage)", () => {
  test("is a well-formed ern:NewReleaseMessage with its header, in schema order, every reference resolving", () => {
    const xml = buildNewReleaseMessage(ernInput());
    assert.ok(xml.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n'));
    const root = message();
    assert.equal(root.name, "ern:NewReleaseMessage");
    assert.equal(root.attrs["xmlns:ern"], ERN_NAMESPACE);
    assert.equal(ERN_NAMESPACE, "http://ddex.net/xml/ern/43");
    assert.equal(
      root.attrs["xsi:schemaLocation"],
      `${ERN_NAMESPACE} http://ddex.net/xml/ern/43/release-notification.xsd`,
    );
    assert.equal(root.attrs.AvsVersionId, "4");
    assert.equal(root.attrs.LanguageAndScriptCode, "en");
    assert.equal(root.attrs.ReleaseProfileVersionId, "Audio");
    assert.deepEqual(names(root), ["MessageHeader", "PartyList", "ResourceList", "ReleaseList", "DealList"]);

    const header = at(root, "MessageHeader");
    assert.deepEqual(names(header), [
      "MessageThreadId",
      "MessageId",
      "MessageSender",
      "MessageRecipient",
      "MessageCreatedDateTime",
      "MessageControlType",
    ]);
    assert.equal(textAt(header, "MessageThreadId"), RELEASE_ID);
    assert.equal(textAt(header, "MessageId"), "0f0e0d0c-0000-4000-8000-000000000001");
    assert.match(textAt(header, "MessageSender/PartyId"), /^PADPIDA[a-zA-Z0-9]+$/);
    assert.equal(textAt(header, "MessageSender/PartyId"), SENDER.dpid);
    assert.equal(textAt(header, "MessageSender/PartyName/FullName"), SENDER.name);
    assert.match(textAt(header, "MessageRecipient/PartyId"), /^PADPIDA[a-zA-Z0-9]+$/);
    assert.equal(textAt(header, "MessageRecipient/PartyId"), RECIPIENT.dpid);
    assert.equal(textAt(header, "MessageRecipient/PartyName/FullName"), RECIPIENT.name);
    // xs:dateTime, to the second, in UTC.
    assert.equal(textAt(header, "MessageCreatedDateTime"), "2026-05-01T12:00:00Z");
    assert.equal(textAt(header, "MessageControlType"), "LiveMessage");
    assert.equal(
      textAt(message(ernInput({ test: true })), "MessageHeader/MessageControlType"),
      "TestMessage",
    );

    // One party per distinct name: the artist, the label and each credited person.
    const parties = kids(at(root, "PartyList"), "Party").map((p) => [
      textAt(p, "PartyReference"),
      textAt(p, "PartyName/FullName"),
    ]);
    assert.deepEqual(
      parties.map(([, n]) => n),
      ["Luna Vale", "Night Owl Records", "Kai", "Ada Moreno", "Sam Reyes"],
    );
    assert.deepEqual(
      parties.map(([r]) => r),
      ["P1", "P2", "P3", "P4", "P5"],
    );
  });

  test("sound recordings: ISRC, ℗ line, audio file, titles, artists, duration, parental warning, language", () => {
    const root = message();
    const [first, second] = soundRecordings(root) as [XmlNode, XmlNode];
    assert.equal(soundRecordings(root).length, 2);

    assert.equal(textAt(first, "ResourceReference"), "A1");
    assert.equal(textAt(first, "Type"), "MusicalWorkSoundRecording");
    assert.equal(textAt(first, "SoundRecordingEdition/ResourceId/ISRC"), "QZDDX2600001");
    assert.equal(textAt(first, "SoundRecordingEdition/PLine/Year"), "2026");
    assert.equal(textAt(first, "SoundRecordingEdition/PLine/PLineText"), "(P) 2026 Night Owl Records");
    const tech = at(first, "SoundRecordingEdition/TechnicalDetails");
    assert.equal(textAt(tech, "TechnicalResourceDetailsReference"), "T1");
    const file = at(tech, "DeliveryFile");
    assert.deepEqual(names(file), [
      "Type",
      "AudioCodecType",
      "NumberOfChannels",
      "SamplingRate",
      "BitsPerSample",
      "File",
    ]);
    assert.equal(textAt(file, "Type"), "AudioFile");
    assert.equal(textAt(file, "AudioCodecType"), "FLAC");
    assert.equal(textAt(file, "NumberOfChannels"), "2");
    assert.equal(textAt(file, "SamplingRate"), "44100");
    assert.equal(at(file, "SamplingRate").attrs.UnitOfMeasure, "Hz");
    assert.equal(textAt(file, "BitsPerSample"), "16");
    assert.equal(textAt(file, "File/URI"), "resources/QZDDX2600001.flac");
    assert.equal(textAt(file, "File/HashSum/Algorithm"), "MD5");
    assert.equal(textAt(file, "File/HashSum/HashSumValue"), MD5("a"));
    assert.equal(textAt(file, "File/FileSize"), "2.000");
    assert.equal(textAt(first, "DisplayTitleText"), "Intro");
    assert.equal(textAt(first, "DisplayTitle/TitleText"), "Intro");
    assert.equal(has(at(first, "DisplayTitle"), "SubTitle"), false);
    assert.equal(textAt(first, "DisplayArtistName"), "Luna Vale");
    assert.equal(textAt(first, "Duration"), "PT3M5S");
    assert.equal(textAt(first, "ParentalWarningType"), "NotExplicit");
    assert.equal(
      textAt(first, "LanguageOfPerformance"),
      "en",
      "the release's language when the track has none",
    );

    assert.equal(textAt(second, "ResourceReference"), "A2");
    assert.equal(textAt(second, "SoundRecordingEdition/ResourceId/ISRC"), "QZDDX2600002");
    const file2 = at(second, "SoundRecordingEdition/TechnicalDetails/DeliveryFile");
    assert.deepEqual(names(file2), ["Type", "AudioCodecType", "File"], "unknown audio details are left out");
    assert.equal(textAt(file2, "AudioCodecType"), "PCM");
    assert.equal(textAt(file2, "File/FileSize"), "0.977");
    assert.equal(textAt(second, "DisplayTitleText"), "Night Drive (Radio Edit)");
    assert.equal(textAt(second, "DisplayTitle/TitleText"), "Night Drive");
    assert.equal(textAt(second, "DisplayTitle/SubTitle"), "Radio Edit");
    assert.equal(at(second, "DisplayTitle/SubTitle").attrs.SubTitleType, "Version");
    assert.equal(textAt(second, "Duration"), "PT1H2M5S");
    assert.match(textAt(second, "Duration"), XS_DURATION);
    assert.equal(textAt(second, "ParentalWarningType"), "Explicit");

    const own = message(
      ernInput({
        tracks: [{ ...TRACK_1, artist_name: "Luna Vale & Kai", language: "es", contributors: [] }],
      }),
    );
    const [only] = soundRecordings(own) as [XmlNode];
    assert.equal(textAt(only, "DisplayArtistName"), "Luna Vale & Kai");
    assert.deepEqual(displayArtists(only, own), [["1", "MainArtist", "Luna Vale & Kai"]]);
    assert.equal(textAt(only, "LanguageOfPerformance"), "es");
  });

  test("contributors map to DDEX roles; a featured artist is a DisplayArtist, not a Contributor", () => {
    const root = message();
    const [first, second] = soundRecordings(root) as [XmlNode, XmlNode];
    assert.deepEqual(displayArtists(first, root), [
      ["1", "MainArtist", "Luna Vale"],
      ["2", "FeaturedArtist", "Kai"],
    ]);
    const contributors = (sr: XmlNode) =>
      kids(sr, "Contributor").map((c) => [
        c.attrs.SequenceNumber,
        textAt(c, "Role"),
        partyName(root, textAt(c, "ContributorPartyReference")),
      ]);
    assert.deepEqual(contributors(first), [
      ["1", "StudioProducer", "Ada Moreno"],
      ["2", "ComposerLyricist", "Sam Reyes"],
      ["3", "Performer", "Luna Vale"],
    ]);
    assert.ok(!contributors(first).some(([, , n]) => n === "Kai"), "the featured artist is no Contributor");
    assert.deepEqual(contributors(second), [], "a role DDEX has no value for is left out");
    // The performer is the main artist: one party for both.
    assert.equal(textAt(kids(first, "Contributor")[2] as XmlNode, "ContributorPartyReference"), "P1");

    const ROLES: [string, string][] = [
      ["remixer", "Remixer"],
      ["composer", "Composer"],
      ["lyricist", "Lyricist"],
      ["songwriter", "ComposerLyricist"],
      ["producer", "StudioProducer"],
      ["co_producer", "CoProducer"],
      ["mixing_engineer", "MixingEngineer"],
      ["mastering_engineer", "MasteringEngineer"],
      ["recording_engineer", "RecordingEngineer"],
      ["arranger", "Arranger"],
      ["conductor", "Conductor"],
      ["orchestra", "Orchestra"],
      ["performer", "Performer"],
      ["publisher", "MusicPublisher"],
    ];
    const all14 = message(
      ernInput({
        tracks: [{ ...TRACK_1, contributors: ROLES.map(([role], i) => ({ name: `Person ${i}`, role })) }],
      }),
    );
    assert.deepEqual(
      kids(soundRecordings(all14)[0] as XmlNode, "Contributor").map((c) => textAt(c, "Role")),
      ROLES.map(([, ddex]) => ddex),
    );
  });

  test("the release: ICPN, type, label, ℗ and © lines, genre, dates, one resource group with the cover linked", () => {
    const root = message();
    const release = at(root, "ReleaseList/Release");
    assert.equal(textAt(release, "ReleaseReference"), "R0");
    assert.equal(textAt(release, "ReleaseType"), "Album");
    assert.deepEqual(names(at(release, "ReleaseId")), ["ICPN", "CatalogNumber", "ProprietaryId"]);
    assert.equal(textAt(release, "ReleaseId/ICPN"), UPC);
    assert.equal(textAt(release, "ReleaseId/CatalogNumber"), "NOR-001");
    assert.equal(at(release, "ReleaseId/CatalogNumber").attrs.Namespace, SENDER.dpid);
    assert.equal(textAt(release, "ReleaseId/ProprietaryId"), RELEASE_ID);
    assert.equal(textAt(release, "DisplayTitleText"), "Night Drive (Deluxe)");
    assert.equal(textAt(release, "DisplayTitle/TitleText"), "Night Drive");
    assert.equal(textAt(release, "DisplayTitle/SubTitle"), "Deluxe");
    assert.equal(textAt(release, "DisplayArtistName"), "Luna Vale");
    assert.deepEqual(displayArtists(release, root), [["1", "MainArtist", "Luna Vale"]]);
    assert.equal(partyName(root, textAt(release, "ReleaseLabelReference")), "Night Owl Records");
    assert.equal(textAt(release, "PLine/PLineText"), "(P) 2026 Night Owl Records");
    assert.equal(textAt(release, "CLine/CLineText"), "(C) 2026 Night Owl Records");
    assert.equal(textAt(release, "CLine/Year"), "2026");
    assert.equal(textAt(release, "Duration"), isoDuration(185 + 3725));
    assert.equal(textAt(release, "Genre/GenreText"), "Electronic", "the genre's display name");
    assert.equal(textAt(release, "Genre/SubGenre"), "House");
    assert.equal(textAt(release, "ReleaseDate"), "2026-09-01");
    assert.equal(
      textAt(release, "OriginalReleaseDate"),
      "2026-09-01",
      "the release date when there is no other",
    );
    assert.equal(textAt(release, "ParentalWarningType"), "Explicit", "explicit when a track is");
    assert.equal(has(release, "IsSoundtrack"), false);

    const group = at(release, "ResourceGroup");
    assert.deepEqual(names(group), ["ResourceGroup", "LinkedReleaseResourceReference"]);
    const disc = at(group, "ResourceGroup");
    assert.equal(disc.attrs.ResourceGroupType, "Component");
    assert.equal(textAt(disc, "SequenceNumber"), "1");
    assert.deepEqual(
      kids(disc, "ResourceGroupContentItem").map((i) => [
        textAt(i, "SequenceNumber"),
        textAt(i, "ReleaseResourceReference"),
      ]),
      [
        ["1", "A1"],
        ["2", "A2"],
      ],
    );
    assert.equal(textAt(group, "LinkedReleaseResourceReference"), "A3");
    assert.equal(at(group, "LinkedReleaseResourceReference").attrs.LinkDescription, "CoverArt");

    const trackReleases = kids(at(root, "ReleaseList"), "TrackRelease");
    assert.deepEqual(
      trackReleases.map((tr) => [
        textAt(tr, "ReleaseReference"),
        textAt(tr, "ReleaseId/ProprietaryId"),
        textAt(tr, "DisplayTitleText"),
        textAt(tr, "ReleaseResourceReference"),
        textAt(tr, "LinkedReleaseResourceReference"),
        partyName(root, textAt(tr, "ReleaseLabelReference")),
        textAt(tr, "Genre/GenreText"),
      ]),
      [
        ["R1", `${RELEASE_ID}:${T1}`, "Intro", "A1", "A3", "Night Owl Records", "Electronic"],
        [
          "R2",
          `${RELEASE_ID}:${T2}`,
          "Night Drive (Radio Edit)",
          "A2",
          "A3",
          "Night Owl Records",
          "Electronic",
        ],
      ],
    );

    const TYPES: [string, string][] = [
      ["single", "Single"],
      ["ep", "EP"],
      ["album", "Album"],
      ["compilation", "Album"],
      ["mixtape", "Album"],
      ["soundtrack", "Album"],
    ];
    for (const [type, ddex] of TYPES) {
      const r = at(message(ernInput({ release: ernRelease({ release_type: type }) })), "ReleaseList/Release");
      assert.equal(textAt(r, "ReleaseType"), ddex, type);
      assert.equal(has(r, "IsSoundtrack"), type === "soundtrack", type);
      if (type === "soundtrack") assert.equal(textAt(r, "IsSoundtrack"), "true");
    }

    // Without label, artist, genre, lines: the artist is the label, "Unknown" the genre.
    const bare = message(
      ernInput({
        release: ernRelease({
          label_name: null,
          artist_name: null,
          primary_genre: null,
          secondary_genre: null,
          copyright: null,
          phonographic_copyright: null,
          catalog_number: null,
          original_release_date: "1999-01-01",
          version: null,
          language: null,
        }),
      }),
    );
    const r = at(bare, "ReleaseList/Release");
    assert.equal(bare.attrs.LanguageAndScriptCode, "en");
    assert.equal(textAt(r, "DisplayArtistName"), "Unknown Artist");
    assert.equal(textAt(r, "ReleaseLabelReference"), textAt(r, "DisplayArtist/ArtistPartyReference"));
    assert.deepEqual(names(at(r, "Genre")), ["GenreText"]);
    assert.equal(textAt(r, "Genre/GenreText"), "Unknown");
    assert.equal(has(r, "PLine") || has(r, "CLine"), false);
    assert.deepEqual(names(at(r, "ReleaseId")), ["ICPN", "ProprietaryId"]);
    assert.equal(textAt(r, "OriginalReleaseDate"), "1999-01-01");
    assert.equal(textAt(r, "DisplayTitleText"), "Night Drive");
  });

  test("the front cover is an Image (FrontCoverImage) with its file", () => {
    const root = message(
      ernInput({
        artwork: {
          uri: "resources/cover.png",
          md5: MD5("d"),
          bytes: 4096,
          codec: "PNG",
          width: 3000,
          height: 3000,
        },
      }),
    );
    const image = at(root, "ResourceList/Image");
    assert.deepEqual(names(at(root, "ResourceList")), ["SoundRecording", "SoundRecording", "Image"]);
    assert.equal(textAt(image, "ResourceReference"), "A3");
    assert.equal(textAt(image, "Type"), "FrontCoverImage");
    assert.equal(textAt(image, "ResourceId/ProprietaryId"), `${RELEASE_ID}:cover`);
    assert.equal(at(image, "ResourceId/ProprietaryId").attrs.Namespace, SENDER.dpid);
    const tech = at(image, "TechnicalDetails");
    assert.deepEqual(names(tech), [
      "TechnicalResourceDetailsReference",
      "ImageCodecType",
      "ImageHeight",
      "ImageWidth",
      "File",
    ]);
    assert.equal(textAt(tech, "TechnicalResourceDetailsReference"), "T3");
    assert.equal(textAt(tech, "ImageCodecType"), "PNG");
    assert.equal(textAt(tech, "ImageHeight"), "3000");
    assert.equal(at(tech, "ImageWidth").attrs.UnitOfMeasure, "Pixel");
    assert.equal(textAt(tech, "File/URI"), "resources/cover.png");
    assert.equal(textAt(tech, "File/HashSum/HashSumValue"), MD5("d"));
    assert.equal(textAt(tech, "File/FileSize"), "4.000");
  });

  test("deals: one per commercial model for the release and every track, from the release date", () => {
    const root = message();
    const releaseDeal = at(root, "DealList/ReleaseDeal");
    assert.deepEqual(
      kids(releaseDeal, "DealReleaseReference").map((d) => d.text),
      ["R0", "R1", "R2"],
    );
    assert.deepEqual(
      kids(releaseDeal, "Deal").map((d) => {
        const terms = at(d, "DealTerms");
        return [
          kids(terms, "TerritoryCode").map((c) => c.text),
          textAt(terms, "ValidityPeriod/StartDateTime"),
          has(at(terms, "ValidityPeriod"), "EndDateTime"),
          textAt(terms, "CommercialModelType"),
          kids(terms, "UseType").map((u) => u.text),
        ];
      }),
      DEFAULT_DEALS.map((d) => [["Worldwide"], "2026-09-01T00:00:00Z", false, d.commercialModel, d.useTypes]),
    );
    const undated = message(ernInput({ release: ernRelease({ release_date: null }) }));
    for (const d of deals(undated)) {
      assert.equal(textAt(d, "DealTerms/ValidityPeriod/StartDateTime"), "2026-05-01T12:00:00Z", "from now");
    }
    assert.equal(has(at(undated, "ReleaseList/Release"), "ReleaseDate"), false);
  });

  test("a takedown ends every deal (EndDateTime), the message otherwise the same", () => {
    const end = new Date("2026-10-02T08:30:00.999Z");
    const root = message(ernInput({ endDealsAt: end }));
    assert.equal(deals(root).length, 3);
    for (const d of deals(root)) {
      const period = at(d, "DealTerms/ValidityPeriod");
      assert.deepEqual(names(period), ["StartDateTime", "EndDateTime"]);
      assert.equal(textAt(period, "StartDateTime"), "2026-09-01T00:00:00Z");
      assert.equal(textAt(period, "EndDateTime"), "2026-10-02T08:30:00Z");
    }
    assert.equal(soundRecordings(root).length, 2);
  });

  test("a takedown before the release date ends each deal at its start, never before it; every date-time has its zone", () => {
    const CASES: [string, string | null, Date, string, string][] = [
      // [what, release date, takedown time, start, end]
      [
        "before the release date",
        "2026-09-01",
        new Date("2026-06-01T08:30:00Z"),
        "2026-09-01T00:00:00Z",
        "2026-09-01T00:00:00Z",
      ],
      [
        "on the release date's first second",
        "2026-09-01",
        new Date("2026-09-01T00:00:00Z"),
        "2026-09-01T00:00:00Z",
        "2026-09-01T00:00:00Z",
      ],
      [
        "one second after the start",
        "2026-09-01",
        new Date("2026-09-01T00:00:01Z"),
        "2026-09-01T00:00:00Z",
        "2026-09-01T00:00:01Z",
      ],
      [
        "without a release date (from the message's time)",
        null,
        new Date("2026-04-01T00:00:00Z"),
        "2026-05-01T12:00:00Z",
        "2026-05-01T12:00:00Z",
      ],
    ];
    const ZONED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
    for (const [what, date, endAt, start, end] of CASES) {
      const root = message(ernInput({ release: ernRelease({ release_date: date }), endDealsAt: endAt }));
      assert.equal(deals(root).length, 3, what);
      for (const d of deals(root)) {
        const period = at(d, "DealTerms/ValidityPeriod");
        assert.deepEqual(
          [textAt(period, "StartDateTime"), textAt(period, "EndDateTime")],
          [start, end],
          what,
        );
        assert.ok(Date.parse(end) >= Date.parse(start), `${what}: the deal ends no earlier than it starts`);
      }
      const stamps = [
        ...all(root, "StartDateTime"),
        ...all(root, "EndDateTime"),
        ...all(root, "MessageCreatedDateTime"),
      ];
      assert.ok(stamps.length >= 7, what);
      for (const s of stamps) assert.match(s.text, ZONED, `${what}: ${s.name} carries its zone`);
    }
  });

  test("genres: display names as GenreText, the secondary genre as SubGenre, a store's own names when its settings map them", () => {
    const release = ernRelease({
      primary_genre: "rnb-soul",
      primary_genre_name: "R&B/Soul",
      secondary_genre: "hip-hop-rap",
      secondary_genre_name: "Hip-Hop/Rap",
    });
    const genres = (root: XmlNode) =>
      [at(root, "ReleaseList/Release"), ...kids(at(root, "ReleaseList"), "TrackRelease")].map((r) => [
        textAt(r, "Genre/GenreText"),
        has(at(r, "Genre"), "SubGenre") ? textAt(r, "Genre/SubGenre") : null,
      ]);
    assert.deepEqual(genres(message(ernInput({ release }))), [
      ["R&B/Soul", "Hip-Hop/Rap"],
      ["R&B/Soul", "Hip-Hop/Rap"],
      ["R&B/Soul", "Hip-Hop/Rap"],
    ]);
    // The store's map wins for the codes it names; the others keep their display names.
    const mapped = message(
      ernInput({ release, genreMap: { "rnb-soul": "R&B", electronic: "Dance/Electronic" } }),
    );
    assert.deepEqual(genres(mapped)[0], ["R&B", "Hip-Hop/Rap"]);
    // No sub-genre: no SubGenre element; a code the catalogue does not name goes as it is.
    const single = message(
      ernInput({
        release: ernRelease({ primary_genre: "vaporwave", primary_genre_name: null, secondary_genre: null }),
      }),
    );
    assert.deepEqual(genres(single)[0], ["vaporwave", null]);
    // A map key that is no own property (an inherited name) is not read.
    const inherited = message(
      ernInput({ release: ernRelease({ primary_genre: "constructor", primary_genre_name: null }) }),
    );
    assert.equal(textAt(at(inherited, "ReleaseList/Release"), "Genre/GenreText"), "constructor");
  });

  test("a multi-disc release has one Component resource group per disc, tracks in disc and track order", () => {
    const tracks = [
      ernTrack(T3, { isrc: "QZDDX2600003", disc_number: 2, track_number: 1, title: "Disc Two Opener" }),
      ernTrack(T2, { isrc: "QZDDX2600002", disc_number: 1, track_number: 2, title: "Second" }),
      ernTrack(T1, { isrc: "QZDDX2600001", disc_number: 1, track_number: 1, title: "First" }),
    ];
    const root = message(ernInput({ tracks, audio: new Map() }));
    assert.deepEqual(
      soundRecordings(root).map((s) => [textAt(s, "ResourceReference"), textAt(s, "DisplayTitleText")]),
      [
        ["A1", "First"],
        ["A2", "Second"],
        ["A3", "Disc Two Opener"],
      ],
    );
    const group = at(root, "ReleaseList/Release/ResourceGroup");
    const discs = kids(group, "ResourceGroup");
    assert.equal(discs.length, 2);
    assert.deepEqual(
      discs.map((d) => [
        d.attrs.ResourceGroupType,
        textAt(d, "SequenceNumber"),
        kids(d, "ResourceGroupContentItem").map((i) => [
          textAt(i, "SequenceNumber"),
          textAt(i, "ReleaseResourceReference"),
        ]),
      ]),
      [
        [
          "Component",
          "1",
          [
            ["1", "A1"],
            ["2", "A2"],
          ],
        ],
        ["Component", "2", [["1", "A3"]]],
      ],
    );
    assert.equal(textAt(group, "LinkedReleaseResourceReference"), "A4", "the cover comes after the tracks");
    assert.deepEqual(
      kids(at(root, "ReleaseList"), "TrackRelease").map((tr) => textAt(tr, "ReleaseResourceReference")),
      ["A1", "A2", "A3"],
    );
  });

  test("territories: Worldwide, the world less exclusions, or an explicit list", () => {
    const CASES: [Partial<ErnRelease>, string, string[]][] = [
      [{ licensed_territories_include: "WW" }, "TerritoryCode", ["Worldwide"]],
      [{ licensed_territories_include: null }, "TerritoryCode", ["Worldwide"]],
      [
        { licensed_territories_include: "WW", territories_exclude: ["US", "CA"] },
        "ExcludedTerritoryCode",
        ["CA", "US"],
      ],
      [{ licensed_territories_include: "DE,AT,CH" }, "TerritoryCode", ["DE", "AT", "CH"]],
      [
        { licensed_territories_include: "DE,AT,CH", territories_exclude: ["AT"] },
        "TerritoryCode",
        ["DE", "CH"],
      ],
      [{ licensed_territories_include: null, territories: ["FR", "BE"] }, "TerritoryCode", ["FR", "BE"]],
    ];
    for (const [over, element, codes] of CASES) {
      const root = message(ernInput({ release: ernRelease(over) }));
      const other = element === "TerritoryCode" ? "ExcludedTerritoryCode" : "TerritoryCode";
      for (const d of deals(root)) {
        const terms = at(d, "DealTerms");
        assert.deepEqual(
          kids(terms, element).map((c) => c.text),
          codes,
          JSON.stringify(over),
        );
        assert.equal(
          has(terms, other),
          false,
          `never both TerritoryCode and ExcludedTerritoryCode: ${JSON.stringify(over)}`,
        );
      }
      const expected = element === "TerritoryCode" ? { include: codes } : { exclude: codes };
      assert.deepEqual(dealTerritories(ernRelease(over)), expected, JSON.stringify(over));
    }
  });

  test("territories: `territories` adds to licensed_territories_include (docs/public-api.md)", () => {
    assert.deepEqual(
      dealTerritories(ernRelease({ licensed_territories_include: "US,CA", territories: ["MX"] })),
      { include: ["US", "CA", "MX"] },
    );
    assert.deepEqual(
      dealTerritories(ernRelease({ licensed_territories_include: "WW", territories: ["FR"] })),
      {
        include: ["Worldwide"],
      },
    );
  });

  test("without media: no TechnicalDetails, no Image, no cover links, no release profile", () => {
    const root = message(ernInput({ audio: new Map(), artwork: undefined }));
    assert.equal(root.attrs.ReleaseProfileVersionId, undefined);
    assert.deepEqual(all(root, "TechnicalDetails"), []);
    assert.deepEqual(all(root, "Image"), []);
    assert.deepEqual(all(root, "LinkedReleaseResourceReference"), []);
    assert.deepEqual(
      soundRecordings(root).map((s) => names(at(s, "SoundRecordingEdition"))),
      [
        ["ResourceId", "PLine"],
        ["ResourceId", "PLine"],
      ],
    );
  });

  test("isoDuration writes seconds as an xs:duration", () => {
    const TABLE: [number, string][] = [
      [0, "PT0S"],
      [1, "PT1S"],
      [59, "PT59S"],
      [60, "PT1M"],
      [61, "PT1M1S"],
      [185, "PT3M5S"],
      [3599, "PT59M59S"],
      [3600, "PT1H"],
      [3601, "PT1H1S"],
      [3660, "PT1H1M"],
      [3725, "PT1H2M5S"],
      [7200, "PT2H"],
      [86_400, "PT24H"],
    ];
    for (const [seconds, expected] of TABLE) {
      assert.equal(isoDuration(seconds), expected, String(seconds));
      assert.match(expected, XS_DURATION);
    }
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 86_400 }), (s) => {
        const d = isoDuration(s);
        const m = XS_DURATION.exec(d);
        assert.ok(m, d);
        const [h, min, sec] = [m[1], m[2], m[3]].map((p) => (p ? Number.parseInt(p, 10) : 0)) as [
          number,
          number,
          number,
        ];
        assert.equal(h * 3600 + min * 60 + sec, s);
        assert.ok(min < 60 && sec < 60);
      }),
    );
  });

  test("text is escaped and characters XML cannot hold are dropped", () => {
    const title = 'Rock & Roll <Live> "Encore" \u0001\u0008\u000b\u001f ]]> it\'s \uFFFE\uD800 😀 done';
    const root = message(
      ernInput({
        release: ernRelease({
          title,
          version: "<b>Bonus</b>",
          artist_name: "Tom & Jerry",
          label_name: "A<B>C",
        }),
        tracks: [{ ...TRACK_1, title: "a\u0000b", contributors: [{ name: "\u0007Bel", role: "producer" }] }],
      }),
    );
    const clean = 'Rock & Roll <Live> "Encore"  ]]> it\'s  😀 done';
    const release = at(root, "ReleaseList/Release");
    assert.equal(textAt(release, "DisplayTitle/TitleText"), clean);
    assert.equal(textAt(release, "DisplayTitleText"), `${clean} (<b>Bonus</b>)`);
    assert.equal(textAt(release, "DisplayTitle/SubTitle"), "<b>Bonus</b>");
    assert.equal(textAt(release, "DisplayArtistName"), "Tom & Jerry");
    assert.equal(partyName(root, textAt(release, "ReleaseLabelReference")), "A<B>C");
    assert.equal(textAt(soundRecordings(root)[0] as XmlNode, "DisplayTitleText"), "ab");
    assert.ok(kids(at(root, "PartyList"), "Party").some((p) => textAt(p, "PartyName/FullName") === "Bel"));
    const xml = buildNewReleaseMessage(ernInput({ release: ernRelease({ title }) }));
    assert.ok(xml.includes("Rock &amp; Roll &lt;Live&gt;"));
    assert.ok(!xml.includes("]]>"), "> is always escaped, so no ]]> in content");
  });

  test("any unicode text keeps the document well-formed and reads back as given, less what XML cannot hold (property)", () => {
    const TRICKY = [
      "&",
      "<",
      ">",
      '"',
      "'",
      "]]>",
      "\r",
      "\n",
      "\r\n",
      "\t",
      "\u0000",
      "\u0001",
      "\u001f",
      "\u007f",
      "\u0085",
      "\uFFFE",
      "\uFFFF",
      "\uD800",
      "\uDFFF",
      "😀",
      "&amp;",
      "&#13;",
      "&#x1;",
      " ",
      "é",
    ];
    const text = fc.string({
      unit: fc.oneof(
        fc.constantFrom(...TRICKY),
        fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
        fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c)),
      ),
      maxLength: 24,
    });
    // What a reader sees: no characters outside XML's Char production; line ends as \n (XML 1.0 §2.11).
    const readable = (s: string) =>
      s.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "");
    const eol = (s: string) => s.replace(/\r\n?/g, "\n");
    fc.assert(
      fc.property(text, text, text, text, text, text, (title, version, artist, label, genre, language) => {
        const release = ernRelease({
          title,
          version: version || null,
          artist_name: artist,
          label_name: label,
          primary_genre: genre,
          primary_genre_name: null,
          language,
        });
        const track = { ...TRACK_1, title: version, contributors: [{ name: title, role: "producer" }] };
        const xml = buildNewReleaseMessage(ernInput({ release, tracks: [track] }));
        assert.ok(XML_CHARS.test(xml), "only XML characters");
        const root = parseXml(xml);
        assertErn43(root, { emptyTextAllowed: true });
        assertReferences(root);
        const r = at(root, "ReleaseList/Release");
        assert.equal(eol(textAt(r, "DisplayTitle/TitleText")), eol(readable(title)));
        const display = release.version ? `${title} (${release.version})` : title;
        assert.equal(eol(textAt(r, "DisplayTitleText")), eol(readable(display)));
        assert.equal(eol(textAt(r, "DisplayArtistName")), eol(readable(artist)));
        assert.equal(eol(textAt(r, "Genre/GenreText")), genre === "" ? "Unknown" : eol(readable(genre)));
        assert.equal(
          eol(textAt(soundRecordings(root)[0] as XmlNode, "DisplayTitleText")),
          eol(readable(version)),
        );
        const partyNames = kids(at(root, "PartyList"), "Party").map((p) =>
          eol(textAt(p, "PartyName/FullName")),
        );
        for (const n of [artist, label, title]) assert.ok(partyNames.includes(eol(readable(n))), n);
        // Attributes carry tabs and line ends as character references: they read back exactly.
        assert.equal(root.attrs.LanguageAndScriptCode, readable(language));
      }),
      { numRuns: 300 },
    );
  });
});

describe("ddex settings (ddexSettingsOf)", () => {
  const base = {
    sender: SENDER,
    recipient: RECIPIENT,
    destination: { type: "directory", path: "/srv/drops" },
  };
  const problems = (ddex: unknown) => {
    try {
      ddexSettingsOf({ code: "drop", settings: { adapter: "ddex", ddex } });
    } catch (error) {
      assert.ok(error instanceof DeliveryConfigError, String(error));
      assert.match(error.message, /^store drop has bad ddex settings: /);
      return error.message;
    }
    assert.fail("accepted");
  };

  test("fills the defaults: three deals, live messages, live on the store's report", () => {
    const s = ddexSettingsOf({ code: "drop", settings: { adapter: "ddex", ddex: base } });
    assert.deepEqual(
      s.deals.map((d) => [d.commercial_model, d.use_types]),
      DEFAULT_DEALS.map((d) => [d.commercialModel, d.useTypes]),
    );
    assert.equal(s.test_messages, false);
    assert.equal(s.live_after_ms, null);
    assert.deepEqual(s.genres, {}, "no genre map: display names");
  });

  test("names every field at fault", () => {
    const CASES: [unknown, string[]][] = [
      [undefined, ["ddex.sender:", "ddex.recipient:", "ddex.destination:"]],
      [
        { sender: { dpid: "nope", name: "X" }, recipient: { dpid: RECIPIENT.dpid, name: " " } },
        ["ddex.sender.dpid:", "ddex.recipient.name:", "ddex.destination:"],
      ],
      [{ ...base, destination: { type: "ftp", path: "/x" } }, ["ddex.destination.type:"]],
      [
        { ...base, destination: { type: "s3", bucket: "ab", endpoint: "not a url" } },
        ["ddex.destination.bucket:", "ddex.destination.endpoint:"],
      ],
      [
        {
          ...base,
          deals: [{ commercial_model: "Free", use_types: [] }],
          test_messages: "yes",
          live_after_ms: -1,
        },
        [
          "ddex.deals.0.commercial_model:",
          "ddex.deals.0.use_types:",
          "ddex.test_messages:",
          "ddex.live_after_ms:",
        ],
      ],
      [{ ...base, extra: true }, ['"extra"']],
      [{ ...base, genres: { "R&B": "R&B", pop: " " } }, ["ddex.genres.R&B:", "ddex.genres.pop:"]],
    ];
    for (const [ddex, fields] of CASES) {
      const message = problems(ddex);
      for (const f of fields) assert.ok(message.includes(f), `${f} in ${message}`);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Deliveries through the pipeline, on each engine

interface DeliveryRow {
  id: string;
  store: string;
  action: string;
  status: string;
  message: string | null;
  store_reference: string | null;
  attempts: number;
  [key: string]: unknown;
}

/** What a batch's ManifestMessage (DDEX's SFTP choreography 1.8) says. */
interface Manifest {
  batch_id: string;
  created_at: string;
  action: string;
  message: string;
  message_id: string;
  icpn: string | null;
  release_id: string;
  sha256: string;
}

async function rowsOf<T extends Record<string, unknown>>(
  db: Db,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  return db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
}

/** A tenant that reviews automatically and delivers for real (no sandbox), with one account. */
async function labelAccount(db: Db): Promise<string> {
  const { tenant } = await createTenant(db, {
    name: "DDEX Label Group",
    slug: `ddex-${randomUUID().slice(0, 8)}`,
    // Releases without a UPC get one from this GS1 prefix at submission (docs/releases.md).
    settings: { auto_review: true, require_media: false, gs1_company_prefix: "2000000" },
  });
  return (await createAccount(db, { tenantId: tenant.id, name: "Night Owl Records" })).id;
}

const releaseFields = (store: string, over: Record<string, unknown> = {}) => ({
  title: "Night Drive",
  release_type: "ep",
  artist_name: "Luna Vale",
  primary_genre: "electronic",
  release_date: FUTURE_DATE,
  label_name: "Night Owl Records",
  licensed_territories_include: "WW",
  services: [store],
  copyright: "2026 Night Owl Records",
  copyright_year: 2026,
  phonographic_copyright: "2026 Night Owl Records",
  phonographic_year: 2026,
  language: "en",
  ...over,
});

/**
 * Checks a dropped batch folder (or the same files read from S3, given as `read`): the batch is
 * the message, its resources and BatchComplete_<batch>.xml, the choreography's ManifestMessage
 * (its schema check: test/ddex-choreography.test.ts), which names the batch, the message with its
 * SHA-256, the delivery and the release; the message is valid and each File in it points at a
 * file of the batch whose MD5 and size it gives. Returns the message and the manifest.
 */
function checkBatch(
  batch: string,
  folder: string,
  files: Map<string, Buffer>,
  expected: { action: string; releaseId: string; upc: string | null; title: string },
): { root: XmlNode; manifest: Manifest } {
  assert.match(batch, /^[0-9]{17}$/, "a batch is named YYYYMMDDhhmmssnnn");
  assert.ok(!files.has("manifest.json"), "the choreography's ManifestMessage replaces manifest.json");
  const complete = parseXml((files.get(`BatchComplete_${batch}.xml`) as Buffer).toString("utf8"));
  assert.equal(complete.name, "ernc:ManifestMessage");
  assert.equal(textAt(complete, "MessageHeader/MessageSender/PartyId"), SENDER.dpid);
  assert.equal(textAt(complete, "MessageHeader/MessageRecipient/PartyId"), RECIPIENT.dpid);
  assert.equal(textAt(complete, "NumberOfMessages"), "1");
  const manifest: Manifest = {
    batch_id: textAt(complete, "RootDirectory") ?? "",
    created_at: textAt(complete, "MessageHeader/MessageCreatedDateTime") ?? "",
    action: (
      { NewReleaseDelivery: "insert", ReDelivery: "update", TakeDown: "takedown" } as Record<string, string>
    )[textAt(complete, "MessageInBatch/DeliveryType") ?? ""] as string,
    message: textAt(complete, "MessageInBatch/URL") ?? "",
    message_id: textAt(complete, "MessageInBatch/MessageId") ?? "",
    icpn: textAt(complete, "MessageInBatch/IncludedReleaseId/ICPN") ?? null,
    release_id: textAt(complete, "MessageInBatch/IncludedReleaseId/ProprietaryId") ?? "",
    sha256: textAt(complete, "MessageInBatch/HashSum/HashSumValue") ?? "",
  };
  assert.equal(manifest.batch_id, batch);
  assert.equal(manifest.action, expected.action);
  assert.equal(manifest.icpn, expected.upc);
  assert.equal(manifest.release_id, expected.releaseId);
  assert.equal(manifest.message, `${folder}/${folder}.xml`);
  assert.ok(!Number.isNaN(Date.parse(manifest.created_at)));
  assert.equal(manifest.sha256, hashesOf(files.get(manifest.message) as Buffer).sha256);

  const xml = (files.get(manifest.message) as Buffer).toString("utf8");
  const root = parseXml(xml);
  assertErn43(root);
  assertReferences(root);
  const referenced = new Set<string>();
  for (const file of all(root, "File")) {
    const uri = textAt(file, "URI");
    const data = files.get(`${folder}/${uri}`);
    assert.ok(data, `${uri} is in the batch`);
    assert.equal(textAt(file, "HashSum/Algorithm"), "MD5");
    assert.equal(textAt(file, "HashSum/HashSumValue"), hashesOf(data).md5, uri);
    assert.equal(textAt(file, "FileSize"), (data.length / 1024).toFixed(3), uri);
    referenced.add(`${folder}/${uri}`);
  }
  assert.deepEqual(
    [...files.keys()].filter((p) => p.startsWith(`${folder}/resources/`)).sort(),
    [...referenced].sort(),
    "every resource file is in the message",
  );
  assert.equal(textAt(root, "MessageHeader/MessageThreadId"), expected.releaseId);
  return { root, manifest };
}

function readBatch(dir: string): Map<string, Buffer> {
  return new Map(listFiles(dir).map((f) => [f, fs.readFileSync(path.join(dir, ...f.split("/")))]));
}

describeEachEngine("ddex file drop", (t) => {
  const db = () => t().db;
  const STORE = "ddex_drop";
  const BAD = "ddex_bad";
  let worker: Worker;
  let media: LocalMedia;
  let drops: string;
  let accountId: string;
  let isrcSeq = 0;
  const nextIsrc = () => `QZDDX26${String(++isrcSeq).padStart(5, "0")}`;

  before(async () => {
    drops = tempDir("backline-ddex-drops-");
    media = new LocalMedia(tempDir("backline-ddex-media-"));
    accountId = await labelAccount(db());
    await configureDdexStore(db(), STORE, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { type: "directory", path: drops },
    });
    // No destination, a sender that is no DDEX party, a blank recipient name.
    await configureDdexStore(db(), BAD, {
      sender: { dpid: "nope", name: SENDER.name },
      recipient: { dpid: RECIPIENT.dpid, name: " " },
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
  const statusOf = async (id: string) =>
    (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]?.status;
  const waitForStatus = (id: string, status: string) =>
    poll(
      `release ${id} to be ${status}`,
      () => statusOf(id),
      (s) => s === status,
    );
  const deliveriesOf = (id: string) =>
    rows<DeliveryRow>(
      `select id::text as id, store, action, status, message, store_reference, attempts
       from internal.release_deliveries where release_id = $1 order by created_at, id`,
      [id],
    );
  const sendJobsOf = (deliveryId: string) =>
    rows<{ status: string; attempts: number; last_error: string | null }>(
      "select status, attempts, last_error from internal.jobs where kind = 'delivery.send' and payload ->> 'delivery_id' = $1",
      [deliveryId],
    );
  async function submit(id: string): Promise<void> {
    await rows("update public.releases set status = 'submitted' where id = $1", [id]);
    worker.wake();
  }
  const batchDirs = () => fs.readdirSync(drops).sort();

  test("an approved release is dropped as an ERN 4.3 batch, goes live on the store's report, and a takedown drops a second batch", async () => {
    const upc = gtin13("400638100001");
    const [isrc1, isrc2] = [nextIsrc(), nextIsrc()];
    const release = await seedRelease(
      db(),
      accountId,
      releaseFields(STORE, { upc, territories_exclude: ["CU"] }),
      [
        {
          title: "Night Drive",
          isrc: isrc1,
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
          isrc: isrc2,
          duration: 372,
          track_number: 2,
          explicit: true,
          contributors: [{ name: "Ada Moreno", role: "remixer" }],
        },
      ],
    );
    const audio = release.tracks.map((tr, i) => ({
      trackId: tr.id,
      ext: "wav" as const,
      data: wavBytes(i + 1),
    }));
    const cover = jpegBytes(3);
    placeMedia(media, accountId, release.id, { cover, audio });

    await submit(release.id);
    await waitForStatus(release.id, "delivered");
    const [insert, ...others] = await deliveriesOf(release.id);
    assert.deepEqual(others, []);
    assert.ok(insert);
    assert.deepEqual(
      [insert.store, insert.action, insert.status, insert.message, insert.attempts],
      [STORE, "insert", "delivered", null, 1],
    );
    const batch = path.basename(insert.store_reference ?? "");
    const dir = path.join(drops, batch);
    assert.equal(insert.store_reference, dir, "the store reference is the batch folder");
    assert.ok(!batchDirs().some((n) => n.startsWith(".")), "no .partial folder is left");
    assert.deepEqual(
      listFiles(dir),
      [
        `${upc}/${upc}.xml`,
        `${upc}/resources/${isrc1}.wav`,
        `${upc}/resources/${isrc2}.wav`,
        `${upc}/resources/cover.jpg`,
        `BatchComplete_${batch}.xml`,
      ].sort(),
    );
    const files = readBatch(dir);
    assert.deepEqual(files.get(`${upc}/resources/${isrc1}.wav`), audio[0]?.data, "the audio as uploaded");
    assert.deepEqual(files.get(`${upc}/resources/${isrc2}.wav`), audio[1]?.data);
    assert.deepEqual(files.get(`${upc}/resources/cover.jpg`), cover);
    const { root } = checkBatch(batch, upc, files, {
      action: "insert",
      releaseId: release.id,
      upc,
      title: "Night Drive",
    });

    // The message says what the release is.
    assert.equal(root.attrs.ReleaseProfileVersionId, "Audio");
    assert.equal(textAt(root, "MessageHeader/MessageId"), insert.id);
    assert.equal(textAt(root, "MessageHeader/MessageSender/PartyId"), SENDER.dpid);
    assert.equal(textAt(root, "MessageHeader/MessageRecipient/PartyId"), RECIPIENT.dpid);
    assert.equal(textAt(root, "MessageHeader/MessageControlType"), "LiveMessage");
    const r = at(root, "ReleaseList/Release");
    assert.equal(textAt(r, "ReleaseId/ICPN"), upc);
    assert.equal(textAt(r, "ReleaseType"), "EP");
    assert.equal(textAt(r, "ParentalWarningType"), "Explicit");
    assert.equal(textAt(r, "Duration"), "PT9M37S");
    const srs = kids(at(root, "ResourceList"), "SoundRecording");
    assert.deepEqual(
      srs.map((s) => [
        textAt(s, "SoundRecordingEdition/ResourceId/ISRC"),
        textAt(s, "DisplayTitleText"),
        textAt(s, "Duration"),
        textAt(s, "SoundRecordingEdition/TechnicalDetails/DeliveryFile/AudioCodecType"),
        textAt(s, "SoundRecordingEdition/TechnicalDetails/DeliveryFile/File/URI"),
        kids(s, "Contributor").map((c) => textAt(c, "Role")),
        kids(s, "DisplayArtist").map((d) => textAt(d, "DisplayArtistRole")),
      ]),
      [
        [
          isrc1,
          "Night Drive",
          "PT3M25S",
          "PCM",
          `resources/${isrc1}.wav`,
          ["StudioProducer", "ComposerLyricist"],
          ["MainArtist", "FeaturedArtist"],
        ],
        [
          isrc2,
          "Night Drive (Extended Mix)",
          "PT6M12S",
          "PCM",
          `resources/${isrc2}.wav`,
          ["Remixer"],
          ["MainArtist"],
        ],
      ],
    );
    const file1 = at(srs[0] as XmlNode, "SoundRecordingEdition/TechnicalDetails/DeliveryFile");
    assert.deepEqual(
      [textAt(file1, "NumberOfChannels"), textAt(file1, "SamplingRate"), textAt(file1, "BitsPerSample")],
      ["2", "44100", "16"],
      "the measured audio details",
    );
    assert.equal(textAt(root, "ResourceList/Image/TechnicalDetails/File/URI"), "resources/cover.jpg");
    assert.equal(deals(root).length, 3);
    for (const d of deals(root)) {
      assert.deepEqual(
        kids(at(d, "DealTerms"), "ExcludedTerritoryCode").map((c) => c.text),
        ["CU"],
      );
      assert.equal(textAt(d, "DealTerms/ValidityPeriod/StartDateTime"), `${FUTURE_DATE}T00:00:00Z`);
      assert.equal(has(at(d, "DealTerms/ValidityPeriod"), "EndDateTime"), false);
    }

    // The ddex store reports back itself: no live job, the release waits at delivered.
    const liveJobs = await rows(
      "select 1 from internal.jobs where kind = 'delivery.live' and payload ->> 'delivery_id' = $1",
      [insert.id],
    );
    assert.deepEqual(liveJobs, []);
    const reported = await reportDelivery(db(), insert.id, { status: "live" });
    assert.equal(reported.status, "live");
    assert.equal(await statusOf(release.id), "live");

    // The takedown: a second batch, every deal ended.
    const [request] = await rows<{ id: string }>(
      "insert into public.takedown_requests (release_id, reason) values ($1, $2) returning id::text as id",
      [release.id, "Rights ended"],
    );
    worker.wake();
    // Sent is not done: the release is taken down when the store confirms (here: by hand).
    const [, takedown, ...more] = await poll(
      "the takedown to be sent",
      () => deliveriesOf(release.id),
      (ds) => ds[1]?.status === "takedown_sent",
    );
    assert.deepEqual(more, []);
    assert.ok(takedown);
    assert.deepEqual(
      [takedown.store, takedown.action, await statusOf(release.id)],
      [STORE, "takedown", "takedown_requested"],
    );
    const note = "Drop Store's ingestion report of the takedown batch";
    assert.equal(
      (await reportDelivery(db(), takedown.id, { status: "taken_down", note })).status,
      "taken_down",
    );
    await waitForStatus(release.id, "taken_down");
    const batch2 = path.basename(takedown.store_reference ?? "");
    assert.notEqual(batch2, batch, "each delivery its own batch");
    const dir2 = path.join(drops, batch2);
    assert.equal(takedown.store_reference, dir2);
    assert.deepEqual(
      listFiles(dir2),
      listFiles(dir).map((f) => f.replace(batch, batch2)),
    );
    const second = checkBatch(batch2, upc, readBatch(dir2), {
      action: "takedown",
      releaseId: release.id,
      upc,
      title: "Night Drive",
    });
    assert.equal(textAt(second.root, "MessageHeader/MessageId"), takedown.id);
    // Taken down before its release date (FUTURE_DATE): each deal ends where it starts, not now.
    assert.ok(Date.parse(second.manifest.created_at) < Date.parse(`${FUTURE_DATE}T00:00:00Z`));
    assert.equal(deals(second.root).length, 3);
    for (const d of deals(second.root)) {
      assert.deepEqual(
        [
          textAt(d, "DealTerms/ValidityPeriod/StartDateTime"),
          textAt(d, "DealTerms/ValidityPeriod/EndDateTime"),
        ],
        [`${FUTURE_DATE}T00:00:00Z`, `${FUTURE_DATE}T00:00:00Z`],
        "every deal ends at its start: never before it",
      );
    }
    // The first batch stays as it was.
    assert.equal(
      all(parseXml(fs.readFileSync(path.join(dir, upc, `${upc}.xml`), "utf8")), "EndDateTime").length,
      0,
    );
    const [done] = await rows<{ status: string }>(
      "select status from public.takedown_requests where id = $1",
      [request?.id],
    );
    assert.equal(done?.status, "completed");
    assert.ok(!batchDirs().some((n) => n.startsWith(".")));
  });

  let bare: { releaseId: string; deliveryId: string; batch: string; folder: string } | undefined;

  test("a release without media, its UPC assigned at submission, gets a valid package: the message alone, in a folder named by the UPC", async () => {
    const release = await seedRelease(
      db(),
      accountId,
      releaseFields(STORE, { release_type: "single", upc: null }),
      [{ title: "Only Words", isrc: nextIsrc(), duration: 61, track_number: 1 }],
    );
    await submit(release.id);
    await waitForStatus(release.id, "delivered");
    const [d] = await deliveriesOf(release.id);
    assert.ok(d);
    const batch = path.basename(d.store_reference ?? "");
    const dir = path.join(drops, batch);
    assert.equal(d.store_reference, dir);
    // The tenant's first number: GS1 prefix 2000000, item 00000, its check digit.
    const folder = gtin13("200000000000");
    assert.deepEqual(
      (await rows<{ upc: string }>("select upc from public.releases where id = $1", [release.id]))[0]?.upc,
      folder,
    );
    assert.deepEqual(listFiles(dir), [`${folder}/${folder}.xml`, `BatchComplete_${batch}.xml`].sort());
    const { root, manifest } = checkBatch(batch, folder, readBatch(dir), {
      action: "insert",
      releaseId: release.id,
      upc: folder,
      title: "Night Drive",
    });
    assert.equal(manifest.message_id, d.id);
    assert.equal(root.attrs.ReleaseProfileVersionId, undefined);
    assert.deepEqual(all(root, "TechnicalDetails"), []);
    assert.deepEqual(all(root, "Image"), []);
    assert.deepEqual(all(root, "LinkedReleaseResourceReference"), []);
    assert.deepEqual(names(at(root, "ReleaseList/Release/ReleaseId")), ["ICPN", "ProprietaryId"]);
    assert.equal(textAt(root, "ReleaseList/Release/ReleaseId/ICPN"), folder);
    assert.equal(textAt(root, "ReleaseList/Release/ReleaseType"), "Single");
    bare = { releaseId: release.id, deliveryId: d.id, batch, folder };
  });

  test("sending a delivery again replaces its batch whole (and a stale .partial folder); a delivered one is not sent twice", async () => {
    assert.ok(bare, "the previous test made the release");
    const { releaseId, deliveryId, batch, folder } = bare;
    const dir = path.join(drops, batch);
    const before = batchDirs();
    const firstManifest = fs.readFileSync(path.join(dir, `BatchComplete_${batch}.xml`));

    // The job run again (a crash after the drop): the delivery is delivered, nothing is written.
    await sendDelivery(db(), deliveryId, { adapters: { ddex: ddexStore(media) } });
    assert.deepEqual(fs.readFileSync(path.join(dir, `BatchComplete_${batch}.xml`)), firstManifest);
    assert.equal((await deliveriesOf(releaseId))[0]?.attempts, 1);

    // Sent again (the operator's retry): written aside, then swapped in for the old batch.
    const partial = path.join(drops, `.${batch}.partial`);
    fs.mkdirSync(partial);
    fs.writeFileSync(path.join(partial, "junk.bin"), "left by a crash");
    fs.writeFileSync(path.join(dir, "stale.txt"), "not part of the new batch");
    await rows("update internal.release_deliveries set status = 'pending' where id = $1", [deliveryId]);
    const again = new Date("2030-01-02T03:04:05.678Z");
    await sendDelivery(db(), deliveryId, { adapters: { ddex: ddexStore(media, () => again) } });

    assert.deepEqual(batchDirs(), before, "the same batch folders, no .partial, no second batch");
    const [d] = await deliveriesOf(releaseId);
    assert.deepEqual([d?.status, d?.attempts, d?.store_reference], ["delivered", 2, dir]);
    const files = readBatch(dir);
    assert.deepEqual([...files.keys()], [`${folder}/${folder}.xml`, `BatchComplete_${batch}.xml`].sort());
    const { root, manifest } = checkBatch(batch, folder, files, {
      action: "insert",
      releaseId,
      upc: folder,
      title: "Night Drive",
    });
    assert.equal(manifest.created_at, "2030-01-02T03:04:05Z");
    assert.equal(textAt(root, "MessageHeader/MessageCreatedDateTime"), "2030-01-02T03:04:05Z");
    assert.equal(textAt(root, "MessageHeader/MessageId"), deliveryId);
    assert.equal(await statusOf(releaseId), "delivered");
  });

  test("bad ddex settings: the delivery is an error naming each bad field, and its job is not retried", async () => {
    const release = await seedRelease(db(), accountId, releaseFields(BAD, { upc: gtin13("400638100002") }), [
      { title: "Never Sent", isrc: nextIsrc(), duration: 100, track_number: 1 },
    ]);
    await submit(release.id);
    const [d] = await poll(
      "the delivery to fail",
      () => deliveriesOf(release.id),
      (ds) => ds[0]?.status === "error",
    );
    assert.ok(d);
    assert.equal(d.store, BAD);
    assert.equal(d.attempts, 1);
    assert.ok(d.message?.startsWith(`store ${BAD} has bad ddex settings: `), d.message ?? "");
    for (const field of ["ddex.sender.dpid:", "ddex.recipient.name:", "ddex.destination:"]) {
      assert.ok(d.message?.includes(field), `${field} in ${d.message}`);
    }
    const [job, ...more] = await poll(
      "the send job to finish",
      () => sendJobsOf(d.id),
      (jobs) => jobs.every((j) => j.status !== "queued" && j.status !== "running"),
    );
    assert.deepEqual(more, []);
    assert.deepEqual(
      job,
      { status: "succeeded", attempts: 1, last_error: null },
      "a configuration error waits for the operator",
    );
    assert.equal(await statusOf(release.id), "delivering");
    assert.equal(d.store_reference, null);
  });
});

// ---------------------------------------------------------------------------------------------
// An S3 destination, against a real S3-compatible server (one engine is enough)

describe(`ddex drop into S3 (s3rver) [${ENGINES[0]}]`, () => {
  const STORE = "ddex_s3";
  const MISSING = "ddex_s3_missing";
  const BUCKET = "ddex-drops";
  let tdb: TestDb | undefined;
  let server: RunningS3rver | undefined;
  let s3: S3Client | undefined;
  let worker: Worker | undefined;
  let media: LocalMedia;
  let endpoint: string;
  let accountId: string;
  const db = () => {
    if (!tdb) throw new Error("no database");
    return tdb.db;
  };

  before(async () => {
    tdb = await createTestDb(ENGINES[0] ?? "pglite");
    media = new LocalMedia(tempDir("backline-ddex-media-"));
    server = await startS3rver();
    endpoint = server.endpoint;
    s3 = new S3Client({
      region: "us-east-1",
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
      requestChecksumCalculation: "WHEN_REQUIRED",
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    accountId = await labelAccount(db());
    const destination = {
      type: "s3",
      bucket: BUCKET,
      prefix: "drops",
      endpoint,
      force_path_style: true,
      access_key_id: "S3RVER",
      secret_access_key: "S3RVER",
    };
    await configureDdexStore(db(), STORE, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination,
      deals: [
        { commercial_model: "SubscriptionModel", use_types: ["OnDemandStream"] },
        { commercial_model: "FreeOfChargeModel", use_types: ["Stream"] },
      ],
      test_messages: true,
      live_after_ms: 0,
    });
    await configureDdexStore(db(), MISSING, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { ...destination, bucket: "no-such-bucket" },
    });
    worker = new Worker({ db: db(), handlers: pipelineHandlers(db(), { media }), pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    s3?.destroy();
    await server?.close();
    await tdb?.close();
    if (media) fs.rmSync(media.root, { recursive: true, force: true });
  });

  const rows = <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    rowsOf<T>(db(), sql, params);
  const deliveriesOf = (id: string) =>
    rows<DeliveryRow>(
      `select id::text as id, store, action, status, message, store_reference, attempts
       from internal.release_deliveries where release_id = $1 order by created_at, id`,
      [id],
    );

  test("a release is dropped under the bucket's prefix: every object with its bytes and checksums, BatchComplete last; live after live_after_ms", async () => {
    const upc = gtin13("400638100003");
    const release = await seedRelease(db(), accountId, releaseFields(STORE, { upc }), [
      { title: "Cloud One", isrc: "QZDDX2690001", duration: 200, track_number: 1 },
      { title: "Cloud Two", isrc: "QZDDX2690002", duration: 210, track_number: 2 },
    ]);
    const audio = release.tracks.map((tr, i) => ({
      trackId: tr.id,
      ext: "flac" as const,
      data: wavBytes(10 + i),
    }));
    placeMedia(media, accountId, release.id, { cover: jpegBytes(5), audio });
    await rows("update public.releases set status = 'submitted' where id = $1", [release.id]);
    worker?.wake();
    // live_after_ms 0: the store is assumed to have it live at once.
    await poll(
      "the release to go live",
      async () =>
        (await rows<{ status: string }>("select status from public.releases where id = $1", [release.id]))[0],
      (r) => r?.status === "live",
    );
    const [d] = await deliveriesOf(release.id);
    assert.ok(d);
    const batch = path.basename(d.store_reference ?? "");
    assert.deepEqual([d.status, d.store_reference], ["live", `s3://${BUCKET}/drops/${batch}/`]);

    const client = s3 as S3Client;
    const listed = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "drops/" }));
    const objects = listed.Contents ?? [];
    const keys = objects.map((o) => o.Key as string).sort();
    const inBatch = [
      `${upc}/${upc}.xml`,
      `${upc}/resources/QZDDX2690001.flac`,
      `${upc}/resources/QZDDX2690002.flac`,
      `${upc}/resources/cover.jpg`,
      `BatchComplete_${batch}.xml`,
    ];
    assert.deepEqual(keys, inBatch.map((k) => `drops/${batch}/${k}`).sort());
    const files = new Map<string, Buffer>();
    for (const o of objects) {
      const got = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: o.Key }));
      const data = Buffer.from(
        await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray(),
      );
      const key = (o.Key as string).slice(`drops/${batch}/`.length);
      files.set(key, data);
      assert.equal(o.Size, data.length, key);
      assert.equal(o.ETag?.replace(/"/g, ""), hashesOf(data).md5, `${key}: the server got the bytes sent`);
      if (key.endsWith(".xml")) assert.equal(got.ContentType, "application/xml", key);
      if (key.endsWith(".json")) assert.equal(got.ContentType, "application/json", key);
    }
    assert.deepEqual(files.get(`${upc}/resources/QZDDX2690001.flac`), audio[0]?.data);
    assert.deepEqual(files.get(`${upc}/resources/cover.jpg`), jpegBytes(5));
    const last =
      objects.find((o) => o.Key?.endsWith(`BatchComplete_${batch}.xml`))?.LastModified?.getTime() ?? 0;
    for (const o of objects)
      assert.ok((o.LastModified?.getTime() ?? 0) <= last, `${o.Key} before BatchComplete`);

    const { root } = checkBatch(batch, upc, files, {
      action: "insert",
      releaseId: release.id,
      upc,
      title: "Night Drive",
    });
    assert.equal(textAt(root, "MessageHeader/MessageControlType"), "TestMessage");
    assert.equal(kids(at(root, "ResourceList"), "SoundRecording").length, 2);
    assert.deepEqual(
      all(root, "DeliveryFile").map((f) => textAt(f, "AudioCodecType")),
      ["FLAC", "FLAC"],
    );
    assert.deepEqual(
      deals(root).map((x) => [
        textAt(x, "DealTerms/CommercialModelType"),
        kids(at(x, "DealTerms"), "UseType").map((u) => u.text),
      ]),
      [
        ["SubscriptionModel", ["OnDemandStream"]],
        ["FreeOfChargeModel", ["Stream"]],
      ],
    );
  });

  test("a bucket that does not exist: the delivery is an error and its job is retried (not a configuration error)", async () => {
    const release = await seedRelease(
      db(),
      accountId,
      releaseFields(MISSING, { upc: gtin13("400638100004") }),
      [{ title: "Lost", isrc: "QZDDX2690003", duration: 100, track_number: 1 }],
    );
    await rows("update public.releases set status = 'submitted' where id = $1", [release.id]);
    worker?.wake();
    const [d] = await poll(
      "the delivery to fail",
      () => deliveriesOf(release.id),
      (ds) => ds[0]?.status === "error",
    );
    assert.ok(d);
    assert.match(d.message ?? "", /bucket/i);
    const [job] = await poll(
      "the send job to be queued again",
      () =>
        rows<{ status: string; attempts: number; last_error: string | null }>(
          "select status, attempts, last_error from internal.jobs where kind = 'delivery.send' and payload ->> 'delivery_id' = $1",
          [d.id],
        ),
      (jobs) => jobs[0]?.status === "queued" && (jobs[0]?.attempts ?? 0) >= 1,
    );
    assert.ok(job?.last_error, "the failure is recorded for the retry");
    // Stop retrying: the server is going away with this suite.
    await rows(
      "update internal.jobs set status = 'dead' where kind = 'delivery.send' and payload ->> 'delivery_id' = $1",
      [d.id],
    );
  });
});
