/**
 * The catalogue a transfer brings (docs/catalogue.md): one normalised model, whichever source it
 * was read from (the CSV template, or a folder of ERN 4.3 / 3.8.2 messages). Every value is in
 * Backline's own terms already (genre codes where the name is known, ISRCs normalised, splits as
 * decimal strings); what the source said that Backline cannot hold is a warning on the item,
 * never dropped silently.
 */

/**
 * One thing to say about the source. An `error` keeps its release out of the import (the rest
 * goes on); a `warning` is imported anyway — something not represented, or a value left for the
 * label to fix before submitting.
 */
export interface TransferProblem {
  severity: "error" | "warning";
  /** Where: "row 12", "row 12, column isrc", or a file and XML path. */
  where: string;
  code: string;
  message: string;
}

export interface TransferContributor {
  name: string;
  /** One of CONTRIBUTOR_ROLES (src/catalog/catalogue.ts). */
  role: string;
}

export interface TransferSplit {
  name: string;
  email?: string | undefined;
  /** A decimal string of percent, e.g. "50" or "33.3333". */
  share: string;
}

/** A media file the source names, and what the source says it should be. */
export interface TransferMedia {
  /** The path as the source gives it (relative to the message or the CSV file). */
  uri: string;
  /** Resolved on disk. */
  path: string;
  md5?: string | undefined;
  /** Set once checked: whether the file is there and matches the checksum. */
  checked?: "ok" | "missing" | "mismatch" | undefined;
}

export interface TransferTrack {
  where: string;
  title: string;
  version: string | null;
  isrc: string | null;
  /** Seconds. */
  duration: number | null;
  track_number: number | null;
  disc_number: number;
  artist_name: string | null;
  explicit: boolean;
  language: string | null;
  contributors: TransferContributor[];
  splits: TransferSplit[];
  /** The track's id in each store, by store code. */
  store_ids: Record<string, string>;
  audio?: TransferMedia | undefined;
  problems: TransferProblem[];
}

/** A deal as the source stated it (Backline's own deals are per store: kept on the transfer). */
export interface TransferDeal {
  territories: string[];
  excluded_territories: string[];
  commercial_models: string[];
  use_types: string[];
  start: string | null;
  end: string | null;
}

export interface TransferRelease {
  where: string;
  /** The file it came from (the CSV file, or the message's path relative to the folder). */
  source: string;
  /**
   * How the release is known across imports: "upc:<gtin>" when it has one, else the source's own
   * identifier ("grid:…", "proprietary:<namespace>:<id>", "csv:<release_ref>").
   */
  key: string;
  title: string;
  version: string | null;
  release_type: string;
  artist_name: string;
  label_name: string | null;
  catalog_number: string | null;
  upc: string | null;
  release_date: string | null;
  original_release_date: string | null;
  primary_genre: string | null;
  secondary_genre: string | null;
  copyright: string | null;
  copyright_year: number | null;
  phonographic_copyright: string | null;
  phonographic_year: number | null;
  explicit: boolean;
  language: string | null;
  /** 'WW' or a comma-separated list, as releases.licensed_territories_include. */
  licensed_territories_include: string | null;
  territories_exclude: string[];
  /** The release's product id in each store, by store code. */
  store_ids: Record<string, string>;
  deals: TransferDeal[];
  artwork?: TransferMedia | undefined;
  tracks: TransferTrack[];
  problems: TransferProblem[];
}

export interface TransferCatalogue {
  format: "csv" | "ern";
  releases: TransferRelease[];
  /** Problems of the source as a whole (an unreadable file, a missing column). */
  problems: TransferProblem[];
}

export const problem = (
  severity: TransferProblem["severity"],
  where: string,
  code: string,
  message: string,
): TransferProblem => ({ severity, where, code, message });

/** Whether the release, or one of its tracks, has an error (and so stays out of the import). */
export function releaseHasErrors(r: TransferRelease): boolean {
  return r.problems.some((p) => p.severity === "error") || r.tracks.some((t) => trackHasErrors(t));
}

export function trackHasErrors(t: TransferTrack): boolean {
  return t.problems.some((p) => p.severity === "error");
}

/** Genre names and codes of the platform (internal.genres), for reading a genre given either way. */
export interface GenreList {
  genres: { code: string; name: string }[];
}

/** The genre code for a code or display name (case and punctuation forgiven), or undefined. */
export function genreCode(list: GenreList, text: string): string | undefined {
  const norm = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, "");
  const n = norm(text);
  if (!n) return undefined;
  return list.genres.find((g) => g.code === text || norm(g.code) === n || norm(g.name) === n)?.code;
}
