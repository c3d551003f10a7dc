import type { Tx } from "../../db/types.ts";
import { VERSION_SQL, versionIn } from "../etag.ts";

/**
 * Small SQL helpers for the resources: column lists come from the representation's fields, values
 * are always bind parameters, and rows are read as the caller (row-level security decides).
 */
export function columns(list: readonly string[], alias = ""): string {
  const prefix = alias ? `${alias}.` : "";
  return list.map((c) => `${prefix}"${c}"`).join(", ");
}

/** `insert into table (a, b) values ($1, $2) returning ...` for the given fields; JSON values as jsonb. */
export async function insertRow<T>(
  tx: Tx,
  table: string,
  values: Record<string, unknown>,
  returning: readonly string[],
): Promise<T> {
  const keys = Object.keys(values).filter((k) => values[k] !== undefined);
  const params = keys.map((k) => sqlValue(k, values[k]));
  const sql = `insert into ${table} (${keys.map((k) => `"${k}"`).join(", ")})
    values (${keys.map((_, i) => `$${i + 1}`).join(", ")}) returning ${columns(returning)}`;
  const r = await tx.query<T>(sql, params);
  return r.rows[0] as T;
}

/**
 * `update table set a = $2 ... where id = $1 [and parent = $n] returning ...`; undefined when no row
 * matches (or the caller cannot see it). With nothing to set, the row is read back as it is.
 */
export async function updateRow<T>(
  tx: Tx,
  table: string,
  id: string,
  values: Record<string, unknown>,
  returning: readonly string[],
  parent?: { column: string; value: string },
  versioned?: { versions: string[] | null },
): Promise<T | undefined> {
  const keys = Object.keys(values).filter((k) => values[k] !== undefined);
  const params: unknown[] = [id, ...keys.map((k) => sqlValue(k, values[k]))];
  let where = "id = $1";
  if (parent) {
    params.push(parent.value);
    where += ` and "${parent.column}" = $${params.length}`;
  }
  // If-Match: the version condition is part of the statement, so a concurrent write that moved the
  // row first (and holds its lock until it commits) makes this one match nothing.
  if (versioned?.versions) {
    params.push(versioned.versions);
    where += ` and ${versionIn(params.length)}`;
  }
  const out = versioned ? `${columns(returning)}, ${VERSION_SQL}` : columns(returning);
  const sql =
    keys.length === 0
      ? `select ${out} from ${table} where ${where}`
      : `update ${table} set ${keys.map((k, i) => `"${k}" = $${i + 2}`).join(", ")}
         where ${where} returning ${out}`;
  return (await tx.query<T>(sql, params)).rows[0];
}

/** The jsonb columns of the catalog tables; other arrays are text[]. */
const JSONB_COLUMNS = new Set([
  "contributors",
  "splits",
  "audio_metadata",
  "store_ids",
  "platform_links",
  "localized_names",
]);

function sqlValue(column: string, v: unknown): unknown {
  return JSONB_COLUMNS.has(column) && v !== null ? JSON.stringify(v) : v;
}

/**
 * A page of rows and the total over all pages, in one query (`count(*) over ()`); a page past the
 * end has no row to carry the total, so only then is it counted on its own.
 */
export async function countAndPage<T>(
  tx: Tx,
  sql: { from: string; where: string; order: string; columns: string },
  params: unknown[],
  limit: number,
  offset: number,
): Promise<{ rows: T[]; total: number }> {
  const result = await tx.query<T & { total_count__: number }>(
    `select ${sql.columns}, count(*) over ()::int as total_count__ from ${sql.from} where ${sql.where}
     order by ${sql.order} limit $${params.length + 1} offset $${params.length + 2}`,
    [...params, limit, offset],
  );
  const rows = result.rows.map(({ total_count__, ...row }) => row as T);
  if (result.rows[0]) return { rows, total: result.rows[0].total_count__ };
  if (offset === 0) return { rows, total: 0 };
  const counted = await tx.query<{ n: number }>(
    `select count(*)::int as n from ${sql.from} where ${sql.where}`,
    params,
  );
  return { rows, total: counted.rows[0]?.n ?? 0 };
}
