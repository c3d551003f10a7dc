import type { RoyaltySums } from "../../api/public.ts";

/** A CSV field: quoted when it holds a comma, a quote or a line break; a formula start disarmed. */
function field(value: string | number): string {
  let text = String(value);
  // A spreadsheet would run "=…", "+…", "-…" or "@…" as a formula (a store or title is free text).
  if (/^[=+\-@\t\r]/.test(text) && !/^-?\d+(\.\d+)?$/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * The royalties page's tables as one CSV, exactly as shown: a row per month, store, territory,
 * release and track (the `breakdown` column says which), in one currency, with the exact amounts
 * the API gave (not the rounded ones on the page). Each breakdown covers the same lines, so the
 * rows of any one breakdown add up to the totals of GET /royalties with the same filters. A
 * track's row also names its release and ISRC (the last two columns, empty on other rows).
 */
export function royaltiesCsv(
  currency: string,
  breakdowns: [string, [string, RoyaltySums, { release?: string; isrc?: string }?][]][],
): string {
  const head = [
    "breakdown",
    "key",
    "currency",
    "lines",
    "units",
    "streams",
    "downloads",
    "ugc_uses",
    "gross",
    "fees",
    "net",
    "release",
    "isrc",
  ];
  const rows = [head.join(",")];
  for (const [breakdown, groups] of breakdowns)
    for (const [key, s, named] of groups)
      rows.push(
        [
          breakdown,
          key,
          currency,
          s.lines,
          s.units,
          s.streams,
          s.downloads,
          s.ugc_uses,
          s.gross,
          s.fees,
          s.net,
          named?.release ?? "",
          named?.isrc ?? "",
        ]
          .map(field)
          .join(","),
      );
  return `${rows.join("\r\n")}\r\n`;
}

/** Hands `text` to the browser as a download named `name`. */
export function downloadCsv(name: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
