import { requiredOnInsert, tableView } from "./openapi-schemas.ts";
import type { Column, Routine, SchemaCache, Table } from "./schema-cache.ts";

/**
 * `backline gen types typescript` (docs/rest.md, "Types for supabase-js"): the `Database` type
 * supabase-js's `createClient<Database>()` reads, in the shape `supabase gen types typescript`
 * prints (`public.Tables.<name>.Row/Insert/Update/Relationships`, `Views`, `Functions`, `Enums`),
 * made from the schema cache the server itself reads, so it says what /rest/v1 does:
 *
 * - Row: the columns the role may read, `| null` where nullable.
 * - Insert: only the columns the role may insert (its column grants), optional where the database
 *   supplies a value — a default, a nullable column, or a BEFORE INSERT trigger that fills it
 *   (`releases.account_id`; FILLING_TRIGGERS) — and `never` for a table the role cannot insert into.
 * - Update: the columns the role may update, all optional; `never` where it may update none.
 * - A text column a CHECK constraint limits to a list of values is the union of those values.
 * - numeric and bigint are `number`, as PostgREST answers them in JSON.
 */

const JSON_TYPE = "string | number | boolean | null | { [key: string]: Json | undefined } | Json[]";

const key = (name: string): string => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name));

function scalarType(type: string): string {
  if (/^(integer|smallint|bigint|real|double precision|numeric)/.test(type)) return "number";
  if (type === "boolean") return "boolean";
  if (type === "json" || type === "jsonb") return "Json";
  return "string";
}

function columnType(column: Column): string {
  let t: string;
  if (column.enumValues?.length) t = column.enumValues.map((v) => JSON.stringify(v)).join(" | ");
  else if (column.elementType) t = `${scalarType(column.elementType)}[]`;
  else t = scalarType(column.type);
  if (column.elementType && column.enumValues?.length) t = `(${t})[]`;
  return column.nullable ? `${t} | null` : t;
}

function object(lines: string[], indent: string): string {
  if (lines.length === 0) return "{ [_ in never]: never }";
  return `{\n${lines.map((l) => `${indent}  ${l}`).join("\n")}\n${indent}}`;
}

function relationships(cache: SchemaCache, table: Table, indent: string): string {
  const rels = (cache.relationships.get(table.name) ?? []).filter(
    (r) =>
      !r.junction &&
      !r.computed &&
      (r.cardinality === "many-to-one" || r.cardinality === "one-to-one") &&
      cache.tables.has(r.target),
  );
  if (rels.length === 0) return "[]";
  const seen = new Set<string>();
  const items: string[] = [];
  for (const r of rels.sort(
    (a, b) => a.constraint.localeCompare(b.constraint) || a.target.localeCompare(b.target),
  )) {
    const id = `${r.constraint}:${r.target}`;
    if (seen.has(id)) continue;
    seen.add(id);
    items.push(
      [
        `${indent}  {`,
        `${indent}    foreignKeyName: ${JSON.stringify(r.constraint)};`,
        `${indent}    columns: [${r.columns.map((c) => JSON.stringify(c)).join(", ")}];`,
        `${indent}    isOneToOne: ${r.cardinality === "one-to-one"};`,
        `${indent}    referencedRelation: ${JSON.stringify(r.target)};`,
        `${indent}    referencedColumns: [${r.targetColumns.map((c) => JSON.stringify(c)).join(", ")}];`,
        `${indent}  },`,
      ].join("\n"),
    );
  }
  return `[\n${items.join("\n")}\n${indent}]`;
}

/** A value of a PostgreSQL type as the JSON /rest/v1 answers: an array for `x[]`. */
function valueType(type: string): string {
  return type.endsWith("[]") ? `${valueType(type.slice(0, -2))}[]` : scalarType(type);
}

/**
 * A function the role may execute, as supabase's generator prints it: `Args` (optional where the
 * parameter has a default; `never` without parameters) and `Returns` (`undefined` for void, a
 * readable table's Row, an array for a set); overloads as a union.
 */
function functionType(cache: SchemaCache, overloads: Routine[], role: string, indent: string): string {
  const one = (r: Routine) => {
    const args = r.params.length
      ? `{ ${r.params.map((p) => `${key(p.name)}${p.required ? "" : "?"}: ${valueType(p.type)}`).join("; ")} }`
      : "never";
    let returns: string;
    if (r.returns === "void") returns = "undefined";
    else if (r.returns === "scalar") returns = valueType(r.returnType);
    else {
      const table = r.returnTable ? cache.tables.get(r.returnTable) : undefined;
      returns =
        table && tableView(table, role).read.length
          ? `Database[${JSON.stringify(cache.schema)}][${JSON.stringify(table.isView ? "Views" : "Tables")}][${JSON.stringify(table.name)}]["Row"]`
          : object(
              r.returnColumns.map((c) => `${key(c.name)}: ${valueType(c.type)} | null;`),
              `${indent}  `,
            );
    }
    if (r.returnsSet && r.returns !== "void")
      returns = returns.startsWith("{") ? `${returns}[]` : `(${returns})[]`;
    return `{
${indent}  Args: ${args};
${indent}  Returns: ${returns};
${indent}}`;
  };
  return overloads.map(one).join(" | ");
}

/**
 * The TypeScript module: `Json`, `Database` with one entry per schema (the first is the helpers'
 * default, as supabase-js's is `public`), and the helpers supabase's generator prints beside them.
 */
export function typescriptTypes(schemas: SchemaCache | SchemaCache[], role = "authenticated"): string {
  const caches = Array.isArray(schemas) ? schemas : [schemas];
  const first = caches[0];
  if (!first) throw new Error("typescriptTypes needs at least one schema");
  const names = caches.map((c) => c.schema).join(", ");
  return `// The ${names} schema${caches.length > 1 ? "s" : ""} as /rest/v1 answers the ${role} role, written by
// \`backline gen types typescript\` (docs/rest.md, "Types for supabase-js"). Regenerate after a migration.

export type Json = ${JSON_TYPE};

export type Database = {
${caches.map((c) => schemaType(c, role)).join("\n")}
};

type DefaultSchema = Database[${JSON.stringify(first.schema)}];

export type Tables<T extends keyof (DefaultSchema["Tables"] & DefaultSchema["Views"])> = (DefaultSchema["Tables"] &
  DefaultSchema["Views"])[T] extends { Row: infer R }
  ? R
  : never;

export type TablesInsert<T extends keyof DefaultSchema["Tables"]> = DefaultSchema["Tables"][T] extends {
  Insert: infer I;
}
  ? I
  : never;

export type TablesUpdate<T extends keyof DefaultSchema["Tables"]> = DefaultSchema["Tables"][T] extends {
  Update: infer U;
}
  ? U
  : never;
`;
}

/** One schema's entry of `Database`: its tables, views and functions as `role` sees them. */
function schemaType(cache: SchemaCache, role: string): string {
  const tables: string[] = [];
  const views: string[] = [];
  const sorted = [...cache.tables.values()].sort((a, b) => a.name.localeCompare(b.name));
  for (const table of sorted) {
    const view = tableView(table, role);
    if (view.read.length === 0) continue;
    const i = "        ";
    const row = view.read.map((c) => `${key(c.name)}: ${columnType(c)};`);
    const parts = [`Row: ${object(row, i)};`];
    if (!table.isView || view.insert.length || view.update.length) {
      const insert = view.insert.map(
        (c) => `${key(c.name)}${requiredOnInsert(c) ? "" : "?"}: ${columnType(c)};`,
      );
      const update = view.update.map((c) => `${key(c.name)}?: ${columnType(c)};`);
      parts.push(`Insert: ${insert.length ? object(insert, i) : "never"};`);
      parts.push(`Update: ${update.length ? object(update, i) : "never"};`);
    }
    parts.push(`Relationships: ${relationships(cache, table, i)};`);
    const entry = `${key(table.name)}: {\n${parts.map((p) => `${i}${p}`).join("\n")}\n      };`;
    (table.isView ? views : tables).push(entry);
  }
  const group = (entries: string[]) =>
    entries.length
      ? `{\n${entries.map((e) => `      ${e}`).join("\n")}\n    }`
      : "{\n      [_ in never]: never;\n    }";
  const functions: string[] = [];
  for (const name of [...cache.routines.keys()].sort()) {
    const overloads = (cache.routines.get(name) ?? []).filter((r) => r.executableBy.has(role));
    if (overloads.length) functions.push(`${key(name)}: ${functionType(cache, overloads, role, "      ")};`);
  }
  return `  ${key(cache.schema)}: {
    Tables: ${group(tables)};
    Views: ${group(views)};
    Functions: ${group(functions)};
    Enums: {
      [_ in never]: never;
    };
    CompositeTypes: {
      [_ in never]: never;
    };
  };`;
}
