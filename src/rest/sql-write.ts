import type { ParsedQuery } from "./ast.ts";
import type { Table } from "./schema-cache.ts";
import { ident, type Params, RestError, requireColumn } from "./sql-common.ts";
import { conditionSql } from "./sql-filter.ts";

/**
 * The data-modifying CTE of a write: `pgrst_rows as (insert|update|delete ... returning t0.*)`.
 * The read built on top of it (sql-read.ts) shapes what the response returns. Body values travel
 * as one JSON parameter and are typed by json_populate_record(set) against the table's row type.
 */

const qualified = (t: Table) => `${ident(t.schema)}.${ident(t.name)}`;

// An upsert that updated a row leaves xmax set; a fresh insert leaves it 0. PostgREST answers 200
// rather than 201 when an upsert inserted nothing.
const RETURNING_INSERT = "t0.*, (t0.xmax = 0) as pgrst_inserted";

/** The payload's column names: `columns=` when given, else the union of the objects' keys, in order of appearance. */
export function payloadColumns(table: Table, body: unknown, query: ParsedQuery): string[] {
  const rows = Array.isArray(body) ? body : [body];
  let names: string[];
  if (query.columns) {
    names = query.columns;
  } else {
    const seen = new Set<string>();
    for (const row of rows) {
      if (typeof row !== "object" || row === null || Array.isArray(row)) {
        throw new RestError(
          400,
          "PGRST102",
          "All object keys must match",
          "Each element of the body must be a JSON object",
        );
      }
      for (const k of Object.keys(row)) seen.add(k);
    }
    names = [...seen];
  }
  for (const n of names) {
    if (!table.columnsByName.has(n)) {
      throw new RestError(
        400,
        "PGRST204",
        `Could not find the '${n}' column of '${table.name}' in the schema cache`,
      );
    }
  }
  return names;
}

const whereClause = (conditions: string[]) => (conditions.length ? ` where ${conditions.join(" and ")}` : "");

function rootWhere(table: Table, query: ParsedQuery, params: Params): string[] {
  return query.conditions
    .filter((c) => c.path.length === 0)
    .map((c) => conditionSql("t0", table, c.condition, params));
}

export interface InsertOptions {
  resolution: "merge-duplicates" | "ignore-duplicates" | undefined;
  onConflict: string[] | undefined;
  /** Rows missing a key take the column's default rather than null (Prefer: missing=default). */
  missingDefault: boolean;
}

/**
 * INSERT (or upsert) of the body's rows. With missing=default, rows are inserted in groups that
 * share the same keys, so each group names only its own columns and the rest take their defaults.
 */
export function insertCte(
  table: Table,
  body: unknown,
  columns: string[],
  params: Params,
  options: InsertOptions,
): string {
  if (!table.insertable) throw new RestError(405, "PGRST205", `Cannot insert into '${table.name}'`);
  const rows = (Array.isArray(body) ? body : [body]) as Record<string, unknown>[];
  const groups: { columns: string[]; rows: Record<string, unknown>[] }[] = [];
  if (options.missingDefault) {
    // (An empty body makes no group: the single group below inserts nothing.)
    for (const row of rows) {
      const keys = columns.filter((c) => c in row);
      const key = keys.join("\u0000");
      const g = groups.find((x) => x.columns.join("\u0000") === key);
      if (g) g.rows.push(row);
      else groups.push({ columns: keys, rows: [row] });
    }
  }
  if (groups.length === 0) groups.push({ columns, rows });
  let conflict = "";
  if (options.resolution) {
    const target = options.onConflict ?? table.primaryKey;
    for (const c of target) requireColumn(table, c);
    if (target.length === 0)
      throw new RestError(400, "PGRST204", `'${table.name}' has no primary key to resolve conflicts on`);
    if (options.resolution === "ignore-duplicates") {
      conflict = ` on conflict (${target.map(ident).join(", ")}) do nothing`;
    } else {
      // PostgREST sets the payload's columns; a payload of only the key still updates (to the
      // same values), so the existing row is returned rather than nothing.
      const others = columns.filter((c) => !target.includes(c));
      const set = (others.length ? others : target).map((c) => `${ident(c)} = excluded.${ident(c)}`);
      conflict = ` on conflict (${target.map(ident).join(", ")}) do update set ${set.join(", ")}`;
    }
  }
  const statements = groups.map((g) => {
    const payload = params.add(JSON.stringify(g.rows));
    if (g.columns.length === 0) {
      // Every value from its default: one row per element.
      return `insert into ${qualified(table)} as t0 select from json_array_elements(${payload}::json)${conflict} returning ${RETURNING_INSERT}`;
    }
    const cols = g.columns.map(ident).join(", ");
    return `insert into ${qualified(table)} as t0 (${cols}) select ${cols} from json_populate_recordset(null::${qualified(table)}, ${payload}::json)${conflict} returning ${RETURNING_INSERT}`;
  });
  if (statements.length === 1) return `pgrst_rows as (${statements[0]})`;
  // Several groups: each its own CTE, their rows together.
  const parts = statements.map((s, i) => `pgrst_rows_${i} as (${s})`);
  return `${parts.join(", ")}, pgrst_rows as (${statements.map((_, i) => `select * from pgrst_rows_${i}`).join(" union all ")})`;
}

/** A limited write (limit/offset on PATCH or DELETE) touches only the first rows in the given order. */
function limitedScope(table: Table, query: ParsedQuery, params: Params, where: string[]): string[] {
  const l = query.limits.find((x) => x.path.length === 0);
  if (!l || (l.limit === undefined && l.offset === undefined)) return where;
  const order = query.order.find((o) => o.path.length === 0);
  if (!order || order.terms.length === 0) {
    throw new RestError(
      400,
      "PGRST109",
      "A limit on an update or delete needs an order",
      null,
      "Add order=<column> so the rows it touches are known.",
    );
  }
  const terms = order.terms.map(
    (t) =>
      `t1.${ident(requireColumn(table, t.field.name).name)}${t.direction ? ` ${t.direction}` : ""}${t.nulls ? ` nulls ${t.nulls}` : ""}`,
  );
  const inner = where.map((w) => w.replace(/\bt0\./g, "t1."));
  const pk = table.primaryKey.length ? table.primaryKey : ["ctid"];
  const tuple = (alias: string) =>
    `(${pk.map((c) => (c === "ctid" ? `${alias}.ctid` : `${alias}.${ident(c)}`)).join(", ")})`;
  return [
    `${tuple("t0")} in (select ${tuple("t1").slice(1, -1)} from ${qualified(table)} as t1${whereClause(inner)} order by ${terms.join(", ")}${l.limit !== undefined ? ` limit ${params.add(l.limit)}::bigint` : ""}${l.offset !== undefined ? ` offset ${params.add(l.offset)}::bigint` : ""})`,
  ];
}

export function updateCte(
  table: Table,
  body: Record<string, unknown>,
  columns: string[],
  query: ParsedQuery,
  params: Params,
): string {
  const where = limitedScope(table, query, params, rootWhere(table, query, params));
  if (columns.length === 0) {
    // Nothing to change: no row is touched (the filters stay in the statement: their parameters are bound).
    return `pgrst_rows as (select t0.*, false as pgrst_inserted from ${qualified(table)} as t0 where false${where.length ? ` and ${where.join(" and ")}` : ""})`;
  }
  const payload = params.add(JSON.stringify(body));
  const sets = columns.map((c) => `${ident(c)} = pgrst_body.${ident(c)}`).join(", ");
  return `pgrst_rows as (update ${qualified(table)} as t0 set ${sets} from (select * from json_populate_record(null::${qualified(table)}, ${payload}::json)) as pgrst_body${whereClause(where)} returning t0.*, false as pgrst_inserted)`;
}

export function deleteCte(table: Table, query: ParsedQuery, params: Params): string {
  const where = limitedScope(table, query, params, rootWhere(table, query, params));
  return `pgrst_rows as (delete from ${qualified(table)} as t0${whereClause(where)} returning t0.*, false as pgrst_inserted)`;
}

/**
 * PUT: replaces (or creates) the one row the URL identifies by its whole primary key, e.g.
 * PUT /releases?id=eq.<uuid>. The body must carry the same key values.
 */
export function putCte(
  table: Table,
  body: Record<string, unknown>,
  columns: string[],
  query: ParsedQuery,
  params: Params,
): string {
  const pk = table.primaryKey;
  const eqs = new Map<string, string>();
  for (const c of query.conditions) {
    if (
      c.path.length === 0 &&
      c.condition.kind === "filter" &&
      c.condition.op === "eq" &&
      !c.condition.negated &&
      c.condition.field.jsonPath.length === 0 &&
      typeof c.condition.value === "string"
    ) {
      eqs.set(c.condition.field.name, c.condition.value);
    }
  }
  const onlyPk = query.conditions.length === pk.length && pk.every((k) => eqs.has(k));
  if (pk.length === 0 || !onlyPk) {
    throw new RestError(
      405,
      "PGRST105",
      "Filters must include all and only primary key columns with 'eq' operators",
    );
  }
  for (const k of pk) {
    if (String(body[k]) !== eqs.get(k)) {
      throw new RestError(400, "PGRST115", "Payload values do not match URL in primary key column(s)");
    }
  }
  return insertCte(table, body, columns, params, {
    resolution: "merge-duplicates",
    onConflict: pk,
    missingDefault: false,
  });
}
