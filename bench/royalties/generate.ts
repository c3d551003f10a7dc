// The benchmark's data: a catalog (accounts, releases with UPCs, tracks with ISRCs) with ids made
// here, a `backline`-format report of N lines over it, and the same lines normalised as the
// importer sends them to COPY (the baseline's input). Deterministic: the same N, the same files.
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";

export const ACCOUNTS = Number(process.env.BENCH_ACCOUNTS ?? 100);
export const RELEASES_PER_ACCOUNT = 20;
export const TRACKS_PER_RELEASE = 10;
const STORES = [
  "spotify",
  "apple_music",
  "amazon_music",
  "deezer",
  "tidal",
  "youtube_music",
  "itunes",
  "soundcloud",
];
const TERRITORIES = [
  "US",
  "GB",
  "DE",
  "FR",
  "SE",
  "NL",
  "ES",
  "IT",
  "BR",
  "MX",
  "CA",
  "AU",
  "JP",
  "KR",
  "IN",
].flatMap((c, i) => [
  c,
  ["PL", "NO", "DK", "FI", "AT", "CH", "BE", "PT", "IE", "NZ", "AR", "CL", "CO", "ZA", "NG"][i] ?? c,
]);
const EURO = new Set(["DE", "FR", "NL", "ES", "IT", "FI", "AT", "BE", "PT", "IE"]);

export interface Catalog {
  accounts: string[];
  releases: { id: string; accountId: string; upc: string }[];
  tracks: { id: string; releaseId: string; accountId: string; isrc: string }[];
}

function gtin(first11: string): string {
  const d = [...first11].reverse().map(Number);
  let sum = 0;
  for (let i = 0; i < d.length; i++) sum += (d[i] ?? 0) * (i % 2 === 0 ? 3 : 1);
  return first11 + ((10 - (sum % 10)) % 10);
}

export function makeCatalog(accountIds: string[]): Catalog {
  const c: Catalog = { accounts: accountIds, releases: [], tracks: [] };
  let n = 0;
  for (const accountId of accountIds) {
    for (let r = 0; r < RELEASES_PER_ACCOUNT; r++) {
      const release = {
        id: randomUUID(),
        accountId,
        upc: gtin(`19${String(c.releases.length + 1).padStart(9, "0")}`),
      };
      c.releases.push(release);
      for (let t = 0; t < TRACKS_PER_RELEASE; t++) {
        n++;
        c.tracks.push({
          id: randomUUID(),
          releaseId: release.id,
          accountId,
          isrc: `QZBEN26${String(n).padStart(5, "0")}`,
        });
      }
    }
  }
  return c;
}

const money = (micros: number) => `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, "0")}`;

export interface GeneratedLine {
  sale: string;
  store: string;
  territory: string;
  upc: string;
  isrc: string;
  usage: string;
  units: number;
  gross: string;
  fees: string;
  net: string;
  currency: string;
  track: Catalog["tracks"][number] | undefined;
}

async function writeLines(
  file: string,
  lines: number,
  header: string,
  row: (i: number) => string,
): Promise<number> {
  const out = createWriteStream(file, { highWaterMark: 1 << 20 });
  let bytes = 0;
  let buf = header;
  for (let i = 0; i < lines; i++) {
    buf += row(i);
    if (buf.length > 1 << 20) {
      bytes += buf.length;
      if (!out.write(buf)) await once(out, "drain");
      buf = "";
    }
  }
  bytes += buf.length;
  out.end(buf);
  await once(out, "finish");
  return bytes;
}

/** The report, in the backline format. */
export function writeReport(c: Catalog, file: string, lines: number): Promise<number> {
  const upcOf = new Map(c.releases.map((r) => [r.id, r.upc]));
  return writeLines(
    file,
    lines,
    "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency\n",
    (i) => {
      const l = lineAtFast(c, upcOf, i);
      return `2026-04,${l.sale},${l.store},${l.territory},${l.upc},${l.isrc},${l.usage},${l.units},${l.gross},${l.fees},${l.net},${l.currency}\n`;
    },
  );
}

/** The same lines, normalised and matched, in COPY text format for internal.royalty_lines. */
export function writeBaseline(
  c: Catalog,
  file: string,
  lines: number,
  importId: string,
  tenantId: string,
): Promise<number> {
  const upcOf = new Map(c.releases.map((r) => [r.id, r.upc]));
  const ends: Record<string, string> = {
    "2026-01": "2026-01-31",
    "2026-02": "2026-02-28",
    "2026-03": "2026-03-31",
  };
  return writeLines(file, lines, "", (i) => {
    const l = lineAtFast(c, upcOf, i);
    const t = l.track;
    return `${importId}\t${tenantId}\t${t ? t.accountId : "\\N"}\t${t ? t.releaseId : "\\N"}\t${t ? t.id : "\\N"}\t${i + 2}\t2026-04-01\t${
      l.sale
    }-01\t${ends[l.sale]}\t${l.store}\t${l.territory}\t${l.upc || "\\N"}\t${l.isrc}\t${l.usage}\t${l.units}\t${l.gross}\t${l.fees}\t${
      l.net
    }\t${l.currency}\n`;
  });
}

/** Line i of the report: one in 50 carries an ISRC the catalog does not have (unmatched). */
function lineAtFast(c: Catalog, upcOf: Map<string, string>, i: number): GeneratedLine {
  const t = c.tracks[i % c.tracks.length];
  const k = Math.floor(i / c.tracks.length);
  const store = STORES[k % STORES.length] ?? "spotify";
  const territory = TERRITORIES[Math.floor(k / STORES.length) % TERRITORIES.length] ?? "US";
  const period = Math.floor(k / (STORES.length * TERRITORIES.length)) % 3;
  const usage = store === "itunes" ? "download" : "stream";
  const units = 1 + ((i * 7919) % 5000);
  const gross = units * (usage === "download" ? 990_000 : 4_000);
  const fees = Math.floor(gross * 0.3);
  const unmatched = i % 50 === 7;
  return {
    sale: `2026-0${period + 1}`,
    store,
    territory,
    upc: unmatched ? "" : t ? (upcOf.get(t.releaseId) ?? "") : "",
    isrc: unmatched ? `QZXXX26${String(i % 99999).padStart(5, "0")}` : (t?.isrc ?? ""),
    usage,
    units,
    gross: money(gross),
    fees: money(fees),
    net: money(gross - fees),
    currency: EURO.has(territory) ? "EUR" : "USD",
    track: unmatched ? undefined : t,
  };
}

/**
 * The report as a DDEX DSR flat file (BENCH_FORMAT=ddex-dsr): one summary per territory, then a
 * block per track (RE, AS) holding its SU02 stream lines, one per territory in turn, until N
 * lines. One in 50 blocks carries an ISRC the catalog does not have.
 */
export async function writeDsrReport(c: Catalog, file: string, lines: number): Promise<number> {
  const upcOf = new Map(c.releases.map((r) => [r.id, r.upc]));
  const perTrack = Math.max(1, Math.ceil(lines / c.tracks.length));
  const head =
    "HEAD\tdsrf/1.1/1.4.1/1.3\tBasicAudioProfile\t1.3\tBENCH\t2026-04-05T00:00:00Z\t1\t1\t2026-03-01\t2026-03-31\tPADPIDA2026000001X\tBench Store\tPremium\tPADPIDA2026000002Y\tBench Label\n" +
    "#SY01.02\tSummaryRecordId\tDistributionChannel\tDistributionChannelDPID\tCommercialModel\tUseType\tTerritory\tServiceDescription\tTotalUsages\tSubscribers\tCurrencyOfReporting\tNetRevenue\n" +
    TERRITORIES.map(
      (t, i) =>
        `SY01.02\tS${i}\tBench\t\tSubscriptionModel\tOnDemandStream\t${t}\tPremium\t1000000000\t1\tUSD\t4000000.00\n`,
    ).join("") +
    "#RE01.02\tBlockId\tReleaseReference\tDspReleaseId\tProprietaryReleaseId\tCatalogNumber\tICPN\n" +
    "#AS02.03\tBlockId\tResourceReference\tDspResourceId\tISRC\n" +
    "#SU02.02\tBlockId\tSummaryRecordId\tSalesTransactionId\tTransactedRelease\tTransactedResource\tIsRoyaltyBearing\tNumberOfStreams\n";
  return writeLines(file, lines, head, (i) => {
    const b = Math.floor(i / perTrack);
    const t = c.tracks[b % c.tracks.length];
    const s = i % perTrack;
    let text = "";
    if (s === 0) {
      const isrc = b % 50 === 7 ? `QZBEN${String(b).padStart(7, "0")}` : (t?.isrc ?? "");
      text += `RE01.02\t${b}\tR1\t\t\t\t${upcOf.get(t?.releaseId ?? "") ?? ""}\nAS02.03\t${b}\tA1\t\t${isrc}\n`;
    }
    return `${text}SU02.02\t${b}\tS${s % TERRITORIES.length}\tT${i}\t\tA1\tTRUE\t${1 + ((i * 7919) % 5000)}\n`;
  });
}
