import type { RoyaltyImport } from "../api/types.ts";

/** The report formats the server reads (src/royalties/formats), each with what it is in words. */
export const IMPORT_FORMATS: readonly { name: string; label: string }[] = [
  { name: "backline", label: "Backline CSV (the documented template)" },
  { name: "streaming-monthly", label: "Streaming store, monthly CSV" },
  { name: "video-ugc", label: "Video / user-generated content CSV" },
  { name: "ddex-dsr", label: "DDEX DSR (tab-separated; the store is read from the file)" },
];

/** The months an import covers: its stated period, else the first and last month of its lines. */
export function importPeriod(
  i: Pick<RoyaltyImport, "reporting_period" | "period_from" | "period_to">,
): string {
  if (i.reporting_period) return i.reporting_period;
  const month = (d: unknown) => (typeof d === "string" && d.length >= 7 ? d.slice(0, 7) : undefined);
  const from = month(i.period_from);
  const to = month(i.period_to);
  if (!from || !to) return "—";
  return from === to ? from : `${from} – ${to}`;
}
