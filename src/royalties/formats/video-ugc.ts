import { cell, FormatError, type FormatParser, headerIndex, type RoyaltyFormat } from "./types.ts";

/**
 * `video-ugc`: a video platform's asset revenue report (docs/formats/video-ugc.csv). Its quirks:
 * a preamble of `#Key: value` lines before the header holding the period and the currency (the
 * lines carry neither), territories often missing (empty, ZZ or --: unknown), no store fees (the
 * partner revenue is both gross and net), quoted asset titles with commas and quotes, and usage
 * named by content type. The lines do not name the store: --store does (default youtube_content_id).
 */
const REQUIRED = ["Country", "ISRC", "Content Type", "Owned Views", "Partner Revenue"] as const;
const OPTIONAL = ["UPC"] as const;

const CONTENT_TYPES: Record<string, string> = {
  ugc: "ugc",
  "user generated": "ugc",
  "art track": "stream",
  "partner uploaded": "stream",
  premium: "stream",
};

export const videoUgcFormat: RoyaltyFormat = {
  name: "video-ugc",
  title: "Video platform asset revenue report (preamble, missing territories)",
  delimiter: ",",
  storeInFile: false,
  defaultStore: "youtube_content_id",
  create(options): FormatParser {
    let index: Map<string, number> | undefined;
    const store = options.store ?? "youtube_content_id";
    const preamble = new Map<string, string>();
    let salePeriod = "";
    let currency = "";
    return {
      record(fields, line) {
        if (!index) {
          const first = (fields[0] ?? "").replace(/^\uFEFF/, "").trim();
          if (first.startsWith("#")) {
            const text = fields
              .join(",")
              .replace(/^\uFEFF/, "")
              .trim()
              .slice(1);
            const colon = text.indexOf(":");
            if (colon > 0)
              preamble.set(text.slice(0, colon).trim().toLowerCase(), text.slice(colon + 1).trim());
            return null;
          }
          index = headerIndex(fields, line, REQUIRED, OPTIONAL);
          // "#Period: 2026-03-01 to 2026-03-31" (one month), else --period.
          const period = preamble.get("period");
          if (period) {
            const m = /^(\d{4}-\d{2})-01\s*(?:to|-)\s*(\d{4}-\d{2})-\d{2}$/.exec(period);
            if (!m || m[1] !== m[2]) {
              throw new FormatError(
                line,
                `the preamble's period ${JSON.stringify(period)} is not one calendar month`,
              );
            }
            salePeriod = m[1] ?? "";
          } else if (options.period) {
            salePeriod = options.period;
          } else {
            throw new FormatError(line, "the report has no #Period line: say --period YYYY-MM");
          }
          currency = (preamble.get("currency") ?? "").toUpperCase();
          if (!currency) throw new FormatError(line, "the report has no #Currency line");
          return null;
        }
        const ix = index;
        const get = (name: string) => cell(fields, ix, name);
        const country = get("Country").toUpperCase();
        const revenue = get("Partner Revenue");
        return {
          reportingPeriod: options.period ?? salePeriod,
          salePeriod,
          store,
          territory: country === "ZZ" || country === "--" ? "" : country,
          upc: get("UPC"),
          isrc: get("ISRC"),
          usageType: CONTENT_TYPES[get("Content Type").toLowerCase()] ?? "other",
          units: get("Owned Views"),
          gross: revenue,
          fees: "0",
          net: revenue,
          currency,
        };
      },
      finish() {
        if (!index) throw new FormatError(1, "the report has no header line");
      },
    };
  },
};
