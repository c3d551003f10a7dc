/**
 * Operator expressions (`eq.5`, `not.in.(1,2)`, `fts(english).word`, `like(any).{a*,b*}`) and
 * logic trees (`or=(a.eq.1,and(b.gt.2,c.is.null))`), as PostgREST parses them.
 *
 * A filter parameter's value is everything after the operator, taken raw; inside a logic tree a
 * value ends at `,` or `)` unless it is a closed `"quoted"` string or a `{pg,array}`.
 */
import type { Condition, FieldRef, Filter, FilterOp, LogicTree } from "./ast.ts";
import {
  Cursor,
  FIELD_NAME,
  isIdentChar,
  MAX_DEPTH,
  parseField,
  parseIdentifier,
  tryQuoted,
} from "./parse-lexer.ts";

const OPERATOR = '"not" or operator (eq, gt, ...)';
const DELIMITER = "delimiter (.)";
const IS_VALUE = "isVal: (null, not_null, true, false, unknown)";
const CONDITION = `${FIELD_NAME}, negation operator (not) or logic operator (and, or)`;

/** `(any)` / `(all)` may follow these. */
const QUANTIFIABLE = new Set<FilterOp>([
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
]);
/** Operators taking one value, kept raw: the builder casts arrays, ranges and JSON itself. */
const RAW = new Set<FilterOp>(["cs", "cd", "ov", "sl", "sr", "nxl", "nxr", "adj", "isdistinct"]);
const FTS = new Set<FilterOp>(["fts", "plfts", "phfts", "wfts"]);
const IS_VALUES = new Set(["null", "not_null", "true", "false", "unknown"]);

type Mode = "param" | "logic";

/** The value of a filter parameter: `field=<value>`. */
export function parseFilter(field: FieldRef, value: string): Filter {
  const c = new Cursor(value, "filter");
  const filter = parseOpExpr(c, field, "param");
  c.expectEnd();
  return filter;
}

/** The value of `or=`, `and=`, `not.or=`, `not.and=` (with or without an embed path). */
export function parseLogicTree(kind: "and" | "or", negated: boolean, value: string): LogicTree {
  const c = new Cursor(value, "logic tree");
  const tree = parseGroup(c, kind, negated, 1);
  c.expectEnd();
  return tree;
}

function parseOpExpr(c: Cursor, field: FieldRef, mode: Mode): Filter {
  const negated = c.eat("not.");
  const start = c.pos;
  const word = c.scan((ch) => (ch >= "a" && ch <= "z") || (ch >= "A" && ch <= "Z"));
  const filter = (op: FilterOp, value: string | string[], extra?: Partial<Filter>): Filter => ({
    kind: "filter",
    field,
    negated,
    op,
    quantifier: undefined,
    language: undefined,
    value,
    ...extra,
  });
  if (word === "in") {
    c.expect(".", DELIMITER);
    return filter("in", parseList(c));
  }
  if (word === "is") {
    c.expect(".", DELIMITER);
    const at = c.pos;
    const value = c.scan((ch) => ch === "_" || (ch >= "a" && ch <= "z") || (ch >= "A" && ch <= "Z"));
    const lower = value.toLowerCase();
    if (!IS_VALUES.has(lower)) c.fail(IS_VALUE, at, value === "" ? undefined : JSON.stringify(value));
    return filter("is", lower);
  }
  const op = word as FilterOp;
  if (FTS.has(op)) {
    let language: string | undefined;
    if (c.eat("(")) {
      language = parseIdentifier(c, "text search configuration ([a..z0..9_$])");
      c.expect(")");
    }
    c.expect(".", language === undefined ? `"(" or ${DELIMITER}` : DELIMITER);
    return filter(op, singleValue(c, mode), { language });
  }
  if (RAW.has(op)) {
    c.expect(".", DELIMITER);
    return filter(op, singleValue(c, mode));
  }
  if (QUANTIFIABLE.has(op)) {
    let quantifier: "any" | "all" | undefined;
    if (c.eat("(")) {
      if (c.eat("any)")) quantifier = "any";
      else if (c.eat("all)")) quantifier = "all";
      else c.fail('"any)" or "all)"');
    }
    c.expect(".", quantifier === undefined ? `"(" or ${DELIMITER}` : DELIMITER);
    return filter(op, quantifier === undefined ? singleValue(c, mode) : quantifiedList(c), { quantifier });
  }
  // Like PostgREST's parser, point past the longest operator the word starts with ("eqx": at "x").
  const prefix =
    [...KNOWN_OPERATORS].filter((o) => word.startsWith(o)).sort((a, b) => b.length - a.length)[0] ?? "";
  const at = start + prefix.length;
  c.fail(
    prefix === "" ? OPERATOR : "operator (eq, gt, ...)",
    at,
    prefix === "" && word !== "" ? JSON.stringify(word) : undefined,
  );
}

const KNOWN_OPERATORS = ["in", "is", ...FTS, ...RAW, ...QUANTIFIABLE];

function singleValue(c: Cursor, mode: Mode): string {
  if (mode === "param") return c.rest();
  const start = c.pos;
  if (c.peek() === '"') {
    const value = tryQuoted(c);
    if (value !== undefined && endsValue(c.peek())) return value;
    c.pos = start;
  }
  if (c.peek() === "{") {
    // PostgREST's pPgArray: `{` up to the first `}`, no nested braces; it may hold commas.
    let i = c.pos + 1;
    while (i < c.chars.length && c.chars[i] !== "{" && c.chars[i] !== "}") i++;
    if (c.chars[i] === "}") {
      c.pos = i + 1;
      return c.slice(start);
    }
  }
  return c.scan((ch) => ch !== "," && ch !== ")");
}

function endsValue(ch: string | undefined): boolean {
  return ch === undefined || ch === "," || ch === ")";
}

/**
 * `(a,"b,c",d)`: `in` lists, and the `(...)` form of quantified values. Unquoted items are kept
 * as written, spaces included; `()` is the empty list while `("")` holds one empty string.
 */
function parseList(c: Cursor): string[] {
  c.skipWs();
  c.expect("(");
  c.skipWs();
  const items: string[] = [];
  let quotedFirst = false;
  for (;;) {
    const start = c.pos;
    let item: string | undefined;
    if (c.peek() === '"') {
      item = tryQuoted(c);
      if (item !== undefined && !endsValue(c.peek())) {
        item = undefined;
        c.pos = start;
      }
      if (items.length === 0) quotedFirst = item !== undefined;
    }
    items.push(item ?? c.scan((ch) => ch !== "," && ch !== ")"));
    if (!c.eat(",")) break;
  }
  c.expect(")", '"," or ")"');
  c.skipWs();
  return items.length === 1 && items[0] === "" && !quotedFirst ? [] : items;
}

/** The operand of `eq(any)`, `like(all)` ...: `{a,b}` (a PostgreSQL array literal) or `(a,b)`. */
function quantifiedList(c: Cursor): string[] {
  if (c.peek() === "(") return parseList(c);
  if (c.peek() !== "{") c.fail('a list: "{" or "("');
  c.pos++;
  const items: string[] = [];
  skipSpace(c);
  if (c.eat("}")) return items;
  for (;;) {
    skipSpace(c);
    items.push(arrayElement(c));
    skipSpace(c);
    if (c.eat("}")) return items;
    c.expect(",", '"," or "}"');
  }
}

/** One element of a one-dimensional array literal, by PostgreSQL's rules. */
function arrayElement(c: Cursor): string {
  const start = c.pos;
  if (c.peek() === '"') {
    const value = tryQuoted(c);
    if (value === undefined) c.fail('closing quote (")', c.chars.length);
    return value;
  }
  let value = "";
  // The length of `value` up to its last escaped character, which trimming must keep.
  let kept = -1;
  for (;;) {
    const ch = c.peek();
    if (ch === undefined || ch === "," || ch === "}") break;
    if (ch === '"' || ch === "{") c.fail('"," or "}" (quote the whole element)');
    c.pos++;
    if (ch === "\\") {
      const next = c.peek();
      if (next === undefined) c.fail("a character after the backslash");
      value += next;
      kept = value.length;
      c.pos++;
    } else {
      value += ch;
    }
  }
  // Unquoted elements lose the whitespace around them (not escaped whitespace), as in PostgreSQL.
  const escaped = kept !== -1;
  value = escaped ? value.slice(0, kept) + value.slice(kept).trimEnd() : value.trim();
  if (value === "" && !escaped) c.fail("an array element", start);
  if (!escaped && value.toUpperCase() === "NULL") {
    c.error(`unquoted NULL in a list at index ${start} is not supported: write "NULL" for the text`, start);
  }
  return value;
}

function skipSpace(c: Cursor): void {
  c.scan((ch) => ch === " " || ch === "\t" || ch === "\n" || ch === "\r" || ch === "\v" || ch === "\f");
}

/** `(child,child,...)` after `and` / `or` / `not.and` / `not.or`. */
function parseGroup(c: Cursor, kind: "and" | "or", negated: boolean, depth: number): LogicTree {
  if (depth > MAX_DEPTH) c.error(`logic trees nest at most ${MAX_DEPTH} levels deep (index ${c.pos})`);
  c.skipWs();
  c.expect("(");
  c.skipWs();
  const children: Condition[] = [];
  for (;;) {
    children.push(parseCondition(c, depth));
    c.skipWs();
    if (!c.eat(",")) break;
    c.skipWs();
  }
  c.expect(")", '"," or ")"');
  c.skipWs();
  return { kind, negated, children };
}

function parseCondition(c: Cursor, depth: number): Condition {
  const head = treeHead(c);
  if (head !== undefined) {
    c.pos += head.length;
    return parseGroup(c, head.kind, head.negated, depth + 1);
  }
  if (c.peek() !== '"' && !isIdentChar(c.peek())) c.fail(CONDITION);
  const field = parseField(c);
  c.expect(".", DELIMITER);
  return parseOpExpr(c, field, "logic");
}

/**
 * `and(`, `or (`, `not.and(`...: a nested tree. No filter can start this way (a filter's field
 * is followed by `.`), so looking ahead decides without backtracking.
 */
function treeHead(c: Cursor): { kind: "and" | "or"; negated: boolean; length: number } | undefined {
  const negated = c.at("not.");
  let i = c.pos + (negated ? 4 : 0);
  const word = (w: string) => [...w].every((ch, k) => c.chars[i + k] === ch);
  const kind = word("and") ? "and" : word("or") ? "or" : undefined;
  if (kind === undefined) return undefined;
  i += kind.length;
  while (c.chars[i] === " " || c.chars[i] === "\t") i++;
  return c.chars[i] === "(" ? { kind, negated, length: i - c.pos } : undefined;
}
