/**
 * A report format turns the records of one file into report lines in one shape (RawLine), with
 * the format's quirks undone: its column names, decimal commas, period notations, usage names.
 * Checking the values (codes, identifiers, amounts) is common to all formats (../normalise.ts).
 */

/** Usage types of a royalty line (docs/royalties.md). */
export const USAGE_TYPES = ["stream", "download", "ugc", "radio", "other"] as const;
export type UsageType = (typeof USAGE_TYPES)[number];

/** One report line as the format read it; strings, decimals with a point. Empty means "not given". */
export interface RawLine {
  /** YYYY-MM: when the store reported it. */
  reportingPeriod: string;
  /** YYYY-MM: the month of sale or use. */
  salePeriod: string;
  store: string;
  territory: string;
  upc: string;
  isrc: string;
  usageType: string;
  units: string;
  gross: string;
  fees: string;
  net: string;
  currency: string;
  /**
   * The store's own ids of what was sold (a DSR's DspResourceId and DspReleaseId): the line is
   * matched by them when its ISRC and UPC find nothing (docs/royalties.md, "Matching").
   */
  storeResourceId?: string;
  storeReleaseId?: string;
}

export interface FormatOptions {
  /** --period: YYYY-MM. */
  period?: string | undefined;
  /** --store: the store code for formats whose lines do not name it. */
  store?: string | undefined;
  /**
   * What the format reads past without refusing the file (a footer that disagrees with the body):
   * a warning on the import, at a line or (null) about the file as a whole.
   */
  warn?: ((line: number | null, message: string) => void) | undefined;
}

export interface FormatParser {
  /**
   * One record of the file: a report line, or null for what is not one (header, preamble, a
   * total). Throws LineError for a malformed line, FormatError when the file cannot be read at all.
   */
  record(fields: string[], line: number): RawLine | null;
  /** At the end of the file: throws FormatError when something the format needs never came. */
  finish(): void;
}

export interface RoyaltyFormat {
  name: string;
  title: string;
  delimiter: string;
  /** false: double quotes are plain text (DDEX DSR flat files do not quote). */
  quoting?: boolean;
  /** Whether the lines name their store; when not, --store (or defaultStore) does. */
  storeInFile: boolean;
  defaultStore?: string;
  /**
   * For a format whose file names its sender by DDEX party id (a DSR's HEAD SenderPartyId): that
   * id, read before the import, so that the store whose `ddex.recipient.dpid` it is can be chosen
   * without --store. undefined when the file gives none.
   */
  senderPartyId?: (file: string) => Promise<string | undefined>;
  /**
   * Whether its lines carry the store's own ids (RawLine.storeResourceId, storeReleaseId): the
   * import then loads the catalog by those ids before reading (never during: on PostgreSQL the
   * lines stream into COPY on the same connection).
   */
  storeIds?: boolean;
  create(options: FormatOptions): FormatParser;
}

/** A line the import cannot read (reported with its line number). */
export class LineError extends Error {}

/** A file the format cannot read at all (no header, a missing column, no period): refused at once. */
export class FormatError extends Error {
  readonly line: number;

  constructor(line: number, message: string) {
    super(message);
    this.line = line;
  }
}

/** Maps header names (case, spaces and a stray BOM forgiven) to their column; FormatError for a missing one. */
export function headerIndex(
  fields: string[],
  line: number,
  required: readonly string[],
  optional: readonly string[] = [],
): Map<string, number> {
  const norm = (s: string) =>
    s
      .replace(/^\uFEFF/, "")
      .trim()
      .toLowerCase();
  const at = new Map<string, number>();
  fields.forEach((f, i) => {
    if (!at.has(norm(f))) at.set(norm(f), i);
  });
  const out = new Map<string, number>();
  const missing: string[] = [];
  for (const name of required) {
    const i = at.get(name.toLowerCase());
    if (i === undefined) missing.push(name);
    else out.set(name, i);
  }
  if (missing.length > 0) {
    throw new FormatError(
      line,
      `the header lacks the column${missing.length > 1 ? "s" : ""} ${missing.join(", ")}`,
    );
  }
  for (const name of optional) {
    const i = at.get(name.toLowerCase());
    if (i !== undefined) out.set(name, i);
  }
  return out;
}

/** The value of column `name` in `fields`, trimmed ("" when the line is short). */
export function cell(fields: string[], index: Map<string, number>, name: string): string {
  const i = index.get(name);
  return i === undefined ? "" : (fields[i] ?? "").trim();
}

/** YYYY-MM from YYYY-MM, YYYYMM, YYYY/MM or MM/YYYY; the input unchanged when none fits (normalise says why). */
export function monthOf(value: string): string {
  let m = /^(\d{4})[-/]?(\d{2})$/.exec(value);
  if (m) return `${m[1]}-${m[2]}`;
  m = /^(\d{2})\/(\d{4})$/.exec(value);
  if (m) return `${m[2]}-${m[1]}`;
  return value;
}
