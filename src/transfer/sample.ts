import { createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  buildNewReleaseMessage,
  type ErnAudioFile,
  type ErnRelease,
  type ErnTrack,
} from "../pipeline/ddex/ern.ts";
import { formatStoreIds, RELEASE_COLUMNS, TRACK_COLUMNS } from "./csv.ts";

/**
 * `backline transfer sample`: a realistic back catalogue of any size, as the CSV template or as a
 * folder of ERN 4.3 messages (one folder per release, written by the same builder Backline's
 * deliveries use), for trying an import. Singles, EPs and albums over twenty years, valid UPCs
 * and ISRCs, P and C lines, genres, explicit tracks, contributors and splits that add up to 100,
 * store ids for some. The same seed writes the same catalogue.
 */

/** A small seeded generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const GENRES: [string, string][] = [
  ["electronic", "Electronic"],
  ["house", "House"],
  ["techno", "Techno"],
  ["pop", "Pop"],
  ["indie", "Indie"],
  ["rock", "Rock"],
  ["hip-hop-rap", "Hip-Hop/Rap"],
  ["rnb-soul", "R&B/Soul"],
  ["jazz", "Jazz"],
  ["ambient", "Ambient"],
  ["folk", "Folk"],
  ["alternative", "Alternative"],
];
const FIRST = [
  "Nova",
  "Echo",
  "Luna",
  "Atlas",
  "Iris",
  "Juno",
  "Orion",
  "Vera",
  "Kai",
  "Mira",
  "Soren",
  "Ada",
  "Theo",
  "Lena",
];
const LAST = [
  "Vale",
  "Rivers",
  "Stone",
  "Marsh",
  "Quill",
  "Hart",
  "North",
  "Bloom",
  "Reyes",
  "Okafor",
  "Lindqvist",
  "Moreau",
];
const WORDS = [
  "Midnight",
  "Static",
  "Golden",
  "Echoes",
  "Harbour",
  "Neon",
  "Paper",
  "Glass",
  "Satellite",
  "Velvet",
  "Tides",
  "Ember",
  "Northern",
  "Quiet",
  "Signal",
  "Summer",
  "Hollow",
  "Parallel",
  "Drift",
  "Lanterns",
  "Orbit",
  "Wires",
  "Rain",
  "Cathedral",
  "Motion",
  "Weather",
  "Silver",
  "Coast",
  "Fever",
  "Gardens",
];
const VERSIONS = ["Radio Edit", "Extended Mix", "Acoustic", "Remastered", "Live", "Instrumental"];

function gtinCheck(body: string): string {
  let sum = 0;
  const digits = [...body].reverse().map(Number);
  for (let i = 0; i < digits.length; i++) sum += (digits[i] ?? 0) * (i % 2 === 0 ? 3 : 1);
  return String((10 - (sum % 10)) % 10);
}

export interface SampleTrack {
  disc_number: number;
  track_number: number;
  isrc: string;
  title: string;
  version: string | null;
  artist: string | null;
  duration: number;
  explicit: boolean;
  contributors: { name: string; role: string }[];
  splits: { name: string; email: string | null; share: string }[];
  store_ids: Record<string, string>;
}

export interface SampleRelease {
  ref: string;
  upc: string;
  catalog_number: string;
  title: string;
  version: string | null;
  release_type: "single" | "ep" | "album";
  artist: string;
  label: string;
  date: string;
  genre: [string, string];
  year: number;
  store_ids: Record<string, string>;
  territories: string;
  excluded: string[];
  tracks: SampleTrack[];
}

/** The catalogue of `tracks` tracks (the last release takes what is left). */
export function sampleCatalogue(tracks: number, seed: number): SampleRelease[] {
  const rand = rng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
  const label = `${pick(WORDS)} ${pick(["Records", "Music", "Recordings", "Sound"])}`;
  const artists = Array.from(
    { length: Math.max(1, Math.ceil(tracks / 40)) },
    () => `${pick(FIRST)} ${pick(LAST)}`,
  );
  const registrant = Array.from(
    { length: 3 },
    () => "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"[Math.floor(rand() * 34)],
  ).join("");
  const upcBase = 100_000_000 + Math.floor(rand() * 800_000_000);
  const isrcSeq = new Map<number, number>();
  const releases: SampleRelease[] = [];
  let left = tracks;
  let n = 0;
  while (left > 0) {
    const kind = rand();
    const type: SampleRelease["release_type"] = kind < 0.45 ? "single" : kind < 0.75 ? "ep" : "album";
    const size = Math.min(
      left,
      type === "single"
        ? 1 + Math.floor(rand() * 2)
        : type === "ep"
          ? 4 + Math.floor(rand() * 3)
          : 8 + Math.floor(rand() * 7),
    );
    left -= size;
    n++;
    const year = 2004 + Math.floor(rand() * 21);
    const date = `${year}-${String(1 + Math.floor(rand() * 12)).padStart(2, "0")}-${String(1 + Math.floor(rand() * 28)).padStart(2, "0")}`;
    const artist = pick(artists);
    const genre = pick(GENRES);
    const upcBody = `0${String(upcBase + n).padStart(10, "0")}`.slice(-11);
    const title =
      size === 1
        ? `${pick(WORDS)} ${pick(WORDS)}`
        : `${pick(WORDS)} ${pick(["", "Nights", "Songs", "Stories", "Sessions"])}`.trim();
    const release: SampleRelease = {
      ref: `R${n}`,
      upc: upcBody + gtinCheck(upcBody),
      catalog_number: `${label.slice(0, 3).toUpperCase()}${String(n).padStart(4, "0")}`,
      title,
      version: rand() < 0.08 ? "Deluxe Edition" : null,
      release_type: size === 1 ? "single" : type,
      artist,
      label,
      date,
      genre,
      year,
      store_ids:
        rand() < 0.3
          ? { spotify: base62(rand, 22), apple_music: String(1_000_000_000 + Math.floor(rand() * 8e9)) }
          : {},
      territories: rand() < 0.9 ? "WW" : "US,CA,GB,IE,AU,NZ",
      excluded: rand() < 0.1 ? ["CU", "IR", "KP"] : [],
      tracks: [],
    };
    const discs = size > 12 && rand() < 0.3 ? 2 : 1;
    const perDisc = Math.ceil(size / discs);
    for (let i = 0; i < size; i++) {
      const yy = year % 100;
      const seq = (isrcSeq.get(yy) ?? 0) + 1;
      isrcSeq.set(yy, seq);
      const featured =
        rand() < 0.15
          ? pick(artists.filter((a) => a !== artist).concat(`${pick(FIRST)} ${pick(LAST)}`))
          : null;
      const writer = `${pick(FIRST)} ${pick(LAST)}`;
      const producer = `${pick(FIRST)} ${pick(LAST)}`;
      const contributors = [
        { name: writer, role: "songwriter" },
        { name: producer, role: "producer" },
        ...(featured ? [{ name: featured, role: "featured_artist" }] : []),
        ...(rand() < 0.3 ? [{ name: `${pick(FIRST)} ${pick(LAST)}`, role: "mastering_engineer" }] : []),
      ];
      const splitKind = rand();
      const splits =
        splitKind < 0.5
          ? []
          : splitKind < 0.8
            ? [
                { name: artist, email: `${slug(artist)}@example.com`, share: "50" },
                { name: writer, email: `${slug(writer)}@example.com`, share: "50" },
              ]
            : [
                { name: artist, email: null, share: "33.3334" },
                { name: writer, email: `${slug(writer)}@example.com`, share: "33.3333" },
                { name: producer, email: `${slug(producer)}@example.com`, share: "33.3333" },
              ];
      release.tracks.push({
        disc_number: Math.floor(i / perDisc) + 1,
        track_number: (i % perDisc) + 1,
        isrc: `QZ${registrant}${String(yy).padStart(2, "0")}${String(seq).padStart(5, "0")}`,
        title: size === 1 ? title : `${pick(WORDS)} ${pick(WORDS)}`,
        version: rand() < 0.1 ? pick(VERSIONS) : null,
        artist: featured ? `${artist} feat. ${featured}` : null,
        duration: 120 + Math.floor(rand() * 300),
        explicit: rand() < 0.12,
        contributors,
        splits,
        store_ids: Object.keys(release.store_ids).length ? { spotify: base62(rand, 22) } : {},
      });
    }
    releases.push(release);
  }
  return releases;
}

const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, ".");

function base62(rand: () => number, length: number): string {
  const chars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  return Array.from({ length }, () => chars[Math.floor(rand() * 62)]).join("");
}

const csvField = (v: string | number | null | undefined): string => {
  const s = v === null || v === undefined ? "" : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

const MAX_CONTRIBUTORS = 4;
const MAX_SPLITS = 3;

/** The CSV template's header for the sample (release columns, track columns, numbered columns). */
export function csvHeader(): string[] {
  return [
    ...RELEASE_COLUMNS,
    ...TRACK_COLUMNS,
    ...Array.from({ length: MAX_CONTRIBUTORS }, (_, i) => [
      `contributor_${i + 1}_name`,
      `contributor_${i + 1}_role`,
    ]).flat(),
    ...Array.from({ length: MAX_SPLITS }, (_, i) => [
      `split_${i + 1}_name`,
      `split_${i + 1}_email`,
      `split_${i + 1}_share`,
    ]).flat(),
  ];
}

/** Writes the catalogue as the CSV template. */
export async function writeSampleCsv(file: string, releases: SampleRelease[]): Promise<void> {
  const out = createWriteStream(file);
  const header = csvHeader();
  const write = async (line: string) => {
    if (!out.write(line)) await once(out, "drain");
  };
  await write(`${header.join(",")}\n`);
  for (const r of releases) {
    for (const t of r.tracks) {
      const v: Record<string, string | number | null> = {
        release_ref: r.ref,
        upc: r.upc,
        catalog_number: r.catalog_number,
        release_title: r.title,
        release_version: r.version,
        release_type: r.release_type,
        release_artist: r.artist,
        label: r.label,
        release_date: r.date,
        original_release_date: r.date,
        genre: r.genre[1],
        subgenre: null,
        c_line: `${r.year} ${r.label}`,
        c_year: r.year,
        p_line: `${r.year} ${r.label}`,
        p_year: r.year,
        language: "en",
        territories: r.territories,
        excluded_territories: r.excluded.join(","),
        release_store_ids: formatStoreIds(r.store_ids),
        cover_file: null,
        cover_md5: null,
        disc_number: t.disc_number,
        track_number: t.track_number,
        isrc: t.isrc,
        track_title: t.title,
        track_version: t.version,
        track_artist: t.artist,
        duration: `${Math.floor(t.duration / 60)}:${String(t.duration % 60).padStart(2, "0")}`,
        explicit: t.explicit ? "yes" : "no",
        track_language: null,
        track_store_ids: formatStoreIds(t.store_ids),
        audio_file: null,
        audio_md5: null,
      };
      t.contributors.slice(0, MAX_CONTRIBUTORS).forEach((c, i) => {
        v[`contributor_${i + 1}_name`] = c.name;
        v[`contributor_${i + 1}_role`] = c.role;
      });
      t.splits.slice(0, MAX_SPLITS).forEach((s, i) => {
        v[`split_${i + 1}_name`] = s.name;
        v[`split_${i + 1}_email`] = s.email;
        v[`split_${i + 1}_share`] = s.share;
      });
      await write(`${header.map((h) => csvField(v[h])).join(",")}\n`);
    }
  }
  out.end();
  await once(out, "finish");
}

/** One second of 8 kHz mono 16-bit silence as a WAV file, different per track (a marker sample). */
function silentWav(marker: number): Buffer {
  const samples = 8000;
  const b = Buffer.alloc(44 + samples * 2);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + samples * 2, 4);
  b.write("WAVEfmt ", 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(16000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write("data", 36);
  b.writeUInt32LE(samples * 2, 40);
  b.writeInt16LE(marker % 32767, 44);
  return b;
}

/**
 * Writes the catalogue as ERN 4.3 messages, one folder per release (`<upc>/<upc>.xml`), each
 * with its audio files when `media` is set (silent, their MD5s in the message).
 */
export async function writeSampleErn(
  dir: string,
  releases: SampleRelease[],
  options: { media?: boolean; sender?: { dpid: string; name: string } } = {},
): Promise<void> {
  const sender = options.sender ?? { dpid: "PADPIDA2026000001S", name: "Previous Distributor" };
  let marker = 0;
  for (const r of releases) {
    const folder = path.join(dir, r.upc);
    await mkdir(folder, { recursive: true });
    const release: ErnRelease = {
      id: r.ref,
      title: r.title,
      version: r.version,
      release_type: r.release_type,
      artist_name: r.artist,
      primary_genre: r.genre[0],
      secondary_genre: null,
      primary_genre_name: r.genre[1],
      release_date: r.date,
      original_release_date: r.date,
      upc: r.upc,
      label_name: r.label,
      catalog_number: r.catalog_number,
      licensed_territories_include: r.territories,
      territories: [],
      territories_exclude: r.excluded,
      copyright: `${r.year} ${r.label}`,
      copyright_year: r.year,
      phonographic_copyright: `${r.year} ${r.label}`,
      phonographic_year: r.year,
      explicit: false,
      language: "en",
    };
    const tracks: ErnTrack[] = r.tracks.map((t, i) => ({
      id: `${r.ref}T${i + 1}`,
      title: t.title,
      version: t.version,
      isrc: t.isrc,
      duration: t.duration,
      track_number: t.track_number,
      disc_number: t.disc_number,
      artist_name: t.artist,
      explicit: t.explicit,
      language: null,
      contributors: t.contributors,
    }));
    const audio = new Map<string, ErnAudioFile>();
    if (options.media) {
      for (const t of tracks) {
        const wav = silentWav(++marker);
        const uri = `resources/${t.isrc}.wav`;
        await mkdir(path.join(folder, "resources"), { recursive: true });
        await writeFile(path.join(folder, uri), wav);
        audio.set(t.id, {
          uri,
          md5: createHash("md5").update(wav).digest("hex"),
          bytes: wav.length,
          codec: "PCM",
          channels: 1,
          sampleRate: 8000,
          bitsPerSample: 16,
        });
      }
    }
    const xml = buildNewReleaseMessage({
      messageId: `${r.upc}-1`,
      threadId: r.upc,
      createdAt: new Date(`${r.date}T00:00:00Z`),
      sender,
      recipient: { dpid: "PADPIDA2026000002B", name: "Backline" },
      test: false,
      release,
      tracks,
      audio,
      artwork: undefined,
      deals: [
        { commercialModel: "SubscriptionModel", useTypes: ["OnDemandStream"] },
        { commercialModel: "PayAsYouGoModel", useTypes: ["PermanentDownload"] },
      ],
    });
    await writeFile(path.join(folder, `${r.upc}.xml`), xml);
  }
}
