import { cell, FormatError, type FormatParser, headerIndex, type RoyaltyFormat } from "./types.ts";

/**
 * `backline`: Backline's own report layout (docs/formats/backline.csv). Comma-separated UTF-8,
 * RFC 4180 quoting, a header naming the columns in any order (extra columns are ignored), one
 * line per store, territory, product and usage type, decimals with a point.
 */
const COLUMNS = [
  "reporting_period",
  "sale_period",
  "store",
  "territory",
  "upc",
  "isrc",
  "usage_type",
  "units",
  "gross",
  "fees",
  "net",
  "currency",
] as const;

export const backlineFormat: RoyaltyFormat = {
  name: "backline",
  title: "Backline standard report (CSV)",
  delimiter: ",",
  storeInFile: true,
  create(options): FormatParser {
    let index: Map<string, number> | undefined;
    return {
      record(fields, line) {
        if (!index) {
          index = headerIndex(fields, line, COLUMNS);
          return null;
        }
        const ix = index;
        const get = (name: string) => cell(fields, ix, name);
        return {
          reportingPeriod: get("reporting_period") || (options.period ?? ""),
          salePeriod: get("sale_period"),
          store: get("store"),
          territory: get("territory"),
          upc: get("upc"),
          isrc: get("isrc"),
          usageType: get("usage_type").toLowerCase(),
          units: get("units"),
          gross: get("gross"),
          fees: get("fees"),
          net: get("net"),
          currency: get("currency"),
        };
      },
      finish() {
        if (!index) throw new FormatError(1, "the report has no header line");
      },
    };
  },
};
