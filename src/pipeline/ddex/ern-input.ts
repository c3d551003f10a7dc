import { opt, type XmlChild, x } from "./xml.ts";

/**
 * What an ERN NewReleaseMessage says, whichever version writes it (docs/ddex.md): the input model
 * both writers take — ern.ts (ERN 4.3) and ern382.ts (ERN 3.8.2) — and the decisions they share,
 * so that a store sees the same release in either: track order, genre names, contributor roles,
 * P and C lines, territories, and when each deal starts and ends. Every date-time carries its
 * zone (UTC, `Z`).
 */

export interface MessageParty {
  /** A DDEX Party Identifier: PADPIDA followed by letters and digits. */
  dpid: string;
  name: string;
}

export interface ErnFile {
  /** Where the file is, relative to the message (e.g. resources/A1.flac). */
  uri: string;
  md5: string;
  bytes: number;
}

export interface ErnAudioFile extends ErnFile {
  codec: "PCM" | "FLAC";
  channels?: number | undefined;
  sampleRate?: number | undefined;
  bitsPerSample?: number | undefined;
}

export interface ErnImageFile extends ErnFile {
  codec: "JPEG" | "PNG";
  width?: number | undefined;
  height?: number | undefined;
}

export interface ErnRelease {
  id: string;
  title: string;
  version: string | null;
  release_type: string;
  artist_name: string | null;
  primary_genre: string | null;
  secondary_genre: string | null;
  /** The genres' display names from the catalogue (internal.genres), when known. */
  primary_genre_name?: string | null | undefined;
  secondary_genre_name?: string | null | undefined;
  release_date: string | null;
  original_release_date: string | null;
  upc: string | null;
  label_name: string | null;
  catalog_number: string | null;
  licensed_territories_include: string | null;
  territories: string[];
  territories_exclude: string[];
  copyright: string | null;
  copyright_year: number | null;
  phonographic_copyright: string | null;
  phonographic_year: number | null;
  explicit: boolean;
  language: string | null;
}

export interface ErnTrack {
  id: string;
  title: string;
  version: string | null;
  isrc: string | null;
  duration: number | null;
  track_number: number | null;
  disc_number: number;
  artist_name: string | null;
  explicit: boolean;
  language: string | null;
  contributors: { name: string; role: string }[];
}

/** A deal a store takes: how it may be used (DDEX CommercialModelType and UseTypes). */
export interface ErnDeal {
  commercialModel: string;
  useTypes: string[];
}

export interface ErnMessageInput {
  messageId: string;
  threadId: string;
  createdAt: Date;
  sender: MessageParty;
  recipient: MessageParty;
  /** TestMessage: the store checks it and ingests nothing. */
  test: boolean;
  release: ErnRelease;
  tracks: ErnTrack[];
  audio: Map<string, ErnAudioFile>;
  artwork: ErnImageFile | undefined;
  deals: ErnDeal[];
  /** Ends every deal at this time (or at its start, when later): the takedown. */
  endDealsAt?: Date | undefined;
  /** The store's own genre names, by Backline genre code (the store's `ddex.genres` setting). */
  genreMap?: Record<string, string> | undefined;
  /** The store's own role names, by Backline contributor role (its dictionary's, `ddex.roles`). */
  roleMap?: Record<string, string> | undefined;
}

/**
 * A contributor's role as the message writes it: DDEX's value, or — for a store that names the
 * role its own way (its dictionary) — `UserDefined` with the store's name as the UserDefinedValue,
 * in the store's namespace (its DDEX Party ID), which both ERN versions allow.
 */
export function storeRole(
  input: ErnMessageInput,
  role: string,
  ddexRole: { role: string; userDefined?: string | undefined },
): { value: string; attributes: Record<string, string | undefined> } {
  const own = input.roleMap && Object.hasOwn(input.roleMap, role) ? input.roleMap[role] : undefined;
  if (own === undefined || own === ddexRole.role) {
    return { value: ddexRole.role, attributes: { UserDefinedValue: ddexRole.userDefined } };
  }
  return { value: "UserDefined", attributes: { Namespace: input.recipient.dpid, UserDefinedValue: own } };
}

/**
 * The text a store reads for a genre: the store's own name for it when its settings map it, else
 * the catalogue's display name, else the code as it is.
 */
export function genreText(
  code: string | null,
  displayName: string | null | undefined,
  genreMap: Record<string, string> = {},
): string | null {
  if (!code) return null;
  return (Object.hasOwn(genreMap, code) ? genreMap[code] : undefined) ?? displayName ?? code;
}

/** The release's genre and sub-genre as the store reads them ("Unknown" when it has none). */
export function releaseGenres(input: ErnMessageInput): { genre: string; subGenre: string | null } {
  const { release, genreMap } = input;
  return {
    genre: genreText(release.primary_genre, release.primary_genre_name, genreMap) ?? "Unknown",
    subGenre: genreText(release.secondary_genre, release.secondary_genre_name, genreMap),
  };
}

/** Backline's contributor roles as DDEX ContributorRole values; artists are DisplayArtists instead. */
export const CONTRIBUTOR_ROLE: Record<string, string> = {
  remixer: "Remixer",
  composer: "Composer",
  lyricist: "Lyricist",
  songwriter: "ComposerLyricist",
  producer: "StudioProducer",
  co_producer: "CoProducer",
  mixing_engineer: "MixingEngineer",
  mastering_engineer: "MasteringEngineer",
  recording_engineer: "RecordingEngineer",
  arranger: "Arranger",
  conductor: "Conductor",
  orchestra: "Orchestra",
  performer: "Performer",
  publisher: "MusicPublisher",
};

export const RELEASE_TYPE: Record<string, string> = {
  single: "Single",
  ep: "EP",
  album: "Album",
  compilation: "Album",
  mixtape: "Album",
  soundtrack: "Album",
};

/** The release's main artist, as every message names it. */
export const releaseArtist = (release: ErnRelease): string => release.artist_name ?? "Unknown Artist";

/** Seconds as an xs:duration (PT3M25S). */
export function isoDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return `PT${h ? `${h}H` : ""}${m ? `${m}M` : ""}${s || (!h && !m) ? `${s}S` : ""}`;
}

/** A UTC date-time without milliseconds: 2026-05-01T12:00:00Z. */
export const isoDateTime = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, "Z");

/**
 * The deal's territories: the world (licensed_territories_include WW, or nothing said) less
 * territories_exclude; else the include list with the `territories` it adds, less the exclusions.
 */
export function dealTerritories(release: ErnRelease): { include: string[] } | { exclude: string[] } {
  const excluded = new Set(release.territories_exclude);
  const include = release.licensed_territories_include;
  if (include === "WW" || (!include && release.territories.length === 0)) {
    return excluded.size > 0 ? { exclude: [...excluded].sort() } : { include: ["Worldwide"] };
  }
  const listed = [...new Set([...(include ? include.split(",") : []), ...release.territories])];
  return { include: listed.filter((t) => !excluded.has(t)) };
}

/**
 * When the deals run: from the release date at 00:00 UTC (the date itself is the release's own
 * ReleaseDate), or from the message's creation when there is none. A takedown ends them at
 * `endDealsAt`, or at their start when that is still ahead — never before it (an empty period:
 * the release is never available).
 */
export function dealPeriod(input: ErnMessageInput): { start: string; end: string | undefined } {
  const { release } = input;
  const startAt = release.release_date ? new Date(`${release.release_date}T00:00:00Z`) : input.createdAt;
  const end =
    input.endDealsAt &&
    isoDateTime(input.endDealsAt.getTime() > startAt.getTime() ? input.endDealsAt : startAt);
  return { start: isoDateTime(startAt), end };
}

/**
 * A PLine or CLine (the same element in both versions): its year and its text, marked (P) or (C)
 * unless it already carries a mark; nothing without a text.
 */
export function copyrightLine(kind: "P" | "C", text: string | null, year: number | null): XmlChild {
  if (!text) return undefined;
  const marked = /^(\(|℗|©)/.test(text) ? text : `(${kind}) ${text}`;
  return x(`${kind}Line`, opt("Year", year), x(`${kind}LineText`, marked));
}

/** The title a store shows: `Title (Version)`. */
export const displayTitleText = (title: string, version: string | null): string =>
  version ? `${title} (${version})` : title;

/** The tracks in the release's order: by disc, then track number (then id, to be stable). */
export function orderedTracks(tracks: ErnTrack[]): ErnTrack[] {
  return [...tracks].sort(
    (a, b) =>
      a.disc_number - b.disc_number ||
      (a.track_number ?? 0) - (b.track_number ?? 0) ||
      a.id.localeCompare(b.id),
  );
}
