import { createReadStream } from "node:fs";
import path from "node:path";
import { CONTRIBUTOR_ROLES, RELEASE_TYPES } from "../catalog/catalogue.ts";
import { gtinIsValid, normaliseIsrc } from "../catalog/identifiers.ts";
import { readRecords } from "../royalties/csv.ts";
import {
  type GenreList,
  genreCode,
  problem,
  type TransferCatalogue,
  type TransferProblem,
  type TransferRelease,
  type TransferTrack,
} from "./model.ts";

/**
 * The CSV template (docs/catalogue.md, "The CSV template"): one row per track, the release's
 * fields repeated on each of its rows, contributors and splits in numbered columns
 * (contributor_1_name, contributor_1_role, …; split_1_name, split_1_email, split_1_share, …).
 * Rows belong to the same release when they share `release_ref`, else `upc`, else the release
 * title and artist. Every problem names its row (the file's line number, the header being row 1).
 */

/** The template's columns, in the order `backline transfer sample` writes them. */
export const RELEASE_COLUMNS = [
  "release_ref",
  "upc",
  "catalog_number",
  "release_title",
  "release_version",
  "release_type",
  "release_artist",
  "label",
  "release_date",
  "original_release_date",
  "genre",
  "subgenre",
  "c_line",
  "c_year",
  "p_line",
  "p_year",
  "language",
  "territories",
  "excluded_territories",
  "release_store_ids",
  "cover_file",
  "cover_md5",
] as const;

export const TRACK_COLUMNS = [
  "disc_number",
  "track_number",
  "isrc",
  "track_title",
  "track_version",
  "track_artist",
  "duration",
  "explicit",
  "track_language",
  "track_store_ids",
  "audio_file",
  "audio_md5",
] as const;

/** Columns that must be in the header. */
export const REQUIRED_COLUMNS = ["release_title", "release_artist", "track_title", "isrc"] as const;

const NUMBERED = /^(contributor|split)_([1-9][0-9]?)_(name|role|email|share)$/;
const KNOWN = new Set<string>([...RELEASE_COLUMNS, ...TRACK_COLUMNS]);

const DATE = /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/;
const LANGUAGE = /^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/;
const SHARE = /^[0-9]{1,3}(\.[0-9]{1,4})?$/;
const TERRITORY = /^[A-Z]{2}$/;

/** Seconds from "245", "4:05" or "1:04:05". Undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  if (/^[0-9]+$/.test(text)) return Number(text);
  const m = /^(?:([0-9]+):)?([0-9]{1,2}):([0-9]{2})$/.exec(text);
  if (!m) return undefined;
  return Number(m[1] ?? 0) * 3600 + Number(m[2]) * 60 + Number(m[3]);
}

/** "spotify=123;apple_music=456" as {spotify: "123", apple_music: "456"}. */
export function parseStoreIds(text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const part of text.split(";")) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf("=");
    if (eq < 1 || eq === p.length - 1) return undefined;
    out[p.slice(0, eq).trim()] = p.slice(eq + 1).trim();
  }
  return out;
}

export const formatStoreIds = (ids: Record<string, string>): string =>
  Object.entries(ids)
    .map(([k, v]) => `${k}=${v}`)
    .join(";");

function parseBool(text: string): boolean | undefined {
  const t = text.toLowerCase();
  if (["", "no", "false", "0", "n", "clean", "notexplicit"].includes(t)) return false;
  if (["yes", "true", "1", "y", "explicit"].includes(t)) return true;
  return undefined;
}

/** The year in a P or C line ("(P) 2019 Night Owl" → 2019), when the year column is empty. */
const yearIn = (line: string): number | undefined => {
  const m = /\b(19[0-9]{2}|2[01][0-9]{2})\b/.exec(line);
  return m ? Number(m[1]) : undefined;
};

interface RowReader {
  row: number;
  get(column: string): string;
  problems: TransferProblem[];
}

export interface CsvReadOptions {
  genres: GenreList;
  /** Store codes the platform knows: ids for other stores are kept, with a warning. */
  storeCodes: ReadonlySet<string>;
}

/** Reads the CSV template at `file` into the catalogue model. */
export async function readCatalogueCsv(file: string, options: CsvReadOptions): Promise<TransferCatalogue> {
  const source = path.basename(file);
  const dir = path.dirname(file);
  const catalogue: TransferCatalogue = { format: "csv", releases: [], problems: [] };
  let header: string[] | undefined;
  let index = new Map<string, number>();
  const byKey = new Map<string, { release: TransferRelease; signature: string; firstRow: number }>();
  let numbered: { kind: string; n: number; field: string }[] = [];

  for await (const batch of readRecords(createReadStream(file), ",")) {
    for (const record of batch) {
      if (record.error) {
        catalogue.problems.push(problem("error", `row ${record.line}`, "malformed_csv", record.error));
        continue;
      }
      if (!header) {
        header = record.fields.map((f) => f.trim().toLowerCase());
        index = new Map(header.map((h, i) => [h, i]));
        for (const c of REQUIRED_COLUMNS) {
          if (!index.has(c))
            catalogue.problems.push(
              problem("error", "row 1", "missing_column", `the header has no ${c} column`),
            );
        }
        for (const h of header) {
          const m = NUMBERED.exec(h);
          if (m) numbered.push({ kind: m[1] as string, n: Number(m[2]), field: m[3] as string });
          else if (h && !KNOWN.has(h))
            catalogue.problems.push(
              problem(
                "warning",
                `row 1, column ${h}`,
                "unknown_column",
                `column ${h} is not part of the template: its values are not imported`,
              ),
            );
        }
        numbered = numbered.filter(
          (c) =>
            (c.kind === "contributor" && (c.field === "name" || c.field === "role")) ||
            (c.kind === "split" && c.field !== "role"),
        );
        if (catalogue.problems.some((p) => p.severity === "error")) return catalogue;
        continue;
      }
      const fields = record.fields;
      const row: RowReader = {
        row: record.line,
        get: (c) => (fields[index.get(c) ?? -1] ?? "").trim(),
        problems: [],
      };
      const { release, signature, group } = readReleaseFields(row, source, dir, options);
      const track = readTrack(row, dir, numbered, options);
      const known = byKey.get(group);
      if (known) {
        if (known.signature !== signature) {
          track.problems.push(
            problem(
              "error",
              `row ${row.row}`,
              "release_mismatch",
              `the release fields differ from row ${known.firstRow} of the same release (${release.key}): every row of a release repeats them`,
            ),
          );
        }
        known.release.tracks.push(track);
      } else {
        release.tracks.push(track);
        release.problems.push(...row.problems);
        byKey.set(group, { release, signature, firstRow: row.row });
        catalogue.releases.push(release);
      }
    }
  }
  if (!header) catalogue.problems.push(problem("error", "row 1", "empty_file", "the file has no header row"));
  for (const r of catalogue.releases) finishRelease(r);
  return catalogue;
}

function readReleaseFields(
  row: RowReader,
  source: string,
  dir: string,
  options: CsvReadOptions,
): { release: TransferRelease; signature: string; group: string } {
  const at = (c: string) => `row ${row.row}, column ${c}`;
  const err = (c: string, code: string, message: string) =>
    row.problems.push(problem("error", at(c), code, message));
  const warn = (c: string, code: string, message: string) =>
    row.problems.push(problem("warning", at(c), code, message));
  const text = (c: string) => row.get(c) || null;

  const title = row.get("release_title");
  if (!title) err("release_title", "required", "release_title is empty");
  const artist = row.get("release_artist");
  if (!artist) err("release_artist", "required", "release_artist is empty");

  let upc: string | null = row.get("upc").replace(/[\s-]/g, "") || null;
  if (upc && !gtinIsValid(upc)) {
    err(
      "upc",
      "invalid_upc",
      `upc ${upc} is not a valid UPC/EAN (12 to 14 digits with a correct check digit)`,
    );
    upc = null;
  }
  if (!upc)
    warn(
      "upc",
      "no_upc",
      "the release has no UPC: it gets a new one at submission, and stores will see it as a new product",
    );

  let releaseType = row.get("release_type").toLowerCase() || "album";
  if (!(RELEASE_TYPES as readonly string[]).includes(releaseType)) {
    err(
      "release_type",
      "invalid_release_type",
      `release_type ${releaseType} is not one of ${RELEASE_TYPES.join(", ")}`,
    );
    releaseType = "album";
  }
  const date = (c: string) => {
    const v = row.get(c);
    if (v && !DATE.test(v)) {
      err(c, "invalid_date", `${c} ${v} is not a date (YYYY-MM-DD)`);
      return null;
    }
    return v || null;
  };
  const releaseDate = date("release_date");
  const originalDate = date("original_release_date") ?? releaseDate;
  if (!originalDate)
    warn(
      "original_release_date",
      "no_original_release_date",
      "the release has neither original_release_date nor release_date: stores match a transfer on both",
    );
  const genre = (c: string) => {
    const v = row.get(c);
    if (!v) return null;
    const code = genreCode(options.genres, v);
    if (!code)
      warn(
        c,
        "unknown_genre",
        `genre "${v}" is not one of the platform's genres: kept as given, change it before submitting`,
      );
    return code ?? v;
  };
  const year = (c: string, line: string | null) => {
    const v = row.get(c);
    if (!v) return line ? (yearIn(line) ?? null) : null;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1900 || n > 2200) {
      err(c, "invalid_year", `${c} ${v} is not a year`);
      return null;
    }
    return n;
  };
  const language = row.get("language") || null;
  if (language && !LANGUAGE.test(language))
    err("language", "invalid_language", `language ${language} is not a BCP 47 tag`);
  const territoryList = (c: string) => {
    const v = row.get(c).toUpperCase();
    if (!v) return [];
    const list = v.split(/[\s,;|]+/).filter(Boolean);
    for (const t of list)
      if (t !== "WW" && !TERRITORY.test(t))
        err(c, "invalid_territory", `territory ${t} is not an ISO 3166-1 alpha-2 code`);
    return list;
  };
  const include = territoryList("territories");
  const exclude = territoryList("excluded_territories").filter((t) => t !== "WW");
  const storeIds = readStoreIds(row, "release_store_ids", options, err, warn);
  const cLine = text("c_line");
  const pLine = text("p_line");
  const ref = row.get("release_ref");
  const sourceKey = `csv:${ref || `${title.toLowerCase()}|${artist.toLowerCase()}`}`;
  const group = ref ? `csv:${ref}` : upc ? `upc:${upc}` : sourceKey;
  const cover = row.get("cover_file");
  const release: TransferRelease = {
    where: `row ${row.row}`,
    source,
    key: upc ? `upc:${upc}` : sourceKey,
    title,
    version: text("release_version"),
    release_type: releaseType,
    artist_name: artist,
    label_name: text("label"),
    catalog_number: text("catalog_number"),
    upc,
    release_date: releaseDate ?? originalDate,
    original_release_date: originalDate,
    primary_genre: genre("genre"),
    secondary_genre: genre("subgenre"),
    copyright: cLine,
    copyright_year: year("c_year", cLine),
    phonographic_copyright: pLine,
    phonographic_year: year("p_year", pLine),
    explicit: false,
    language,
    licensed_territories_include: include.length === 0 || include.includes("WW") ? "WW" : include.join(","),
    territories_exclude: exclude,
    store_ids: storeIds,
    deals: [],
    artwork: cover
      ? { uri: cover, path: path.resolve(dir, cover), md5: row.get("cover_md5").toLowerCase() || undefined }
      : undefined,
    tracks: [],
    problems: [],
  };
  // The release's own fields, as every row of it must repeat them.
  const signature = JSON.stringify(RELEASE_COLUMNS.map((c) => row.get(c)));
  return { release, signature, group };
}

function readStoreIds(
  row: RowReader,
  column: string,
  options: CsvReadOptions,
  err: (c: string, code: string, m: string) => void,
  warn: (c: string, code: string, m: string) => void,
): Record<string, string> {
  const v = row.get(column);
  if (!v) return {};
  const ids = parseStoreIds(v);
  if (!ids) {
    err(
      column,
      "invalid_store_ids",
      `${column} must read store=id;store=id (e.g. spotify=4uLU6hMCjMI75M1A2tKUQC)`,
    );
    return {};
  }
  for (const store of Object.keys(ids)) {
    if (!options.storeCodes.has(store))
      warn(
        column,
        "unknown_store",
        `store ${store} is not a store this platform delivers to: its id is kept, unused`,
      );
  }
  return ids;
}

function readTrack(
  row: RowReader,
  dir: string,
  numbered: { kind: string; n: number; field: string }[],
  options: CsvReadOptions,
): TransferTrack {
  const problems: TransferProblem[] = [];
  const at = (c: string) => `row ${row.row}, column ${c}`;
  const err = (c: string, code: string, message: string) =>
    problems.push(problem("error", at(c), code, message));
  const warn = (c: string, code: string, message: string) =>
    problems.push(problem("warning", at(c), code, message));

  const title = row.get("track_title");
  if (!title) err("track_title", "required", "track_title is empty");
  const rawIsrc = row.get("isrc");
  let isrc: string | null = null;
  if (!rawIsrc) err("isrc", "required", "isrc is empty: a transferred track keeps its ISRC");
  else {
    isrc = normaliseIsrc(rawIsrc) ?? null;
    if (!isrc) err("isrc", "invalid_isrc", `isrc ${rawIsrc} is not an ISRC (CC-XXX-YY-NNNNN)`);
  }
  const int = (c: string, min: number, max: number): number | null => {
    const v = row.get(c);
    if (!v) return null;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) {
      err(c, "invalid_number", `${c} ${v} is not a whole number from ${min} to ${max}`);
      return null;
    }
    return n;
  };
  const trackNumber = int("track_number", 1, 999);
  const disc = int("disc_number", 1, 99) ?? 1;
  const durationText = row.get("duration");
  let duration: number | null = null;
  if (durationText) {
    const d = parseDuration(durationText);
    if (d === undefined || d < 1 || d > 86400)
      err("duration", "invalid_duration", `duration ${durationText} is not seconds or m:ss`);
    else duration = d;
  }
  const explicitText = row.get("explicit");
  const explicit = parseBool(explicitText);
  if (explicit === undefined) err("explicit", "invalid_boolean", `explicit ${explicitText} is not yes or no`);
  const language = row.get("track_language") || null;
  if (language && !LANGUAGE.test(language))
    err("track_language", "invalid_language", `track_language ${language} is not a BCP 47 tag`);

  const contributors: TransferTrack["contributors"] = [];
  const splits: TransferTrack["splits"] = [];
  const numbers = (kind: string) =>
    [...new Set(numbered.filter((c) => c.kind === kind).map((c) => c.n))].sort((a, b) => a - b);
  for (const n of numbers("contributor")) {
    const name = row.get(`contributor_${n}_name`);
    const role = row
      .get(`contributor_${n}_role`)
      .toLowerCase()
      .replace(/[\s-]+/g, "_");
    if (!name && !role) continue;
    if (!name) err(`contributor_${n}_name`, "required", `contributor ${n} has a role but no name`);
    else if (!(CONTRIBUTOR_ROLES as readonly string[]).includes(role))
      err(
        `contributor_${n}_role`,
        "invalid_role",
        `contributor ${n} (${name}) has role "${role}", not one of ${CONTRIBUTOR_ROLES.join(", ")}`,
      );
    else contributors.push({ name, role });
  }
  for (const n of numbers("split")) {
    const name = row.get(`split_${n}_name`);
    const email = row.get(`split_${n}_email`).toLowerCase();
    const share = row.get(`split_${n}_share`).replace(/%$/, "");
    if (!name && !share && !email) continue;
    if (!name) err(`split_${n}_name`, "required", `split ${n} has no name`);
    else if (!SHARE.test(share) || Number(share) <= 0)
      err(
        `split_${n}_share`,
        "invalid_share",
        `split ${n} (${name}) share "${share}" is not a percentage above 0 (up to 4 decimals)`,
      );
    else splits.push({ name, ...(email ? { email } : {}), share });
  }
  if (splits.length > 0) {
    // Exact: in ten-thousandths of a percent.
    const total = splits.reduce((sum, s) => {
      const [whole, frac = ""] = s.share.split(".");
      return sum + Number(whole) * 10_000 + Number(frac.padEnd(4, "0"));
    }, 0);
    if (total !== 1_000_000)
      err("split_1_share", "splits_total", `the splits total ${total / 10_000}%, not 100%`);
  }
  const audio = row.get("audio_file");
  return {
    where: `row ${row.row}`,
    title,
    version: row.get("track_version") || null,
    isrc,
    duration,
    track_number: trackNumber,
    disc_number: disc,
    artist_name: row.get("track_artist") || null,
    explicit: explicit ?? false,
    language,
    contributors,
    splits,
    store_ids: readStoreIds(row, "track_store_ids", options, err, warn),
    audio: audio
      ? { uri: audio, path: path.resolve(dir, audio), md5: row.get("audio_md5").toLowerCase() || undefined }
      : undefined,
    problems,
  };
}

/** Release-wide checks once all its rows are read: positions, the explicit flag. */
function finishRelease(r: TransferRelease): void {
  const seenPositions = new Map<string, string>();
  const seenIsrc = new Map<string, string>();
  let next = 1;
  for (const t of r.tracks) {
    if (t.track_number === null) t.track_number = next;
    next = t.track_number + 1;
    const pos = `${t.disc_number}/${t.track_number}`;
    const other = seenPositions.get(pos);
    if (other)
      t.problems.push(
        problem(
          "error",
          t.where,
          "duplicate_position",
          `disc ${t.disc_number} track ${t.track_number} is also ${other}`,
        ),
      );
    else seenPositions.set(pos, t.where);
    if (t.isrc) {
      const dup = seenIsrc.get(t.isrc);
      if (dup)
        t.problems.push(
          problem("error", t.where, "duplicate_isrc", `ISRC ${t.isrc} is also on ${dup} of this release`),
        );
      else seenIsrc.set(t.isrc, t.where);
    }
  }
  r.explicit = r.tracks.some((t) => t.explicit);
}
