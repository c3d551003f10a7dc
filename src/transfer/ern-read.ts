import { XMLParser } from "fast-xml-parser";
import { gtinIsValid, normaliseIsrc } from "../catalog/identifiers.ts";
import { CONTRIBUTOR_ROLE, ERN_NAMESPACE, RELEASE_TYPE } from "../pipeline/ddex/ern.ts";
import {
  type GenreList,
  genreCode,
  problem,
  type TransferContributor,
  type TransferDeal,
  type TransferMedia,
  type TransferProblem,
  type TransferRelease,
  type TransferTrack,
} from "./model.ts";

/**
 * Reading an ERN NewReleaseMessage back into the catalogue model: the other half of
 * src/pipeline/ddex/ern.ts, which writes them. Both versions archives hold are read — ERN 4.3
 * (what Backline sends) and ERN 3.8.2 (details by territory, contributors with their names
 * inline) — each through the same mapping ern.ts uses (its ContributorRole and ReleaseType
 * tables, read backwards). docs/catalogue.md lists what is read and what is reported.
 *
 * Only the main release of a message is imported; its TrackReleases give the tracks' own product
 * ids. Everything the message says that Backline has no place for is a warning naming its XML
 * path; an element the schema does not allow where the reader looks, or a sound recording without
 * its ISRC, is an error and keeps the release out (never half-imported).
 */

export const ERN_382_NAMESPACE = "http://ddex.net/xml/ern/382";

interface Node {
  name: string;
  attrs: Record<string, string>;
  children: Node[];
  text: string;
  path: string;
}

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: "",
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  processEntities: true,
  htmlEntities: false,
});

type Ordered = Record<string, unknown> & { ":@"?: Record<string, string> };

const local = (name: string) => name.slice(name.indexOf(":") + 1);

function toNode(entry: Ordered, parentPath: string, counts: Map<string, number>): Node | undefined {
  const raw = Object.keys(entry).find((k) => k !== ":@");
  if (!raw || raw === "#text" || raw.startsWith("?") || raw === "#comment") return undefined;
  const name = local(raw);
  const n = (counts.get(name) ?? 0) + 1;
  counts.set(name, n);
  const path = `${parentPath}/${name}[${n}]`;
  const kids = (entry[raw] as Ordered[]) ?? [];
  const childCounts = new Map<string, number>();
  const children = kids.map((k) => toNode(k, path, childCounts)).filter((c): c is Node => c !== undefined);
  const text = kids
    .filter((k) => "#text" in k)
    .map((k) => String(k["#text"]))
    .join("")
    .trim();
  return { name, attrs: { ...(entry[":@"] ?? {}) }, children, text, path };
}

const all = (n: Node | undefined, name: string): Node[] => n?.children.filter((c) => c.name === name) ?? [];
const one = (n: Node | undefined, name: string): Node | undefined => n?.children.find((c) => c.name === name);
/** The text at a path of child names, or null. */
function text(n: Node | undefined, ...names: string[]): string | null {
  let at = n;
  for (const name of names) at = one(at, name);
  return at?.text ? at.text : null;
}
/** The default of several language or territory variants: IsDefault, else Worldwide, else the first. */
const pick = (nodes: Node[]): Node | undefined =>
  nodes.find((x) => x.attrs.IsDefault === "true") ??
  nodes.find(
    (x) => (x.attrs.ApplicableTerritoryCode ?? "Worldwide") === "Worldwide" && !x.attrs.LanguageAndScriptCode,
  ) ??
  nodes[0];

/** Children the schema allows in the records the reader looks into (names only, from DDEX's XSDs). */
const ALLOWED: Record<"382" | "43", Record<string, readonly string[]>> = {
  "382": {
    SoundRecording: [
      "SoundRecordingType",
      "IsArtistRelated",
      "SoundRecordingId",
      "IndirectSoundRecordingId",
      "ResourceReference",
      "ReferenceTitle",
      "InstrumentationDescription",
      "IsMedley",
      "IsPotpourri",
      "IsInstrumental",
      "IsBackground",
      "IsHiddenResource",
      "IsBonusResource",
      "HasPreOrderFulfillment",
      "IsComputerGenerated",
      "IsRemastered",
      "NoSilenceBefore",
      "NoSilenceAfter",
      "PerformerInformationRequired",
      "LanguageOfPerformance",
      "Duration",
      "RightsAgreementId",
      "SoundRecordingCollectionReferenceList",
      "ResourceMusicalWorkReferenceList",
      "ResourceContainedResourceReferenceList",
      "CreationDate",
      "MasteredDate",
      "RemasteredDate",
      "SoundRecordingDetailsByTerritory",
      "TerritoryOfCommissioning",
      "NumberOfFeaturedArtists",
      "NumberOfNonFeaturedArtists",
      "NumberOfContractedArtists",
      "NumberOfNonContractedArtists",
    ],
    Release: [
      "ReleaseId",
      "ReleaseReference",
      "ExternalResourceLink",
      "SalesReportingProxyReleaseId",
      "ReferenceTitle",
      "ReleaseResourceReferenceList",
      "ResourceOmissionReason",
      "ReleaseCollectionReferenceList",
      "ReleaseType",
      "ReleaseDetailsByTerritory",
      "LanguageOfPerformance",
      "LanguageOfDubbing",
      "SubTitleLanguage",
      "Duration",
      "RightsAgreementId",
      "PLine",
      "CLine",
      "ArtistProfilePage",
      "GlobalReleaseDate",
      "GlobalOriginalReleaseDate",
    ],
  },
  "43": {
    SoundRecording: [
      "ResourceReference",
      "Type",
      "SoundRecordingEdition",
      "RecordingFormat",
      "WorkId",
      "DisplayTitleText",
      "DisplayTitle",
      "AdditionalTitle",
      "VersionType",
      "DisplayArtistName",
      "DisplayArtist",
      "Contributor",
      "Character",
      "ResourceRightsController",
      "WorkRightsController",
      "CourtesyLine",
      "Duration",
      "CreationDate",
      "MasteredDate",
      "RemasteredDate",
      "FirstPublicationDate",
      "LocationAndDateOfSession",
      "ParentalWarningType",
      "RelatedRelease",
      "RelatedResource",
      "CompositeMusicalWorkType",
      "IsCover",
      "HasVocalPerformance",
      "HasForegroundVocalPerformance",
      "IsInstrumental",
      "ContainsHiddenContent",
      "IsRemastered",
      "IsHiResMusic",
      "DisableCrossfade",
      "DisableSearch",
      "DisplayCredits",
      "LanguageOfPerformance",
      "Raga",
      "Tala",
      "Deity",
      "AudioChapterReference",
    ],
    Release: [
      "ReleaseReference",
      "ReleaseType",
      "ReleaseId",
      "DisplayTitleText",
      "DisplayTitle",
      "AdditionalTitle",
      "VersionType",
      "DisplayArtistName",
      "DisplayArtist",
      "ReleaseLabelReference",
      "AdministratingRecordCompany",
      "PLine",
      "CLine",
      "CourtesyLine",
      "Duration",
      "Genre",
      "ReleaseDate",
      "OriginalReleaseDate",
      "ReleaseVisibilityReference",
      "ParentalWarningType",
      "AvRating",
      "RelatedRelease",
      "RelatedResource",
      "IsSingleArtistCompilation",
      "IsMultiArtistCompilation",
      "ResourceGroup",
      "ExternalResourceLink",
      "TargetURL",
      "Keywords",
      "Synopsis",
      "Raga",
      "Tala",
      "Deity",
      "HiResMusicDescription",
      "IsSoundtrack",
      "IsHiResMusic",
      "MarketingComment",
    ],
  },
};

/** DDEX ContributorRole → Backline role: ern.ts's table read backwards, and the roles it folds together. */
const ROLE_FROM_DDEX: Record<string, string> = {
  ...Object.fromEntries(Object.entries(CONTRIBUTOR_ROLE).map(([backline, ddex]) => [ddex, backline])),
  Producer: "producer",
  Soloist: "performer",
  AssociatedPerformer: "performer",
  Vocalist: "performer",
  Musician: "performer",
  Instrumentalist: "performer",
  Ensemble: "performer",
  Band: "performer",
  Choir: "performer",
  Composer: "composer",
  Writer: "songwriter",
  Author: "lyricist",
  Librettist: "lyricist",
  Mixer: "mixing_engineer",
  Remixer: "remixer",
  FeaturedArtist: "featured_artist",
};

/** DDEX ReleaseType → Backline release_type: ern.ts's table read backwards, first match wins. */
const TYPE_FROM_DDEX: Record<string, string> = {
  ...Object.fromEntries(
    Object.entries(RELEASE_TYPE)
      .reverse()
      .map(([backline, ddex]) => [ddex, backline]),
  ),
  SingleResourceRelease: "single",
  ClassicalAlbum: "album",
  DjMix: "album",
  AudioBookRelease: "album",
  Bundle: "compilation",
};

export interface ErnReadOptions {
  genres: GenreList;
  /** The message's path relative to the transfer folder (for `where` and `source`). */
  source: string;
  /** The message's folder: media URIs are relative to it. */
  dir: string;
}

export interface ErnReadResult {
  version: "43" | "382" | undefined;
  release: TransferRelease | undefined;
  /** Problems of the message as a whole (not XML, not a NewReleaseMessage). */
  problems: TransferProblem[];
}

/** `PT3M25S` (or `PT0H3M25.5S`) in whole seconds, or undefined. */
export function parseIsoDuration(value: string): number | undefined {
  const m = /^P(?:([0-9]+)D)?T?(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+(?:\.[0-9]+)?)S)?$/.exec(value);
  if (!m || value === "P" || value === "PT") return undefined;
  return Math.round(
    Number(m[1] ?? 0) * 86400 + Number(m[2] ?? 0) * 3600 + Number(m[3] ?? 0) * 60 + Number(m[4] ?? 0),
  );
}

export function readErnMessage(xml: string, options: ErnReadOptions): ErnReadResult {
  const { source } = options;
  let parsed: Ordered[];
  try {
    parsed = parser.parse(xml) as Ordered[];
  } catch (error) {
    return {
      version: undefined,
      release: undefined,
      problems: [problem("error", source, "not_xml", `not well-formed XML: ${(error as Error).message}`)],
    };
  }
  const counts = new Map<string, number>();
  const root = parsed.map((e) => toNode(e, "", counts)).find((n) => n !== undefined);
  if (!root)
    return {
      version: undefined,
      release: undefined,
      problems: [problem("error", source, "not_xml", "no root element")],
    };
  const ns = Object.entries(root.attrs).find(([k]) => k === "xmlns" || k.startsWith("xmlns:"))?.[1];
  const namespaces = Object.entries(root.attrs)
    .filter(([k]) => k === "xmlns" || k.startsWith("xmlns:"))
    .map(([, v]) => v);
  const version = namespaces.includes(ERN_NAMESPACE)
    ? "43"
    : namespaces.includes(ERN_382_NAMESPACE)
      ? "382"
      : undefined;
  if (!version) {
    return {
      version,
      release: undefined,
      problems: [
        problem(
          "error",
          `${source} ${root.path}`,
          "unsupported_version",
          `not an ERN 4.3 or 3.8.2 message (namespace ${ns ?? "none"})`,
        ),
      ],
    };
  }
  if (root.name !== "NewReleaseMessage") {
    return {
      version,
      release: undefined,
      problems: [
        problem(
          "warning",
          `${source} ${root.path}`,
          "not_a_new_release",
          `a ${root.name} brings no release to import: skipped`,
        ),
      ],
    };
  }
  const release = version === "43" ? read43(root, options) : read382(root, options);
  return { version, release, problems: [] };
}

class Reader {
  readonly problems: TransferProblem[] = [];
  readonly source: string;

  constructor(source: string) {
    this.source = source;
  }

  error(at: Node | string, code: string, message: string): void {
    this.problems.push(problem("error", this.where(at), code, message));
  }

  warn(at: Node | string, code: string, message: string): void {
    this.problems.push(problem("warning", this.where(at), code, message));
  }

  where(at: Node | string): string {
    return `${this.source} ${typeof at === "string" ? at : at.path}`;
  }

  /** Every child the schema does not allow here is an error. */
  allowed(n: Node, list: readonly string[]): void {
    for (const c of n.children) {
      if (!list.includes(c.name))
        this.error(c, "schema_violation", `element ${c.name} is not allowed in ${n.name} (DDEX schema)`);
    }
  }
}

interface Track extends TransferTrack {
  ref: string;
  pLine: string | null;
  pYear: number | null;
}

function isrcOf(
  r: Reader,
  at: Node | undefined,
  track: { problems: TransferProblem[] },
  where: Node,
): string | null {
  const raw = at?.text ?? null;
  if (!raw) {
    track.problems.push(
      problem(
        "error",
        r.where(where),
        "no_isrc",
        "the sound recording has no ISRC: a transferred track keeps its ISRC",
      ),
    );
    return null;
  }
  const isrc = normaliseIsrc(raw);
  if (!isrc)
    track.problems.push(problem("error", r.where(at as Node), "invalid_isrc", `ISRC ${raw} is malformed`));
  return isrc ?? null;
}

function roleOf(
  r: Reader,
  at: Node,
  role: string,
  name: string,
  contributors: TransferContributor[],
  mainArtist: string | null,
): void {
  const mapped = ROLE_FROM_DDEX[role];
  if (mapped) {
    if (!contributors.some((c) => c.name === name && c.role === mapped))
      contributors.push({ name, role: mapped });
  } else if ((role === "Artist" || role === "MainArtist") && name === mainArtist) {
    // The display artist again as a contributor: already the track's artist.
  } else {
    r.warn(
      at,
      "unrepresented_role",
      `contributor ${name} as ${role}: Backline has no such role, not imported`,
    );
  }
}

function fileOf(
  r: Reader,
  file: Node | undefined,
  dir: string,
  hash: { value: string | null; algorithm: string | null },
): TransferMedia | undefined {
  if (!file) return undefined;
  // ERN 3's FilePath is a folder, often written with its trailing slash ("resources/").
  const folder = text(file, "FilePath")?.replace(/\/+$/, "");
  const uri = (text(file, "URI") ?? [folder, text(file, "FileName")].filter(Boolean).join("/")).trim();
  if (!uri) return undefined;
  let md5: string | undefined;
  if (hash.value) {
    if ((hash.algorithm ?? "MD5").toUpperCase() === "MD5") md5 = hash.value.toLowerCase();
    else r.warn(file, "unsupported_checksum", `checksum algorithm ${hash.algorithm}: only MD5 is checked`);
  }
  const clean = uri.replace(/^file:\/\//, "");
  return { uri: clean, path: `${dir}/${clean}`, md5 };
}

/** The deals the message gives the main release (and its track releases), with its territories. */
function readDeals(r: Reader, root: Node, releaseRefs: Set<string>, version: "43" | "382"): TransferDeal[] {
  const deals: TransferDeal[] = [];
  for (const rd of all(one(root, "DealList"), "ReleaseDeal")) {
    const refs = all(rd, "DealReleaseReference").map((n) => n.text);
    if (!refs.some((x) => releaseRefs.has(x))) continue;
    for (const deal of all(rd, "Deal")) {
      const terms = one(deal, "DealTerms");
      if (!terms) continue;
      const period = one(terms, "ValidityPeriod");
      const dateOf = (...names: string[]) => {
        for (const n of names) {
          const v = text(period, n);
          if (v) return v.slice(0, 10);
        }
        return null;
      };
      const useParent = version === "382" ? one(terms, "Usage") : terms;
      deals.push({
        territories: all(terms, "TerritoryCode").map((t) => (t.text === "Worldwide" ? "WW" : t.text)),
        excluded_territories: all(terms, "ExcludedTerritoryCode").map((t) => t.text),
        commercial_models: all(terms, "CommercialModelType").map((t) =>
          t.text === "UserDefined" && t.attrs.UserDefinedValue
            ? `UserDefined:${t.attrs.UserDefinedValue}`
            : t.text,
        ),
        use_types: all(useParent, "UseType").map((t) => t.text),
        start: dateOf("StartDate", "StartDateTime"),
        // ERN 3's TakeDown: the deal ends (at its start, or now).
        end:
          dateOf("EndDate", "EndDateTime") ??
          (text(terms, "TakeDown") === "true"
            ? (dateOf("StartDate", "StartDateTime") ?? new Date().toISOString().slice(0, 10))
            : null),
      });
      if (one(terms, "PriceInformation")?.children.length)
        r.warn(
          one(terms, "PriceInformation") as Node,
          "unrepresented_price",
          "the deal's price is not imported: Backline's prices are set per store",
        );
    }
  }
  return deals;
}

/** Territories of the release from its deals: the world less exclusions, or the listed countries. */
function territoriesOf(deals: TransferDeal[]): { include: string | null; exclude: string[] } {
  if (deals.length === 0) return { include: null, exclude: [] };
  const listed = new Set(deals.flatMap((d) => d.territories));
  const excluded = new Set(deals.flatMap((d) => d.excluded_territories));
  // The world, or only exclusions (which ERN reads as the world less them).
  if (listed.has("WW") || listed.size === 0) return { include: "WW", exclude: [...excluded].sort() };
  const codes = [...listed].filter((t) => /^[A-Z]{2}$/.test(t) && !excluded.has(t)).sort();
  return { include: codes.length ? codes.join(",") : null, exclude: [] };
}

function lineOf(n: Node | undefined, kind: "P" | "C"): { text: string | null; year: number | null } {
  if (!n) return { text: null, year: null };
  const t = text(n, `${kind}LineText`);
  const y = Number(text(n, "Year"));
  return { text: t, year: Number.isInteger(y) && y >= 1900 && y <= 2200 ? y : null };
}

function genreOf(
  r: Reader,
  genre: Node | undefined,
  options: ErnReadOptions,
): { primary: string | null; secondary: string | null } {
  const textOf = text(genre, "GenreText");
  const sub = text(genre, "SubGenre");
  const map = (value: string | null, at: Node | undefined) => {
    if (!value) return null;
    const code = genreCode(options.genres, value);
    if (!code)
      r.warn(
        at ?? "",
        "unknown_genre",
        `genre "${value}" is not one of the platform's genres: kept as given, change it before submitting`,
      );
    return code ?? value;
  };
  return { primary: map(textOf, one(genre, "GenreText")), secondary: map(sub, one(genre, "SubGenre")) };
}

function mapReleaseType(r: Reader, at: Node | undefined): string {
  const t = at?.text;
  if (!t) return "album";
  const mapped = TYPE_FROM_DDEX[t];
  if (!mapped) {
    r.warn(at as Node, "unrepresented_release_type", `release type ${t} is imported as an album`);
    return "album";
  }
  if (!RELEASE_TYPE[mapped] || RELEASE_TYPE[mapped] !== t)
    r.warn(at as Node, "release_type_folded", `release type ${t} is imported as ${mapped}`);
  return mapped;
}

/** Resources in release order: [disc, position, resource reference]. */
function trackOrder(
  group: Node | undefined,
  disc = 1,
  out: [number, number, string][] = [],
): [number, number, string][] {
  if (!group) return out;
  for (const c of group.children) {
    if (c.name === "ResourceGroup") {
      const seq = Number(text(c, "SequenceNumber"));
      trackOrder(c, Number.isInteger(seq) && seq > 0 ? seq : disc, out);
    } else if (c.name === "ResourceGroupContentItem") {
      const ref = text(c, "ReleaseResourceReference");
      const seq = Number(text(c, "SequenceNumber"));
      if (ref) out.push([disc, Number.isInteger(seq) && seq > 0 ? seq : out.length + 1, ref]);
    }
  }
  return out;
}

function releaseIdOf(
  r: Reader,
  id: Node | undefined,
  sender: string | null,
): { upc: string | null; key: string | null; catalog: string | null; storeIds: Record<string, string> } {
  const storeIds: Record<string, string> = {};
  let upc: string | null = null;
  const icpn = one(id, "ICPN");
  let badIcpn: string | null = null;
  if (icpn?.text) {
    if (gtinIsValid(icpn.text)) upc = icpn.text;
    else {
      badIcpn = icpn.text;
      r.warn(
        icpn,
        "invalid_upc",
        `ICPN ${icpn.text} is not a valid UPC/EAN (check digit): it cannot be kept as the release's UPC, and identifies the release between imports only`,
      );
    }
  }
  const grid = text(id, "GRid");
  for (const p of all(id, "ProprietaryId")) {
    const ns = (p.attrs.Namespace ?? sender ?? "unknown").replace(/^DPID:/, "");
    storeIds[ns] = p.text;
  }
  const catalog = text(id, "CatalogNumber");
  const firstProprietary = Object.entries(storeIds)[0];
  const key = upc
    ? `upc:${upc}`
    : badIcpn
      ? `icpn:${badIcpn}`
      : grid
        ? `grid:${grid}`
        : firstProprietary
          ? `proprietary:${firstProprietary[0]}:${firstProprietary[1]}`
          : null;
  return { upc, key, catalog, storeIds };
}

function newRelease(options: ErnReadOptions, at: Node): TransferRelease {
  return {
    where: `${options.source} ${at.path}`,
    source: options.source,
    key: "",
    title: "",
    version: null,
    release_type: "album",
    artist_name: "",
    label_name: null,
    catalog_number: null,
    upc: null,
    release_date: null,
    original_release_date: null,
    primary_genre: null,
    secondary_genre: null,
    copyright: null,
    copyright_year: null,
    phonographic_copyright: null,
    phonographic_year: null,
    explicit: false,
    language: null,
    licensed_territories_include: null,
    territories_exclude: [],
    store_ids: {},
    deals: [],
    tracks: [],
    problems: [],
  };
}

function placeTracks(
  r: Reader,
  release: TransferRelease,
  releaseNode: Node,
  order: [number, number, string][],
  tracks: Map<string, Track>,
  images: Set<string>,
): void {
  const used = new Set<string>();
  for (const [disc, position, ref] of order) {
    const t = tracks.get(ref);
    if (!t) {
      if (!images.has(ref))
        r.warn(
          releaseNode,
          "unrepresented_resource",
          `resource ${ref} of the release is not a sound recording: not imported`,
        );
      continue;
    }
    if (used.has(ref)) continue;
    used.add(ref);
    release.tracks.push({ ...t, disc_number: Math.min(disc, 99), track_number: Math.min(position, 999) });
  }
  for (const [ref, t] of tracks) {
    if (!used.has(ref))
      r.warn(
        t.where.slice(r.source.length + 1),
        "unrepresented_resource",
        `sound recording ${ref} (${t.title}) is not a track of the release (a supplemental or referenced resource): not imported`,
      );
  }
  if (release.phonographic_copyright === null) {
    const first = (release.tracks as Track[]).find((t) => t.pLine);
    if (first) {
      release.phonographic_copyright = first.pLine;
      release.phonographic_year = first.pYear;
    }
  }
  for (const t of release.tracks as Track[]) {
    if (t.pLine && t.pLine !== release.phonographic_copyright)
      t.problems.push(
        problem(
          "warning",
          t.where,
          "unrepresented_p_line",
          `the track's own P line "${t.pLine}" differs from the release's: Backline keeps one P line per release`,
        ),
      );
  }
  release.explicit = release.explicit || release.tracks.some((t) => t.explicit);
  if (release.tracks.length === 0)
    r.error(releaseNode, "no_tracks", "the release has no sound recording to import");
}

function finish(
  r: Reader,
  release: TransferRelease,
  releaseNode: Node,
  root: Node,
  releaseRefs: Set<string>,
  version: "43" | "382",
): TransferRelease {
  release.deals = readDeals(r, root, releaseRefs, version);
  const terr = territoriesOf(release.deals);
  release.licensed_territories_include = terr.include ?? "WW";
  release.territories_exclude = terr.exclude;
  if (release.deals.length === 0)
    r.warn(releaseNode, "no_deals", "the message gives the release no deal: it is imported for the world");
  const starts = release.deals
    .map((d) => d.start)
    .filter((d): d is string => d !== null)
    .sort();
  release.release_date ??= starts[0] ?? release.original_release_date;
  release.original_release_date ??= release.release_date;
  if (!release.key) {
    release.key = `source:${release.source}`;
    r.warn(
      releaseNode,
      "no_release_id",
      "the release has no ICPN, GRid or proprietary id: it is known by its file name",
    );
  }
  if (!release.upc)
    r.warn(
      releaseNode,
      "no_upc",
      "the release has no ICPN (UPC/EAN): it gets a new one at submission, and stores will see it as a new product",
    );
  release.problems.push(...r.problems);
  release.tracks = (release.tracks as Track[]).map(({ ref: _ref, pLine: _pLine, pYear: _pYear, ...t }) => t);
  return release;
}

// ---------------------------------------------------------------------------------------------
// ERN 4.3

function read43(root: Node, options: ErnReadOptions): TransferRelease | undefined {
  const r = new Reader(options.source);
  const sender = text(root, "MessageHeader", "MessageSender", "PartyId");
  const parties = new Map<string, string>();
  for (const p of all(one(root, "PartyList"), "Party")) {
    const ref = text(p, "PartyReference");
    const name = text(p, "PartyName", "FullName");
    if (ref) parties.set(ref, name ?? ref);
  }
  const party = (at: Node | undefined) => (at?.text ? (parties.get(at.text) ?? at.text) : null);

  const resources = one(root, "ResourceList");
  const tracks = new Map<string, Track>();
  for (const sr of all(resources, "SoundRecording")) {
    r.allowed(sr, ALLOWED["43"].SoundRecording as readonly string[]);
    const ref = text(sr, "ResourceReference") ?? sr.path;
    const edition = pick(all(sr, "SoundRecordingEdition"));
    const track: Track = emptyTrack(r, sr, ref);
    track.isrc = isrcOf(r, one(one(edition, "ResourceId"), "ISRC"), track, sr);
    for (const p of all(one(edition, "ResourceId"), "ProprietaryId"))
      track.store_ids[(p.attrs.Namespace ?? sender ?? "unknown").replace(/^DPID:/, "")] = p.text;
    const titles = all(sr, "DisplayTitle");
    const title = pick(titles);
    track.title = text(title, "TitleText") ?? text(sr, "DisplayTitleText") ?? "";
    const sub = all(title, "SubTitle").find((s) => (s.attrs.SubTitleType ?? "Version") === "Version");
    track.version = sub?.text || null;
    if (!track.title)
      track.problems.push(problem("error", r.where(sr), "no_title", "the sound recording has no title"));
    untranslated(r, titles, "title");
    const names = all(sr, "DisplayArtistName");
    track.artist_name = pick(names)?.text ?? null;
    untranslated(r, names, "display artist name");
    for (const da of all(sr, "DisplayArtist")) {
      const name = party(one(da, "ArtistPartyReference"));
      const role = text(da, "DisplayArtistRole") ?? "MainArtist";
      if (!name) continue;
      if (role === "FeaturedArtist")
        roleOf(r, da, "FeaturedArtist", name, track.contributors, track.artist_name);
      else if (role !== "MainArtist" && role !== "Artist")
        roleOf(r, da, role, name, track.contributors, track.artist_name);
      else if (!track.artist_name) track.artist_name = name;
    }
    for (const c of all(sr, "Contributor")) {
      const name = party(one(c, "ContributorPartyReference"));
      if (!name) continue;
      for (const role of all(c, "Role")) {
        const value =
          role.text === "UserDefined" ? (role.attrs.UserDefinedValue ?? "UserDefined") : role.text;
        roleOf(r, c, value, name, track.contributors, track.artist_name);
      }
    }
    const dur = text(sr, "Duration");
    track.duration = dur ? (parseIsoDuration(dur) ?? null) : null;
    if (dur && track.duration === null)
      r.warn(one(sr, "Duration") as Node, "invalid_duration", `duration ${dur} is not read`);
    if (track.duration === 0) track.duration = null;
    track.explicit = text(sr, "ParentalWarningType") === "Explicit";
    track.language = text(sr, "LanguageOfPerformance");
    ({ text: track.pLine, year: track.pYear } = lineOf(one(edition, "PLine"), "P"));
    const details = one(edition, "TechnicalDetails");
    const deliveryFile = one(details, "DeliveryFile");
    const file = one(deliveryFile, "File");
    track.audio = fileOf(r, file, options.dir, {
      value: text(file, "HashSum", "HashSumValue"),
      algorithm: text(file, "HashSum", "Algorithm"),
    });
    if (all(sr, "RelatedResource").length > 0)
      r.warn(
        sr,
        "unrepresented_related_resource",
        "the recording's related resources (e.g. a mix's sources) are not imported",
      );
    tracks.set(ref, track);
  }
  const images = new Set<string>();
  let artwork: TransferMedia | undefined;
  for (const img of all(resources, "Image")) {
    const ref = text(img, "ResourceReference");
    if (ref) images.add(ref);
    if (text(img, "Type") !== "FrontCoverImage") continue;
    const file = one(one(img, "TechnicalDetails"), "File");
    artwork ??= fileOf(r, file, options.dir, {
      value: text(file, "HashSum", "HashSumValue"),
      algorithm: text(file, "HashSum", "Algorithm"),
    });
  }
  for (const other of resources?.children ?? []) {
    if (other.name !== "SoundRecording" && other.name !== "Image")
      r.warn(
        other,
        "unrepresented_resource",
        `a ${other.name} resource is not imported: Backline's releases are audio`,
      );
  }

  const releaseList = one(root, "ReleaseList");
  const main = one(releaseList, "Release");
  if (!main) {
    r.error(root, "no_release", "the message has no Release");
    const rel = newRelease(options, root);
    rel.problems.push(...r.problems);
    return rel;
  }
  r.allowed(main, ALLOWED["43"].Release as readonly string[]);
  const release = newRelease(options, main);
  release.artwork = artwork;
  const ids = releaseIdOf(r, one(main, "ReleaseId"), sender);
  release.upc = ids.upc;
  release.key = ids.key ?? "";
  release.catalog_number = ids.catalog;
  release.store_ids = ids.storeIds;
  release.release_type = mapReleaseType(r, one(main, "ReleaseType"));
  const titles = all(main, "DisplayTitle");
  const title = pick(titles);
  release.title = text(title, "TitleText") ?? text(main, "DisplayTitleText") ?? "";
  release.version =
    all(title, "SubTitle").find((s) => (s.attrs.SubTitleType ?? "Version") === "Version")?.text || null;
  untranslated(r, titles, "title");
  if (!release.title) r.error(main, "no_title", "the release has no title");
  const names = all(main, "DisplayArtistName");
  untranslated(r, names, "display artist name");
  release.artist_name =
    pick(names)?.text ?? party(one(pick(all(main, "DisplayArtist")), "ArtistPartyReference")) ?? "";
  if (!release.artist_name) r.error(main, "no_artist", "the release has no display artist");
  release.label_name = party(pick(all(main, "ReleaseLabelReference")));
  const p = lineOf(one(main, "PLine"), "P");
  const c = lineOf(one(main, "CLine"), "C");
  release.phonographic_copyright = p.text;
  release.phonographic_year = p.year;
  release.copyright = c.text;
  release.copyright_year = c.year;
  const genre = genreOf(r, pick(all(main, "Genre")), options);
  release.primary_genre = genre.primary;
  release.secondary_genre = genre.secondary;
  release.release_date = datePart(text(main, "ReleaseDate"));
  release.original_release_date = datePart(text(main, "OriginalReleaseDate"));
  release.explicit = text(main, "ParentalWarningType") === "Explicit";
  release.language = root.attrs.LanguageAndScriptCode?.split("-")[0]?.toLowerCase() ?? null;
  if (all(main, "RelatedRelease").length)
    r.warn(
      main,
      "unrepresented_related_release",
      "the release's related releases (e.g. its physical edition) are not imported",
    );

  placeTracks(r, release, main, trackOrder(one(main, "ResourceGroup")), tracks, images);
  const releaseRefs = new Set([text(main, "ReleaseReference") ?? "R0"]);
  for (const tr of all(releaseList, "TrackRelease")) {
    const rr = text(tr, "ReleaseReference");
    if (rr) releaseRefs.add(rr);
    const res = text(tr, "ReleaseResourceReference");
    const track = release.tracks.find((t) => (t as Track).ref === res);
    if (!track) continue;
    for (const pid of all(one(tr, "ReleaseId"), "ProprietaryId"))
      track.store_ids[(pid.attrs.Namespace ?? sender ?? "unknown").replace(/^DPID:/, "")] = pid.text;
  }
  for (const extra of all(releaseList, "Release").slice(1))
    r.warn(
      extra,
      "unrepresented_release",
      "a second Release in the message is not imported: one release per message",
    );
  return finish(r, release, main, root, releaseRefs, "43");
}

const datePart = (d: string | null): string | null =>
  d && /^[0-9]{4}-[0-9]{2}-[0-9]{2}/.test(d) ? d.slice(0, 10) : null;

function emptyTrack(r: Reader, at: Node, ref: string): Track {
  return {
    ref,
    pLine: null,
    pYear: null,
    where: r.where(at),
    title: "",
    version: null,
    isrc: null,
    duration: null,
    track_number: null,
    disc_number: 1,
    artist_name: null,
    explicit: false,
    language: null,
    contributors: [],
    splits: [],
    store_ids: {},
    problems: [],
  };
}

/** Titles and names in other languages or scripts: Backline keeps one. */
function untranslated(r: Reader, nodes: Node[], what: string): void {
  const chosen = pick(nodes);
  for (const n of nodes) {
    if (n === chosen) continue;
    const value = n.children.length ? (text(n, "TitleText") ?? "") : n.text;
    if (value && value !== (chosen?.children.length ? text(chosen, "TitleText") : chosen?.text))
      r.warn(
        n,
        "unrepresented_translation",
        `the ${what} "${value}"${n.attrs.LanguageAndScriptCode ? ` (${n.attrs.LanguageAndScriptCode})` : ""} is not imported: Backline keeps one ${what}`,
      );
  }
}

// ---------------------------------------------------------------------------------------------
// ERN 3.8.2

/** The details that apply worldwide (or the first given), and a warning for each other territory's. */
function byTerritory(r: Reader, nodes: Node[]): Node | undefined {
  const chosen = nodes.find((n) => all(n, "TerritoryCode").some((t) => t.text === "Worldwide")) ?? nodes[0];
  for (const n of nodes) {
    if (n !== chosen)
      r.warn(
        n,
        "unrepresented_territory_details",
        `details for ${
          all(n, "TerritoryCode")
            .map((t) => t.text)
            .join(", ") || "other territories"
        } are not imported: Backline keeps one set`,
      );
  }
  return chosen;
}

function title382(
  n: Node | undefined,
  fallback: Node | undefined,
): { title: string; version: string | null } {
  const titles = all(n, "Title");
  const display = titles.find((t) => t.attrs.TitleType === "DisplayTitle") ?? titles[0];
  const title = text(display, "TitleText") ?? text(fallback, "TitleText") ?? "";
  const sub = text(display, "SubTitle") ?? text(fallback, "SubTitle");
  return { title, version: sub };
}

function read382(root: Node, options: ErnReadOptions): TransferRelease | undefined {
  const r = new Reader(options.source);
  const sender = text(root, "MessageHeader", "MessageSender", "PartyId");
  const resources = one(root, "ResourceList");
  const tracks = new Map<string, Track>();
  for (const sr of all(resources, "SoundRecording")) {
    r.allowed(sr, ALLOWED["382"].SoundRecording as readonly string[]);
    const ref = text(sr, "ResourceReference") ?? sr.path;
    const track = emptyTrack(r, sr, ref);
    const id = one(sr, "SoundRecordingId");
    if (!id)
      track.problems.push(
        problem("error", r.where(sr), "no_isrc", "the sound recording has no SoundRecordingId (its ISRC)"),
      );
    else track.isrc = isrcOf(r, one(id, "ISRC"), track, id);
    for (const p of all(id, "ProprietaryId"))
      track.store_ids[(p.attrs.Namespace ?? sender ?? "unknown").replace(/^DPID:/, "")] = p.text;
    const details = byTerritory(r, all(sr, "SoundRecordingDetailsByTerritory"));
    const t = title382(details, one(sr, "ReferenceTitle"));
    track.title = t.title;
    track.version = t.version;
    if (!track.title)
      track.problems.push(problem("error", r.where(sr), "no_title", "the sound recording has no title"));
    track.artist_name = text(details, "DisplayArtistName");
    const artists = all(details, "DisplayArtist");
    for (const da of artists) {
      const name = text(da, "PartyName", "FullName");
      if (!name) continue;
      const roles = all(da, "ArtistRole").map((x) => x.text);
      if (roles.includes("FeaturedArtist"))
        roleOf(r, da, "FeaturedArtist", name, track.contributors, track.artist_name);
      else if (!track.artist_name) track.artist_name = name;
    }
    const mains = artists
      .filter((da) => !all(da, "ArtistRole").some((x) => x.text === "FeaturedArtist"))
      .map((da) => text(da, "PartyName", "FullName"))
      .filter((n): n is string => !!n);
    if (!text(details, "DisplayArtistName") && mains.length > 1) track.artist_name = mains.join(" & ");
    for (const c of [
      ...all(details, "ResourceContributor"),
      ...all(details, "IndirectResourceContributor"),
    ]) {
      const name = text(c, "PartyName", "FullName");
      if (!name) continue;
      for (const role of [
        ...all(c, "ResourceContributorRole"),
        ...all(c, "IndirectResourceContributorRole"),
      ]) {
        const value =
          role.text === "UserDefined" ? (role.attrs.UserDefinedValue ?? "UserDefined") : role.text;
        roleOf(r, c, value, name, track.contributors, track.artist_name);
      }
    }
    const dur = text(sr, "Duration");
    track.duration = dur ? (parseIsoDuration(dur) ?? null) : null;
    if (track.duration === 0) track.duration = null;
    track.explicit = text(details, "ParentalWarningType") === "Explicit";
    track.language = text(sr, "LanguageOfPerformance");
    ({ text: track.pLine, year: track.pYear } = lineOf(one(details, "PLine"), "P"));
    const tech = one(details, "TechnicalSoundRecordingDetails");
    const file = one(tech, "File");
    track.audio = fileOf(r, file, options.dir, {
      value: text(file, "HashSum", "HashSum"),
      algorithm: text(file, "HashSum", "HashSumAlgorithmType"),
    });
    tracks.set(ref, track);
  }
  const images = new Set<string>();
  let artwork: TransferMedia | undefined;
  for (const img of all(resources, "Image")) {
    const ref = text(img, "ResourceReference");
    if (ref) images.add(ref);
    if (text(img, "ImageType") !== "FrontCoverImage") continue;
    const details = one(img, "ImageDetailsByTerritory");
    const file = one(one(details, "TechnicalImageDetails"), "File");
    artwork ??= fileOf(r, file, options.dir, {
      value: text(file, "HashSum", "HashSum"),
      algorithm: text(file, "HashSum", "HashSumAlgorithmType"),
    });
  }
  for (const other of resources?.children ?? []) {
    if (other.name !== "SoundRecording" && other.name !== "Image")
      r.warn(
        other,
        "unrepresented_resource",
        `a ${other.name} resource is not imported: Backline's releases are audio`,
      );
  }

  const releaseList = one(root, "ReleaseList");
  const releases = all(releaseList, "Release");
  const main =
    releases.find((x) => x.attrs.IsMainRelease === "true") ??
    releases.find((x) => text(x, "ReleaseType") !== "TrackRelease") ??
    releases[0];
  if (!main) {
    r.error(root, "no_release", "the message has no Release");
    const rel = newRelease(options, root);
    rel.problems.push(...r.problems);
    return rel;
  }
  r.allowed(main, ALLOWED["382"].Release as readonly string[]);
  const release = newRelease(options, main);
  release.artwork = artwork;
  const ids = releaseIdOf(r, one(main, "ReleaseId"), sender);
  release.upc = ids.upc;
  release.key = ids.key ?? "";
  release.catalog_number = ids.catalog;
  release.store_ids = ids.storeIds;
  release.release_type = mapReleaseType(r, one(main, "ReleaseType"));
  const details = byTerritory(r, all(main, "ReleaseDetailsByTerritory"));
  const t = title382(details, one(main, "ReferenceTitle"));
  release.title = t.title;
  release.version = t.version;
  if (!release.title) r.error(main, "no_title", "the release has no title");
  release.artist_name =
    text(details, "DisplayArtistName") ??
    text(pick(all(details, "DisplayArtist")), "PartyName", "FullName") ??
    "";
  if (!release.artist_name) r.error(main, "no_artist", "the release has no display artist");
  release.label_name = text(details, "LabelName");
  const p = lineOf(one(main, "PLine") ?? one(details, "PLine"), "P");
  const c = lineOf(one(main, "CLine") ?? one(details, "CLine"), "C");
  release.phonographic_copyright = p.text;
  release.phonographic_year = p.year;
  release.copyright = c.text;
  release.copyright_year = c.year;
  const genre = genreOf(r, one(details, "Genre"), options);
  release.primary_genre = genre.primary;
  release.secondary_genre = genre.secondary;
  release.release_date = datePart(text(details, "ReleaseDate")) ?? datePart(text(main, "GlobalReleaseDate"));
  release.original_release_date =
    datePart(text(details, "OriginalReleaseDate")) ?? datePart(text(main, "GlobalOriginalReleaseDate"));
  release.explicit = text(details, "ParentalWarningType") === "Explicit";
  release.language = root.attrs.LanguageAndScriptCode?.split("-")[0]?.toLowerCase() ?? null;

  let order = trackOrder(one(details, "ResourceGroup"));
  if (order.length === 0) {
    order = all(one(main, "ReleaseResourceReferenceList"), "ReleaseResourceReference").map(
      (n, i) => [1, i + 1, n.text] as [number, number, string],
    );
  }
  placeTracks(r, release, main, order, tracks, images);
  const releaseRefs = new Set([text(main, "ReleaseReference") ?? "R0"]);
  for (const tr of releases) {
    if (tr === main) continue;
    const rr = text(tr, "ReleaseReference");
    if (text(tr, "ReleaseType") !== "TrackRelease") {
      r.warn(
        tr,
        "unrepresented_release",
        "a second Release in the message is not imported: one release per message",
      );
      continue;
    }
    if (rr) releaseRefs.add(rr);
    const res = all(one(tr, "ReleaseResourceReferenceList"), "ReleaseResourceReference")[0]?.text;
    const track = release.tracks.find((x) => (x as Track).ref === res);
    if (!track) continue;
    const id = one(tr, "ReleaseId");
    const grid = text(id, "GRid");
    if (grid) track.store_ids.grid = grid;
    for (const pid of all(id, "ProprietaryId"))
      track.store_ids[(pid.attrs.Namespace ?? sender ?? "unknown").replace(/^DPID:/, "")] = pid.text;
  }
  return finish(r, release, main, root, releaseRefs, "382");
}
