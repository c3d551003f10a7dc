/** A JSON array of objects as CSV (RFC 4180): a header of the first row's keys; nested values as JSON. */
export function toCsv(json: string): string {
  const rows = JSON.parse(json) as Record<string, unknown>[] | Record<string, unknown>;
  const list = Array.isArray(rows) ? rows : [rows];
  if (list.length === 0) return "";
  const keys = Object.keys(list[0] ?? {});
  const cell = (v: unknown) => {
    if (v === null || v === undefined) return "";
    const s = typeof v === "object" ? JSON.stringify(v) : String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [keys.map(cell).join(","), ...list.map((r) => keys.map((k) => cell(r[k])).join(","))].join("\n");
}
