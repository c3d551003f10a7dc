import { LAYOUTS } from "./formats/ddex-dsr.ts";
/** The formats a sample is written in: every format the import reads. */
export const SAMPLE_FORMATS = ["backline", "streaming-monthly", "video-ugc", "ddex-dsr"] as const;

/**
 * Sample store reports for one release of your own catalog (`backline royalties sample`,
 * docs/royalties.md): plausible stores, countries, units and amounts, written in one of
 * SAMPLE_FORMATS so that importing it matches every line to the release.
 *
 * Amounts are exact: computed in millionths of the currency with integers, written as decimals
 * (never floats), so gross = fees + net on every line and the totals printed are the totals the
 * import reports. A seed makes a report reproducible; without one each sample differs, so a second
 * sample of the same release is not refused as a duplicate of the first.
 */

export interface SampleRelease {
  id: string;
  title: string;
  artistName: string;
  upc: string | null;
  tracks: { title: string; isrc: string | null }[];
  /** Stores the release was delivered to, else the enabled stores, with their kind. */
  stores: { code: string; kind: string }[];
  /**
   * The stores' DDEX party ids (`ddex.recipient.dpid`) by code, where set: a DSR sample names its
   * store by it, so that its import finds the store without --store.
   */
  partyIds?: Record<string, string> | undefined;
}

export interface SampleOptions {
  format: string;
  /** YYYY-MM: the month of sale or use; reported the month after. */
  salePeriod: string;
  seed: number;
  /** For formats whose lines do not name the store: the store the report is from. */
  store?: string | undefined;
}

export interface SampleTotal {
  currency: string;
  lines: number;
  units: number;
  gross: string;
  fees: string;
  net: string;
}

export interface SampleReport {
  text: string;
  format: string;
  /** Stores the lines are from. */
  stores: string[];
  /** The --store the import needs (formats whose lines do not name it), else undefined. */
  importStore: string | undefined;
  countries: string[];
  salePeriod: string;
  reportingPeriod: string;
  lines: number;
  totals: SampleTotal[];
}

export class SampleError extends Error {}

/** Per country: its currency and a plausible per-stream payout, in millionths of that currency. */
const COUNTRIES: { code: string; currency: string; stream: bigint; download: bigint; album: bigint }[] = [
  { code: "US", currency: "USD", stream: 4_000n, download: 1_290_000n, album: 9_990_000n },
  { code: "GB", currency: "GBP", stream: 3_200n, download: 990_000n, album: 7_990_000n },
  { code: "DE", currency: "EUR", stream: 3_600n, download: 1_290_000n, album: 9_990_000n },
  { code: "FR", currency: "EUR", stream: 3_400n, download: 1_290_000n, album: 9_990_000n },
  { code: "SE", currency: "SEK", stream: 38_000n, download: 12_000_000n, album: 99_000_000n },
  { code: "BR", currency: "BRL", stream: 9_000n, download: 4_900_000n, album: 29_900_000n },
  { code: "JP", currency: "JPY", stream: 500_000n, download: 255_000_000n, album: 1_500_000_000n },
  { code: "CA", currency: "CAD", stream: 5_200n, download: 1_290_000n, album: 11_990_000n },
  { code: "AU", currency: "AUD", stream: 5_800n, download: 2_190_000n, album: 16_990_000n },
  { code: "MX", currency: "MXN", stream: 50_000n, download: 15_000_000n, album: 119_000_000n },
];

/** The stores' cut of gross revenue, in per cent. */
const STORE_FEE_PERCENT = 30n;

/** A small seeded generator (mulberry32): the same seed writes the same report. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Millionths to decimal text with six places: 1234567n → "1.234567". */
function micros(v: bigint): string {
  const negative = v < 0n;
  const abs = negative ? -v : v;
  return `${negative ? "-" : ""}${abs / 1_000_000n}.${(abs % 1_000_000n).toString().padStart(6, "0")}`;
}

/** "1.234567" → "1,234567" and thousands grouped with dots: "12345.5" → "12.345,5". */
function decimalComma(text: string): string {
  const [int = "", frac] = text.split(".");
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ".");
  return frac === undefined ? grouped : `${grouped},${frac}`;
}

function nextMonth(period: string): string {
  const [y, m] = period.split("-").map(Number) as [number, number];
  return m === 12 ? `${y + 1}-01` : `${y}-${String(m + 1).padStart(2, "0")}`;
}

function lastDay(period: string): string {
  const [y, m] = period.split("-").map(Number) as [number, number];
  return String(new Date(Date.UTC(y, m, 0)).getUTCDate()).padStart(2, "0");
}

/** A CSV field, quoted when it holds the delimiter, a quote or a line break (RFC 4180). */
function field(value: string, delimiter: string): string {
  return value.includes(delimiter) || /["\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value;
}

interface Line {
  store: string;
  country: (typeof COUNTRIES)[number];
  upc: string;
  /** ddex-dsr: units returned (a download's Returns); the line's units are net of them. */
  returns?: number;
  isrc: string;
  title: string;
  usage: "stream" | "download" | "ugc";
  /** The wording a store uses for the usage (streaming-monthly's product type, video-ugc's content type). */
  product: string;
  units: number;
  gross: bigint;
  fees: bigint;
  net: bigint;
}

/** The sample report of `release` in `options.format`. */
export function sampleReport(release: SampleRelease, options: SampleOptions): SampleReport {
  if (!(SAMPLE_FORMATS as readonly string[]).includes(options.format)) {
    throw new SampleError(`no sample writer for ${options.format}: one of ${SAMPLE_FORMATS.join(", ")}`);
  }
  const tracks = release.tracks.filter((t): t is { title: string; isrc: string } => Boolean(t.isrc));
  if (tracks.length === 0 && !release.upc) {
    throw new SampleError(
      `release ${release.id} has no UPC and no ISRC yet: stores report on those (it gets them at submission)`,
    );
  }
  const rand = random(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)] as T;
  const between = (min: number, max: number) => min + Math.floor(rand() * (max - min + 1));
  const someCountries = (n: number) => {
    const rest = COUNTRIES.slice(1);
    const chosen = [COUNTRIES[0] as (typeof COUNTRIES)[number]];
    while (chosen.length < n && rest.length > 0)
      chosen.push(rest.splice(between(0, rest.length - 1), 1)[0] as never);
    return chosen;
  };
  const amounts = (units: number, price: bigint, fee = true) => {
    // ±15 % around the country's rate, in whole millionths.
    const gross = (BigInt(units) * price * BigInt(between(85, 115))) / 100n;
    const fees = fee ? (gross * STORE_FEE_PERCENT) / 100n : 0n;
    return { gross, fees, net: gross - fees };
  };
  const ofKind = (kind: string) => release.stores.filter((s) => s.kind === kind).map((s) => s.code);
  const upc = release.upc ?? "";
  const lines: Line[] = [];
  let importStore: string | undefined;
  const streamed = (
    store: string,
    country: (typeof COUNTRIES)[number],
    t: { title: string; isrc: string },
    product: string,
    units: number,
    money: { gross: bigint; fees: bigint; net: bigint },
  ) =>
    lines.push({
      store,
      country,
      upc,
      isrc: t.isrc,
      title: t.title,
      usage: "stream",
      product,
      units,
      ...money,
    });

  if (options.format === "video-ugc") {
    // One platform, one currency (the preamble's), territories sometimes unknown.
    const store = options.store ?? ofKind("ugc")[0] ?? "youtube_content_id";
    importStore = store;
    const usd = COUNTRIES[0] as (typeof COUNTRIES)[number];
    for (const t of tracks) {
      for (const c of someCountries(between(3, 5))) {
        const units = between(200, 40_000);
        const ugc = rand() < 0.6;
        lines.push({
          store,
          // One currency; some territories come unknown (ZZ).
          country: { ...c, code: c.code === "MX" ? "ZZ" : c.code, currency: usd.currency },
          upc,
          isrc: t.isrc,
          title: t.title,
          usage: ugc ? "ugc" : "stream",
          product: ugc ? "UGC" : "Art Track",
          units,
          ...amounts(units, ugc ? 600n : 1_100n, false),
        });
      }
    }
  } else if (options.format === "ddex-dsr") {
    // One store's DSR: streams per territory, each territory one summary whose NetRevenue is
    // shared over its streams (so every stream of a territory earns the same rate, and each line's
    // share is exact), and downloads priced per unit. A DSR carries no store fees: gross = net.
    const store = options.store ?? ofKind("dsp")[0] ?? "spotify";
    // A store with its own party id (and no other store with it) is found by it on import.
    const party = release.partyIds?.[store];
    const unique =
      party &&
      Object.values(release.partyIds ?? {}).filter((p) => p.toUpperCase() === party.toUpperCase()).length ===
        1;
    importStore = unique ? undefined : store;
    for (const c of someCountries(between(2, 4))) {
      const rate = (c.stream * BigInt(between(85, 115))) / 100n;
      for (const t of tracks) {
        const units = between(50, 25_000);
        const gross = BigInt(units) * rate;
        streamed(store, c, t, "OnDemandStream", units, { gross, fees: 0n, net: gross });
      }
    }
    const c = pick(COUNTRIES.slice(0, 4));
    const sold = (price: bigint, title: string, isrc: string, product: string) => {
      const units = between(1, 12);
      const gross = BigInt(units) * price;
      const returns = rand() < 0.3 ? 1 : 0;
      lines.push({
        store,
        country: c,
        upc,
        isrc,
        title,
        usage: "download",
        product,
        units,
        returns,
        gross,
        fees: 0n,
        net: gross,
      });
    };
    for (const t of tracks.slice(0, 2)) sold(c.download, t.title, t.isrc, "PermanentDownload");
    if (upc) sold(c.album, release.title, "", "PermanentDownload");
  } else {
    const dsps = ofKind("dsp");
    const streaming =
      options.format === "streaming-monthly"
        ? [options.store ?? dsps[0] ?? "spotify"]
        : (dsps.length ? dsps : ["spotify"]).slice(0, 3);
    if (options.format === "streaming-monthly") importStore = streaming[0];
    for (const store of streaming) {
      for (const t of tracks) {
        for (const c of someCountries(between(2, 5))) {
          const units = between(50, 25_000);
          streamed(
            store,
            c,
            t,
            pick(["Premium Stream", "Ad-Supported Stream"]),
            units,
            amounts(units, c.stream),
          );
        }
      }
    }
    // Downloads: a track or two, and the release itself (a line with its UPC only).
    const download = options.format === "streaming-monthly" ? streaming[0] : ofKind("download")[0];
    if (download) {
      const c = pick(COUNTRIES.slice(0, 4));
      for (const t of tracks.slice(0, 2)) {
        const units = between(1, 12);
        lines.push({
          store: download,
          country: c,
          upc,
          isrc: t.isrc,
          title: t.title,
          usage: "download",
          product: "Track Download",
          units,
          ...amounts(units, c.download),
        });
      }
      if (upc) {
        const units = between(1, 5);
        lines.push({
          store: download,
          country: c,
          upc,
          isrc: "",
          title: release.title,
          usage: "download",
          product: "Album Download",
          units,
          ...amounts(units, c.album),
        });
      }
    }
  }

  const reportingPeriod = nextMonth(options.salePeriod);
  const text =
    options.format === "backline"
      ? backlineText(lines, reportingPeriod, options.salePeriod)
      : options.format === "streaming-monthly"
        ? streamingMonthlyText(lines, release, reportingPeriod, options.salePeriod)
        : options.format === "ddex-dsr"
          ? ddexDsrText(lines, release, reportingPeriod, options.salePeriod, options.seed)
          : videoUgcText(lines, release, options.salePeriod);

  const byCurrency = new Map<
    string,
    { lines: number; units: number; gross: bigint; fees: bigint; net: bigint }
  >();
  for (const l of lines) {
    const t = byCurrency.get(l.country.currency) ?? { lines: 0, units: 0, gross: 0n, fees: 0n, net: 0n };
    t.lines += 1;
    t.units += l.units;
    t.gross += l.gross;
    t.fees += l.fees;
    t.net += l.net;
    byCurrency.set(l.country.currency, t);
  }
  const trim = (v: bigint) => micros(v).replace(/\.?0+$/, "") || "0";
  return {
    text,
    format: options.format,
    stores: [...new Set(lines.map((l) => l.store))],
    importStore,
    countries: [...new Set(lines.map((l) => l.country.code).filter((c) => c !== "ZZ"))],
    salePeriod: options.salePeriod,
    reportingPeriod: options.format === "video-ugc" ? options.salePeriod : reportingPeriod,
    lines: lines.length,
    totals: [...byCurrency.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([currency, t]) => ({
        currency,
        lines: t.lines,
        units: t.units,
        gross: trim(t.gross),
        fees: trim(t.fees),
        net: trim(t.net),
      })),
  };
}

function backlineText(lines: Line[], reportingPeriod: string, salePeriod: string): string {
  const rows = lines.map((l) =>
    [
      reportingPeriod,
      salePeriod,
      l.store,
      l.country.code,
      l.upc,
      l.isrc,
      l.usage,
      String(l.units),
      micros(l.gross),
      micros(l.fees),
      micros(l.net),
      l.country.currency,
    ].join(","),
  );
  return `${["reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency", ...rows].join("\n")}\n`;
}

/** A streaming store's monthly report, with its quirks (docs/royalties.md): BOM, `;`, decimal commas, YYYYMM, UK. */
function streamingMonthlyText(
  lines: Line[],
  release: SampleRelease,
  reportingPeriod: string,
  salePeriod: string,
): string {
  const month = (p: string) => p.replace("-", "");
  // A spreadsheet drops a UPC's leading zero; the import pads it back.
  const upc = (v: string) => (/^0\d{11}$/.test(v) ? v.slice(1) : v);
  const sum = { units: 0, gross: 0n, fees: 0n, net: 0n };
  const rows = lines.map((l) => {
    sum.units += l.units;
    sum.gross += l.gross;
    sum.fees += l.fees;
    sum.net += l.net;
    return [
      month(reportingPeriod),
      month(salePeriod),
      l.country.code === "GB" ? "UK" : l.country.code,
      upc(l.upc),
      l.isrc,
      field(l.title, ";"),
      field(release.artistName, ";"),
      l.product,
      decimalComma(String(l.units)),
      decimalComma(micros(l.gross)),
      decimalComma(micros(l.fees)),
      decimalComma(micros(l.net)),
      l.country.currency,
    ].join(";");
  });
  const header =
    "\uFEFFReporting Month;Sales Month;Country;UPC;ISRC;Track Title;Artist Name;Product Type;Quantity;Gross Revenue;Store Commission;Net Revenue;Currency";
  // The closing line sums the report (over currencies, as such reports do); the import skips it.
  const total = `TOTAL;;;;;;;;${decimalComma(String(sum.units))};${decimalComma(micros(sum.gross))};${decimalComma(micros(sum.fees))};${decimalComma(micros(sum.net))};`;
  return `${[header, ...rows, total].join("\r\n")}\r\n`;
}

/** A video platform's asset revenue report: a preamble with the period and currency, then the assets. */
function videoUgcText(lines: Line[], release: SampleRelease, salePeriod: string): string {
  const assets = new Map<string, string>();
  const rows = lines.map((l) => {
    const asset = assets.get(l.isrc) ?? `A${String(1001 + assets.size)}`;
    assets.set(l.isrc, asset);
    return [
      "None",
      l.country.code,
      asset,
      field(l.title, ","),
      field(release.artistName, ","),
      l.isrc,
      l.upc,
      l.product,
      String(l.units),
      micros(l.gross),
    ].join(",");
  });
  return `${[
    "#Report: Music Asset Revenue",
    `#Period: ${salePeriod}-01 to ${salePeriod}-${lastDay(salePeriod)}`,
    "#Currency: USD",
    "Adjustment Type,Country,Asset ID,Asset Title,Asset Labels,ISRC,UPC,Content Type,Owned Views,Partner Revenue",
    ...rows,
  ].join("\n")}\n`;
}

/** "apple_music" → "Apple Music": a store's name where a DSR spells out its sender. */
function storeName(code: string): string {
  return code
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join(" ");
}

/** A DDEX party id (PADPIDA + 11 characters) made up from a name, the same for the same name. */
function dpid(name: string): string {
  let h = 2166136261;
  for (const ch of name) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
  return `PADPIDA${String(h).padStart(10, "0").slice(0, 10)}X`;
}

/**
 * A store's DDEX DSR in the flat-file Basic Audio Profile 1.3, as the real ones are written
 * (../shared/ddex/dsr): CRLF, a HEAD record, the SY01.02 summaries, one block for the release
 * (RE01.02, an AS02.03 per track, SU02.02 streams and SU01.02 downloads), each record type's
 * `#` column row before its first use, and a FOOT that counts the file. No field is quoted: tabs
 * and line breaks in titles become spaces.
 */
function ddexDsrText(
  lines: Line[],
  release: SampleRelease,
  reportingPeriod: string,
  salePeriod: string,
  seed: number,
): string {
  const text = (v: string) => v.replace(/[\t\r\n]+/g, " ");
  const store = lines[0]?.store ?? "spotify";
  const name = storeName(store);
  const sender = release.partyIds?.[store] ?? dpid(store);
  const out: string[][] = [];
  const created = `${reportingPeriod}-03T07:59:30Z`;
  out.push(
    [
      "HEAD",
      "dsrf/1.1/1.4.1/1.3",
      "BasicAudioProfile",
      "1.3",
      String(1_000_000_000 + seed),
      created,
      "1",
      "1",
      `${salePeriod}-01`,
      `${salePeriod}-${lastDay(salePeriod)}`,
      sender,
      name,
      `${name} Premium`,
      dpid("Backline Distribution"),
      "Backline Distribution",
      "",
    ],
    ["#HEAD", ...LAYOUTS.HEAD],
    [
      "#SY01.02",
      // The parser's SY01 layout, as the real files name its columns (TotalUsages for Usages).
      ...LAYOUTS.SY01.map((c) => (c === "Usages" ? "TotalUsages" : c)),
      "IndirectValue",
      "CurrencyOfTransaction",
      "ExchangeRate",
    ],
  );
  // One summary per territory and use: its usages and revenue are the sums of its lines.
  const summaries = new Map<string, { id: string; usages: number; net: bigint; line: Line }>();
  const summaryOf = (l: Line) => {
    const key = `${l.country.code} ${l.usage}`;
    let s = summaries.get(key);
    if (!s) {
      s = { id: `S${summaries.size + 1}`, usages: 0, net: 0n, line: l };
      summaries.set(key, s);
    }
    s.usages += l.units;
    s.net += l.net;
    return s.id;
  };
  const ids = lines.map(summaryOf);
  for (const s of summaries.values()) {
    const stream = s.line.usage === "stream";
    const currency = s.line.country.currency;
    out.push([
      "SY01.02",
      s.id,
      name,
      "",
      stream ? "SubscriptionModel" : "PayAsYouGoModel",
      stream ? "OnDemandStream" : "PermanentDownload",
      s.line.country.code,
      stream ? `${name} Premium` : `${name} Downloads`,
      String(s.usages),
      stream ? String(s.usages * 7 + 1000) : "",
      currency,
      micros(s.net),
      "0.00",
      currency,
      "1.00",
    ]);
  }
  const dspId = (prefix: string, v: string) => `${prefix}${v.replace(/-/g, "").slice(0, 10).toUpperCase()}`;
  out.push(
    [
      "#RE01.02",
      ...LAYOUTS.RE01,
      "DisplayArtistName",
      "DisplayArtistPartyId",
      "Title",
      "SubTitle",
      "ReleaseType",
      "LabelName",
      "PLine",
      "DataProviderName",
      "ReleaseDate",
    ],
    [
      "RE01.02",
      "1",
      "R1",
      dspId("B0", release.id),
      "",
      "",
      lines[0]?.upc ?? "",
      text(release.artistName),
      "",
      text(release.title),
      "",
      release.tracks.length > 3 ? "Album" : "Single",
      "",
      "",
      "Backline Distribution",
      "",
    ],
    [
      "#AS02.03",
      ...LAYOUTS.AS02,
      "Title",
      "SubTitle",
      "DisplayArtistName",
      "DisplayArtistPartyID",
      "Duration",
      "ResourceType",
    ],
  );
  const resources = new Map<string, string>();
  for (const l of lines) {
    if (!l.isrc || resources.has(l.isrc)) continue;
    const ref = `A${resources.size + 1}`;
    resources.set(l.isrc, ref);
    out.push([
      "AS02.03",
      "1",
      ref,
      dspId("T0", l.isrc),
      l.isrc,
      text(l.title),
      "",
      text(release.artistName),
      "",
      "",
      "SoundRecording",
    ]);
  }
  let streamsHeaded = false;
  let downloadsHeaded = false;
  lines.forEach((l, i) => {
    const tx = `${1000000 + (seed % 1000000)}${String(i + 1).padStart(7, "0")}`;
    if (l.usage === "stream") {
      if (!streamsHeaded) {
        out.push(["#SU02.02", ...LAYOUTS.SU02, "PromotionalActivity", "UseType"]);
        streamsHeaded = true;
      }
      out.push([
        "SU02.02",
        "1",
        ids[i] ?? "",
        tx,
        "",
        resources.get(l.isrc) ?? "",
        "TRUE",
        String(l.units),
        "",
        "",
        "OnDemandStream",
      ]);
    } else {
      if (!downloadsHeaded) {
        out.push(["#SU01.02", ...LAYOUTS.SU01, "PromotionalActivity"]);
        downloadsHeaded = true;
      }
      const returns = l.returns ?? 0;
      const price = l.units > 0 ? l.gross / BigInt(l.units) : 0n;
      out.push([
        "SU01.02",
        "1",
        ids[i] ?? "",
        tx,
        l.isrc ? "" : "R1",
        l.isrc ? (resources.get(l.isrc) ?? "") : "",
        "TRUE",
        "",
        String(l.units + returns),
        String(returns),
        micros(price).replace(/0{1,4}$/, ""),
        "",
      ]);
    }
  });
  out.push([
    "#FOOT",
    "NumberOfLinesInFile",
    "NumberOfLinesInReport",
    "NumberOfSummaryRecords",
    "NumberOfBlocksInFile",
    "NumberOfBlocksInReport",
  ]);
  const total = String(out.length + 1);
  out.push(["FOOT", total, total, String(summaries.size), "1", "1"]);
  return `${out.map((r) => r.join("\t")).join("\r\n")}\r\n`;
}
