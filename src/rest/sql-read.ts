import type {
  Condition,
  EmbedItem,
  EmbedPath,
  FieldItem,
  OrderTerm,
  ParsedQuery,
  SelectItem,
} from "./ast.ts";
import { isToOne, type Relationship, type SchemaCache, type Table } from "./schema-cache.ts";
import { castSql, fieldSql, ident, type LevelNames, type Params, RestError } from "./sql-common.ts";
import { conditionSql } from "./sql-filter.ts";

/**
 * The SELECT behind a read, and behind the representation a write returns: one statement that
 * builds the JSON in the database, embedding related rows through foreign keys (to-one as an
 * object, to-many as an array), with filters, order and limits at every level.
 */

interface Level {
  table: Table;
  /** The SQL alias, quoted where needed. */
  alias: string;
  path: EmbedPath;
  /** 0 at the root; an embed is one deeper than its parent (PostgREST's depth). */
  depth: number;
  /** What 42703 and the computed columns see: the table's name at the root, `<table>_<depth>` below. */
  names: LevelNames;
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

const single = <T>(xs: T[]): T | undefined => (xs.length === 1 ? xs[0] : undefined);

/**
 * Finds the relationship an embed names, by PostgREST's rules: the target table or view; a foreign
 * key's constraint or its one column (not towards a view); narrowed by a hint naming the
 * constraint, a column of either side, or a many-to-many junction. A table's key to itself gives
 * two: `t(*)` embeds the rows pointing here (one-to-many), `fk_column(*)` the row this one points
 * to (many-to-one), and `t!fk_column(*)` the rows pointing here through that column.
 */
export function findRelationship(cache: SchemaCache, from: Table, embed: EmbedItem): Relationship {
  const all = cache.relationships.get(from.name) ?? [];
  const target = embed.relation;
  const hint = embed.hint;
  const fkCol = (r: Relationship, name: string) => !r.junction && single(r.columns) === name;
  const fkRefCol = (r: Relationship, name: string) => !r.junction && single(r.targetColumns) === name;
  const constraint = (r: Relationship, name: string) => !r.junction && r.constraint === name;
  // A computed relationship is named by its function, and only so; it comes before the keys'.
  const computed = all.filter((r) => r.computed === target && hint === undefined);
  if (computed.length === 1) return computed[0] as Relationship;
  const candidates = all.filter((r) => {
    if (r.computed) return false;
    if (r.isSelf) {
      if (hint === undefined) {
        return (
          (r.target === target && r.cardinality === "one-to-many") ||
          (fkCol(r, target) && r.cardinality === "many-to-one")
        );
      }
      return r.target === target && r.cardinality === "one-to-many" && fkRefCol(r, hint);
    }
    if (hint === undefined) {
      return (
        r.target === target ||
        (constraint(r, target) && !r.targetIsView) ||
        (fkCol(r, target) && !r.targetIsView)
      );
    }
    return (
      r.target === target &&
      (constraint(r, hint) || fkCol(r, hint) || fkRefCol(r, hint) || r.junction?.table === hint)
    );
  });
  if (candidates.length === 0) {
    throw new RestError(
      400,
      "PGRST200",
      `Could not find a relationship between '${from.name}' and '${target}' in the schema cache`,
      `Searched for a foreign key relationship between '${from.name}' and '${target}${hint ? `' using the hint '${hint}` : ""}' in the schema '${cache.schema}', but no matches were found.`,
      noRelationshipHint(cache, from.name, target),
    );
  }
  if (candidates.length > 1) {
    throw new RestError(
      300,
      "PGRST201",
      `Could not embed because more than one relationship was found for '${from.name}' and '${target}'`,
      candidates.map(describeRelationship),
      `Try changing '${target}' to one of the following: ${candidates.map((r) => `'${r.target}!${r.junction ? r.junction.table : r.constraint}'`).join(", ")}. Find the desired relationship in the 'details' key.`,
    );
  }
  return candidates[0] as Relationship;
}

/** PGRST201's description of one candidate. */
function describeRelationship(r: Relationship): {
  cardinality: string;
  embedding: string;
  relationship: string;
} {
  const cols = (xs: string[]) => `(${xs.join(", ")})`;
  const relationship = r.junction
    ? `${r.junction.table} using ${r.junction.constraint1}${cols(r.junction.sourceColumns.map((c) => c[0]))} and ${r.junction.constraint2}${cols(r.junction.targetColumns.map((c) => c[0]))}`
    : `${r.constraint} using ${r.table}${cols(r.columns)} and ${r.target}${cols(r.targetColumns)}`;
  return { cardinality: r.cardinality, embedding: `${r.table} with ${r.target}`, relationship };
}

/**
 * PGRST200's hint: when the parent has relationships, the closest other target; otherwise the
 * closest table that has relationships; null when nothing is close (a fuzzy match, as PostgREST's).
 */
function noRelationshipHint(cache: SchemaCache, parent: string, child: string): string | null {
  const own = cache.relationships.get(parent);
  if (own?.length) {
    const best = fuzzyMatches([...new Set(own.map((r) => r.target))], child).find(([score]) => score < 1);
    return best ? `Perhaps you meant '${best[1]}' instead of '${child}'.` : null;
  }
  const parents = [...cache.relationships.entries()].filter(([, rs]) => rs.length > 0).map(([t]) => t);
  const best = fuzzyMatches(parents, parent)[0];
  return best ? `Perhaps you meant '${best[1]}' instead of '${parent}'.` : null;
}

/** A fuzzy-set lookup (trigram, then bigram, cosine similarity rescored by Levenshtein, at least 0.33), best first. */
export function fuzzyMatches(items: string[], query: string): [number, string][] {
  const grams = (value: string, size: number) => {
    let v = `-${value.toLowerCase().replace(/[^a-z0-9\u00C0-\u00FF, ]+/g, "")}-`;
    while (v.length < size) v += "-";
    const counts = new Map<string, number>();
    for (let i = 0; i + size <= v.length; i++) {
      const g = v.slice(i, i + size);
      counts.set(g, (counts.get(g) ?? 0) + 1);
    }
    return counts;
  };
  const norm = (m: Map<string, number>) => Math.sqrt([...m.values()].reduce((a, n) => a + n * n, 0));
  const levenshtein = (a: string, b: string) => {
    const row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0] as number;
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const tmp = row[j] as number;
        row[j] = Math.min(
          (row[j] as number) + 1,
          (row[j - 1] as number) + 1,
          prev + (a[i - 1] === b[j - 1] ? 0 : 1),
        );
        prev = tmp;
      }
    }
    return row[b.length] as number;
  };
  for (const size of [3, 2]) {
    const q = grams(query, size);
    const qn = norm(q);
    const scored: [number, string][] = [];
    for (const item of items) {
      const g = grams(item, size);
      let dot = 0;
      for (const [k, n] of q) dot += n * (g.get(k) ?? 0);
      if (dot === 0) continue;
      const a = query.toLowerCase();
      const b = item.toLowerCase();
      const score = 1 - levenshtein(a, b) / Math.max(a.length, b.length, 1);
      if (dot / (qn * norm(g)) > 0 && score >= 0.33) scored.push([score, item]);
    }
    if (scored.length) return scored.sort((x, y) => y[0] - x[0]);
  }
  return [];
}

/** The join of an embedded level to its parent: extra FROM items (a junction) and the WHERE condition. */
function joinTo(parent: Level, child: Level, rel: Relationship): { from: string; where: string } {
  if (rel.computed) return { from: "", where: "true" };
  if (rel.junction) {
    const j = ident(`${rel.junction.table}_${child.depth}_j`);
    const on = rel.junction.targetColumns.map(
      ([jc, tc]) => `${j}.${ident(jc)} = ${child.alias}.${ident(tc)}`,
    );
    const where = rel.junction.sourceColumns.map(
      ([jc, pc]) => `${j}.${ident(jc)} = ${parent.alias}.${ident(pc)}`,
    );
    return {
      from: ` join ${ident(child.table.schema)}.${ident(rel.junction.table)} as ${j} on ${on.join(" and ")}`,
      where: where.join(" and "),
    };
  }
  return {
    from: "",
    where: rel.columns
      .map((c, i) => `${child.alias}.${ident(rel.targetColumns[i] as string)} = ${parent.alias}.${ident(c)}`)
      .join(" and "),
  };
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
  /** With an aggregate in the list: what the rows are grouped by (the other outputs); else undefined. */
  groupBy: string[] | undefined;
}

/** `count` alone, on a table without such a column: PostgREST's older spelling of count(). */
function isBareCount(level: Level, item: FieldItem): boolean {
  return (
    item.field.name === "count" &&
    item.field.jsonPath.length === 0 &&
    item.cast === undefined &&
    item.aggregate === undefined &&
    !level.table.columnsByName.has("count") &&
    !level.table.computed.has("count")
  );
}

/** The output of one level: its fields, and a lateral subquery per embed. */
function selectList(shape: ReadShape, level: Level, items: SelectItem[]): SelectList {
  const out: SelectList = { columns: [], names: [], joins: [], innerConditions: [], groupBy: undefined };
  const plain: string[] = [];
  let aggregated = false;
  const emit = (expr: string, name: string) => {
    out.columns.push(`${expr} as ${ident(name)}`);
    out.names.push(name);
  };
  for (const item of expandStar(level, items)) {
    if (item.kind === "field") {
      if (item.aggregate || isBareCount(level, item)) {
        aggregated = true;
        const fn = item.aggregate ?? "count";
        let arg = "*";
        if (item.field.name !== "*" || item.aggregate === undefined) {
          if (item.aggregate !== undefined) {
            const { sql } = fieldSql(level.alias, level.table, item.field, shape.params, level.names);
            arg = item.cast ? `(${sql})::${castSql(item.cast)}` : sql;
          }
        }
        const expr = `${fn}(${arg})`;
        emit(item.aggregateCast ? `(${expr})::${castSql(item.aggregateCast)}` : expr, item.alias ?? fn);
        continue;
      }
      const { sql } = fieldSql(level.alias, level.table, item.field, shape.params, level.names);
      // PostgREST names a JSON path after its last key; an array index is no name, so the column's.
      const lastKey = item.field.jsonPath[item.field.jsonPath.length - 1]?.key;
      const name = item.alias ?? (typeof lastKey === "string" ? lastKey : item.field.name);
      const expr = item.cast ? `(${sql})::${castSql(item.cast)}` : sql;
      emit(expr, name);
      plain.push(expr);
      continue;
    }
    if (item.kind !== "embed") continue;
    const rel = findRelationship(shape.cache, level.table, item);
    const target = shape.cache.tables.get(rel.target);
    if (!target) throw new RestError(400, "PGRST200", `Could not find '${rel.target}'`);
    const name = item.alias ?? item.relation;
    const depth = level.depth + 1;
    const childName = `${target.name}_${depth}`;
    const child: Level = {
      table: target,
      alias: ident(childName),
      path: [...level.path, name],
      depth,
      names: { display: childName },
    };
    const sub = embedded(shape, child, item.select, level, rel);
    if (item.inner) out.innerConditions.push(`exists (${sub.exists})`);
    // An embed with no columns only filters (with !inner): it adds nothing to the answer.
    if (item.select.length === 0) continue;
    // PostgREST's alias for the embed's subquery: the same embed twice at one level is 42712.
    const joinAlias = ident(`${level.table.name}_${name}_${depth}`);
    if (item.spread && !isToOne(rel)) {
      // PostgREST 13: a to-many spread gives each of its columns as an array over the children.
      const arrays = sub.names.map((n) => `coalesce(json_agg(_s.${ident(n)}), '[]'::json) as ${ident(n)}`);
      out.joins.push(
        `left join lateral (select ${arrays.join(", ")} from (${sub.rows}) as _s) as ${joinAlias} on true`,
      );
      for (const n of sub.names) {
        emit(`${joinAlias}.${ident(n)}`, n);
        plain.push(`${joinAlias}.${ident(n)}`);
      }
    } else if (item.spread) {
      out.joins.push(`left join lateral (select * from (${sub.rows}) as _s limit 1) as ${joinAlias} on true`);
      for (const n of sub.names) {
        emit(`${joinAlias}.${ident(n)}`, n);
        plain.push(`${joinAlias}.${ident(n)}`);
      }
    } else if (isToOne(rel)) {
      out.joins.push(
        `left join lateral (select row_to_json(_r) as body from (select * from (${sub.rows}) as _s limit 1) as _r) as ${joinAlias} on true`,
      );
      emit(`${joinAlias}.body`, name);
      plain.push(`${joinAlias}.body`);
    } else {
      out.joins.push(
        `left join lateral (select coalesce(json_agg(_r), '[]'::json) as body from (${sub.rows}) as _r) as ${joinAlias} on true`,
      );
      emit(`${joinAlias}.body`, name);
      plain.push(`${joinAlias}.body`);
    }
  }
  if (aggregated) out.groupBy = plain;
  return out;
}

const groupBySql = (list: SelectList) => (list.groupBy?.length ? ` group by ${list.groupBy.join(", ")}` : "");

/** An embedded level: its rows (joined to the parent, filtered, ordered, limited) and an existence test for !inner. */
function embedded(shape: ReadShape, level: Level, items: SelectItem[], parent: Level, rel: Relationship) {
  const list = selectList(shape, level, items);
  const join = joinTo(parent, level, rel);
  const where = [join.where, ...whereAt(shape, level), ...list.innerConditions];
  // A computed relationship's rows are its function's, called with the parent's row.
  const source = rel.computed
    ? `${ident(level.table.schema)}.${ident(rel.computed)}(${parent.names.row ?? parent.alias})`
    : `${ident(level.table.schema)}.${ident(level.table.name)}`;
  const table = `${source} as ${level.alias}${join.from}`;
  return {
    rows: `select ${list.columns.join(", ")} from ${table} ${list.joins.join(" ")} where ${where.join(" and ")}${groupBySql(list)}${orderSql(shape, level)}${limitSql(shape, level.path)}`,
    exists: `select 1 from ${table} where ${where.join(" and ")}`,
    names: list.names,
  };
}

function whereAt(shape: ReadShape, level: Level): string[] {
  return conditionsAt(shape, level.path).map((c) =>
    conditionSql(level.alias, level.table, c, shape.params, level.names),
  );
}

function orderSql(shape: ReadShape, level: Level): string {
  const terms = orderAt(shape, level.path);
  if (terms.length === 0) return "";
  const parts = terms.map((t) => {
    const { sql } = fieldSql(level.alias, level.table, t.field, shape.params, level.names);
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
  /** rowFromColumns: the source's rows are not of the table's type (a function's result). */
  options: { applyConditions: boolean; rowFromColumns?: boolean },
): RootRead {
  // Read from a write's returned rows, the row is rebuilt as the table's type for computed columns.
  const row =
    source === "pgrst_rows" || options.rowFromColumns
      ? `row(${table.columns.map((c) => `t0.${ident(c.name)}`).join(", ")})::${ident(table.schema)}.${ident(table.name)}`
      : "t0";
  const level: Level = { table, alias: "t0", path: [], depth: 0, names: { display: table.name, row } };
  const list = selectList(shape, level, shape.query.select ?? [{ kind: "star" }]);
  const where = [...(options.applyConditions ? whereAt(shape, level) : []), ...list.innerConditions];
  let sql = `select ${list.columns.join(", ")} from ${source} as t0 ${list.joins.join(" ")}`;
  if (where.length) sql += ` where ${where.join(" and ")}`;
  sql += groupBySql(list);
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
