/**
 * `select=`, `order=`, `columns=` and `on_conflict=`, as PostgREST parses them.
 *
 * select: `*`, `alias:column->json::cast`, `alias:relation!hint!inner(...)`, `...relation(...)`.
 * order: `field->json.desc.nullslast,other`.
 */
import type { Aggregate, EmbedItem, FieldRef, OrderTerm, SelectItem } from "./ast.ts";
import {
  Cursor,
  MAX_DEPTH,
  parseField,
  parseFieldName,
  parseIdentifier,
  parseJsonPath,
} from "./parse-lexer.ts";

const AGGREGATES: Aggregate[] = ["sum", "avg", "count", "max", "min"];

export function parseSelect(value: string): SelectItem[] {
  const c = new Cursor(value, "select parameter");
  const items = parseForest(c, 0);
  c.expectEnd('"," or end of input');
  return items;
}

/** Items separated by commas; empty is allowed (`select=`, `tracks!inner()`). */
function parseForest(c: Cursor, depth: number): SelectItem[] {
  const items: SelectItem[] = [];
  c.skipWs();
  if (c.done || c.peek() === ")") return items;
  for (;;) {
    items.push(parseItem(c, depth));
    c.skipWs();
    if (!c.eat(",")) return items;
    c.skipWs();
  }
}

function parseItem(c: Cursor, depth: number): SelectItem {
  if (c.eat("...")) return parseEmbed(c, depth, parseFieldName(c), undefined, true);
  if (c.eat("*")) {
    c.skipWs();
    expectItemEnd(c, '",", ")" or end of input');
    return { kind: "star" };
  }
  const first = parseFieldName(c);
  let alias: string | undefined;
  let name = first;
  if (c.peek() === ":" && c.peek(1) !== ":") {
    c.pos++;
    c.skipWs();
    alias = first;
    name = parseFieldName(c);
  }
  // `count()`: the number of rows (of the group), as a field `*` with the count aggregate.
  if (name === "count" && c.eat("()")) {
    const aggregateCast = c.eat("::") ? parseIdentifier(c, "cast type ([a..z0..9_$])") : undefined;
    c.skipWs();
    expectItemEnd(c, '"::", ",", ")" or end of input');
    return {
      kind: "field",
      field: { name: "*", jsonPath: [] },
      alias,
      cast: undefined,
      aggregate: "count",
      aggregateCast,
    };
  }
  if (c.peek() === "!" || c.peek() === "(") return parseEmbed(c, depth, name, alias, false);
  const field: FieldRef = { name, jsonPath: parseJsonPath(c) };
  c.skipWs();
  let cast: string | undefined;
  if (c.eat("::")) cast = parseIdentifier(c, "cast type ([a..z0..9_$])");
  let aggregate: Aggregate | undefined;
  let aggregateCast: string | undefined;
  if (c.peek() === ".") {
    const fn = AGGREGATES.find((a) => c.chars.slice(c.pos + 1, c.pos + 3 + a.length).join("") === `${a}()`);
    if (fn !== undefined) {
      c.pos += fn.length + 3;
      aggregate = fn;
      if (c.eat("::")) aggregateCast = parseIdentifier(c, "cast type ([a..z0..9_$])");
    }
  }
  c.skipWs();
  expectItemEnd(c, `"->", "::", ",", ")" or end of input`);
  return aggregate
    ? { kind: "field", field, alias, cast, aggregate, aggregateCast }
    : { kind: "field", field, alias, cast };
}

function expectItemEnd(c: Cursor, expecting: string): void {
  const ch = c.peek();
  if (ch !== undefined && ch !== "," && ch !== ")") c.fail(expecting);
}

/** After the relation name: `!hint`, `!inner`, `!left` (at most two), then `(select...)`. */
function parseEmbed(
  c: Cursor,
  depth: number,
  relation: string,
  alias: string | undefined,
  spread: boolean,
): EmbedItem {
  let hint: string | undefined;
  let join: "inner" | "left" | undefined;
  // PostgREST reads at most two `!` parameters and keeps the first hint and the first join type.
  for (let i = 0; i < 2 && c.eat("!"); i++) {
    const param = parseFieldName(c);
    if (param === "inner" || param === "left") join ??= param;
    else hint ??= param;
  }
  if (depth + 1 > MAX_DEPTH) c.error(`embeds nest at most ${MAX_DEPTH} levels deep (index ${c.pos})`);
  c.expect("(", c.peek() === "!" ? '"("' : '"!" or "("');
  const select = parseForest(c, depth + 1);
  c.expect(")", '"," or ")"');
  return { kind: "embed", relation, alias, hint, inner: join === "inner", spread, select };
}

export function parseOrder(value: string): OrderTerm[] {
  const c = new Cursor(value, "order");
  const terms: OrderTerm[] = [];
  for (;;) {
    const field = parseField(c);
    if (c.peek() === "(") {
      // `order=relation(column)` orders by a to-one embed's column; the AST cannot hold it yet.
      c.error(
        `ordering by an embedded resource's column, relation(column), is not supported (index ${c.pos})`,
      );
    }
    let direction: OrderTerm["direction"];
    let nulls: OrderTerm["nulls"];
    if (c.eat(".")) {
      const at = c.pos;
      const word = c.scan((ch) => ch >= "a" && ch <= "z");
      if (word === "asc" || word === "desc") direction = word;
      else if (word === "nullsfirst" || word === "nullslast")
        nulls = word === "nullsfirst" ? "first" : "last";
      else
        c.fail(
          '"asc", "desc", "nullsfirst" or "nullslast"',
          at,
          word === "" ? undefined : JSON.stringify(word),
        );
      if (direction !== undefined && c.eat(".")) {
        const at2 = c.pos;
        const word2 = c.scan((ch) => ch >= "a" && ch <= "z");
        if (word2 === "nullsfirst" || word2 === "nullslast")
          nulls = word2 === "nullsfirst" ? "first" : "last";
        else c.fail('"nullsfirst" or "nullslast"', at2, word2 === "" ? undefined : JSON.stringify(word2));
      }
    }
    terms.push({ field, direction, nulls });
    c.skipWs();
    if (c.done) return terms;
    c.expect(",", nulls !== undefined ? '"," or end of input' : '".", "," or end of input');
  }
}

/** `columns=` and `on_conflict=`: names separated by commas, quoted or not. */
export function parseColumns(value: string, what: "columns" | "on_conflict"): string[] {
  const c = new Cursor(value, `${what} parameter`);
  const names = new Set<string>();
  for (;;) {
    c.skipWs();
    names.add(parseFieldName(c));
    c.skipWs();
    if (!c.eat(",")) break;
  }
  c.expectEnd('"," or end of input');
  return [...names];
}
