import { gtinIsValid } from "../../catalog/identifiers.ts";
import { formatAmount, parseAmount } from "../normalise.ts";
import { FormatError, type FormatParser, LineError, type RawLine, type RoyaltyFormat } from "./types.ts";

/**
 * `ddex-dsr`: a DDEX Digital Sales Report in its flat-file form (docs/royalties.md, "DDEX DSR";
 * sample docs/formats/ddex-dsr.tsv). Tab-separated records, each starting with its record type:
 *
 * - HEAD: the usage period (UsageStartDate) and when the report was made (MessageCreatedDateTime).
 * - SYxx: summary records; the details point at one by SummaryRecordId and take its territory,
 *   currency and revenue from it.
 * - Blocks (BlockId): RE (a release: ICPN = UPC), AS (a resource: ISRC), then SU details: SU01
 *   downloads, SU02 streams (Basic Audio Profile), SU03 usages with their own NetRevenue (UGC Profile).
 * - `#XXnn` rows name a record's columns; they override the layouts built in below, so a file's
 *   own column order wins. MW, RU, LI, SR and other records are read past. FOOT's counts are not
 *   trusted (real files get them wrong) and not checked.
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

export const ddexDsrFormat: RoyaltyFormat = {
  name: "ddex-dsr",
  title: "DDEX DSR flat file (Basic Audio and UGC profiles)",
  delimiter: "\t",
  quoting: false,
  storeInFile: false,
  create(options): FormatParser {
    const store = options.store;
    const layouts = new Map<string, Columns>(
      Object.entries(LAYOUTS).map(([k, v]) => [k, columns(v)] as [string, Columns]),
    );
    let head: { salePeriod: string; reportingPeriod: string; ugc: boolean } | undefined;
    const summaries = new Map<string, Summary>();
    let block = "";
    const releases = new Map<string, string>();
    const resources = new Map<string, string>();
    let firstIsrc = "";

    return {
      record(fields, line) {
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
          };
          return null;
        }
        if (!head)
          throw new FormatError(line, "the file does not start with a HEAD record: not a DSR flat file");
        if (base.startsWith("SY")) {
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
          if (id !== block) {
            block = id;
            releases.clear();
            resources.clear();
            firstIsrc = "";
          }
          if (base.startsWith("RE")) releases.set(get("ReleaseReference"), get("ICPN"));
          if (base.startsWith("AS")) {
            const isrc = get("ISRC");
            resources.set(get("ResourceReference"), isrc);
            if (!firstIsrc) firstIsrc = isrc;
          }
          return null;
        }
        if (base !== "SU01" && base !== "SU02" && base !== "SU03") return null;
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
        if (base === "SU03") {
          isrc = firstIsrc;
        } else {
          const resource = get("TransactedResource");
          const release = get("TransactedRelease");
          if (resource) {
            isrc = resources.get(resource) ?? "";
            if (!resources.has(resource)) {
              throw new LineError(
                `TransactedResource ${JSON.stringify(resource)} is not a resource of block ${block}`,
              );
            }
            // The release's ICPN helps matching when it is a valid code; an invalid one is dropped.
            const icpn = releases.size === 1 ? (releases.values().next().value ?? "") : "";
            if (/^\d{12,14}$/.test(icpn) && gtinIsValid(icpn)) upc = icpn;
          } else if (release) {
            if (!releases.has(release)) {
              throw new LineError(
                `TransactedRelease ${JSON.stringify(release)} is not a release of block ${block}`,
              );
            }
            upc = releases.get(release) ?? "";
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
        } satisfies RawLine;
      },
      finish() {
        if (!head) throw new FormatError(1, "the file has no HEAD record: not a DSR flat file");
      },
    };
  },
};
