import { createReadStream } from "node:fs";
import { gtinIsValid } from "../../catalog/identifiers.ts";
import { readRecords } from "../csv.ts";
import { formatAmount, parseAmount } from "../normalise.ts";
import { FormatError, type FormatParser, LineError, type RawLine, type RoyaltyFormat } from "./types.ts";

/**
 * `ddex-dsr`: a DDEX Digital Sales Report in its flat-file form (docs/royalties.md, "DDEX DSR";
 * sample docs/formats/ddex-dsr.tsv). Tab-separated records, each starting with its record type:
 *
 * - HEAD: the usage period (UsageStartDate), when the report was made (MessageCreatedDateTime) and
 *   who sent it (SenderPartyId: the store, found by its party id before the import starts, see
 *   dsrSenderPartyId).
 * - SYxx: summary records; the details point at one by SummaryRecordId and take its territory,
 *   currency and revenue from it.
 * - Blocks (BlockId): RE (a release: ICPN = UPC), AS (a resource: ISRC), then SU details: SU01
 *   downloads, SU02 streams (Basic Audio Profile), SU03 usages with their own NetRevenue (UGC Profile).
 * - `#XXnn` rows name a record's columns; they override the layouts built in below, so a file's
 *   own column order wins. MW, RU, LI, SR and other records are read past. FOOT's counts are
 *   compared with the body and each difference is a warning on the import (real files get them
 *   wrong: the report is not refused for it).
 *
 * Identifiers: a detail about a resource carries its ISRC and the block's ICPN; one about a release
 * carries the release's ICPN, and when that fails its check digit, the ISRC of the block's only
 * resource. Both carry the store's own ids (DspResourceId, DspReleaseId). An ICPN that fails its
 * check digit is left off the line with a warning (normalise), never a malformed line.
 *
 * Amounts: SU03 carries its NetRevenue. SU01 is priced: units (Usages − Returns) × the price the
 * consumer paid. SU02 has no amount: its share of the summary's NetRevenue in proportion to its
 * streams (NetRevenue × streams ÷ the summary's usages). A detail that is not royalty bearing
 * (IsRoyaltyBearing FALSE) counts its units with no money. The store's fees are not in a DSR:
 * gross = net, fees 0. The lines do not name the store in Backline's codes: --store does.
 */

/** The columns each record type starts with (the sample writer, src/royalties/sample.ts, writes them too). */
export const LAYOUTS = {
  HEAD: [
    "MessageVersion",
    "Profile",
    "ProfileVersion",
    "MessageId",
    "MessageCreatedDateTime",
    "FileNumber",
    "NumberOfFiles",
    "UsageStartDate",
    "UsageEndDate",
    "SenderPartyId",
    "SenderName",
    "ServiceDescription",
    "RecipientPartyId",
    "RecipientName",
    "RepresentedRepertoire",
  ],
  SY01: [
    "SummaryRecordId",
    "DistributionChannel",
    "DistributionChannelDPID",
    "CommercialModel",
    "UseType",
    "Territory",
    "ServiceDescription",
    "Usages",
    "Subscribers",
    "CurrencyOfReporting",
    "NetRevenue",
  ],
  SY02: [
    "SummaryRecordId",
    "DistributionChannel",
    "DistributionChannelDPID",
    "CommercialModel",
    "UseType",
    "Territory",
    "ServiceDescription",
    "Usages",
    "Users",
    "Currency",
    "NetRevenue",
  ],
  RE01: ["BlockId", "ReleaseReference", "DspReleaseId", "ProprietaryReleaseId", "CatalogNumber", "ICPN"],
  AS01: ["BlockId", "ResourceReference", "DspResourceId", "ISRC"],
  AS02: ["BlockId", "ResourceReference", "DspResourceId", "ISRC"],
  SU01: [
    "BlockId",
    "SummaryRecordId",
    "SalesTransactionId",
    "TransactedRelease",
    "TransactedResource",
    "IsRoyaltyBearing",
    "SalesUpgrade",
    "Usages",
    "Returns",
    "PriceConsumerPaidExcSalesTax",
  ],
  SU02: [
    "BlockId",
    "SummaryRecordId",
    "SalesTransactionId",
    "TransactedRelease",
    "TransactedResource",
    "IsRoyaltyBearing",
    "NumberOfStreams",
    "PriceConsumerPaidExcSalesTax",
  ],
  SU03: ["BlockId", "SalesTransactionId", "SummaryRecordId", "DspReleaseId", "Usages", "NetRevenue"],
  FOOT: [
    "NumberOfLinesInFile",
    "NumberOfLinesInReport",
    "NumberOfSummaryRecords",
    "NumberOfBlocksInFile",
    "NumberOfBlocksInReport",
  ],
} satisfies Record<string, string[]>;

/** Synonyms across profile versions: the first name found in a layout is used. */
const ALIASES: Record<string, string[]> = {
  Usages: ["Usages", "TotalUsages", "NumberOfStreams"],
  Currency: ["Currency", "CurrencyOfReporting"],
};

type Columns = Map<string, number>;

function columns(names: readonly string[]): Columns {
  const m: Columns = new Map();
  names.forEach((n, i) => {
    const key = n.trim().toLowerCase();
    // Column 0 is the record type: the names start at 1.
    if (!m.has(key)) m.set(key, i + 1);
  });
  return m;
}

interface Summary {
  territory: string;
  currency: string;
  /** NetRevenue scaled by 10^12, and the usages it is shared over (SU02). */
  net: bigint | undefined;
  usages: bigint | undefined;
  useType: string;
}

/** DSR territory: ISO alpha-2, or "" for Worldwide and lists (the line then has no territory). */
function territoryOf(value: string): string {
  return /^[A-Za-z]{2}$/.test(value) ? value.toUpperCase() : "";
}

function monthOfDate(value: string, what: string, line: number): string {
  const m = /^(\d{4})-?(\d{2})/.exec(value.trim());
  if (!m) throw new FormatError(line, `the HEAD record's ${what} ${JSON.stringify(value)} is not a date`);
  return `${m[1]}-${m[2]}`;
}

/** HEAD's column of SenderPartyId when no `#HEAD` row names the columns (the record type is column 0). */
const SENDER_COLUMN = LAYOUTS.HEAD.indexOf("SenderPartyId") + 1;

/**
 * The DDEX party id of the file's sender (HEAD's SenderPartyId), read from the file's first records
 * (a `#HEAD` row before HEAD names the columns); undefined when the file does not start with a HEAD
 * record or the HEAD gives none. The file's NAME is not read: real files name their parties there in
 * either order (DDEX's UnlimitedMusicMonthly sample puts the recipient first).
 */
export async function dsrSenderPartyId(file: string): Promise<string | undefined> {
  // HEAD is the first record: the first 64 KiB hold it, and any `#` rows before it.
  const source = createReadStream(file, { start: 0, end: 64 * 1024 - 1 });
  try {
    let column = SENDER_COLUMN;
    for await (const records of readRecords(source, "\t", false)) {
      for (const record of records) {
        const type = (record.fields[0] ?? "").replace(/^\uFEFF/, "").trim();
        if (type.startsWith("#")) {
          if (type.slice(1).split(".")[0] === "HEAD") {
            const at = record.fields.findIndex((f, n) => n > 0 && f.trim().toLowerCase() === "senderpartyid");
            if (at > 0) column = at;
          }
          continue;
        }
        if (type.split(".")[0] !== "HEAD") return undefined;
        return (record.fields[column] ?? "").trim() || undefined;
      }
    }
    return undefined;
  } finally {
    source.destroy();
  }
}

/** A FOOT count: a whole number, or undefined when empty (then not compared). */
function footCount(value: string, name: string, line: number, warn: Warn): number | undefined {
  if (value === "") return undefined;
  if (!/^\d+$/.test(value)) {
    warn(line, `the FOOT record's ${name} ${JSON.stringify(value)} is not a whole number: not compared`);
    return undefined;
  }
  return Number(value);
}

type Warn = (line: number | null, message: string) => void;

interface Release {
  icpn: string;
  dspId: string;
}

interface Resource {
  isrc: string;
  dspId: string;
}

export const ddexDsrFormat: RoyaltyFormat = {
  name: "ddex-dsr",
  title: "DDEX DSR flat file (Basic Audio and UGC profiles)",
  delimiter: "\t",
  quoting: false,
  storeInFile: false,
  senderPartyId: dsrSenderPartyId,
  storeIds: true,
  create(options): FormatParser {
    const store = options.store;
    const warn: Warn = options.warn ?? (() => {});
    const layouts = new Map<string, Columns>(
      Object.entries(LAYOUTS).map(([k, v]) => [k, columns(v)] as [string, Columns]),
    );
    let head: { salePeriod: string; reportingPeriod: string; ugc: boolean; oneFile: boolean } | undefined;
    const summaries = new Map<string, Summary>();
    let block = "";
    const releases = new Map<string, Release>();
    const resources = new Map<string, Resource>();
    let firstResource: Resource | undefined;
    // What FOOT's counts are compared with.
    let lastLine = 0;
    let summaryRecords = 0;
    const blocks = new Set<string>();
    let foot: { line: number; fields: string[]; layout: Columns } | undefined;

    return {
      record(fields, line) {
        if (line > lastLine) lastLine = line;
        const type = (fields[0] ?? "").replace(/^\uFEFF/, "").trim();
        if (type.startsWith("#")) {
          const base = type.slice(1).split(".")[0] ?? "";
          if (base) layouts.set(base, columns(fields.slice(1)));
          return null;
        }
        const base = type.split(".")[0] ?? "";
        const layout = layouts.get(base);
        const get = (name: string): string => {
          if (!layout) return "";
          for (const n of ALIASES[name] ?? [name]) {
            const i = layout.get(n.toLowerCase());
            if (i !== undefined) return (fields[i] ?? "").trim();
          }
          return "";
        };
        if (base === "HEAD") {
          if (!store)
            throw new FormatError(line, "a DSR does not name the store in Backline's codes: say --store");
          const ugc = /ugc/i.test(get("Profile"));
          const salePeriod = monthOfDate(get("UsageStartDate"), "UsageStartDate", line);
          const created = get("MessageCreatedDateTime");
          head = {
            salePeriod,
            reportingPeriod:
              options.period ?? (created ? monthOfDate(created, "MessageCreatedDateTime", line) : salePeriod),
            ugc,
            // The report is this one file: its counts "in the report" are the file's.
            oneFile: (get("NumberOfFiles") || "1") === "1",
          };
          return null;
        }
        if (!head)
          throw new FormatError(line, "the file does not start with a HEAD record: not a DSR flat file");
        if (base === "FOOT") {
          // Compared at the end (finish): records after FOOT count too.
          foot = { line, fields, layout: layout ?? columns(LAYOUTS.FOOT) };
          return null;
        }
        if (base.startsWith("SY")) {
          summaryRecords++;
          const id = get("SummaryRecordId");
          // Several summaries can share an id (one per rights controller): the first one counts.
          if (summaries.has(id)) return null;
          const net = get("NetRevenue");
          const usages = get("Usages");
          if (net !== "" && parseAmount(net) === undefined) {
            throw new LineError(`the summary's NetRevenue ${JSON.stringify(net)} is not an amount`);
          }
          summaries.set(id, {
            territory: territoryOf(get("Territory")),
            currency: get("Currency").toUpperCase(),
            net: net === "" ? undefined : parseAmount(net),
            usages: /^\d+$/.test(usages) ? BigInt(usages) : undefined,
            useType: get("UseType"),
          });
          return null;
        }
        if (base.startsWith("RE") || base.startsWith("AS") || base.startsWith("MW")) {
          const id = get("BlockId");
          blocks.add(id);
          if (id !== block) {
            block = id;
            releases.clear();
            resources.clear();
            firstResource = undefined;
          }
          if (base.startsWith("RE")) {
            releases.set(get("ReleaseReference"), { icpn: get("ICPN"), dspId: get("DspReleaseId") });
          }
          if (base.startsWith("AS")) {
            const resource = { isrc: get("ISRC"), dspId: get("DspResourceId") };
            resources.set(get("ResourceReference"), resource);
            if (!firstResource) firstResource = resource;
          }
          return null;
        }
        if (base !== "SU01" && base !== "SU02" && base !== "SU03") return null;
        blocks.add(get("BlockId"));
        if (get("BlockId") !== block) {
          throw new LineError(
            `the ${type} record's BlockId ${JSON.stringify(get("BlockId"))} has no RE or AS record before it`,
          );
        }
        const summaryId = get("SummaryRecordId");
        let summary = summaries.get(summaryId);
        // Real files write "SY1" for a summary numbered "1": with one summary, it is that one.
        if (!summary && summaries.size === 1) summary = summaries.values().next().value;
        if (!summary)
          throw new LineError(`no summary record ${JSON.stringify(summaryId)} before this ${type} record`);

        let isrc = "";
        let upc = "";
        let storeResourceId = "";
        let storeReleaseId = "";
        if (base === "SU03") {
          isrc = firstResource?.isrc ?? "";
          storeResourceId = firstResource?.dspId || get("DspReleaseId");
        } else {
          const resource = get("TransactedResource");
          const release = get("TransactedRelease");
          if (resource) {
            const r = resources.get(resource);
            if (!r) {
              throw new LineError(
                `TransactedResource ${JSON.stringify(resource)} is not a resource of block ${block}`,
              );
            }
            isrc = r.isrc;
            storeResourceId = r.dspId;
            // The block's release, when it has one: its ICPN helps matching (checked by normalise).
            const only = releases.size === 1 ? releases.values().next().value : undefined;
            upc = only?.icpn ?? "";
            storeReleaseId = only?.dspId ?? "";
          } else if (release) {
            const r = releases.get(release);
            if (!r) {
              throw new LineError(
                `TransactedRelease ${JSON.stringify(release)} is not a release of block ${block}`,
              );
            }
            upc = r.icpn;
            storeReleaseId = r.dspId;
            // An ICPN that fails its check digit cannot find the release: the block's only
            // resource, when it has just one, is what was sold (DDEX's AdFunded sample).
            if (!(/^\d{8,14}$/.test(upc) && gtinIsValid(upc.padStart(12, "0"))) && resources.size === 1) {
              isrc = firstResource?.isrc ?? "";
              storeResourceId = firstResource?.dspId ?? "";
            }
          } else {
            throw new LineError(
              `the ${type} record names neither a TransactedResource nor a TransactedRelease`,
            );
          }
        }

        const bearing = get("IsRoyaltyBearing").toUpperCase() !== "FALSE";
        let units: bigint;
        let amount: bigint;
        let usageType: string;
        if (base === "SU01") {
          const sold = get("Usages") || "0";
          const returned = get("Returns") || "0";
          if (!/^\d+$/.test(sold) || !/^\d+$/.test(returned)) {
            throw new LineError(
              `Usages ${JSON.stringify(sold)} or Returns ${JSON.stringify(returned)} is not a whole number`,
            );
          }
          units = BigInt(sold) - BigInt(returned);
          if (units < 0n) units = 0n;
          const price = parseAmount(get("PriceConsumerPaidExcSalesTax") || "0");
          if (price === undefined) {
            throw new LineError(
              `PriceConsumerPaidExcSalesTax ${JSON.stringify(get("PriceConsumerPaidExcSalesTax"))} is not an amount`,
            );
          }
          amount = price * units;
          usageType = "download";
        } else {
          const n = base === "SU02" ? get("NumberOfStreams") || get("Usages") : get("Usages");
          if (!/^\d+$/.test(n)) throw new LineError(`the usages ${JSON.stringify(n)} are not a whole number`);
          units = BigInt(n);
          if (base === "SU03") {
            const net = parseAmount(get("NetRevenue") || "0");
            if (net === undefined)
              throw new LineError(`NetRevenue ${JSON.stringify(get("NetRevenue"))} is not an amount`);
            amount = net;
          } else if (summary.net !== undefined && summary.usages !== undefined && summary.usages > 0n) {
            amount = (summary.net * units) / summary.usages;
          } else {
            amount = 0n;
          }
          usageType = head.ugc ? "ugc" : /download/i.test(summary.useType) ? "download" : "stream";
        }
        if (!bearing) amount = 0n;
        const money = formatAmount(amount);
        return {
          reportingPeriod: head.reportingPeriod,
          salePeriod: head.salePeriod,
          store: store ?? "",
          territory: summary.territory,
          upc,
          isrc,
          usageType,
          units: units.toString(),
          gross: money,
          fees: "0",
          net: money,
          currency: summary.currency,
          storeResourceId,
          storeReleaseId,
        } satisfies RawLine;
      },
      finish() {
        if (!head) throw new FormatError(1, "the file has no HEAD record: not a DSR flat file");
        if (!foot) {
          warn(null, "the file has no FOOT record: its counts could not be checked (is the file complete?)");
          return;
        }
        const { line, fields, layout } = foot;
        const value = (name: string) => {
          const i = layout.get(name.toLowerCase());
          return i === undefined ? "" : (fields[i] ?? "").trim();
        };
        const checks: [string, number, boolean][] = [
          ["NumberOfLinesInFile", lastLine, true],
          ["NumberOfLinesInReport", lastLine, head.oneFile],
          ["NumberOfSummaryRecords", summaryRecords, true],
          ["NumberOfBlocksInFile", blocks.size, true],
          ["NumberOfBlocksInReport", blocks.size, head.oneFile],
        ];
        for (const [name, actual, compare] of checks) {
          if (!compare) continue;
          const said = footCount(value(name), name, line, warn);
          if (said !== undefined && said !== actual) {
            warn(line, `the FOOT record's ${name} is ${said}, the file has ${actual}`);
          }
        }
      },
    };
  },
};
