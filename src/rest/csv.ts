/**
 * A JSON array of objects as CSV, quoting as PostgreSQL's record text does (PostgREST's output):
 * a value is quoted when it is empty or holds a quote, backslash, comma, parenthesis or white
 * space; nested values are JSON; null is an empty field.
 */
export function toCsv(json: string): string {
  const rows = JSON.parse(json) as Record<string, unknown>[] | Record<string, unknown>;
  const list = Array.isArray(rows) ? rows : [rows];
  if (list.length === 0) return "";
  const keys = Object.keys(list[0] ?? {});
  const cell = (v: unknown) => {
    if (v === null || v === undefined) return "";
    const s = typeof v === "object" ? JSON.stringify(v) : String(v);
    return s === "" || /[",\\()\s]/.test(s) ? `"${s.replace(/"/g, '""').replace(/\\/g, "\\\\")}"` : s;
  };
  return [keys.map(cell).join(","), ...list.map((r) => keys.map((k) => cell(r[k])).join(","))].join("\n");
}
