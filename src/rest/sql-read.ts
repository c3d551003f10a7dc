import type { Condition, EmbedItem, EmbedPath, OrderTerm, ParsedQuery, SelectItem } from "./ast.ts";
import { isToOne, type Relationship, type SchemaCache, type Table } from "./schema-cache.ts";
import { castSql, fieldSql, ident, type Params, RestError } from "./sql-common.ts";
import { conditionSql } from "./sql-filter.ts";

/**
 * The SELECT behind a read, and behind the representation a write returns: one statement that
 * builds the JSON in the database, embedding related rows through foreign keys (to-one as an
 * object, to-many as an array), with filters, order and limits at every level.
 */

interface Level {
  table: Table;
  alias: string;
  path: EmbedPath;
}

export interface ReadShape {
  query: ParsedQuery;
  cache: SchemaCache;
  params: Params;
  /** Counter for fresh aliases. */
  next: { n: number };
}

const samePath = (a: EmbedPath, b: EmbedPath) => a.length === b.length && a.every((x, i) => x === b[i]);

function conditionsAt(shape: ReadShape, path: EmbedPath): Condition[] {
  return shape.query.conditions.filter((c) => samePath(c.path, path)).map((c) => c.condition);
}

function orderAt(shape: ReadShape, path: EmbedPath): OrderTerm[] {
  return shape.query.order.filter((o) => samePath(o.path, path)).flatMap((o) => o.terms);
}

function limitAt(shape: ReadShape, path: EmbedPath) {
  return shape.query.limits.find((l) => samePath(l.path, path));
}

/** Finds the relationship an embed names: a table, a foreign-key column, or a constraint; narrowed by the hint. */
export function findRelationship(cache: SchemaCache, from: Table, embed: EmbedItem): Relationship {
  const all = cache.relationships.get(from.name) ?? [];
  let candidates = all.filter(
    (r) =>
      r.target === embed.relation ||
      r.constraint === embed.relation ||
      (r.cardinality !== "one-to-many" && r.columns[0] === embed.relation && r.columns.length >= 1),
  );
  if (embed.hint) {
    const hint = embed.hint;
    candidates = candidates.filter(
      (r) =>
        r.constraint === hint ||
        r.columns.includes(hint) ||
        r.targetColumns.includes(hint) ||
        r.target === hint,
    );
  }
  if (candidates.length === 0) {
    throw new RestError(
      400,
      "PGRST200",
      `Could not find a relationship between '${from.name}' and '${embed.relation}' in the schema cache`,
      `Searched for a foreign key relationship between '${from.name}' and '${embed.relation}'${embed.hint ? ` using the hint '${embed.hint}'` : ""} in the schema '${cache.schema}', but no matches were found.`,
      all.length
        ? `Perhaps you meant '${[...new Set(all.map((r) => r.target))].join("', '")}' instead of '${embed.relation}'.`
        : null,
    );
  }
  if (candidates.length > 1) {
    throw new RestError(
      300,
      "PGRST201",
      `Could not embed because more than one relationship was found for '${from.name}' and '${embed.relation}'`,
      candidates.map((r) => `${r.cardinality} via ${r.constraint}`).join("; "),
      `Try changing '${embed.relation}' to one of: ${candidates.map((r) => `'${embed.relation}!${r.constraint}'`).join(", ")}.`,
    );
  }
  return candidates[0] as Relationship;
}

function joinCondition(parent: Level, child: Level, rel: Relationship): string {
  return rel.columns
    .map((c, i) => `${child.alias}.${ident(rel.targetColumns[i] as string)} = ${parent.alias}.${ident(c)}`)
    .join(" and ");
}

function expandStar(level: Level, items: SelectItem[]): SelectItem[] {
  return items.flatMap((item) =>
    item.kind === "star"
      ? level.table.columns.map<SelectItem>((c) => ({
          kind: "field",
          field: { name: c.name, jsonPath: [] },
          alias: undefined,
          cast: undefined,
        }))
      : [item],
  );
}

interface SelectList {
  /** `expr as "name"` for each output column. */
  columns: string[];
  /** The output names, in order. */
  names: string[];
  /** Lateral joins for the embeds. */
  joins: string[];
  /** Existence tests for !inner embeds, which filter this level. */
  innerConditions: string[];
}

/** The output of one level: its fields, and a lateral subquery per embed. */
function selectList(shape: ReadShape, level: Level, items: SelectItem[]): SelectList {
  const out: SelectList = { columns: [], names: [], joins: [], innerConditions: [] };
  const emit = (expr: string, name: string) => {
    out.columns.push(`${expr} as ${ident(name)}`);
    out.names.push(name);
  };
  for (const item of expandStar(level, items)) {
    if (item.kind === "field") {
      const { sql } = fieldSql(level.alias, level.table, item.field, shape.params);
      // PostgREST names a JSON path after its last key; an array index is no name, so the column's.
      const lastKey = item.field.jsonPath[item.field.jsonPath.length - 1]?.key;
      const name = item.alias ?? (typeof lastKey === "string" ? lastKey : item.field.name);
      emit(item.cast ? `(${sql})::${castSql(item.cast)}` : sql, name);
      continue;
    }
    if (item.kind !== "embed") continue;
    const rel = findRelationship(shape.cache, level.table, item);
    const target = shape.cache.tables.get(rel.target);
    if (!target) throw new RestError(400, "PGRST200", `Could not find '${rel.target}'`);
    const name = item.alias ?? item.relation;
    const child: Level = { table: target, alias: `t${++shape.next.n}`, path: [...level.path, name] };
    const sub = embedded(shape, child, item.select, level, rel);
    const joinAlias = `e${child.alias.slice(1)}`;
    if (item.spread) {
      if (!isToOne(rel)) {
        throw new RestError(
          400,
          "PGRST119",
          `A spread embed must be to-one: '${item.relation}' is a to-many relationship`,
        );
      }
      out.joins.push(`left join lateral (select * from (${sub.rows}) as _s limit 1) as ${joinAlias} on true`);
      for (const n of sub.names) emit(`${joinAlias}.${ident(n)}`, n);
    } else if (isToOne(rel)) {
      out.joins.push(
        `left join lateral (select row_to_json(_r) as body from (select * from (${sub.rows}) as _s limit 1) as _r) as ${joinAlias} on true`,
      );
      emit(`${joinAlias}.body`, name);
    } else {
      out.joins.push(
        `left join lateral (select coalesce(json_agg(_r), '[]'::json) as body from (${sub.rows}) as _r) as ${joinAlias} on true`,
      );
      emit(`${joinAlias}.body`, name);
    }
    if (item.inner) out.innerConditions.push(`exists (${sub.exists})`);
  }
  return out;
}

/** An embedded level: its rows (joined to the parent, filtered, ordered, limited) and an existence test for !inner. */
function embedded(shape: ReadShape, level: Level, items: SelectItem[], parent: Level, rel: Relationship) {
  const list = selectList(shape, level, items);
  const where = [joinCondition(parent, level, rel), ...whereAt(shape, level), ...list.innerConditions];
  const from = `from ${ident(level.table.schema)}.${ident(level.table.name)} as ${level.alias} ${list.joins.join(" ")}`;
  return {
    rows: `select ${list.columns.join(", ") || "null"} ${from} where ${where.join(" and ")}${orderSql(shape, level)}${limitSql(shape, level.path)}`,
    exists: `select 1 from ${ident(level.table.schema)}.${ident(level.table.name)} as ${level.alias} where ${where.join(" and ")}`,
    names: list.names,
  };
}

function whereAt(shape: ReadShape, level: Level): string[] {
  return conditionsAt(shape, level.path).map((c) => conditionSql(level.alias, level.table, c, shape.params));
}

function orderSql(shape: ReadShape, level: Level): string {
  const terms = orderAt(shape, level.path);
  if (terms.length === 0) return "";
  const parts = terms.map((t) => {
    const { sql } = fieldSql(level.alias, level.table, t.field, shape.params);
    return `${sql}${t.direction ? ` ${t.direction}` : ""}${t.nulls ? ` nulls ${t.nulls}` : ""}`;
  });
  return ` order by ${parts.join(", ")}`;
}

function limitSql(shape: ReadShape, path: EmbedPath): string {
  const l = limitAt(shape, path);
  let sql = "";
  if (l?.limit !== undefined) sql += ` limit ${shape.params.add(l.limit)}::bigint`;
  if (l?.offset !== undefined) sql += ` offset ${shape.params.add(l.offset)}::bigint`;
  return sql;
}

export interface RootRead {
  /** `select ... from <source> as t0 ...`: the page of rows, with embeds, as named columns. */
  rows: string;
  /** The root conditions (including !inner existence tests), for counting and for writes. */
  where: string[];
}

/**
 * The root level read from `source` (a table, or a CTE holding the rows a write returned),
 * limited to `limit`/`offset` when given.
 */
export function rootRead(
  shape: ReadShape,
  table: Table,
  source: string,
  page: { limit: number | undefined; offset: number | undefined },
  options: { applyConditions: boolean },
): RootRead {
  const level: Level = { table, alias: "t0", path: [] };
  const list = selectList(shape, level, shape.query.select ?? [{ kind: "star" }]);
  const where = [...(options.applyConditions ? whereAt(shape, level) : []), ...list.innerConditions];
  let sql = `select ${list.columns.join(", ") || 'null as "?column?"'} from ${source} as t0 ${list.joins.join(" ")}`;
  if (where.length) sql += ` where ${where.join(" and ")}`;
  sql += orderSql(shape, level);
  if (page.limit !== undefined) sql += ` limit ${shape.params.add(page.limit)}::bigint`;
  if (page.offset !== undefined && page.offset > 0) sql += ` offset ${shape.params.add(page.offset)}::bigint`;
  return { rows: sql, where };
}

/** The embed paths the select names (by alias, or by relation name), at every depth. */
function embedPaths(items: SelectItem[] | undefined, prefix: EmbedPath = []): EmbedPath[] {
  return (items ?? []).flatMap((item) => {
    if (item.kind !== "embed") return [];
    const path = [...prefix, item.alias ?? item.relation];
    return [path, ...embedPaths(item.select, path)];
  });
}

/**
 * Refuses filters, orders and limits aimed at a resource the select does not embed, as PostgREST
 * does (PGRST108). Silently dropping them would widen a PATCH or DELETE to every row.
 */
export function checkEmbedPaths(query: ParsedQuery): void {
  const known = embedPaths(query.select);
  const paths = [...query.conditions, ...query.order, ...query.limits].map((x) => x.path);
  for (const path of paths) {
    if (path.length > 0 && !known.some((k) => samePath(k, path))) {
      const name = path.join(".");
      throw new RestError(
        400,
        "PGRST108",
        `'${name}' is not an embedded resource in this request`,
        null,
        `Verify that '${name}' is included in the 'select' query parameter.`,
      );
    }
  }
}
