import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import type { Db } from "../../src/db/db.ts";
import type { ErnTrack } from "../../src/pipeline/ddex/ern.ts";
import { configureStore } from "../../src/pipeline/stores.ts";
import type { LocalMedia } from "../../src/storage/media.ts";

/**
 * Helpers for the DDEX suites (test/ddex.test.ts): reading an ERN message back as a tree (with
 * fast-xml-parser, order preserved), checking it against the parts of the ERN 4.3 schema our
 * messages use (element order, required children, ID/IDREF integrity), and making the releases,
 * stores and media files a delivery needs.
 */

// ---------------------------------------------------------------------------------------------
// Reading XML

export interface XmlNode {
  name: string;
  attrs: Record<string, string>;
  children: XmlNode[];
  /** The element's own text (entities decoded); "" when it has element children. */
  text: string;
}

type Ordered = Record<string, unknown> & { ":@"?: Record<string, string> };

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: "",
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  // Entities are decoded below, in one pass, so that "&amp;#13;" stays the text "&#13;".
  processEntities: false,
});

const ENTITY = /&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);/g;
const NAMED: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

export function decodeEntities(s: string): string {
  return s.replace(ENTITY, (_, e: string) => {
    if (e.startsWith("#x")) return String.fromCodePoint(Number.parseInt(e.slice(2), 16));
    if (e.startsWith("#")) return String.fromCodePoint(Number.parseInt(e.slice(1), 10));
    return NAMED[e] as string;
  });
}

function toNode(entry: Ordered): XmlNode | undefined {
  const name = Object.keys(entry).find((k) => k !== ":@");
  if (!name || name === "#text" || name.startsWith("?")) return undefined;
  const raw = (entry[name] as Ordered[]) ?? [];
  const attrs = Object.fromEntries(Object.entries(entry[":@"] ?? {}).map(([k, v]) => [k, decodeEntities(v)]));
  const children = raw.map(toNode).filter((n): n is XmlNode => n !== undefined);
  const texts = raw.filter((r) => "#text" in r).map((r) => String(r["#text"]));
  const text = children.length > 0 ? "" : decodeEntities(texts.join(""));
  if (children.length > 0) {
    const stray = texts.filter((s) => s.trim() !== "");
    assert.deepEqual(stray, [], `<${name}> mixes text with elements`);
  }
  return { name, attrs, children, text };
}

/** Checks well-formedness (fast-xml-parser's validator), then the document element as a tree. */
export function parseXml(xml: string): XmlNode {
  const valid = XMLValidator.validate(xml);
  assert.equal(valid, true, `not well-formed: ${JSON.stringify(valid)}`);
  const roots = (parser.parse(xml) as Ordered[]).map(toNode).filter((n): n is XmlNode => n !== undefined);
  assert.equal(roots.length, 1, "one document element");
  return roots[0] as XmlNode;
}

/** Characters XML 1.0 allows (the Char production). */
export const XML_CHARS = /^[\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]*$/u;

export const kids = (node: XmlNode, name: string): XmlNode[] => node.children.filter((c) => c.name === name);

/** The only child `name` (fails when there is none or more than one). */
export function one(node: XmlNode, name: string): XmlNode {
  const found = kids(node, name);
  assert.equal(found.length, 1, `<${node.name}> has ${found.length} <${name}>, expected one`);
  return found[0] as XmlNode;
}

/** Follows a path of single children: at(root, "ReleaseList/Release/ReleaseId/ICPN"). */
export function at(node: XmlNode, pathText: string): XmlNode {
  return pathText.split("/").reduce(one, node);
}

export const textAt = (node: XmlNode, pathText: string): string => at(node, pathText).text;

export function has(node: XmlNode, name: string): boolean {
  return kids(node, name).length > 0;
}

/** Every element called `name` under `node`, in document order. */
export function all(node: XmlNode, name: string): XmlNode[] {
  const out: XmlNode[] = [];
  const walk = (n: XmlNode) => {
    for (const c of n.children) {
      if (c.name === name) out.push(c);
      walk(c);
    }
  };
  walk(node);
  return out;
}

export const names = (node: XmlNode): string[] => node.children.map((c) => c.name);

// ---------------------------------------------------------------------------------------------
// The ERN 4.3 schema, as far as our messages go

/**
 * For each composite our NewReleaseMessage uses: the children the ERN 4.3 schema (release-
 * notification.xsd) allows, in its sequence order (alternatives of an xs:choice share a slot), the
 * ones it requires, and the ones that occur at most once. "Required" also covers what a message
 * of ours must carry to be ingestible (an ISRC, the file of a delivered resource, a DealList).
 */
interface Rule {
  seq: (string | string[])[];
  required?: string[];
  once?: string[];
  /** An xs:choice of which our message must give exactly one branch. */
  choice?: string[];
  attrs?: string[];
}

const TITLE_SEQ = ["DisplayTitleText", "DisplayTitle", "AdditionalTitle"];

export const ERN43: Record<string, Rule> = {
  NewReleaseMessage: {
    seq: [
      "MessageHeader",
      "ReleaseAdmin",
      "PartyList",
      "CueSheetList",
      "ResourceList",
      "ChapterList",
      "ReleaseList",
      "DealList",
      "SupplementalDocumentList",
    ],
    required: ["MessageHeader", "PartyList", "ResourceList", "ReleaseList", "DealList"],
    once: ["MessageHeader", "PartyList", "ResourceList", "ReleaseList", "DealList"],
    attrs: ["AvsVersionId", "LanguageAndScriptCode"],
  },
  MessageHeader: {
    seq: [
      "MessageThreadId",
      "MessageId",
      "MessageFileName",
      "MessageSender",
      "SentOnBehalfOf",
      "MessageRecipient",
      "MessageCreatedDateTime",
      "MessageAuditTrail",
      "MessageControlType",
    ],
    required: ["MessageId", "MessageSender", "MessageRecipient", "MessageCreatedDateTime"],
    once: ["MessageThreadId", "MessageId", "MessageSender", "MessageCreatedDateTime", "MessageControlType"],
  },
  MessagingParty: { seq: ["PartyId", "PartyName", "TradingName"], required: ["PartyId"], once: ["PartyId"] },
  PartyName: {
    seq: [
      "FullName",
      "FullNameAsciiTranscribed",
      "FullNameIndexed",
      "NamesBeforeKeyName",
      "KeyName",
      "NamesAfterKeyName",
      "AbbreviatedName",
    ],
    required: ["FullName"],
    once: ["FullName"],
  },
  PartyList: { seq: ["Party"], required: ["Party"] },
  Party: {
    seq: ["PartyReference", ["PartyName", "PartyId"], "Affiliation", "RelatedParty", "ArtistProfilePage"],
    required: ["PartyReference", "PartyName"],
    once: ["PartyReference"],
  },
  ResourceList: {
    seq: ["SoundRecording", "Video", "Image", "Text", "SheetMusic", "Software"],
    required: ["SoundRecording"],
  },
  SoundRecording: {
    seq: [
      "ResourceReference",
      "Type",
      "SoundRecordingEdition",
      "RecordingFormat",
      "WorkId",
      ...TITLE_SEQ,
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
    required: [
      "ResourceReference",
      "Type",
      "SoundRecordingEdition",
      "DisplayTitleText",
      "DisplayTitle",
      "DisplayArtistName",
      "DisplayArtist",
      "Duration",
      "ParentalWarningType",
    ],
    once: ["ResourceReference", "Type", "Duration"],
  },
  SoundRecordingEdition: {
    seq: ["Type", "ResourceId", "EditionContributor", "PLine", "RecordingMode", "TechnicalDetails"],
    required: ["ResourceId"],
    once: ["Type", "ResourceId"],
  },
  SoundRecordingId: { seq: ["ISRC", "CatalogNumber", "ProprietaryId"], required: ["ISRC"], once: ["ISRC"] },
  SoundRecordingTechnicalDetails: {
    seq: [
      "TechnicalResourceDetailsReference",
      "DeliveryFile",
      "HasImmersiveAudioMetadata",
      "IsClip",
      "ClipDetails",
    ],
    required: ["TechnicalResourceDetailsReference", "DeliveryFile"],
    once: ["TechnicalResourceDetailsReference"],
  },
  DeliveryFile: {
    seq: [
      "Type",
      "ContainerFormat",
      "AudioCodecType",
      "BitRate",
      "OriginalBitRate",
      "NumberOfChannels",
      "NumberOfAudioObjects",
      "SamplingRate",
      "OriginalSamplingRate",
      "BitsPerSample",
      "Duration",
      "BitDepth",
      "File",
      "Fingerprint",
      "IsProvidedInDelivery",
    ],
    required: ["Type", "File"],
    once: ["Type", "AudioCodecType", "NumberOfChannels", "SamplingRate", "BitsPerSample", "File"],
  },
  File: {
    seq: ["URI", "HashSum", "FileSize"],
    required: ["URI", "HashSum"],
    once: ["URI", "HashSum", "FileSize"],
  },
  HashSum: {
    seq: ["Algorithm", "Version", "Parameter", "DataType", "HashSumValue"],
    required: ["Algorithm", "HashSumValue"],
    once: ["Algorithm", "HashSumValue"],
  },
  PLine: { seq: ["Year", "PLineCompany", "PLineText"], required: ["PLineText"], once: ["Year", "PLineText"] },
  CLine: { seq: ["Year", "CLineCompany", "CLineText"], required: ["CLineText"], once: ["Year", "CLineText"] },
  DisplayTitle: { seq: ["TitleText", "SubTitle"], required: ["TitleText"], once: ["TitleText"] },
  DisplayArtist: {
    seq: ["ArtistPartyReference", "DisplayArtistRole", "ArtisticRole", "TitleDisplayInformation"],
    required: ["ArtistPartyReference", "DisplayArtistRole"],
    once: ["ArtistPartyReference", "DisplayArtistRole"],
  },
  Contributor: {
    seq: [
      "ContributorPartyReference",
      "Role",
      "InstrumentType",
      "HasMadeFeaturedContribution",
      "HasMadeContractedContribution",
      "IsCredited",
      "DisplayCredits",
    ],
    required: ["ContributorPartyReference", "Role"],
    once: ["ContributorPartyReference"],
  },
  Image: {
    seq: [
      "ResourceReference",
      "Type",
      "ResourceId",
      ...TITLE_SEQ,
      "VersionType",
      "DisplayArtistName",
      "DisplayArtist",
      "Contributor",
      "ResourceRightsController",
      "WorkRightsController",
      "CLine",
      "CourtesyLine",
      "CreationDate",
      "FirstPublicationDate",
      "ParentalWarningType",
      "RelatedRelease",
      "RelatedResource",
      "ContainsHiddenContent",
      "Description",
      "TechnicalDetails",
    ],
    required: ["ResourceReference", "Type", "ResourceId"],
    once: ["ResourceReference", "Type"],
  },
  ImageResourceId: { seq: ["ProprietaryId"], required: ["ProprietaryId"] },
  ImageTechnicalDetails: {
    seq: [
      "TechnicalResourceDetailsReference",
      "ImageCodecType",
      "ImageHeight",
      "ImageWidth",
      "AspectRatio",
      "ColorDepth",
      "ImageResolution",
      "BitDepth",
      "IsClip",
      "ClipDetails",
      "File",
      "IsProvidedInDelivery",
      "Fingerprint",
    ],
    required: ["TechnicalResourceDetailsReference", "File"],
    once: ["TechnicalResourceDetailsReference", "ImageCodecType", "ImageHeight", "ImageWidth", "File"],
  },
  ReleaseList: { seq: ["Release", "TrackRelease", "ClipRelease"], required: ["Release"], once: ["Release"] },
  Release: {
    seq: [
      "ReleaseReference",
      "ReleaseType",
      "ReleaseId",
      ...TITLE_SEQ,
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
    required: [
      "ReleaseReference",
      "ReleaseType",
      "ReleaseId",
      "DisplayTitleText",
      "DisplayTitle",
      "DisplayArtistName",
      "DisplayArtist",
      "ReleaseLabelReference",
      "Genre",
      "ParentalWarningType",
      "ResourceGroup",
    ],
    once: ["ReleaseReference", "ReleaseId", "Duration", "ResourceGroup", "IsSoundtrack"],
  },
  ReleaseId: {
    seq: ["GRid", "ICPN", "CatalogNumber", "ProprietaryId"],
    once: ["GRid", "ICPN", "CatalogNumber"],
  },
  Genre: {
    seq: ["GenreText", "SubGenre", "GenreCategory", "SubGenreCategory"],
    required: ["GenreText"],
    once: ["GenreText", "SubGenre"],
  },
  ResourceGroup: {
    seq: [
      ...TITLE_SEQ,
      "SequenceNumber",
      "DisplayArtist",
      "CarrierType",
      "Duration",
      "ResourceGroup",
      "ResourceGroupContentItem",
      "LinkedReleaseResourceReference",
      "ResourceGroupReleaseReference",
      "ReleaseId",
    ],
    once: ["SequenceNumber", "Duration"],
  },
  ResourceSubGroup: {
    seq: [
      ...TITLE_SEQ,
      "SequenceNumber",
      "DisplayArtist",
      "CarrierType",
      "Duration",
      "ResourceGroup",
      "ResourceGroupContentItem",
      "LinkedReleaseResourceReference",
      "ResourceGroupReleaseReference",
      "ReleaseId",
    ],
    required: ["ResourceGroupContentItem"],
    once: ["SequenceNumber", "Duration"],
    attrs: ["ResourceGroupType"],
  },
  ResourceGroupContentItem: {
    seq: [
      "SequenceNumber",
      "ReleaseResourceReference",
      "LinkedReleaseResourceReference",
      "IsBonusResource",
      "IsInstantGratificationResource",
      "IsPreOrderIncentiveResource",
    ],
    required: ["ReleaseResourceReference"],
    once: ["SequenceNumber", "ReleaseResourceReference"],
  },
  TrackRelease: {
    seq: [
      "ReleaseReference",
      "ReleaseId",
      ...TITLE_SEQ,
      "ReleaseResourceReference",
      "LinkedReleaseResourceReference",
      "ReleaseLabelReference",
      "Genre",
      "ReleaseVisibilityReference",
      "RelatedRelease",
      "RelatedResource",
      "TargetURL",
      "Keywords",
      "Synopsis",
      "MarketingComment",
    ],
    required: ["ReleaseReference", "ReleaseId", "ReleaseResourceReference", "ReleaseLabelReference", "Genre"],
    once: ["ReleaseReference", "ReleaseId", "ReleaseResourceReference"],
  },
  DealList: {
    seq: ["ReleaseDeal", "ReleaseVisibility", "TrackReleaseVisibility"],
    required: ["ReleaseDeal"],
  },
  ReleaseDeal: { seq: ["DealReleaseReference", "Deal"], required: ["DealReleaseReference", "Deal"] },
  Deal: {
    seq: [
      "DealReference",
      "IsCommunicatedOutOfBand",
      "DealTerms",
      "DealTechnicalResourceDetailsReferenceList",
      "DistributionChannelPage",
    ],
    required: ["DealTerms"],
    once: ["DealTerms"],
  },
  DealTerms: {
    seq: [
      ["TerritoryCode", "ExcludedTerritoryCode"],
      "DistributionChannel",
      "ExcludedDistributionChannel",
      "ValidityPeriod",
      "CommercialModelType",
      "UseType",
      "UserInterfaceType",
      "CarrierType",
      "TechnicalInstantiation",
      "NumberOfUsages",
      "RightsClaimPolicy",
      "PriceInformation",
      "IsPreOrderDeal",
      "InstantGratificationResourceList",
      "PhysicalReturns",
      "NumberOfProductsPerCarton",
      "IsPromotional",
      "PromotionalCode",
    ],
    required: ["ValidityPeriod", "CommercialModelType", "UseType"],
    choice: ["TerritoryCode", "ExcludedTerritoryCode"],
  },
  // PeriodWithStartDate: (StartDate, EndDate?) | (StartDateTime, EndDateTime?); we send date-times.
  ValidityPeriod: {
    seq: ["StartDateTime", "EndDateTime"],
    required: ["StartDateTime"],
    once: ["StartDateTime", "EndDateTime"],
  },
};

function ruleKey(node: XmlNode, parent: XmlNode | undefined): string {
  const p = parent?.name;
  switch (node.name) {
    case "ern:NewReleaseMessage":
      return "NewReleaseMessage";
    case "MessageSender":
    case "MessageRecipient":
      return "MessagingParty";
    case "ResourceId":
      return p === "SoundRecordingEdition" ? "SoundRecordingId" : p === "Image" ? "ImageResourceId" : "?";
    case "TechnicalDetails":
      return p === "SoundRecordingEdition"
        ? "SoundRecordingTechnicalDetails"
        : p === "Image"
          ? "ImageTechnicalDetails"
          : "?";
    case "ResourceGroup":
      return p === "ResourceGroup" ? "ResourceSubGroup" : "ResourceGroup";
    default:
      return node.name;
  }
}

/**
 * Walks the message: every element with element children must be a composite listed in ERN43,
 * hold only children its schema sequence allows, in that order, with the required ones present
 * and the single ones once; leaves must have text (unless `emptyTextAllowed`, for generated titles).
 */
export function assertErn43(root: XmlNode, options: { emptyTextAllowed?: boolean } = {}): void {
  const problems: string[] = [];
  const walk = (node: XmlNode, parent: XmlNode | undefined, where: string) => {
    const key = ruleKey(node, parent);
    const rule = ERN43[key];
    if (!rule) {
      if (node.children.length > 0) problems.push(`${where}: <${node.name}> is not a composite we know`);
      else if (node.text.trim() === "" && !options.emptyTextAllowed) {
        problems.push(`${where}: <${node.name}> is empty`);
      }
      return;
    }
    const slot = new Map<string, number>();
    rule.seq.forEach((s, i) => {
      for (const n of Array.isArray(s) ? s : [s]) slot.set(n, i);
    });
    let last = -1;
    for (const c of node.children) {
      const i = slot.get(c.name);
      if (i === undefined) problems.push(`${where}: <${c.name}> is not allowed in ${key}`);
      else if (i < last)
        problems.push(`${where}: <${c.name}> is out of order in ${key} (${names(node).join(", ")})`);
      else last = i;
    }
    for (const r of rule.required ?? []) {
      if (!has(node, r)) problems.push(`${where}: ${key} lacks <${r}>`);
    }
    for (const o of rule.once ?? []) {
      if (kids(node, o).length > 1) problems.push(`${where}: ${key} has more than one <${o}>`);
    }
    if (rule.choice && rule.choice.filter((c) => has(node, c)).length !== 1) {
      problems.push(`${where}: ${key} needs exactly one of ${rule.choice.join(", ")}`);
    }
    for (const a of rule.attrs ?? []) {
      const value = node.attrs[a];
      if (value === undefined || (value === "" && !options.emptyTextAllowed)) {
        problems.push(`${where}: ${key} lacks the ${a} attribute`);
      }
    }
    const seen = new Map<string, number>();
    for (const c of node.children) {
      const n = (seen.get(c.name) ?? 0) + 1;
      seen.set(c.name, n);
      walk(c, node, `${where}/${c.name}[${n}]`);
    }
  };
  walk(root, undefined, root.name);
  assert.deepEqual(problems, [], problems.join("\n"));
}

/** The xs:ID elements of a message (by kind) and the references that must point at them. */
const IDS: Record<string, { parents: string[]; pattern: RegExp }> = {
  PartyReference: { parents: ["Party"], pattern: /^P[\d\-_a-zA-Z]+$/ },
  ResourceReference: { parents: ["SoundRecording", "Image"], pattern: /^A[\d\-_a-zA-Z]+$/ },
  ReleaseReference: { parents: ["Release", "TrackRelease"], pattern: /^R[\d\-_a-zA-Z]+$/ },
  TechnicalResourceDetailsReference: { parents: ["TechnicalDetails"], pattern: /^T[\d\-_a-zA-Z]+$/ },
};
const REFS: Record<string, keyof typeof IDS> = {
  ArtistPartyReference: "PartyReference",
  ContributorPartyReference: "PartyReference",
  ReleaseLabelReference: "PartyReference",
  ReleaseResourceReference: "ResourceReference",
  LinkedReleaseResourceReference: "ResourceReference",
  DealReleaseReference: "ReleaseReference",
};

/**
 * ID/IDREF integrity: IDs unique in the document and of their kind's pattern (P.., A.., R.., T..);
 * every reference points at an ID of the right kind; every party, resource and release is used.
 */
export function assertReferences(root: XmlNode): void {
  const ids = new Map<string, string>();
  const problems: string[] = [];
  const refs: [string, string][] = [];
  const walk = (node: XmlNode, parent: XmlNode | undefined) => {
    const id = IDS[node.name];
    if (id && parent && id.parents.includes(parent.name)) {
      if (!id.pattern.test(node.text))
        problems.push(`${node.name} ${node.text} does not match ${id.pattern}`);
      if (ids.has(node.text)) problems.push(`ID ${node.text} is not unique`);
      ids.set(node.text, node.name);
    }
    if (REFS[node.name]) refs.push([node.name, node.text]);
    for (const c of node.children) walk(c, node);
  };
  walk(root, undefined);
  const used = new Set<string>();
  for (const [name, value] of refs) {
    const kind = REFS[name];
    if (ids.get(value) !== kind) problems.push(`${name} ${value} points at no ${kind}`);
    used.add(value);
  }
  for (const [value, kind] of ids) {
    if (kind !== "TechnicalResourceDetailsReference" && !used.has(value)) {
      problems.push(`${kind} ${value} is never referenced`);
    }
  }
  assert.deepEqual(problems, [], problems.join("\n"));
}

/** xs:duration as ERN uses it for times (no years, months or days). */
export const XS_DURATION = /^PT(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?$/;

// ---------------------------------------------------------------------------------------------
// Files

export interface Hashes {
  md5: string;
  sha256: string;
  bytes: number;
}

export function hashesOf(data: Buffer): Hashes {
  return {
    md5: createHash("md5").update(data).digest("hex"),
    sha256: createHash("sha256").update(data).digest("hex"),
    bytes: data.length,
  };
}

/** Every file under `dir`, as sorted paths with forward slashes relative to it. */
export function listFiles(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((d) => d.isFile())
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)).split(path.sep).join("/"))
    .sort();
}

/** A short PCM WAV file (16-bit stereo, 44.1 kHz) whose samples depend on `seed`. */
export function wavBytes(seed: number, dataBytes = 4000): Buffer {
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "ascii");
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write("WAVE", 8, "ascii");
  header.write("fmt ", 12, "ascii");
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(2, 22); // channels
  header.writeUInt32LE(44_100, 24);
  header.writeUInt32LE(44_100 * 4, 28);
  header.writeUInt16LE(4, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36, "ascii");
  header.writeUInt32LE(dataBytes, 40);
  const data = Buffer.alloc(dataBytes);
  for (let i = 0; i < dataBytes; i++) data[i] = (i * 31 + seed * 17) & 0xff;
  return Buffer.concat([header, data]);
}

/** The start and end markers of a JPEG with a JFIF header and a few bytes between. */
export function jpegBytes(seed = 1): Buffer {
  return Buffer.concat([
    Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]),
    Buffer.from("JFIF\0", "latin1"),
    Buffer.from([0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]),
    Buffer.from(Array.from({ length: 300 }, (_, i) => (i * seed + 7) & 0xff)),
    Buffer.from([0xff, 0xd9]),
  ]);
}

/** Writes a release's cover and its tracks' audio where LocalMedia finds them. */
export function placeMedia(
  media: LocalMedia,
  accountId: string,
  releaseId: string,
  files: { cover?: Buffer; audio?: { trackId: string; ext: "wav" | "flac"; data: Buffer }[] },
): void {
  if (files.cover) {
    const dir = media.folder("artwork", accountId, releaseId);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "cover.jpg"), files.cover);
  }
  for (const a of files.audio ?? []) {
    const dir = media.folder("audio", accountId, releaseId);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `${a.trackId}.${a.ext}`), a.data);
  }
}

// ---------------------------------------------------------------------------------------------
// Stores and releases

export const SENDER = { dpid: "PADPIDA2026112201B", name: "Backline Distribution" };
export const RECIPIENT = { dpid: "PADPIDA2026112202S", name: "Drop Store" };

/** The release id and creation time the message tests build their ERN input with. */
export const ERN_RELEASE_ID = "6b1f6f0e-1d1c-4c57-9a0e-0d3c6c1f5a01";
export const ERN_CREATED = new Date("2026-05-01T12:00:00.123Z");

/** Track `n` of a message test's release, with `over` in place of its defaults. */
export function ernTrack(n: number, over: Partial<ErnTrack> = {}): ErnTrack {
  return {
    id: `1111111${n}-1111-4111-8111-111111111111`,
    title: `Track ${n}`,
    version: null,
    isrc: `QZDDX260000${n}`,
    duration: 185 + n,
    track_number: n,
    disc_number: 1,
    artist_name: null,
    explicit: false,
    language: null,
    contributors: [],
    ...over,
  };
}

/** Adds (or reconfigures) a store that delivers through the ddex adapter. */
export async function configureDdexStore(db: Db, code: string, ddex: Record<string, unknown>): Promise<void> {
  await db.asService((tx) =>
    tx.query(
      `insert into internal.stores (code, name, kind) values ($1, $2, 'dsp')
       on conflict (code) do update set enabled = true`,
      [code, `Store ${code}`],
    ),
  );
  // As `backline stores configure` does: credentials sealed, apart from the settings.
  await configureStore(db, code, { adapter: "ddex", ddex });
}

/** A GTIN-13 with its check digit, from 12 digits. */
export function gtin13(first12: string): string {
  const sum = [...first12].reduce((s, d, i) => s + Number(d) * (i % 2 === 0 ? 1 : 3), 0);
  return `${first12}${(10 - (sum % 10)) % 10}`;
}

export interface SeedTrack {
  title: string;
  isrc: string;
  duration: number;
  track_number: number;
  disc_number?: number;
  explicit?: boolean;
  version?: string | null;
  contributors?: { name: string; role: string }[];
  audio_metadata?: Record<string, unknown>;
}

export interface SeededRelease {
  id: string;
  accountId: string;
  tracks: (SeedTrack & { id: string })[];
}

/** A complete release (artist, release, tracks) of `accountId`, as a draft, on the service path. */
export async function seedRelease(
  db: Db,
  accountId: string,
  release: Record<string, unknown>,
  tracks: SeedTrack[],
): Promise<SeededRelease> {
  return db.asService(async (tx) => {
    const artist = (
      await tx.query<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, $2) returning id",
        [accountId, String(release.artist_name ?? "Luna Vale")],
      )
    ).rows[0] as { id: string };
    const fields = { artist_id: artist.id, account_id: accountId, ...release };
    const cols = Object.keys(fields);
    const r = (
      await tx.query<{ id: string }>(
        `insert into public.releases (${cols.join(", ")}) values (${cols.map((_, i) => `$${i + 1}`).join(", ")})
         returning id`,
        Object.values(fields),
      )
    ).rows[0] as { id: string };
    const seeded: (SeedTrack & { id: string })[] = [];
    for (const t of tracks) {
      const row = (
        await tx.query<{ id: string }>(
          `insert into public.tracks (release_id, account_id, title, version, isrc, duration, track_number, disc_number,
                                      explicit, contributors, audio_metadata)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) returning id`,
          [
            r.id,
            accountId,
            t.title,
            t.version ?? null,
            t.isrc,
            t.duration,
            t.track_number,
            t.disc_number ?? 1,
            t.explicit ?? false,
            JSON.stringify(t.contributors ?? []),
            JSON.stringify(t.audio_metadata ?? {}),
          ],
        )
      ).rows[0] as { id: string };
      seeded.push({ ...t, id: row.id });
    }
    return { id: r.id, accountId, tracks: seeded };
  });
}

/** Reads until `ok` holds; fails with `what` and the last value read. */
export async function poll<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) {
      assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
