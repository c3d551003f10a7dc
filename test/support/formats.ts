import { z } from "zod";
import { Currency, MONEY_PATTERN, Timestamp, TimestampInput } from "../../src/http/formats.ts";

/**
 * The formats rule of /api/public/v1, /admin/v1 and webhook payloads (docs/public-api.md,
 * "Formats"), checked two ways: `schemaDepartures` walks an OpenAPI document, every schema of it
 * (components, inline schemas, parameters, request and response bodies, the webhooks section),
 * recursively; `valueDepartures` walks a real answer. Both go by a property's name and its schema:
 *
 * - a time (a name ending in `_at`, `created`, or any `format: date-time`) is the Timestamp schema
 *   in what Backline writes (RFC 3339, UTC, milliseconds), TimestampInput in what it reads;
 * - a date (a name ending in `_date`, `period_start`…, or `format: date`) is `format: date`;
 * - money (amount, revenue, earnings, price, gross, net, fees, balance, payout, *_amount…, and any
 *   field whose schema is Money, such as a statement's `payments_total`) is the Money schema (a
 *   decimal string) beside a `currency` that is the Currency schema;
 * - a count (lines, units, streams, total, attempts, *_count…) is an integer; and no property is a
 *   non-integer number but the few measures named in NUMBERS, with why.
 */

type Json = Record<string, unknown>;
export interface Departure {
  at: string;
  problem: string;
}

const json = (s: z.ZodType): Json => z.toJSONSchema(s, { target: "draft-2020-12" }) as Json;
const TIMESTAMP = json(Timestamp);
const TIMESTAMP_INPUT = json(TimestampInput);
const CURRENCY_PATTERN = json(Currency).pattern as string;

export const TIMESTAMP_RE = new RegExp(TIMESTAMP.pattern as string);
export const MONEY_RE = MONEY_PATTERN;
export const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;

const TIME_NAME = /(_at|^created|_since)$/;
const DATE_NAME = /(_date|^period_(start|end|from|to))$/;
const MONEY_NAME = /(^|_)(amount|revenue|earnings|price|gross|net|fee|fees|balance|payout|cost)$/;
const COUNT_NAME =
  /(^|_)(count|total|lines|units|streams|downloads|uses|attempts|retried|bytes|releases|artists|api_keys|submitted|in_review)$|^(lines|units)_/;

/** The only properties that may be non-integer numbers, and why. */
export const NUMBERS: Record<string, string> = {
  share: "a split's percentage (0–100, up to four decimals), not money or a count",
  seconds: "how long an import took, a measure of time",
};

/** A schema without its `null` alternative (anyOf [X, null], type [X, "null"]). */
function unwrap(node: Json): Json {
  const any = (node.anyOf ?? node.oneOf) as Json[] | undefined;
  if (any) {
    const rest = any.filter((s) => s.type !== "null");
    if (rest.length === 1 && rest.length < any.length)
      return { ...(rest[0] as Json), ...omit(node, "anyOf", "oneOf") };
  }
  if (Array.isArray(node.type)) {
    const types = (node.type as string[]).filter((t) => t !== "null");
    if (types.length === 1) return { ...node, type: types[0] };
  }
  return node;
}

function omit(o: Json, ...keys: string[]): Json {
  const out = { ...o };
  for (const k of keys) delete out[k];
  return out;
}

const same = (a: Json, b: Json, keys: string[]) => keys.every((k) => a[k] === b[k]);

/** Departures of one property (its schema unwrapped and resolved). */
function propertyDepartures(
  name: string,
  s: Json,
  siblings: Record<string, Json>,
  io: "input" | "output",
  at: string,
): string[] {
  const problems: string[] = [];
  const type = s.type;
  if (TIME_NAME.test(name) || s.format === "date-time") {
    const want = io === "output" ? TIMESTAMP : TIMESTAMP_INPUT;
    if (!same(s, want, ["type", "format", "pattern"])) {
      problems.push(
        `${at}: a time ${io === "output" ? "answered" : "read"} must be the ${io === "output" ? "Timestamp" : "TimestampInput"} schema (src/http/formats.ts), got ${JSON.stringify(omit(s, "description", "pattern"))}`,
      );
    }
  }
  if (DATE_NAME.test(name) || s.format === "date") {
    if (!(type === "string" && s.format === "date"))
      problems.push(`${at}: a date must be format: date (YYYY-MM-DD)`);
  }
  // A field the schema makes money (the Money schema) is money whatever its name: a statement's
  // `payments_total` is an amount, not a count. Lists and groups (a statement's `earnings`) are
  // not amounts themselves; their members are checked where they stand.
  const scalar = type !== "object" && type !== "array";
  const moneySchema = type === "string" && s.pattern === MONEY_PATTERN.source;
  if ((MONEY_NAME.test(name) && scalar) || moneySchema) {
    if (!moneySchema) {
      problems.push(`${at}: money must be the Money schema (a decimal string), got ${JSON.stringify(type)}`);
    }
    const currency = siblings.currency ? unwrap(siblings.currency) : undefined;
    if (currency?.type !== "string" || currency.pattern !== CURRENCY_PATTERN) {
      problems.push(`${at}: money must have a currency beside it (the Currency schema)`);
    }
  }
  if (COUNT_NAME.test(name) && !moneySchema && type !== "integer" && scalar) {
    problems.push(`${at}: a count must be an integer, got ${JSON.stringify(type)}`);
  }
  if (type === "number" && !(name in NUMBERS)) {
    problems.push(`${at}: a non-integer number (money is a decimal string, a count an integer)`);
  }
  return problems;
}

/**
 * Every departure in an OpenAPI 3.1 document. Named schemas are followed through $ref with the
 * direction they are used in (a schema used by a request and a response is checked both ways),
 * and a named schema nothing uses is checked as an answer.
 */
export function schemaDepartures(doc: Json): Departure[] {
  const components = ((doc.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>;
  const out: Departure[] = [];
  const seen = new Set<string>();
  const resolve = (node: Json): Json => {
    const ref = node.$ref;
    if (typeof ref === "string" && ref.startsWith("#/components/schemas/")) {
      return components[ref.slice("#/components/schemas/".length)] ?? {};
    }
    return node;
  };
  const visit = (node: unknown, io: "input" | "output", at: string): void => {
    if (Array.isArray(node)) {
      for (const [i, n] of node.entries()) visit(n, io, `${at}[${i}]`);
      return;
    }
    if (!node || typeof node !== "object") return;
    const n = node as Json;
    if (typeof n.$ref === "string") {
      const name = n.$ref.slice("#/components/schemas/".length);
      const key = `${name}@${io}`;
      if (seen.has(key)) return;
      seen.add(key);
      visit(components[name], io, `#/components/schemas/${name}`);
      return;
    }
    const props = n.properties as Record<string, Json> | undefined;
    if (props) {
      const resolved: Record<string, Json> = {};
      for (const [k, v] of Object.entries(props)) resolved[k] = unwrap(resolve(unwrap(v)));
      for (const [k, v] of Object.entries(resolved)) {
        for (const problem of propertyDepartures(k, v, resolved, io, `${at}.${k}`)) out.push({ at, problem });
      }
    }
    for (const [k, v] of Object.entries(n)) {
      if (k === "properties") {
        for (const [p, s] of Object.entries(v as Json)) visit(s, io, `${at}.${p}`);
      } else if (typeof v === "object" && k !== "example" && k !== "examples" && k !== "default") {
        visit(v, io, `${at}/${k}`);
      }
    }
  };
  const paths = (doc.paths ?? {}) as Record<string, Json>;
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(item)) {
      const o = op as Json;
      for (const p of (o.parameters as Json[] | undefined) ?? []) {
        if (p.schema) checkParameter(p, `${method.toUpperCase()} ${path} ${p.in} ${p.name}`);
        visit(p.schema, "input", `${method.toUpperCase()} ${path} (${p.name})`);
      }
      visit((o.requestBody as Json | undefined)?.content, "input", `${method.toUpperCase()} ${path} body`);
      visit(o.responses, "output", `${method.toUpperCase()} ${path} responses`);
    }
  }
  // Webhook payloads are what Backline writes.
  visit(doc.webhooks, "output", "webhooks");
  for (const name of Object.keys(components)) {
    if (!seen.has(`${name}@input`) && !seen.has(`${name}@output`))
      visit({ $ref: `#/components/schemas/${name}` }, "output", "");
  }
  return out;

  function checkParameter(p: Json, at: string) {
    const s = unwrap(resolve(unwrap(p.schema as Json)));
    for (const problem of propertyDepartures(p.name as string, s, {}, "input", at)) out.push({ at, problem });
  }
}

/**
 * Every departure in a real answer or payload: times, dates, money (with a currency beside it) and
 * counts by the same names as in the schemas. Free-form maps the schemas leave open
 * (audio_metadata, metadata, payload, store_ids…) are not read: their keys are not Backline's names.
 */
const FREE_FORM = new Set([
  "audio_metadata",
  "metadata",
  "payload",
  "store_ids",
  "platform_links",
  "localized_names",
  "headers",
]);

export function valueDepartures(value: unknown, at = "$"): Departure[] {
  const out: Departure[] = [];
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) {
      for (const [i, x] of v.entries()) walk(x, `${path}[${i}]`);
      return;
    }
    if (!v || typeof v !== "object") return;
    const o = v as Json;
    for (const [k, x] of Object.entries(o)) {
      const p = `${path}.${k}`;
      if (FREE_FORM.has(k)) continue;
      if (x !== null && TIME_NAME.test(k) && !(typeof x === "string" && TIMESTAMP_RE.test(x))) {
        out.push({
          at: p,
          problem: `a time must be RFC 3339 UTC with milliseconds, got ${JSON.stringify(x)}`,
        });
      }
      if (x !== null && DATE_NAME.test(k) && !(typeof x === "string" && DATE_RE.test(x))) {
        out.push({ at: p, problem: `a date must be YYYY-MM-DD, got ${JSON.stringify(x)}` });
      }
      // An amount named a total (a statement's payments_total) is money: a decimal string with its
      // currency beside it, where the schemas give it the Money schema.
      const amount =
        typeof x === "string" && MONEY_RE.test(x) && typeof o.currency === "string" && /_total$/.test(k);
      if (x !== null && ((MONEY_NAME.test(k) && typeof x !== "object") || amount)) {
        if (!(typeof x === "string" && MONEY_RE.test(x))) {
          out.push({ at: p, problem: `money must be a decimal string, got ${JSON.stringify(x)}` });
        }
        if (typeof o.currency !== "string" || !/^[A-Z]{3}$/.test(o.currency)) {
          out.push({ at: p, problem: "money must have its currency beside it" });
        }
      }
      if (x !== null && !amount && COUNT_NAME.test(k) && typeof x !== "object" && !Number.isSafeInteger(x)) {
        out.push({ at: p, problem: `a count must be an integer, got ${JSON.stringify(x)}` });
      }
      if (typeof x === "number" && !Number.isInteger(x) && !(k in NUMBERS)) {
        out.push({ at: p, problem: `a non-integer number ${x}` });
      }
      walk(x, p);
    }
  };
  walk(value, at);
  return out;
}
