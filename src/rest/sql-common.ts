import type { FieldRef } from "./ast.ts";
import { ParseError } from "./ast.ts";
import type { Column, Table } from "./schema-cache.ts";

/** Building blocks of the SQL /rest/v1 runs: every value a bind parameter, every name checked and quoted. */

export class Params {
  readonly values: unknown[] = [];

  /** Adds a value and returns its placeholder. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** A PostgREST error that is not a parse error: its code, HTTP status, and texts. */
export class RestError extends Error {
  readonly code: string;
  readonly status: number;
  /** Text, or (PGRST201) the list of candidate relationships. */
  readonly details: string | null | object[];
  readonly hint: string | null;
  /** Headers the error response carries (e.g. Content-Range on a 416). */
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    details: string | null | object[] = null,
    hint: string | null = null,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "RestError";
    this.status = status;
    this.code = code;
    this.details = details;
    this.hint = hint;
    this.headers = headers;
  }
}

/**
 * `sql` made to reference every one of `count` parameters, so it can run with a parameter list
 * built for a larger statement (PostgreSQL refuses parameters a statement does not use). The
 * added condition is always true and costs the planner nothing.
 */
export function referencingAll(sql: string, count: number): string {
  const used = new Set([...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  const unused: string[] = [];
  for (let i = 1; i <= count; i++) if (!used.has(i)) unused.push(`$${i}::text`);
  if (unused.length === 0) return sql;
  return `${sql} ${/\bwhere\b/.test(sql) ? "and" : "where"} coalesce(${unused.join(", ")}, '') is not null`;
}

/** How a level is named in messages (PostgREST's alias, `messages_1`) and its row as a value (for computed columns). */
export interface LevelNames {
  /** The name a 42703 quotes: the table at the root, `<table>_<depth>` in an embed. */
  display?: string;
  /** An expression of the table's row type; the alias by default. */
  row?: string;
}

export function requireColumn(table: Table, name: string, display = table.name): Column {
  const column = table.columnsByName.get(name);
  if (!column) {
    throw new RestError(400, "42703", `column ${display}.${name} does not exist`, null, null);
  }
  return column;
}

/** A column, or a computed column (a function of the row); else 42703. */
function resolveField(
  alias: string,
  table: Table,
  name: string,
  names: LevelNames,
): { sql: string; column: Column } {
  const column = table.columnsByName.get(name);
  if (column) return { sql: `${alias}.${ident(column.name)}`, column };
  const computed = table.computed.get(name);
  if (computed) {
    return {
      sql: `${ident(table.schema)}.${ident(computed.name)}(${names.row ?? alias})`,
      column: {
        name: computed.name,
        type: computed.type,
        elementType: computed.elementType,
        nullable: true,
        hasDefault: false,
        position: 0,
        description: null,
      },
    };
  }
  return { sql: "", column: requireColumn(table, name, names.display) };
}

/** `alias."col"->'a'->>'b'`, with keys as parameters; returns the SQL and whether the result is text. */
export function fieldSql(
  alias: string,
  table: Table,
  field: FieldRef,
  params: Params,
  names: LevelNames = {},
): { sql: string; column: Column; text: boolean } {
  const resolved = resolveField(alias, table, field.name, names);
  const column = resolved.column;
  let sql = resolved.sql;
  for (const step of field.jsonPath) {
    const key =
      typeof step.key === "number" ? `${params.add(step.key)}::int` : `${params.add(step.key)}::text`;
    sql = `${sql}${step.op}${key}`;
  }
  const last = field.jsonPath[field.jsonPath.length - 1];
  return { sql, column, text: last?.op === "->>" };
}

/** The type an operand is cast to: the column's, or text/jsonb behind a JSON path. */
export function operandType(column: Column, field: FieldRef): string {
  if (field.jsonPath.length === 0) return column.type;
  const last = field.jsonPath[field.jsonPath.length - 1];
  return last?.op === "->>" ? "text" : "jsonb";
}

const CASTS = new Set([
  "text",
  "varchar",
  "char",
  "int",
  "int2",
  "int4",
  "int8",
  "integer",
  "smallint",
  "bigint",
  "numeric",
  "decimal",
  "real",
  "float4",
  "float8",
  "double precision",
  "boolean",
  "bool",
  "date",
  "time",
  "timestamp",
  "timestamptz",
  "interval",
  "uuid",
  "json",
  "jsonb",
]);

/** A cast from a select item, checked against the types a client may cast to. */
export function castSql(cast: string): string {
  const base = cast.endsWith("[]") ? cast.slice(0, -2) : cast;
  if (!CASTS.has(base.toLowerCase())) {
    throw new ParseError(
      `unknown cast type ${JSON.stringify(cast)}`,
      `allowed: ${[...CASTS].join(", ")} (and their arrays)`,
    );
  }
  return cast.toLowerCase();
}

/** A PostgreSQL array literal of text values: {"a","b\"c"}; the caller casts it to the column's array type. */
export function arrayLiteral(values: string[]): string {
  return `{${values.map((v) => `"${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`).join(",")}}`;
}
