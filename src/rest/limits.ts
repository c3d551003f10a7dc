import type { Condition, ParsedQuery, SelectItem } from "./ast.ts";
import { RestError } from "./sql-common.ts";

/**
 * What one /rest/v1 request may ask (docs/rest.md, "Request limits"). PostgREST has no such
 * bounds; Backline has them because one request's statement holds a connection (on PostgreSQL,
 * until its role's statement timeout) or the whole embedded database (PGlite cannot interrupt a
 * statement). Past a limit the answer is 400 `BL400`, naming the limit, before any SQL runs.
 */
export interface RestLimits {
  /**
   * Characters of the raw query string: below Node's 16 KiB for the request line and headers
   * together (past which Node answers a bare 431), leaving room for the headers.
   */
  queryLength: number;
  /** Characters of one like/ilike/match/imatch pattern (each of a quantified list). */
  patternLength: number;
  /** Items of one `in.(...)` list or quantified `(any)`/`(all)` list. */
  listItems: number;
  /** Nesting of one `or=`/`and=` tree: `or=(a.eq.1)` is 1, `or=(and(a.eq.1))` is 2. */
  logicDepth: number;
  /** Conditions of the whole request: every filter and every and/or group, at every embed path. */
  conditions: number;
  /** Nesting of embeds in `select`: `*,tracks(*)` is 1, `*,tracks(*,track_analytics(*))` is 2. */
  embedDepth: number;
  /** Embeds in `select`, at every depth. */
  embeds: number;
}

export const REST_LIMITS: RestLimits = {
  queryLength: 12_288,
  patternLength: 1000,
  listItems: 1000,
  logicDepth: 10,
  conditions: 500,
  embedDepth: 6,
  embeds: 25,
};

/** The limit `name` (a RestLimits key, as the message names it) was passed: 400 BL400. */
function exceeded(name: keyof RestLimits, details: string, hint: string): never {
  throw new RestError(400, "BL400", `Request exceeds the ${name} limit`, details, hint);
}

/** Before parsing: the raw query string (after `?`). */
export function checkQueryLength(rawQuery: string, limits: RestLimits = REST_LIMITS): void {
  if (rawQuery.length > limits.queryLength) {
    exceeded(
      "queryLength",
      `The query string is ${rawQuery.length} characters long; at most ${limits.queryLength} are allowed.`,
      "Split the request, or filter on fewer values.",
    );
  }
}

const PATTERN_OPS = new Set(["like", "ilike", "match", "imatch"]);

/**
 * A back-reference (`\1` ... `\9`) in a POSIX regular expression: the one construct that makes
 * PostgreSQL's regex engine backtrack (without it, matching is a DFA, linear in the text).
 */
function hasBackReference(pattern: string): boolean {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "\\") continue;
    const next = pattern[i + 1];
    if (next !== undefined && next >= "1" && next <= "9") return true;
    i++;
  }
  return false;
}

/** After parsing: patterns, lists, logic trees and embeds. */
export function checkQueryLimits(query: ParsedQuery, limits: RestLimits = REST_LIMITS): void {
  let conditions = 0;
  const visit = (c: Condition, depth: number): void => {
    conditions++;
    if (c.kind === "filter") {
      const name = c.field.name;
      const values = typeof c.value === "string" ? [c.value] : c.value;
      if (typeof c.value !== "string" && c.value.length > limits.listItems) {
        exceeded(
          "listItems",
          `The list of ${c.op} on ${name} has ${c.value.length} items; at most ${limits.listItems} are allowed.`,
          "Filter on fewer values per request.",
        );
      }
      if (PATTERN_OPS.has(c.op)) {
        for (const v of values) {
          if (v.length > limits.patternLength) {
            exceeded(
              "patternLength",
              `A ${c.op} pattern on ${name} is ${v.length} characters long; at most ${limits.patternLength} are allowed.`,
              "Use a shorter pattern.",
            );
          }
          if ((c.op === "match" || c.op === "imatch") && hasBackReference(v)) {
            throw new RestError(
              400,
              "BL400",
              "Request uses a regular expression back-reference",
              `A ${c.op} pattern on ${name} uses a back-reference (\\1 to \\9), which can take exponential time.`,
              "Write the pattern without back-references.",
            );
          }
        }
      }
      return;
    }
    if (depth > limits.logicDepth) {
      exceeded(
        "logicDepth",
        `A logic tree nests ${depth} levels deep; at most ${limits.logicDepth} are allowed.`,
        "Flatten the and/or tree.",
      );
    }
    for (const child of c.children) visit(child, depth + 1);
  };
  for (const { condition } of query.conditions) {
    visit(condition, 1);
    if (conditions > limits.conditions) {
      exceeded(
        "conditions",
        `The request has more than ${limits.conditions} filters and and/or groups.`,
        "Filter with fewer conditions, e.g. one in.(...) list instead of many eq in an or.",
      );
    }
  }

  let embeds = 0;
  const walk = (items: SelectItem[] | undefined, depth: number): void => {
    for (const item of items ?? []) {
      if (item.kind !== "embed") continue;
      embeds++;
      if (depth > limits.embedDepth) {
        exceeded(
          "embedDepth",
          `The embed ${item.relation} is ${depth} levels deep; at most ${limits.embedDepth} are allowed.`,
          "Embed less deeply, or read the deeper rows with a second request.",
        );
      }
      if (embeds > limits.embeds) {
        exceeded(
          "embeds",
          `The select has more than ${limits.embeds} embeds.`,
          "Embed fewer relations, or read them with a second request.",
        );
      }
      walk(item.select, depth + 1);
    }
  };
  walk(query.select, 1);
}
