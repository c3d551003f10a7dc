import assert from "node:assert/strict";
import { test } from "node:test";
import { buildNewReleaseMessage, type ErnRelease, type ErnTrack } from "../pipeline/ddex/ern.ts";
import { formatStoreIds, parseDuration, parseStoreIds } from "./csv.ts";
import { parseIsoDuration, readErnMessage } from "./ern-read.ts";
import { genreCode } from "./model.ts";

const genres = {
  genres: [
    { code: "hip-hop-rap", name: "Hip-Hop/Rap" },
    { code: "rnb-soul", name: "R&B/Soul" },
    { code: "electronic", name: "Electronic" },
  ],
};

test("durations: seconds, m:ss, h:mm:ss and xs:duration", () => {
  assert.equal(parseDuration("245"), 245);
  assert.equal(parseDuration("4:05"), 245);
  assert.equal(parseDuration("1:04:05"), 3845);
  assert.equal(parseDuration("4:5"), undefined);
  assert.equal(parseDuration("abc"), undefined);
  assert.equal(parseIsoDuration("PT3M25S"), 205);
  assert.equal(parseIsoDuration("PT1H2M3S"), 3723);
  assert.equal(parseIsoDuration("PT0H4M5.6S"), 246);
  assert.equal(parseIsoDuration("PT"), undefined);
  assert.equal(parseIsoDuration("3:25"), undefined);
});

test("store ids: store=id;store=id, both ways", () => {
  assert.deepEqual(parseStoreIds("spotify=4uLU6hMCjMI75M1A2tKUQC; apple_music=1440857781"), {
    spotify: "4uLU6hMCjMI75M1A2tKUQC",
    apple_music: "1440857781",
  });
  assert.equal(parseStoreIds("spotify"), undefined);
  assert.equal(parseStoreIds("=1"), undefined);
  assert.equal(formatStoreIds({ spotify: "a", deezer: "1" }), "spotify=a;deezer=1");
});

test("genres by code or by name, punctuation and case forgiven", () => {
  assert.equal(genreCode(genres, "hip-hop-rap"), "hip-hop-rap");
  assert.equal(genreCode(genres, "Hip-Hop/Rap"), "hip-hop-rap");
  assert.equal(genreCode(genres, "R&B / Soul"), "rnb-soul");
  assert.equal(genreCode(genres, "Nu Disco"), undefined);
});

test("a message Backline writes reads back to the same release and tracks (ERN 4.3)", () => {
  const release: ErnRelease = {
    id: "rel-1",
    title: "Night Drive",
    version: "Deluxe Edition",
    release_type: "ep",
    artist_name: "Nova Vale",
    primary_genre: "rnb-soul",
    secondary_genre: null,
    primary_genre_name: "R&B/Soul",
    release_date: "2019-05-03",
    original_release_date: "2018-11-30",
    upc: "036000291452",
    label_name: "Owl Records",
    catalog_number: "OWL001",
    licensed_territories_include: "WW",
    territories: [],
    territories_exclude: ["KP"],
    copyright: "2019 Owl Records",
    copyright_year: 2019,
    phonographic_copyright: "2018 Owl Records",
    phonographic_year: 2018,
    explicit: false,
    language: "en",
  };
  const tracks: ErnTrack[] = [
    {
      id: "t1",
      title: "Tunnel Lights",
      version: "Radio Edit",
      isrc: "USS1Z1800001",
      duration: 205,
      track_number: 1,
      disc_number: 1,
      artist_name: null,
      explicit: true,
      language: null,
      contributors: [
        { name: "Ada Stone", role: "songwriter" },
        { name: "Kai North", role: "featured_artist" },
        { name: "Theo Marsh", role: "mastering_engineer" },
      ],
    },
    {
      id: "t2",
      title: "Coastline",
      version: null,
      isrc: "USS1Z1800002",
      duration: 190,
      track_number: 2,
      disc_number: 1,
      artist_name: null,
      explicit: false,
      language: null,
      contributors: [{ name: "Ada Stone", role: "producer" }],
    },
  ];
  const xml = buildNewReleaseMessage({
    messageId: "m1",
    threadId: "t1",
    createdAt: new Date("2026-01-01T00:00:00Z"),
    sender: { dpid: "PADPIDA2026000001S", name: "Backline" },
    recipient: { dpid: "PADPIDA2026000002B", name: "Store" },
    test: false,
    release,
    tracks,
    audio: new Map(),
    artwork: undefined,
    deals: [{ commercialModel: "SubscriptionModel", useTypes: ["OnDemandStream"] }],
  });
  const { version, release: read, problems } = readErnMessage(xml, { genres, source: "m.xml", dir: "/tmp" });
  assert.equal(version, "43");
  assert.deepEqual(problems, []);
  assert.ok(read);
  assert.deepEqual(read.problems, []);
  assert.equal(read.key, "upc:036000291452");
  assert.equal(read.upc, "036000291452");
  assert.equal(read.title, "Night Drive");
  assert.equal(read.version, "Deluxe Edition");
  assert.equal(read.release_type, "ep");
  assert.equal(read.artist_name, "Nova Vale");
  assert.equal(read.label_name, "Owl Records");
  assert.equal(read.catalog_number, "OWL001");
  assert.equal(read.primary_genre, "rnb-soul");
  assert.equal(read.release_date, "2019-05-03");
  assert.equal(read.original_release_date, "2018-11-30");
  assert.equal(read.copyright, "(C) 2019 Owl Records");
  assert.equal(read.copyright_year, 2019);
  assert.equal(read.phonographic_copyright, "(P) 2018 Owl Records");
  assert.equal(read.licensed_territories_include, "WW");
  assert.deepEqual(read.territories_exclude, ["KP"]);
  assert.equal(read.explicit, true);
  assert.deepEqual(read.store_ids, { PADPIDA2026000001S: "rel-1" });
  assert.deepEqual(
    read.deals.map((d) => [d.commercial_models, d.use_types, d.start]),
    [[["SubscriptionModel"], ["OnDemandStream"], "2019-05-03"]],
  );
  assert.deepEqual(
    read.tracks.map((t) => [
      t.isrc,
      t.title,
      t.version,
      t.duration,
      t.disc_number,
      t.track_number,
      t.explicit,
    ]),
    [
      ["USS1Z1800001", "Tunnel Lights", "Radio Edit", 205, 1, 1, true],
      ["USS1Z1800002", "Coastline", null, 190, 1, 2, false],
    ],
  );
  assert.deepEqual(read.tracks[0]?.contributors, [
    { name: "Kai North", role: "featured_artist" },
    { name: "Ada Stone", role: "songwriter" },
    { name: "Theo Marsh", role: "mastering_engineer" },
  ]);
  assert.deepEqual(read.tracks[1]?.store_ids, { PADPIDA2026000001S: "rel-1:t2" });
});

test("not XML, another namespace, and a schema violation are reported with where they are", () => {
  const bad = readErnMessage("<oops", { genres, source: "a.xml", dir: "/tmp" });
  assert.equal(bad.problems[0]?.code, "not_xml");
  const other = readErnMessage('<x:NewReleaseMessage xmlns:x="http://ddex.net/xml/ern/41"/>', {
    genres,
    source: "b.xml",
    dir: "/tmp",
  });
  assert.equal(other.problems[0]?.code, "unsupported_version");
  const fake = readErnMessage(
    `<ern:NewReleaseMessage xmlns:ern="http://ddex.net/xml/ern/43"><ResourceList><SoundRecording><ResourceReference>A1</ResourceReference><Bogus/></SoundRecording></ResourceList></ern:NewReleaseMessage>`,
    { genres, source: "c.xml", dir: "/tmp" },
  );
  const codes = fake.release?.problems.map((p) => `${p.code} ${p.where}`) ?? [];
  assert.ok(
    codes.includes("schema_violation c.xml /NewReleaseMessage[1]/ResourceList[1]/SoundRecording[1]/Bogus[1]"),
  );
  assert.ok(codes.some((c) => c.startsWith("no_release ")));
});
