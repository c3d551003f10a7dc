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
  /** The default's expression as pg_get_expr() prints it (`'draft'::text`, `now()`), if any. */
  defaultExpr?: string | null;
  /** The only values a check constraint allows (`col = any (array[...])`, `col in (...)`). */
  enumValues?: string[];
  /** A jsonb column's check `jsonb_typeof(col) = 'object'` (or 'array'). */
  jsonType?: "object" | "array";
  /** A BEFORE INSERT trigger fills it when an insert leaves it out (FILLING_TRIGGERS). */
  filledByDatabase?: boolean;
}

/**
 * The columns a BEFORE INSERT trigger on an exposed table fills when an insert leaves them out,
 * by the trigger's function (src/db/migrations). PostgreSQL cannot tell which columns a trigger
 * sets, and the description (GET /rest/v1/, docs/rest.md) must not require a column the database
 * supplies, so every such function is named here, with the columns it fills (none for a rule that
 * only checks). test/rest-openapi.test.ts fails on a BEFORE INSERT trigger function of an exposed
 * table missing here, so whoever adds one decides here what it fills.
 */
export const FILLING_TRIGGERS: Record<string, string[]> = {
  // 0005: the owning account from the parent row or the caller's default account; the creator.
  "internal.assign_owner": ["account_id", "created_by"],
  // 0005: the recipient's tenant.
  "internal.notification_rules": ["tenant_id"],
  // 0010: the storage key, from the ids.
  "internal.media_asset_rules": ["object_key"],
  // The others fill or rewrite only nullable columns or ones with defaults, or only check.
  "internal.artist_store_ids": [],
  "internal.release_assign_identifiers": [],
  "internal.release_rules": [],
  "internal.release_status_value": [],
  "internal.takedown_rules": [],
  "internal.track_isrc_rules": [],
  "internal.track_rules": [],
};

export interface Table {
  schema: string;
  name: string;
  columns: Column[];
  columnsByName: Map<string, Column>;
  primaryKey: string[];
  /** Column sets with a unique constraint or index (for on_conflict). */
  uniqueKeys: string[][];
  insertable: boolean;
  /** A view (or materialized view): it embeds through its base tables' foreign keys. */
  isView: boolean;
  description: string | null;
  /** Computed columns: functions of the exposed schema taking this table's row type, by name. */
  computed: Map<string, ComputedColumn>;
  /** What each request role may do with the table, for the description (PostgREST's follow-privileges). */
  privileges: Map<string, TablePrivileges>;
}

/** The request roles whose privileges the schema cache reads. */
export const REQUEST_ROLES = ["anon", "authenticated", "tenant_service", "service_role"] as const;

/** One role's grants on a table: the columns it may read, insert and update, and whether it may delete. */
export interface TablePrivileges {
  select: Set<string>;
  insert: Set<string>;
  update: Set<string>;
  delete: boolean;
}

/** `f(t table) returns scalar`: selectable and filterable as if it were a column of `t`. */
export interface ComputedColumn {
  name: string;
  type: string;
  elementType: string | undefined;
}

/** A many-to-many relationship's junction: a table whose primary key holds both foreign keys. */
export interface Junction {
  table: string;
  /** The key from the junction to the relationship's origin, and its columns (junction, origin). */
  constraint1: string;
  sourceColumns: [string, string][];
  /** The key from the junction to the target, and its columns (junction, target). */
  constraint2: string;
  targetColumns: [string, string][];
}

/**
 * A foreign key seen from one side: `table(columns)` -> `target(targetColumns)`; or, for
 * many-to-many, two foreign keys of a junction table (PostgREST's relationships).
 */
export interface Relationship {
  constraint: string;
  table: string;
  columns: string[];
  target: string;
  targetColumns: string[];
  /** many-to-one from `table` (the FK side) to `target`; one-to-many the other way round. */
  cardinality: "many-to-one" | "one-to-many" | "one-to-one" | "many-to-many";
  /** A table's key to itself (or a view's to itself). */
  isSelf: boolean;
  targetIsView: boolean;
  junction: Junction | undefined;
  /**
   * A computed relationship (PostgREST 12+): the function, of this schema, that takes a row of
   * `table` and returns the `target` rows it relates (to-one when it returns one row or is
   * declared `rows 1`); embedded by its name, `channels?select=*,get_messages(*)`.
   */
  computed?: string;
}

export interface SchemaCache {
  schema: string;
  tables: Map<string, Table>;
  /** Relationships by the table they start from. */
  relationships: Map<string, Relationship[]>;
  /** The functions of the schema /rest/v1/rpc/<name> may call, by name (overloads in creation order). */
  routines: Map<string, Routine[]>;
}

/** One input parameter of a function: IN, INOUT or VARIADIC. */
export interface RoutineParam {
  /** "" when unnamed. */
  name: string;
  /** The type as format_type() spells it (for VARIADIC, the array type). */
  type: string;
  /** No default: a call must give it. */
  required: boolean;
  variadic: boolean;
}

/**
 * A function of the exposed schema, for /rest/v1/rpc (docs/rest.md, "Functions (rpc)"): its
 * parameters, what it returns, its volatility, and the request roles that may EXECUTE it (its
 * grants decide; nothing else does).
 */
export interface Routine {
  schema: string;
  name: string;
  oid: string;
  params: RoutineParam[];
  returnsSet: boolean;
  /** void; a scalar (base, domain, enum, range, array); or rows of columns. */
  returns: "void" | "scalar" | "composite";
  /** The return type as format_type() spells it. */
  returnType: string;
  /** A composite return: the exposed table or view whose row type it is (its relationships embed). */
  returnTable: string | undefined;
  /** A composite return: its columns (a table's, a composite type's, or the OUT/TABLE parameters). */
  returnColumns: Column[];
  volatility: "immutable" | "stable" | "volatile";
  /** The request roles (REQUEST_ROLES) with EXECUTE on it. */
  executableBy: Set<string>;
  description: string | null;
}

interface RoutineRow {
  oid: string;
  name: string;
  volatility: string;
  returns_set: boolean;
  return_type: string;
  return_element_type: string | null;
  return_typtype: string;
  return_is_void: boolean;
  return_relation: string | null;
  return_relation_kind: string | null;
  return_relation_schema: string | null;
  return_attributes: { name: string; type: string; element_type: string | null }[] | null;
  arg_types: string[];
  arg_element_types: (string | null)[];
  arg_modes: string[] | null;
  arg_names: string[] | null;
  defaults: number;
  roles: string[];
  description: string | null;
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
  default_expr: string | null;
}

/** A check constraint on one column, as pg_get_constraintdef() prints it. */
interface CheckRow {
  table_name: string;
  column_name: string;
  definition: string;
}

interface PrivilegeRow {
  table_name: string;
  column_name: string;
  role: string;
  can_select: boolean;
  can_insert: boolean;
  can_update: boolean;
  can_delete: boolean;
}

/** A BEFORE INSERT row trigger of an exposed table and its function. */
export interface InsertTriggerRow {
  table_name: string;
  function_name: string;
}

interface FunctionRow {
  name: string;
  table_name: string;
  type: string;
  element_type: string | null;
}

interface ViewRow {
  view_name: string;
  action: string;
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
                  col_description(c.oid, a.attnum) as description,
                  pg_get_expr(d.adbin, d.adrelid) as default_expr
           from pg_class c
           join pg_namespace n on n.oid = c.relnamespace
           join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
           join pg_type t on t.oid = a.atttypid
           left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
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
      // Computed columns: one-argument, non-set-returning functions of a table's row type.
      const functions = (
        await tx.query<FunctionRow>(
          `select p.proname as name, c.relname as table_name, format_type(p.prorettype, null) as type,
                  case when t.typcategory = 'A' then format_type(t.typelem, null) end as element_type
           from pg_proc p
           join pg_namespace n on n.oid = p.pronamespace
           join pg_class c on c.reltype = p.proargtypes[0]
           join pg_namespace cn on cn.oid = c.relnamespace
           join pg_type t on t.oid = p.prorettype
           where n.nspname = $1 and cn.nspname = $1 and p.pronargs = 1 and not p.proretset
             and p.prokind = 'f' and c.relkind in ('r', 'v', 'm', 'p', 'f')`,
          [schema],
        )
      ).rows;
      // Views' query trees: each output column's original table and column (resorigtbl/resorigcol).
      const views = (
        await tx.query<ViewRow>(
          `select c.relname as view_name, r.ev_action::text as action
           from pg_rewrite r
           join pg_class c on c.oid = r.ev_class
           join pg_namespace n on n.oid = c.relnamespace
           where n.nspname = $1 and c.relkind in ('v', 'm') and r.rulename = '_RETURN'`,
          [schema],
        )
      ).rows;
      const tableOids = (
        await tx.query<{ oid: string; name: string; attnum: number; attname: string }>(
          `select c.oid::text as oid, c.relname as name, a.attnum, a.attname
           from pg_class c join pg_namespace n on n.oid = c.relnamespace
           join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
           where n.nspname = $1 and c.relkind in ('r', 'p', 'f')`,
          [schema],
        )
      ).rows;
      const checks = (
        await tx.query<CheckRow>(
          `select c.relname as table_name, a.attname as column_name, pg_get_constraintdef(con.oid) as definition
           from pg_constraint con
           join pg_class c on c.oid = con.conrelid
           join pg_namespace n on n.oid = c.relnamespace
           join pg_attribute a on a.attrelid = c.oid and a.attnum = con.conkey[1]
           where n.nspname = $1 and con.contype = 'c' and cardinality(con.conkey) = 1`,
          [schema],
        )
      ).rows;
      const privileges = (
        await tx.query<PrivilegeRow>(
          `select c.relname as table_name, a.attname as column_name, r.rolname as role,
                  has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT') as can_select,
                  has_column_privilege(r.oid, c.oid, a.attnum, 'INSERT') as can_insert,
                  has_column_privilege(r.oid, c.oid, a.attnum, 'UPDATE') as can_update,
                  has_table_privilege(r.oid, c.oid, 'DELETE') as can_delete
           from pg_class c
           join pg_namespace n on n.oid = c.relnamespace
           join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
           cross join pg_roles r
           where n.nspname = $1 and c.relkind in ('r', 'v', 'm', 'p', 'f') and r.rolname = any ($2::text[])`,
          [schema, [...REQUEST_ROLES]],
        )
      ).rows;
      const routines = (
        await tx.query<RoutineRow>(
          `select p.oid::text as oid, p.proname as name, p.provolatile::text as volatility, p.proretset as returns_set,
                  format_type(p.prorettype, null) as return_type,
                  case when rt.typcategory = 'A' then format_type(rt.typelem, null) end as return_element_type,
                  rt.typtype::text as return_typtype, p.prorettype = 'void'::regtype as return_is_void,
                  rc.relname as return_relation, rc.relkind::text as return_relation_kind, rn.nspname as return_relation_schema,
                  case when rt.typtype = 'c' then (
                    select json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
                             'element_type', case when at.typcategory = 'A' then format_type(at.typelem, null) end) order by a.attnum)
                    from pg_attribute a join pg_type at on at.oid = a.atttypid
                    where a.attrelid = rt.typrelid and a.attnum > 0 and not a.attisdropped) end as return_attributes,
                  array(select format_type(u.t, null) from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) with ordinality u(t, i) order by u.i)::text[] as arg_types,
                  array(select case when ut.typcategory = 'A' then format_type(ut.typelem, null) end
                        from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) with ordinality u(t, i)
                        join pg_type ut on ut.oid = u.t order by u.i)::text[] as arg_element_types,
                  p.proargmodes::text[] as arg_modes, p.proargnames as arg_names, p.pronargdefaults as defaults,
                  array(select r.rolname::text from pg_roles r
                        where r.rolname = any ($2::text[]) and has_function_privilege(r.oid, p.oid, 'EXECUTE'))::text[] as roles,
                  obj_description(p.oid, 'pg_proc') as description
           from pg_proc p
           join pg_namespace n on n.oid = p.pronamespace
           join pg_type rt on rt.oid = p.prorettype
           left join pg_class rc on rc.oid = rt.typrelid and rt.typtype = 'c'
           left join pg_namespace rn on rn.oid = rc.relnamespace
           where n.nspname = $1 and p.prokind = 'f'
             and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')
           order by p.oid`,
          [schema, [...REQUEST_ROLES]],
        )
      ).rows;
      // Computed relationships: one-argument functions from a table's row to another's rows.
      const computedRelationships = (
        await tx.query<ComputedRelationshipRow>(
          `select p.proname as name, c.relname as table_name, rc.relname as target_name,
                  p.proretset as returns_set, p.prorows::float8 as est_rows
           from pg_proc p
           join pg_namespace n on n.oid = p.pronamespace
           join pg_class c on c.reltype = p.proargtypes[0]
           join pg_namespace cn on cn.oid = c.relnamespace
           join pg_type rt on rt.oid = p.prorettype
           join pg_class rc on rc.oid = rt.typrelid
           join pg_namespace rn on rn.oid = rc.relnamespace
           where n.nspname = $1 and cn.nspname = $1 and rn.nspname = $1 and p.pronargs = 1
             and p.prokind = 'f' and c.relkind in ('r', 'v', 'm', 'p', 'f') and rc.relkind in ('r', 'v', 'm', 'p', 'f')
             and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')
           order by p.oid`,
          [schema],
        )
      ).rows;
      const triggers = await insertTriggers(tx, schema);
      const cache = buildCache(schema, columns, constraints, functions, viewColumnSources(views, tableOids));
      cache.routines = buildRoutines(schema, routines, cache.tables);
      addComputedRelationships(cache, computedRelationships);
      describeColumns(cache, checks, triggers);
      for (const p of privileges) {
        const table = cache.tables.get(p.table_name);
        if (!table) continue;
        let grants = table.privileges.get(p.role);
        if (!grants) {
          grants = { select: new Set(), insert: new Set(), update: new Set(), delete: p.can_delete };
          table.privileges.set(p.role, grants);
        }
        if (p.can_select) grants.select.add(p.column_name);
        if (p.can_insert) grants.insert.add(p.column_name);
        if (p.can_update) grants.update.add(p.column_name);
      }
      return cache;
    },
    { readOnly: true },
  );
}

/** The BEFORE INSERT row triggers of the schema's tables, with their functions' qualified names. */
export async function insertTriggers(
  tx: { query<T>(sql: string, params?: unknown[]): Promise<{ rows: T[] }> },
  schema: string,
): Promise<InsertTriggerRow[]> {
  // tgtype bits: 1 row, 2 before, 4 insert.
  return (
    await tx.query<InsertTriggerRow>(
      `select c.relname as table_name, pn.nspname || '.' || p.proname as function_name
       from pg_trigger tg
       join pg_class c on c.oid = tg.tgrelid
       join pg_namespace n on n.oid = c.relnamespace
       join pg_proc p on p.oid = tg.tgfoid
       join pg_namespace pn on pn.oid = p.pronamespace
       where n.nspname = $1 and not tg.tgisinternal and tg.tgtype & 7 = 7
       order by 1, 2`,
      [schema],
    )
  ).rows;
}

/**
 * What the description says of a column beyond its type: the values a check allows, the shape a
 * jsonb check demands, and whether a trigger fills it. Only the simple checks PostgreSQL prints as
 * `CHECK ((col = ANY (ARRAY['a'::text, ...])))` or `CHECK ((jsonb_typeof(col) = 'object'::text))`
 * are read; anything else is left to the database to enforce.
 */
function describeColumns(cache: SchemaCache, checks: CheckRow[], triggers: InsertTriggerRow[]): void {
  for (const check of checks) {
    const column = cache.tables.get(check.table_name)?.columnsByName.get(check.column_name);
    if (!column) continue;
    const col = columnPattern(check.column_name);
    const anyOf = new RegExp(`^CHECK \\(\\(${col} = ANY \\(ARRAY\\[(.*)\\]\\)\\)\\)$`).exec(check.definition);
    if (anyOf?.[1] !== undefined) {
      const items = [...anyOf[1].matchAll(/'((?:[^']|'')*)'::[a-z ]+(?:, |$)/g)].map((m) =>
        (m[1] as string).replace(/''/g, "'"),
      );
      if (items.length > 0) column.enumValues = items;
      continue;
    }
    const json = new RegExp(`^CHECK \\(\\(jsonb_typeof\\(${col}\\) = '(object|array)'::text\\)\\)$`).exec(
      check.definition,
    );
    if (json?.[1]) column.jsonType = json[1] as "object" | "array";
  }
  for (const trigger of triggers) {
    const table = cache.tables.get(trigger.table_name);
    for (const name of FILLING_TRIGGERS[trigger.function_name] ?? []) {
      const column = table?.columnsByName.get(name);
      if (column) column.filledByDatabase = true;
    }
  }
}

/** A column's name as pg_get_constraintdef() may print it (bare, or double-quoted), as a pattern. */
function columnPattern(name: string): string {
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return `(?:${literal(name)}|${literal(`"${name.replace(/"/g, '""')}"`)})`;
}

/** The text of the top-level query's `:targetList (...)` in a rule's node tree (depth 1 of braces). */
function topLevelTargetList(action: string): string {
  let depth = 0;
  for (let i = 0; i < action.length; i++) {
    const ch = action[i];
    if (ch === "\\") i++;
    else if (ch === "{") depth++;
    else if (ch === "}") depth--;
    else if (depth === 1 && ch === ":" && action.startsWith(":targetList", i)) {
      let j = i + ":targetList".length;
      let d = 0;
      for (; j < action.length; j++) {
        const c = action[j];
        if (c === "\\") j++;
        else if (c === "{") d++;
        else if (c === "}") d--;
        else if (c === ":" && d === 0 && j > i + 12) break;
      }
      return action.slice(i, j);
    }
  }
  return "";
}

/** view -> view column -> [base table, base column], from the views' query trees (the first query's target list). */
type ViewSources = Map<string, Map<string, [string, string]>>;

function viewColumnSources(
  views: ViewRow[],
  attributes: { oid: string; name: string; attnum: number; attname: string }[],
): ViewSources {
  const byOid = new Map<string, { name: string; columns: Map<number, string> }>();
  for (const a of attributes) {
    const t = byOid.get(a.oid) ?? { name: a.name, columns: new Map() };
    t.columns.set(Number(a.attnum), a.attname);
    byOid.set(a.oid, t);
  }
  const out: ViewSources = new Map();
  for (const v of views) {
    const map = new Map<string, [string, string]>();
    // The top-level query's target list comes first in the text; a name is escaped with backslashes.
    const re =
      /\{TARGETENTRY :expr .*?:resname ((?:\\.|[^ ])+) :ressortgroupref \d+ :resorigtbl (\d+) :resorigcol (\d+) :resjunk false\}/g;
    const targetList = topLevelTargetList(v.action);
    for (const m of targetList.matchAll(re)) {
      const name = (m[1] as string).replace(/\\(.)/g, "$1");
      const table = byOid.get(m[2] as string);
      const column = table?.columns.get(Number(m[3]));
      if (table && column && !map.has(name)) map.set(name, [table.name, column]);
    }
    out.set(v.view_name, map);
  }
  return out;
}

function buildCache(
  schema: string,
  columnRows: ColumnRow[],
  constraints: ConstraintRow[],
  functions: FunctionRow[],
  viewSources: ViewSources,
): SchemaCache {
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
        isView: row.table_kind === "v" || row.table_kind === "m",
        description: row.table_description,
        computed: new Map(),
        privileges: new Map(),
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
      defaultExpr: row.default_expr,
    };
    table.columns.push(column);
    table.columnsByName.set(column.name, column);
  }
  for (const f of functions) {
    const table = tables.get(f.table_name);
    if (table && !table.columnsByName.has(f.name))
      table.computed.set(f.name, { name: f.name, type: f.type, elementType: f.element_type ?? undefined });
  }

  for (const c of constraints) {
    const table = tables.get(c.table_name);
    if (!table) continue;
    if (c.kind === "p") table.primaryKey = c.columns;
    if (c.kind === "p" || c.kind === "u") {
      if (!table.uniqueKeys.some((k) => sameSet(k, c.columns))) table.uniqueKeys.push(c.columns);
    }
  }

  // As PostgREST builds them: the foreign keys (many-to-one, or one-to-one when the key's columns
  // are unique), the same through views that show the key's columns, many-to-many through
  // junctions, then every one of those seen from the other side.
  interface Forward {
    constraint: string;
    table: string;
    target: string;
    /** (table column, target column) */
    columns: [string, string][];
    oneToOne: boolean;
  }
  const forward: Forward[] = [];
  for (const c of constraints) {
    // Only relationships between exposed tables: a key into an internal table is not embeddable.
    if (c.kind !== "f" || c.target_schema !== schema || !c.target_name || !c.target_columns) continue;
    const from = tables.get(c.table_name);
    if (!from || !tables.has(c.target_name)) continue;
    const targetColumns = c.target_columns;
    forward.push({
      constraint: c.name,
      table: c.table_name,
      target: c.target_name,
      columns: c.columns.map((col, i) => [col, targetColumns[i] as string]),
      oneToOne: from.uniqueKeys.some((k) => sameSet(k, c.columns)),
    });
  }
  // A view column that shows a base column: view -> base table -> base column -> view column.
  const viewColumn = (view: string, table: string, column: string): string | undefined => {
    for (const [vcol, [t, col]] of viewSources.get(view) ?? [])
      if (t === table && col === column) return vcol;
    return undefined;
  };
  const views = [...tables.values()].filter((t) => t.isView).map((t) => t.name);
  const mapped = (view: string, table: string, cols: string[]): string[] | undefined => {
    const out = cols.map((c) => viewColumn(view, table, c));
    return out.every((c) => c !== undefined) ? (out as string[]) : undefined;
  };
  const withViews: (Forward & { tableIsView: boolean; targetIsView: boolean })[] = forward.map((f) => ({
    ...f,
    tableIsView: false,
    targetIsView: false,
  }));
  for (const f of forward) {
    const fromCols = f.columns.map((c) => c[0]);
    const toCols = f.columns.map((c) => c[1]);
    const fromViews = views.flatMap((v) => {
      const cols = mapped(v, f.table, fromCols);
      return cols ? [{ view: v, cols }] : [];
    });
    const toViews = views.flatMap((v) => {
      const cols = mapped(v, f.target, toCols);
      return cols ? [{ view: v, cols }] : [];
    });
    for (const v of fromViews) {
      withViews.push({
        ...f,
        table: v.view,
        columns: v.cols.map((c, i) => [c, toCols[i] as string]),
        tableIsView: true,
        targetIsView: false,
      });
    }
    for (const v of toViews) {
      withViews.push({
        ...f,
        target: v.view,
        columns: fromCols.map((c, i) => [c, v.cols[i] as string]),
        tableIsView: false,
        targetIsView: true,
      });
    }
    for (const a of fromViews) {
      for (const b of toViews) {
        withViews.push({
          ...f,
          table: a.view,
          target: b.view,
          columns: a.cols.map((c, i) => [c, b.cols[i] as string]),
          tableIsView: true,
          targetIsView: true,
        });
      }
    }
  }

  const relationships = new Map<string, Relationship[]>();
  const add = (r: Relationship) => {
    const list = relationships.get(r.table) ?? [];
    list.push(r);
    relationships.set(r.table, list);
  };
  const isView = (name: string) => tables.get(name)?.isView ?? false;
  for (const f of withViews) {
    add({
      constraint: f.constraint,
      table: f.table,
      columns: f.columns.map((c) => c[0]),
      target: f.target,
      targetColumns: f.columns.map((c) => c[1]),
      cardinality: f.oneToOne ? "one-to-one" : "many-to-one",
      isSelf: f.table === f.target,
      targetIsView: f.targetIsView,
      junction: undefined,
    });
  }
  // Many-to-many: two different keys of one junction whose columns are all in its primary key.
  for (const a of withViews) {
    if (a.oneToOne) continue;
    const pk = tables.get(a.table)?.primaryKey ?? [];
    for (const b of withViews) {
      if (b.oneToOne || b.table !== a.table || b.constraint === a.constraint) continue;
      const cols = [...a.columns.map((c) => c[0]), ...b.columns.map((c) => c[0])];
      if (!cols.every((c) => pk.includes(c))) continue;
      add({
        constraint: a.table,
        table: a.target,
        columns: a.columns.map((c) => c[1]),
        target: b.target,
        targetColumns: b.columns.map((c) => c[1]),
        cardinality: "many-to-many",
        isSelf: a.target === b.target,
        targetIsView: isView(b.target),
        junction: {
          table: a.table,
          constraint1: a.constraint,
          sourceColumns: a.columns,
          constraint2: b.constraint,
          targetColumns: b.columns,
        },
      });
    }
  }
  for (const f of withViews) {
    add({
      constraint: f.constraint,
      table: f.target,
      columns: f.columns.map((c) => c[1]),
      target: f.table,
      targetColumns: f.columns.map((c) => c[0]),
      cardinality: f.oneToOne ? "one-to-one" : "one-to-many",
      isSelf: f.table === f.target,
      targetIsView: f.tableIsView,
      junction: undefined,
    });
  }
  return { schema, tables, relationships, routines: new Map() };
}

/** The types of a single unnamed parameter that takes a request's whole body. */
const BODY_TYPES = new Set(["json", "jsonb", "text", "xml", "bytea"]);

/**
 * The type an argument is cast to: `character` and `bit` without a length would cut a value to one
 * character, so their varying forms take any length (the parameter's own type converts it).
 */
function unbounded(type: string): string {
  if (type === "character" || type === "bit") return `${type} varying`;
  if (type === "character[]" || type === "bit[]") return `${type.slice(0, -2)} varying[]`;
  return type;
}

const VOLATILITY = { i: "immutable", s: "stable", v: "volatile" } as const;

const column = (name: string, type: string, elementType: string | null, position: number): Column => ({
  name,
  type,
  elementType: elementType ?? undefined,
  nullable: true,
  hasDefault: false,
  position,
  description: null,
});

/**
 * The schema's functions as /rest/v1/rpc sees them, from pg_proc: the input parameters (IN,
 * INOUT, VARIADIC), and the result: void, a scalar, or rows whose columns are the OUT/TABLE
 * parameters, a table's or a composite type's. A function returning `record` without OUT
 * parameters (which needs a column list to call) or taking a pseudo-type (polymorphic) cannot be
 * called through the interface and is left out, as are functions an extension owns.
 */
function buildRoutines(
  schema: string,
  rows: RoutineRow[],
  tables: Map<string, Table>,
): Map<string, Routine[]> {
  const out = new Map<string, Routine[]>();
  for (const r of rows) {
    const modes = r.arg_modes ?? r.arg_types.map(() => "i");
    const names = r.arg_names ?? [];
    const inputs: { name: string; type: string; variadic: boolean }[] = [];
    const outputs: Column[] = [];
    r.arg_types.forEach((type, i) => {
      const mode = modes[i] ?? "i";
      const name = names[i] ?? "";
      if (mode === "i" || mode === "b" || mode === "v") inputs.push({ name, type, variadic: mode === "v" });
      if (mode === "o" || mode === "b" || mode === "t")
        outputs.push(column(name, type, r.arg_element_types[i] ?? null, outputs.length + 1));
    });
    const pseudo = (t: string) =>
      /^(any|anyelement|anyarray|anynonarray|anyenum|anyrange|anymultirange|anycompatible\w*|internal|cstring|trigger|event_trigger|language_handler|fdw_handler|table_am_handler|index_am_handler|tsm_handler|opaque)$/.test(
        t,
      );
    if (inputs.some((p) => pseudo(p.type)) || pseudo(r.return_type)) continue;
    // As PostgREST: an unnamed parameter can only be the one that takes the whole body.
    const unnamed = inputs.filter((p) => p.name === "");
    if (
      unnamed.length > 1 ||
      (unnamed.length === 1 && !BODY_TYPES.has((unnamed[0] as { type: string }).type))
    )
      continue;
    let returns: Routine["returns"];
    let returnTable: string | undefined;
    let returnColumns: Column[] = [];
    if (r.return_is_void) returns = "void";
    else if (outputs.length > 0) {
      returns = "composite";
      returnColumns = outputs;
    } else if (r.return_typtype === "c") {
      returns = "composite";
      const exposed =
        r.return_relation_schema === schema && r.return_relation ? tables.get(r.return_relation) : undefined;
      if (exposed) {
        returnTable = exposed.name;
        returnColumns = exposed.columns;
      } else {
        returnColumns = (r.return_attributes ?? []).map((a, i) =>
          column(a.name, a.type, a.element_type, i + 1),
        );
      }
    } else if (r.return_type === "record" || r.return_typtype === "p") {
      continue;
    } else {
      returns = "scalar";
    }
    const required = inputs.length - Number(r.defaults);
    const routine: Routine = {
      schema,
      name: r.name,
      oid: r.oid,
      params: inputs.map((p, i) => ({ ...p, type: unbounded(p.type), required: i < required })),
      returnsSet: r.returns_set,
      returns,
      returnType: r.return_type,
      returnTable,
      returnColumns,
      volatility: VOLATILITY[r.volatility as keyof typeof VOLATILITY] ?? "volatile",
      executableBy: new Set(r.roles),
      description: r.description,
    };
    const list = out.get(r.name) ?? [];
    list.push(routine);
    out.set(r.name, list);
  }
  return out;
}

function sameSet(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

interface ComputedRelationshipRow {
  name: string;
  table_name: string;
  target_name: string;
  returns_set: boolean;
  est_rows: number;
}

/**
 * Each function from one exposed table's row to another's rows is a relationship of the first,
 * named as the function, as PostgREST reads them: to-many for `setof`, unless declared `rows 1`.
 */
function addComputedRelationships(cache: SchemaCache, rows: ComputedRelationshipRow[]): void {
  for (const r of rows) {
    const from = cache.tables.get(r.table_name);
    const target = cache.tables.get(r.target_name);
    if (!from || !target) continue;
    const toOne = !r.returns_set || r.est_rows === 1;
    const list = cache.relationships.get(from.name) ?? [];
    list.push({
      constraint: r.name,
      table: from.name,
      columns: [],
      target: target.name,
      targetColumns: [],
      cardinality: toOne ? "many-to-one" : "one-to-many",
      isSelf: false,
      targetIsView: target.isView,
      junction: undefined,
      computed: r.name,
    });
    cache.relationships.set(from.name, list);
  }
}

/** Whether a relationship embeds as one object (to-one) rather than an array. */
export const isToOne = (r: Relationship): boolean =>
  r.cardinality === "many-to-one" || r.cardinality === "one-to-one";
