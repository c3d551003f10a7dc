/**
 * The parsed form of a /rest/v1 request: what the PostgREST grammar (parse-*.ts) produces and the
 * SQL builder (sql-*.ts) consumes. Names in it are still the caller's: the builder checks every
 * one against the schema cache before it reaches SQL.
 */

/** A column, optionally followed by a JSON path: `data->a->>b`, `tags->0`. */
export interface FieldRef {
  name: string;
  jsonPath: JsonStep[];
}

export interface JsonStep {
  /** `->` keeps JSON, `->>` gives text. */
  op: "->" | "->>";
  /** An object key, or an array index when it is a whole number. */
  key: string | number;
}

export type SelectItem = StarItem | FieldItem | EmbedItem;

export interface StarItem {
  kind: "star";
}

export type Aggregate = "sum" | "avg" | "count" | "max" | "min";

/**
 * `alias:field::cast`, or an aggregate: `alias:field::cast.sum()::cast`, `alias:count()::cast`
 * (field `*`), and `count` alone when the table has no column of that name.
 */
export interface FieldItem {
  kind: "field";
  field: FieldRef;
  alias: string | undefined;
  cast: string | undefined;
  aggregate?: Aggregate | undefined;
  /** The cast applied to the aggregate's result. */
  aggregateCast?: string | undefined;
}

/** `alias:relation!hint!inner(select...)`, or `...relation(select...)` to spread a to-one embed. */
export interface EmbedItem {
  kind: "embed";
  relation: string;
  alias: string | undefined;
  /** A foreign-key constraint name or a column that disambiguates the relationship. */
  hint: string | undefined;
  /** `!inner`: only parent rows with at least one embedded row. */
  inner: boolean;
  /** `...relation(...)`: the to-one embed's columns are spread into the parent object. */
  spread: boolean;
  select: SelectItem[];
}

export const FILTER_OPS = [
  "eq",
  "neq",
  "gt",
  "gte",
  "lt",
  "lte",
  "like",
  "ilike",
  "match",
  "imatch",
  "in",
  "is",
  "isdistinct",
  "cs",
  "cd",
  "ov",
  "sl",
  "sr",
  "nxl",
  "nxr",
  "adj",
  "fts",
  "plfts",
  "phfts",
  "wfts",
] as const;
export type FilterOp = (typeof FILTER_OPS)[number];

/** `field=not.op(quantifier).value`, `field=fts(language).value`, `field=in.(a,"b,c")`. */
export interface Filter {
  kind: "filter";
  field: FieldRef;
  negated: boolean;
  op: FilterOp;
  /** `(any)` / `(all)` after eq, neq, gt, gte, lt, lte, like, ilike, match, imatch. */
  quantifier: "any" | "all" | undefined;
  /** The text-search configuration of fts, plfts, phfts, wfts: `fts(english)`. */
  language: string | undefined;
  /**
   * The operand, unquoted and unescaped: a string; for `in` and for quantified operators a list
   * (`(a,b)` or `{a,b}`); for `is` one of null, true, false, unknown, not_null.
   */
  value: string | string[];
}

/** `or=(...)`, `and=(...)`, `not.or=(...)`, and nested `and(...)` / `not.or(...)` inside them. */
export interface LogicTree {
  kind: "and" | "or";
  negated: boolean;
  children: Condition[];
}

export type Condition = Filter | LogicTree;

export interface OrderTerm {
  field: FieldRef;
  direction: "asc" | "desc" | undefined;
  nulls: "first" | "last" | undefined;
}

/**
 * An embed path: [] is the table of the URL; ["tracks"] the embed aliased or named `tracks`;
 * ["tracks", "credits"] one level deeper. Filters, order and limits given as `tracks.title=eq.x`,
 * `tracks.order=...`, `tracks.limit=...` apply there.
 */
export type EmbedPath = string[];

export interface ParsedQuery {
  /** From `select=`; undefined when not given (meaning `*`). */
  select: SelectItem[] | undefined;
  /** Every filter and logic tree, each at its embed path. All conditions at one path are ANDed. */
  conditions: { path: EmbedPath; condition: Condition }[];
  order: { path: EmbedPath; terms: OrderTerm[] }[];
  limits: { path: EmbedPath; limit: number | undefined; offset: number | undefined }[];
  /** `columns=` (insert/upsert): the body keys to use, in order. */
  columns: string[] | undefined;
  /** `on_conflict=` (upsert): the unique columns to resolve on. */
  onConflict: string[] | undefined;
}

/**
 * A grammar error, reported as PostgREST does (PGRST100, 400) with where it happened:
 * `message` says what was expected, `details` quotes the input around the position.
 */
export class ParseError extends Error {
  readonly code: string;
  readonly details: string;
  readonly hint: string | undefined;

  constructor(message: string, details: string, hint?: string, code = "PGRST100") {
    super(message);
    this.name = "ParseError";
    this.code = code;
    this.details = details;
    this.hint = hint;
  }
}
