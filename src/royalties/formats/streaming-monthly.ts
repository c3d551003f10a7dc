import {
  cell,
  FormatError,
  type FormatParser,
  headerIndex,
  LineError,
  monthOf,
  type RoyaltyFormat,
} from "./types.ts";

/**
 * `streaming-monthly`: the monthly sales report of a streaming store (docs/formats/streaming-monthly.csv).
 * Its quirks: semicolons between fields, a byte-order mark, decimal commas with dots between
 * thousands (1.234,5678), months written YYYYMM, the country UK for GB, UPCs that lost their
 * leading zero in a spreadsheet (normalise pads them), product types in words, and a closing
 * TOTAL line. The lines do not name the store: --store does (default spotify).
 */
const REQUIRED = [
  "Reporting Month",
  "Sales Month",
  "Country",
  "UPC",
  "ISRC",
  "Product Type",
  "Quantity",
  "Gross Revenue",
  "Store Commission",
  "Net Revenue",
  "Currency",
] as const;

const PRODUCT_TYPES: Record<string, string> = {
  "premium stream": "stream",
  "ad-supported stream": "stream",
  "free stream": "stream",
  stream: "stream",
  "track download": "download",
  "album download": "download",
  download: "download",
  radio: "radio",
  "non-interactive stream": "radio",
};

/**
 * 1.234,5678 -> 1234.5678 (thousands dots dropped, the comma made a point). Thousands groups
 * follow a leading group of 1 to 3 digits that does not start with 0: "0.004" and "-0.500" are
 * refused (a decimal point where a comma belongs), not read as 4 and -500; "0,004" is 0.004.
 */
export function decimalComma(value: string, line: string): string {
  const v = value.replace(/\s/g, "");
  if (v === "") return v;
  if (!/^-?[1-9]\d{0,2}(\.\d{3})+(,\d+)?$/.test(v) && !/^-?\d+(,\d+)?$/.test(v)) {
    throw new LineError(
      `${line} ${JSON.stringify(value)} is not a number with a decimal comma (e.g. 1.234,56)`,
    );
  }
  return v.replace(/\./g, "").replace(",", ".");
}

export const streamingMonthlyFormat: RoyaltyFormat = {
  name: "streaming-monthly",
  title: "Streaming store monthly sales report (semicolons, decimal commas)",
  delimiter: ";",
  storeInFile: false,
  defaultStore: "spotify",
  create(options): FormatParser {
    let index: Map<string, number> | undefined;
    const store = options.store ?? "spotify";
    return {
      record(fields, line) {
        if (!index) {
          index = headerIndex(fields, line, REQUIRED);
          return null;
        }
        const ix = index;
        const get = (name: string) => cell(fields, ix, name);
        // The closing line sums the report: not a sale.
        if (/^total$/i.test((fields[0] ?? "").trim())) return null;
        const product = get("Product Type");
        const country = get("Country").toUpperCase();
        return {
          reportingPeriod: monthOf(get("Reporting Month")) || (options.period ?? ""),
          salePeriod: monthOf(get("Sales Month")),
          store,
          territory: country === "UK" ? "GB" : country,
          upc: get("UPC"),
          isrc: get("ISRC"),
          usageType: PRODUCT_TYPES[product.toLowerCase()] ?? "other",
          units: decimalComma(get("Quantity"), "Quantity"),
          gross: decimalComma(get("Gross Revenue"), "Gross Revenue"),
          fees: decimalComma(get("Store Commission"), "Store Commission"),
          net: decimalComma(get("Net Revenue"), "Net Revenue"),
          currency: get("Currency").toUpperCase(),
        };
      },
      finish() {
        if (!index) throw new FormatError(1, "the report has no header line");
      },
    };
  },
};
