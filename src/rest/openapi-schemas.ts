import type { Column, SchemaCache, Table } from "./schema-cache.ts";

/**
 * The JSON Schemas of GET /rest/v1/'s description (openapi.ts): one per column, as the table
 * interface answers it (PostgREST's JSON: numeric and bigint as numbers, timestamps with their
 * offset), and the three shapes of a table's rows — as read, as inserted, as updated.
 */

type Schema = Record<string, unknown>;

/** The type of one value of `type` (format_type's spelling), and its standard format where one exists. */
/** A reference to a component of the document. */
export const ref = (kind: "parameters" | "responses" | "schemas", name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

/**
 * The errors every operation of /rest/v1 may answer, by status, as references to the document's
 * responses; `extra` adds an operation's own (a table's writes, a function's 404).
 */
export function errorResponses(extra: Record<string, string>): Schema {
  return Object.fromEntries(
    Object.entries({
      400: "BadRequest",
      401: "Unauthorized",
      403: "Forbidden",
      406: "NotAcceptable",
      429: "TooManyRequests",
      500: "ServerError",
      503: "Unavailable",
      504: "Timeout",
      ...extra,
    })
      .sort(([a], [b]) => Number(a) - Number(b))
      .map(([status, name]) => [status, ref("responses", name)]),
  );
}

export function scalar(type: string): Schema {
  if (type === "uuid") return { type: "string", format: "uuid" };
  if (type === "date") return { type: "string", format: "date" };
  // PostgREST prints timestamptz with its offset (RFC 3339); a timestamp without one is not date-time.
  if (type === "timestamp with time zone") return { type: "string", format: "date-time" };
  if (type === "integer" || type === "smallint") return { type: "integer", format: "int32" };
  if (type === "bigint") return { type: "integer", format: "int64" };
  if (type === "real") return { type: "number", format: "float" };
  if (type === "double precision") return { type: "number", format: "double" };
  if (type.startsWith("numeric")) return { type: "number" };
  if (type === "boolean") return { type: "boolean" };
  if (type === "jsonb" || type === "json") return {};
  const sized = /^(?:character varying|character|bit varying)\((\d+)\)$/.exec(type);
  if (sized?.[1]) return { type: "string", maxLength: Number(sized[1]) };
  return { type: "string" };
}

/** A default PostgreSQL prints as a literal, as the JSON value the row will carry; undefined otherwise. */
export function literalDefault(expr: string, column: Column): unknown {
  const text = /^'((?:[^']|'')*)'::[a-z ]+(?:\[\])?$/.exec(expr);
  const value = text ? (text[1] as string).replace(/''/g, "'") : expr;
  if (column.elementType) return value === "{}" ? [] : undefined;
  if (column.type === "jsonb" || column.type === "json") {
    try {
      return JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  if (column.type === "boolean") return value === "true" ? true : value === "false" ? false : undefined;
  if (/^(integer|smallint|bigint|numeric|real|double)/.test(column.type))
    return /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : undefined;
  return text ? value : undefined;
}

/** PostgREST's notes on a column (primary key, foreign key), and ours (who fills it, how exact it is). */
function notes(table: Table, column: Column, cache: SchemaCache): string[] {
  const out: string[] = [];
  if (table.primaryKey.includes(column.name)) out.push("Primary key.");
  // PostgREST notes single-column keys; a composite one (the account's, beside the row's) too.
  const fk = (cache.relationships.get(table.name) ?? []).find(
    (r) =>
      (r.cardinality === "many-to-one" || r.cardinality === "one-to-one") &&
      !r.targetIsView &&
      !table.isView &&
      r.columns[0] === column.name,
  );
  if (fk) {
    const others = fk.columns.slice(1).map((c, i) => `\`${c}\` = \`${fk.targetColumns[i + 1]}\``);
    out.push(
      `Foreign key to \`${fk.target}.${fk.targetColumns[0]}\`${others.length ? `, with ${others.join(", ")}` : ""}.`,
    );
  }
  if (column.filledByDatabase) out.push("Filled by the database when an insert leaves it out.");
  const literal = column.defaultExpr ? literalDefault(column.defaultExpr, column) : undefined;
  if (column.defaultExpr && literal === undefined) out.push(`Default: \`${column.defaultExpr}\`.`);
  if (column.type.startsWith("numeric"))
    out.push(
      `An exact decimal in the database, answered as a JSON number, as PostgREST answers it; \`select=${column.name}::text\` reads its exact digits as a string.`,
    );
  return out;
}

export function columnSchema(table: Table, column: Column, cache: SchemaCache): Schema {
  let schema: Schema = column.elementType
    ? { type: "array", items: scalar(column.elementType) }
    : scalar(column.type);
  if (column.jsonType) schema = { type: column.jsonType };
  if (column.enumValues)
    schema.enum = column.nullable ? [...column.enumValues, null] : [...column.enumValues];
  // OpenAPI 3.0's `nullable` needs a `type` beside it; a schema without one (json) takes null anyway.
  if (column.nullable && schema.type) schema.nullable = true;
  const literal = column.defaultExpr ? literalDefault(column.defaultExpr, column) : undefined;
  if (literal !== undefined) schema.default = literal;
  const description = [column.description, notes(table, column, cache).join(" ")]
    .filter((x) => x)
    .join("\n\n");
  if (description) schema.description = description;
  return schema;
}

/** Whether an insert must carry the column: NOT NULL, no default, and no trigger fills it. */
export const requiredOnInsert = (c: Column): boolean => !c.nullable && !c.hasDefault && !c.filledByDatabase;

/**
 * A table as one role sees it (PostgREST's follow-privileges): the columns it may read, insert and
 * update, and whether it may delete. Empty `read`: the table is left out of that role's description.
 */
export interface TableView {
  table: Table;
  read: Column[];
  insert: Column[];
  update: Column[];
  delete: boolean;
}

export function tableView(table: Table, role: string): TableView {
  const grants = table.privileges.get(role);
  const writable = table.insertable;
  const pick = (names: Set<string> | undefined, allowed: boolean) =>
    allowed && names ? table.columns.filter((c) => names.has(c.name)) : [];
  return {
    table,
    read: pick(grants?.select, true),
    insert: pick(grants?.insert, writable),
    update: pick(grants?.update, writable),
    delete: writable && (grants?.delete ?? false),
  };
}

/**
 * A table's schemas for one role: the row as read (`select=*`: every column it may read, null where
 * nullable), and, where it may write, the body of an insert (only what the database requires) and
 * of an update (nothing required).
 */
export function tableSchemas(view: TableView, cache: SchemaCache): Record<string, Schema> {
  const { table } = view;
  const properties = (columns: Column[]) =>
    Object.fromEntries(columns.map((c) => [c.name, columnSchema(table, c, cache)]));
  const out: Record<string, Schema> = {
    [table.name]: {
      type: "object",
      ...(table.description ? { description: table.description } : {}),
      required: view.read.map((c) => c.name),
      properties: properties(view.read),
    },
  };
  if (view.insert.length) {
    const required = view.insert.filter(requiredOnInsert).map((c) => c.name);
    out[`${table.name}.insert`] = {
      type: "object",
      description: `A new row of ${table.name}: the columns an insert leaves out take their defaults.`,
      ...(required.length ? { required } : {}),
      properties: properties(view.insert),
    };
  }
  if (view.update.length) {
    out[`${table.name}.update`] = {
      type: "object",
      description: `The columns of ${table.name} an update changes; the others keep their values.`,
      properties: properties(view.update),
    };
  }
  return out;
}

/** PostgREST's error body, and the apikey gateway's (Supabase's Kong answers a 401 without `code`). */
export const ERROR_SCHEMAS: Record<string, Schema> = {
  Error: {
    type: "object",
    description: "PostgREST's error body (docs/rest.md#errors).",
    required: ["code", "message", "details", "hint"],
    properties: {
      code: {
        type: "string",
        description: "A PGRSTnnn code, a PostgreSQL SQLSTATE, or one of Backline's (BLnnn).",
      },
      message: { type: "string" },
      details: { type: "string", nullable: true },
      hint: { type: "string", nullable: true },
    },
  },
  GatewayError: {
    type: "object",
    description: "The apikey gateway's answer to a missing or unknown apikey, as on Supabase.",
    required: ["message"],
    properties: {
      message: { type: "string" },
      hint: { type: "string", nullable: true },
    },
  },
};
