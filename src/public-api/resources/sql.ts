import type { Tx } from "../../db/types.ts";
import { ApiError } from "../errors.ts";
import { VERSION_SQL, versionIn } from "../etag.ts";

/**
 * Small SQL helpers for the resources: column lists come from the representation's fields, values
 * are always bind parameters, and rows are read as the caller (row-level security decides).
 */
export function columns(list: readonly string[], alias = ""): string {
  const prefix = alias ? `${alias}.` : "";
  return list.map((c) => `${prefix}"${c}"`).join(", ");
}

/**
 * The rows of `select` as one JSON array (`[]` for none), for a column of an outer statement: a
 * parent and its children in one statement. The objects keep the select's column order; `order`
 * names columns of the select (as `x.column`). Timestamps arrive as ISO text (see `withDates`).
 */
export function jsonRows(select: string, order?: string): string {
  return `coalesce((select json_agg(x${order ? ` order by ${order}` : ""}) from (${select}) x), '[]')`;
}

/** A row read through `jsonRows` with its timestamp columns as Dates again, as the drivers return them. */
export function withDates<T extends Record<string, unknown>>(row: T, names: readonly string[]): T {
  const out: Record<string, unknown> = { ...row };
  for (const name of names) if (typeof out[name] === "string") out[name] = new Date(out[name] as string);
  return out as T;
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

/** What a list was asked for (route.ts's Pagination): an offset page, or a cursor page. */
export interface PageQuery {
  limit: number;
  offset?: number | undefined;
  starting_after?: string | undefined;
  ending_before?: string | undefined;
}

export interface PageResult<T> {
  rows: T[];
  /** Offset pages only: how many items match over all pages. Cursor pages count nothing. */
  total?: number;
  has_more: boolean;
}

interface OrderTerm {
  expr: string;
  desc: boolean;
}

/** "created_at desc, id" as terms; "x nulls last" (ascending) becomes "(x is null), x". */
function orderTerms(order: string): OrderTerm[] {
  const terms: OrderTerm[] = [];
  for (const part of order.split(",").map((p) => p.trim())) {
    const m = /^(.+?)(\s+(asc|desc))?(\s+nulls\s+last)?$/i.exec(part);
    if (!m?.[1]) throw new Error(`order term ${part}`);
    const desc = m[3]?.toLowerCase() === "desc";
    if (m[4]) {
      if (desc) throw new Error(`order term ${part}: desc nulls last is not supported`);
      terms.push({ expr: `(${m[1]} is null)`, desc: false });
    }
    terms.push({ expr: m[1], desc });
  }
  return terms;
}

/**
 * A page of a list (docs/public-api.md, "Lists"). By offset: the rows and the total over all pages,
 * in one query (`count(*) over ()`; a page past the end has no row to carry the total, so only then
 * is it counted on its own). By cursor (`starting_after` / `ending_before`, an item's id): the rows
 * after (or before) that item in the list's order, found by comparing the order's keys with the
 * item's (keyset pagination), `limit + 1` rows read to know `has_more`, and nothing counted.
 * The order's last term is the id, which makes it total.
 */
export async function countAndPage<T>(
  tx: Tx,
  sql: { from: string; where: string; order: string; columns: string },
  params: unknown[],
  query: PageQuery,
): Promise<PageResult<T>> {
  const { limit } = query;
  const cursor = query.starting_after ?? query.ending_before;
  if (query.starting_after !== undefined && query.ending_before !== undefined) {
    throw pageParameterError("ending_before", "send starting_after or ending_before, not both");
  }
  if (cursor === undefined) return offsetPage(tx, sql, params, limit, query.offset ?? 0);
  if (query.offset !== undefined) {
    throw pageParameterError("offset", "offset cannot be combined with starting_after or ending_before");
  }
  const param = query.starting_after !== undefined ? "starting_after" : "ending_before";
  const terms = orderTerms(sql.order);
  const id = terms[terms.length - 1]?.expr ?? "id";
  const n = params.length + 1;
  const found = await tx.query(`select 1 from ${sql.from} where ${id} = $1`, [cursor]);
  if (found.rowCount === 0) throw pageParameterError(param, `${param} ${cursor} is not an item of this list`);
  // Before the cursor: the order reversed, then the page turned back.
  const back = param === "ending_before";
  const dir = (t: OrderTerm) => (t.desc !== back ? "desc" : "asc");
  const keys = terms.map((t, i) => `${t.expr} as "k${i}__"`).join(", ");
  const after = terms
    .map((t, i) => {
      const equal = terms.slice(0, i).map((u, j) => `${u.expr} is not distinct from cursor__."k${j}__"`);
      return [...equal, `${t.expr} ${dir(t) === "desc" ? "<" : ">"} cursor__."k${i}__"`].join(" and ");
    })
    .map((c) => `(${c})`)
    .join(" or ");
  const result = await tx.query<T>(
    `select ${sql.columns} from ${sql.from}
       cross join lateral (select ${keys} from ${sql.from} where ${id} = $${n}) as cursor__
     where (${sql.where}) and (${after})
     order by ${terms.map((t) => `${t.expr} ${dir(t)}`).join(", ")} limit $${n + 1}`,
    [...params, cursor, limit + 1],
  );
  const rows = result.rows.slice(0, limit);
  return { rows: back ? rows.reverse() : rows, has_more: result.rows.length > limit };
}

function pageParameterError(param: string, message: string): ApiError {
  return new ApiError(400, "invalid_parameter", message, {
    errors: [{ param, code: "invalid_value", message }],
  });
}

async function offsetPage<T>(
  tx: Tx,
  sql: { from: string; where: string; order: string; columns: string },
  params: unknown[],
  limit: number,
  offset: number,
): Promise<PageResult<T>> {
  const result = await tx.query<T & { total_count__: number }>(
    `select ${sql.columns}, count(*) over ()::int as total_count__ from ${sql.from} where ${sql.where}
     order by ${sql.order} limit $${params.length + 1} offset $${params.length + 2}`,
    [...params, limit, offset],
  );
  const rows = result.rows.map(({ total_count__, ...row }) => row as T);
  let total = 0;
  if (result.rows[0]) total = result.rows[0].total_count__;
  else if (offset > 0) {
    const counted = await tx.query<{ n: number }>(
      `select count(*)::int as n from ${sql.from} where ${sql.where}`,
      params,
    );
    total = counted.rows[0]?.n ?? 0;
  }
  return { rows, total, has_more: offset + rows.length < total };
}
