/**
 * The query string of a /rest/v1 request, parsed as PostgREST (v12) parses it. The caller has
 * already percent-decoded keys and values (`+` as a space) and keeps their order.
 *
 * Keys: `select`, `columns`, `on_conflict` (the first of each counts, as in PostgREST); keys whose
 * last dot-separated segment is `order`, `limit`, `offset`, `and` or `or` (with an embed path
 * before it: `tracks.order`, `tracks.not.or`); `apikey`, which is authentication and ignored;
 * every other key is a filter `path.to.field->json=operator.value`.
 */
import type { Condition, EmbedPath, FieldRef, OrderTerm, ParsedQuery, SelectItem } from "./ast.ts";
import { parseFilter, parseLogicTree } from "./parse-filter.ts";
import { Cursor, parseFieldName, parseJsonPath } from "./parse-lexer.ts";
import { parseColumns, parseOrder, parseSelect } from "./parse-select.ts";

type Limit = ParsedQuery["limits"][number];

export function parseQuery(entries: [string, string][]): ParsedQuery {
  let select: SelectItem[] | undefined;
  let columns: string[] | undefined;
  let onConflict: string[] | undefined;
  const conditions: { path: EmbedPath; condition: Condition }[] = [];
  const orders = new Map<string, { path: EmbedPath; terms: OrderTerm[] }>();
  const limits = new Map<string, Limit>();

  for (const [key, value] of entries) {
    if (key === "apikey") continue;
    if (key === "select") {
      select ??= parseSelect(value);
      continue;
    }
    if (key === "columns") {
      columns ??= parseColumns(value, "columns");
      continue;
    }
    if (key === "on_conflict") {
      onConflict ??= parseColumns(value, "on_conflict");
      continue;
    }
    const last = key.slice(key.lastIndexOf(".") + 1);
    switch (last) {
      case "order": {
        const path = reservedPath(key, "tree path");
        const terms = parseOrder(value);
        // PostgREST applies the first `order` given for a path.
        if (!orders.has(pathKey(path))) orders.set(pathKey(path), { path, terms });
        break;
      }
      case "limit":
      case "offset": {
        const path = reservedPath(key, "tree path");
        const n = parseCount(value, last);
        let entry = limits.get(pathKey(path));
        if (entry === undefined) {
          entry = { path, limit: undefined, offset: undefined };
          limits.set(pathKey(path), entry);
        }
        // The last one given wins, as in PostgREST.
        entry[last] = n;
        break;
      }
      case "and":
      case "or": {
        const path = reservedPath(key, "logic path");
        const negated = path.at(-1) === "not";
        if (negated) path.pop();
        conditions.push({ path, condition: parseLogicTree(last, negated, value) });
        break;
      }
      default: {
        const { path, field } = filterKey(key);
        conditions.push({ path, condition: parseFilter(field, value) });
      }
    }
  }

  return {
    select,
    conditions,
    order: [...orders.values()],
    limits: [...limits.values()],
    columns,
    onConflict,
  };
}

function pathKey(path: EmbedPath): string {
  return JSON.stringify(path);
}

/** `tracks.credits.title->a` → path ["tracks", "credits"], field title with its JSON path. */
function filterKey(key: string): { path: EmbedPath; field: FieldRef } {
  const c = new Cursor(key, "tree path");
  const names = [parseFieldName(c)];
  while (c.eat(".")) names.push(parseFieldName(c));
  const jsonPath = parseJsonPath(c);
  c.expectEnd('".", "->", "->>" or end of input');
  const name = names.pop() as string;
  return { path: names, field: { name, jsonPath } };
}

/** `tracks.order` → ["tracks"]; for logic keys the `not` before and/or stays for the caller. */
function reservedPath(key: string, what: "tree path" | "logic path"): string[] {
  const c = new Cursor(key, what);
  const names = [parseFieldName(c)];
  while (c.eat(".")) names.push(parseFieldName(c));
  c.expectEnd('"." or end of input');
  names.pop();
  return names;
}

/** limit and offset: a non-negative whole number. */
function parseCount(value: string, what: "limit" | "offset"): number {
  const c = new Cursor(value, `${what} parameter`);
  const digits = c.scan((ch) => ch >= "0" && ch <= "9");
  if (digits === "") c.fail("digit (a non-negative whole number)");
  c.expectEnd("digit or end of input");
  const n = Number(digits);
  if (!Number.isSafeInteger(n)) c.error(`${what} ${digits} is larger than ${Number.MAX_SAFE_INTEGER}`, 0);
  return n;
}
