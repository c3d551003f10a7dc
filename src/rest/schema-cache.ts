import type { Db } from "../db/db.ts";

/**
 * What /rest/v1 knows of the exposed schema: tables, their columns and types, primary keys, and
 * the relationships foreign keys make between exposed tables. Read by introspection when the app
 * starts (after migrations), as PostgREST's schema cache is. Every identifier a request names is
 * checked against it before it is quoted into SQL.
 */

/**
 * The channel PostgREST listens on: `NOTIFY pgrst, 'reload schema'` makes every process read the
 * schema cache again (any notice on it does: 'reload config' too). The migration runner sends it.
 */
export const SCHEMA_CHANNEL = "pgrst";

export interface Column {
  name: string;
  /** The type as format_type() spells it, e.g. 'uuid', 'text[]', 'timestamp with time zone'. */
  type: string;
  /** The element type for arrays ('text' for text[]), else undefined. */
  elementType: string | undefined;
  nullable: boolean;
  hasDefault: boolean;
  position: number;
  description: string | null;
}

export interface Table {
  schema: string;
  name: string;
  columns: Column[];
  columnsByName: Map<string, Column>;
  primaryKey: string[];
  /** Column sets with a unique constraint or index (for on_conflict). */
  uniqueKeys: string[][];
  insertable: boolean;
  description: string | null;
}

/** A foreign key seen from one side: `table(columns)` -> `target(targetColumns)`. */
export interface Relationship {
  constraint: string;
  table: string;
  columns: string[];
  target: string;
  targetColumns: string[];
  /** many-to-one from `table` (the FK side) to `target`; one-to-many the other way round. */
  cardinality: "many-to-one" | "one-to-many" | "one-to-one";
}

export interface SchemaCache {
  schema: string;
  tables: Map<string, Table>;
  /** Relationships by the table they start from. */
  relationships: Map<string, Relationship[]>;
}

interface ColumnRow {
  table_name: string;
  table_kind: string;
  table_description: string | null;
  column_name: string;
  type: string;
  element_type: string | null;
  not_null: boolean;
  has_default: boolean;
  position: number;
  description: string | null;
}

interface ConstraintRow {
  name: string;
  kind: "p" | "u" | "f";
  table_name: string;
  columns: string[];
  target_schema: string | null;
  target_name: string | null;
  target_columns: string[] | null;
}

export async function loadSchemaCache(db: Db, schema = "public"): Promise<SchemaCache> {
  return db.asService(
    async (tx) => {
      const columns = (
        await tx.query<ColumnRow>(
          `select c.relname as table_name, c.relkind::text as table_kind, obj_description(c.oid, 'pg_class') as table_description,
                  a.attname as column_name, format_type(a.atttypid, a.atttypmod) as type,
                  case when t.typcategory = 'A' then format_type(t.typelem, null) end as element_type,
                  a.attnotnull as not_null, a.atthasdef as has_default, a.attnum as position,
                  col_description(c.oid, a.attnum) as description
           from pg_class c
           join pg_namespace n on n.oid = c.relnamespace
           join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
           join pg_type t on t.oid = a.atttypid
           where n.nspname = $1 and c.relkind in ('r', 'v', 'm', 'p', 'f')
           order by c.relname, a.attnum`,
          [schema],
        )
      ).rows;
      const constraints = (
        await tx.query<ConstraintRow>(
          `select con.conname as name, con.contype::text as kind, c.relname as table_name,
                  array(select a.attname from unnest(con.conkey) with ordinality k(attnum, i)
                        join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.attnum order by k.i)::text[] as columns,
                  tn.nspname as target_schema, tc.relname as target_name,
                  case when con.contype = 'f' then
                    array(select a.attname from unnest(con.confkey) with ordinality k(attnum, i)
                          join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.attnum order by k.i)::text[]
                  end as target_columns
           from pg_constraint con
           join pg_class c on c.oid = con.conrelid
           join pg_namespace n on n.oid = c.relnamespace
           left join pg_class tc on tc.oid = con.confrelid
           left join pg_namespace tn on tn.oid = tc.relnamespace
           where n.nspname = $1 and con.contype in ('p', 'u', 'f')
           union all
           select i.relname, 'u', c.relname,
                  array(select a.attname from unnest(ix.indkey) with ordinality k(attnum, i)
                        join pg_attribute a on a.attrelid = ix.indrelid and a.attnum = k.attnum order by k.i)::text[],
                  null, null, null
           from pg_index ix
           join pg_class i on i.oid = ix.indexrelid
           join pg_class c on c.oid = ix.indrelid
           join pg_namespace n on n.oid = c.relnamespace
           where n.nspname = $1 and ix.indisunique and ix.indpred is null and ix.indexprs is null
           order by 1`,
          [schema],
        )
      ).rows;
      return buildCache(schema, columns, constraints);
    },
    { readOnly: true },
  );
}

function buildCache(schema: string, columnRows: ColumnRow[], constraints: ConstraintRow[]): SchemaCache {
  const tables = new Map<string, Table>();
  for (const row of columnRows) {
    let table = tables.get(row.table_name);
    if (!table) {
      table = {
        schema,
        name: row.table_name,
        columns: [],
        columnsByName: new Map(),
        primaryKey: [],
        uniqueKeys: [],
        insertable: row.table_kind === "r" || row.table_kind === "p",
        description: row.table_description,
      };
      tables.set(row.table_name, table);
    }
    const column: Column = {
      name: row.column_name,
      type: row.type,
      elementType: row.element_type ?? undefined,
      nullable: !row.not_null,
      hasDefault: row.has_default,
      position: row.position,
      description: row.description,
    };
    table.columns.push(column);
    table.columnsByName.set(column.name, column);
  }

  const relationships = new Map<string, Relationship[]>();
  const add = (r: Relationship) => {
    const list = relationships.get(r.table) ?? [];
    list.push(r);
    relationships.set(r.table, list);
  };
  for (const c of constraints) {
    const table = tables.get(c.table_name);
    if (!table) continue;
    if (c.kind === "p") table.primaryKey = c.columns;
    if (c.kind === "p" || c.kind === "u") {
      if (!table.uniqueKeys.some((k) => sameSet(k, c.columns))) table.uniqueKeys.push(c.columns);
    }
  }
  for (const c of constraints) {
    // Only relationships between exposed tables: a key into an internal table is not embeddable.
    if (c.kind !== "f" || c.target_schema !== schema || !c.target_name || !c.target_columns) continue;
    const from = tables.get(c.table_name);
    if (!from || !tables.has(c.target_name)) continue;
    const unique = from.uniqueKeys.some((k) => sameSet(k, c.columns));
    add({
      constraint: c.name,
      table: c.table_name,
      columns: c.columns,
      target: c.target_name,
      targetColumns: c.target_columns,
      cardinality: unique ? "one-to-one" : "many-to-one",
    });
    add({
      constraint: c.name,
      table: c.target_name,
      columns: c.target_columns,
      target: c.table_name,
      targetColumns: c.columns,
      cardinality: unique ? "one-to-one" : "one-to-many",
    });
  }
  return { schema, tables, relationships };
}

function sameSet(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

/** Whether a relationship embeds as one object (to-one) rather than an array. */
export const isToOne = (r: Relationship): boolean => r.cardinality !== "one-to-many";
