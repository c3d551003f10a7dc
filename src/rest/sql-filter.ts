import type { Condition, Filter } from "./ast.ts";
import { ParseError } from "./ast.ts";
import type { Table } from "./schema-cache.ts";
import { arrayLiteral, fieldSql, type LevelNames, operandType, type Params } from "./sql-common.ts";

/**
 * Filters and logic trees as SQL. Operands are parameters cast to the column's own type, so a
 * malformed value is PostgreSQL's 22P02 (400), never an injection.
 */

const COMPARE: Record<string, string> = {
  eq: "=",
  neq: "<>",
  gt: ">",
  gte: ">=",
  lt: "<",
  lte: "<=",
  like: "like",
  ilike: "ilike",
  match: "~",
  imatch: "~*",
};

const RANGE_OR_ARRAY: Record<string, string> = {
  cs: "@>",
  cd: "<@",
  ov: "&&",
  sl: "<<",
  sr: ">>",
  // "does not extend to the left of" is &>, "to the right of" is &<.
  nxl: "&>",
  nxr: "&<",
  adj: "-|-",
};

const FTS: Record<string, string> = {
  fts: "to_tsquery",
  plfts: "plainto_tsquery",
  phfts: "phraseto_tsquery",
  wfts: "websearch_to_tsquery",
};

const likePattern = (v: string) => v.replace(/\*/g, "%");

function single(f: Filter): string {
  if (typeof f.value !== "string")
    throw new ParseError(`operator ${f.op} takes one value`, `got a list for ${f.field.name}`);
  return f.value;
}

function list(f: Filter): string[] {
  return typeof f.value === "string" ? [f.value] : f.value;
}

function filterSql(alias: string, table: Table, f: Filter, params: Params, names: LevelNames): string {
  const { sql: field, column } = fieldSql(alias, table, f.field, params, names);
  const type = operandType(column, f.field);
  // Pattern operators work on text whatever the column's type.
  const textOps = f.op === "like" || f.op === "ilike" || f.op === "match" || f.op === "imatch";
  const lhs = textOps && type !== "text" ? `${field}::text` : field;
  const castTo = textOps ? "text" : type;
  let sql: string;
  const compare = COMPARE[f.op];
  if (compare && f.quantifier) {
    const values = list(f).map((v) => (f.op === "like" || f.op === "ilike" ? likePattern(v) : v));
    sql = `${lhs} ${compare} ${f.quantifier}(${params.add(arrayLiteral(values))}::${castTo}[])`;
  } else if (compare) {
    const v = f.op === "like" || f.op === "ilike" ? likePattern(single(f)) : single(f);
    sql = `${lhs} ${compare} ${params.add(v)}::${castTo}`;
  } else if (f.op === "in") {
    // The list is parsed as an array of the column's type when the statement is bound, so a
    // malformed element is refused (22P02...) whether or not any row is looked at.
    sql = `${field} = any(${params.add(arrayLiteral(list(f)))}::${type}[])`;
  } else if (f.op === "is") {
    const v = single(f).toLowerCase();
    const IS: Record<string, string> = {
      null: "is null",
      not_null: "is not null",
      true: "is true",
      false: "is false",
      unknown: "is unknown",
    };
    const tail = IS[v];
    if (!tail)
      throw new ParseError(
        `failed to parse filter (is.${v})`,
        "is takes null, not_null, true, false or unknown",
      );
    sql = `${field} ${tail}`;
  } else if (f.op === "isdistinct") {
    sql = `${field} is distinct from ${params.add(single(f))}::${type}`;
  } else if (RANGE_OR_ARRAY[f.op]) {
    sql = `${field} ${RANGE_OR_ARRAY[f.op]} ${params.add(single(f))}::${type}`;
  } else if (FTS[f.op]) {
    const config = f.language ? `${params.add(f.language)}::regconfig, ` : "";
    const vector = type === "tsvector" ? field : `to_tsvector(${config}${field}::text)`;
    sql = `${vector} @@ ${FTS[f.op]}(${config}${params.add(single(f))}::text)`;
  } else {
    throw new ParseError(`unknown operator ${f.op}`, "");
  }
  return f.negated ? `not (${sql})` : sql;
}

/** A condition (filter or and/or tree) on `alias`, a row of `table`. */
export function conditionSql(
  alias: string,
  table: Table,
  c: Condition,
  params: Params,
  names: LevelNames = {},
): string {
  if (c.kind === "filter") return filterSql(alias, table, c, params, names);
  if (c.children.length === 0) return c.negated ? "false" : "true";
  const joined = c.children
    .map((child) => `(${conditionSql(alias, table, child, params, names)})`)
    .join(c.kind === "and" ? " and " : " or ");
  return c.negated ? `not (${joined})` : `(${joined})`;
}
