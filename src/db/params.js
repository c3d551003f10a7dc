// @ts-check
// Plain JavaScript, type-checked from its JSDoc: it runs in the embedded database's thread, which
// loads no TypeScript file (src/db/pglite-protocol.ts says why).

/**
 * Bind parameters as text, the way node-postgres sends them (its `prepareValue`), so that
 * PostgreSQL itself parses every value and a malformed one fails with PostgreSQL's own SQLSTATE
 * (22P02 and friends, answered 400) on both engines.
 *
 * PGlite, left alone, serializes a parameter on the client side by the type PostgreSQL inferred
 * for it, and refuses some values itself with a plain Error that has no SQLSTATE (a boolean
 * parameter given "xyz": "Invalid input for boolean type"), which surfaced as a 500. The embedded
 * engine uses this function for every parameter of every type instead (src/db/pglite-host.js).
 *
 * @param {unknown} value
 * @returns {string | null}
 */
export function toPostgresText(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (typeof value === "boolean") return value ? "true" : "false";
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? "invalid" : value.toISOString();
  if (value instanceof Uint8Array) return `\\x${Buffer.from(value).toString("hex")}`;
  if (Array.isArray(value)) return arrayLiteral(value);
  return JSON.stringify(value);
}

/**
 * A PostgreSQL array literal: elements quoted and escaped, NULL for null, nested arrays as is.
 *
 * @param {readonly unknown[]} values
 * @returns {string}
 */
function arrayLiteral(values) {
  const parts = values.map((v) => {
    if (v === null || v === undefined) return "NULL";
    if (Array.isArray(v)) return arrayLiteral(v);
    const text = /** @type {string} */ (toPostgresText(v));
    return `"${text.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  });
  return `{${parts.join(",")}}`;
}
