import fs from "node:fs";
import path from "node:path";
import { XMLParser } from "fast-xml-parser";
import { toXml, x } from "./xml.ts";

/**
 * DDEX's ERN choreography for SFTP and cloud storage, version 1.8 (namespace
 * `http://ddex.net/xml/ern-c-sftp/18`, the one that goes with ERN 4.3; docs/ddex.md): the
 * batch's `ManifestMessage` (the `BatchComplete_<BatchId>.xml` file written last), and the
 * store's `AcknowledgementMessage`, read only once it is valid against DDEX's schema.
 */

export const ERNC_NAMESPACE = "http://ddex.net/xml/ern-c-sftp/18";
// The allowed-value sets whose values the choreography uses (ErnMessageType, ErncFileStatus, …).
const AVS_VERSION = "9";

/** A batch is named by the UTC time it was made, YYYYMMDDhhmmssnnn (choreography: BatchId). */
export function batchIdAt(at: Date): string {
  return at.toISOString().replace(/[-:TZ.]/g, "");
}
export const BATCH_ID = /^[0-9]{17}$/;

export interface ManifestParty {
  dpid: string;
  name: string;
}

export interface ManifestEntry {
  /** The NewReleaseMessage's MessageId (the delivery id). */
  messageId: string;
  /** The message file's path inside the batch, e.g. `<upc>/<upc>.xml`. */
  url: string;
  icpn: string | null;
  releaseId: string;
  action: "insert" | "update" | "takedown";
  sha256: string;
}

const DELIVERY_TYPE = { insert: "NewReleaseDelivery", update: "ReDelivery", takedown: "TakeDown" } as const;

const party = (p: ManifestParty) =>
  x("MessageSender", x("PartyId", p.dpid), x("PartyName", x("FullName", p.name)));

/** The batch's ManifestMessage: who sends it to whom, and each message with its release ids and hash. */
export function buildManifestMessage(input: {
  batchId: string;
  createdAt: Date;
  sender: ManifestParty;
  recipient: ManifestParty;
  test: boolean;
  messages: ManifestEntry[];
}): string {
  const recipient = party(input.recipient);
  recipient.name = "MessageRecipient";
  return toXml(
    x(
      "ernc:ManifestMessage",
      { "xmlns:ernc": ERNC_NAMESPACE, MessageVersionId: "ern-c-sftp/18", AvsVersionId: AVS_VERSION },
      x(
        "MessageHeader",
        party(input.sender),
        recipient,
        x("MessageCreatedDateTime", input.createdAt.toISOString().replace(/\.\d{3}Z$/, "Z")),
      ),
      x("IsTestFlag", input.test ? "true" : "false"),
      x("RootDirectory", input.batchId),
      x("NumberOfMessages", input.messages.length),
      input.messages.map((m) =>
        x(
          "MessageInBatch",
          x("MessageType", "NewReleaseMessage"),
          x("MessageId", m.messageId),
          x("URL", m.url),
          x(
            "IncludedReleaseId",
            m.icpn ? x("ICPN", m.icpn) : undefined,
            x("ProprietaryId", { Namespace: input.sender.dpid }, m.releaseId),
          ),
          x("DeliveryType", DELIVERY_TYPE[m.action]),
          x("ProductType", "AudioProduct"),
          x("HashSum", x("HashSumValue", m.sha256), x("HashSumAlgorithmType", "SHA-256")),
        ),
      ),
    ),
  );
}

// --- Validation -------------------------------------------------------------------------------

const MAIN = "ern-choreography-sftp.xsd";
const AVS = "allowed-value-sets.xsd";
const DSIG = "xmldsig-core-schema.xsd";

/** The schema's files are DDEX's (and W3C's): never shipped, read from the configured folder. */
export class ChoreographySchemaMissing extends Error {}

const loaded = new Map<string, { schema: string; avs: string; dsig: string }>();

function schemaFiles(dir: string) {
  const found = loaded.get(dir);
  if (found) return found;
  const read = (name: string) => {
    try {
      return fs.readFileSync(path.join(dir, name), "utf8");
    } catch {
      throw new ChoreographySchemaMissing(
        `DDEX's ERN choreography 1.8 schema is not at ${dir} (${MAIN}, ${AVS}, ${DSIG}): set DDEX_ERNC_SCHEMA_DIR`,
      );
    }
  };
  // The schema imports its two companions by absolute URL; they are given by file name instead
  // (libxml2 in WebAssembly has no catalogs, and nothing is fetched).
  const schema = read(MAIN)
    .replace(/schemaLocation="http:\/\/ddex\.net\/xml\/allowed-value-sets\/[^"]*"/, `schemaLocation="${AVS}"`)
    .replace(
      /schemaLocation="http:\/\/www\.w3\.org\/TR\/[^"]*xmldsig-core-schema\.xsd"/,
      `schemaLocation="${DSIG}"`,
    );
  const files = { schema, avs: read(AVS), dsig: read(DSIG) };
  loaded.set(dir, files);
  return files;
}

/**
 * Every error of the document against DDEX's ERN choreography 1.8 schema ([] when it is valid),
 * with libxml2 (xmllint-wasm). Throws ChoreographySchemaMissing when the schema is not there.
 */
export async function choreographyErrors(xml: string, schemaDir: string): Promise<string[]> {
  const files = schemaFiles(schemaDir);
  // Loaded on the first validation, not by every process.
  const { validateXML } = await import("xmllint-wasm");
  const result = await validateXML({
    xml: { fileName: "message.xml", contents: xml },
    schema: { fileName: MAIN, contents: files.schema },
    preload: [
      { fileName: AVS, contents: files.avs },
      { fileName: DSIG, contents: files.dsig },
    ],
    // The allowed-value sets are large: room for libxml2 to hold them.
    maxMemoryPages: 16_384,
  });
  if (result.valid) return [];
  const errors = result.errors.map((e) => (e.loc ? `line ${e.loc.lineNumber}: ${e.message}` : e.message));
  return errors.length > 0 ? errors : [result.rawOutput || "invalid (no message from xmllint)"];
}

// --- Reading an acknowledgement ---------------------------------------------------------------

export interface AckFileStatus {
  /** ErncFileStatus: FileOK, ResourceCorrupt, NewReleaseMessageInvalid, … */
  status: string;
  information?: string | undefined;
}
export interface AckMessage {
  messageType: string;
  messageId: string;
  batchId?: string | undefined;
  statuses: AckFileStatus[];
}
export interface AckRelease {
  icpn?: string | undefined;
  proprietaryIds: string[];
  /** SupplyChainStatus: SuccessfullyIngestedByReleaseDistributor, ProcessingErrorAtReleaseDistributor, … */
  status: string;
  errorText?: string | undefined;
  messages: AckMessage[];
}
export interface ChoreographyAck {
  messageId: string;
  sender: string;
  recipients: string[];
  releases: AckRelease[];
}

const REPEATED = new Set([
  "ReleaseStatus",
  "Acknowledgement",
  "MessageStatus",
  "ProprietaryId",
  "MessageRecipient",
]);
const parser = new XMLParser({
  removeNSPrefix: true,
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  textNodeName: "#text",
  parseTagValue: false,
  trimValues: true,
  isArray: (name) => REPEATED.has(name),
});

type Node = Record<string, unknown>;
const text = (v: unknown): string | undefined => {
  if (v === undefined || v === null) return undefined;
  if (typeof v === "object") return text((v as Node)["#text"]);
  const s = String(v).trim();
  return s === "" ? undefined : s;
};
const list = (v: unknown): Node[] => (Array.isArray(v) ? (v as Node[]) : v ? [v as Node] : []);

/**
 * Whether the document claims to be a choreography AcknowledgementMessage (by its root element's
 * name): it is then held to the 1.8 schema, its namespace included. ERN-C 1.4's
 * FtpAcknowledgementMessage and other roots are not.
 */
export function isChoreographyAck(xml: string): boolean {
  const root = /^\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--[\s\S]*?-->\s*)*<(?:[\w.-]+:)?([\w.-]+)[\s>/]/.exec(xml);
  return root?.[1] === "AcknowledgementMessage";
}

/** The parts of a schema-valid AcknowledgementMessage that say what became of each release. */
export function readChoreographyAck(xml: string): ChoreographyAck {
  const doc = parser.parse(xml) as Node;
  const root = (doc.AcknowledgementMessage ?? {}) as Node;
  const header = (root.MessageHeader ?? {}) as Node;
  return {
    messageId: text(header.MessageId) ?? "",
    sender: text((header.MessageSender as Node | undefined)?.PartyId) ?? "",
    recipients: list(header.MessageRecipient)
      .map((r) => text(r.PartyId))
      .filter((s): s is string => s !== undefined),
    releases: list(root.ReleaseStatus).map((r) => {
      const id = (r.ReleaseId ?? {}) as Node;
      return {
        icpn: text(id.ICPN),
        proprietaryIds: list(id.ProprietaryId)
          .map(text)
          .filter((s): s is string => s !== undefined),
        // The composite and its status share the name ReleaseStatus.
        status: text(list(r.ReleaseStatus)[0]) ?? "",
        errorText: text(r.ErrorText),
        messages: list(r.Acknowledgement).map((a) => ({
          messageType: text(a.MessageType) ?? "",
          messageId: text(a.MessageId) ?? "",
          batchId: text(a.BatchId),
          statuses: list(a.MessageStatus).map((s) => ({
            status: text(s.Status) ?? "",
            information: text(s.Information),
          })),
        })),
      };
    }),
  };
}

/**
 * What a release's status means for its delivery (docs/ddex.md has the table): `ok` (live, or a
 * takedown confirmed), `error` with the store's words, `gone` (no longer available: confirms a
 * takedown, an error for anything else), or `noted` (on its way: nothing changes).
 */
export type ReleaseOutcome =
  | { kind: "ok" }
  | { kind: "gone" }
  | { kind: "noted" }
  | { kind: "error"; message: string };

const OK_RELEASE = new Set(["SuccessfullyIngestedByReleaseDistributor", "ReleaseMadeAvailableToConsumers"]);
const ERROR_RELEASE = new Set([
  "ProcessingErrorAtReleaseDistributor",
  "ProcessingErrorAtReleaseCreator",
  "ReleaseViolatesTermsOfService",
  "RightsConflict",
]);

export function releaseOutcome(r: AckRelease, message?: AckMessage): ReleaseOutcome {
  // A file the store could not take is an error whatever the release's status says.
  const bad = (message ? [message] : r.messages)
    .flatMap((m) => m.statuses)
    .filter((s) => s.status !== "FileOK");
  if (bad.length > 0 || ERROR_RELEASE.has(r.status)) {
    const words = [
      ...(ERROR_RELEASE.has(r.status) || bad.length === 0 ? [r.status] : []),
      ...bad.map((s) => (s.information ? `${s.status} (${s.information})` : s.status)),
      ...(r.errorText ? [r.errorText] : []),
    ];
    return { kind: "error", message: words.join(": ") };
  }
  if (OK_RELEASE.has(r.status)) return { kind: "ok" };
  if (r.status === "ReleaseNotAvailable") return { kind: "gone" };
  return { kind: "noted" };
}
