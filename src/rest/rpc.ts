import { type ParsedQuery, ParseError } from "./ast.ts";
import type { CallSource } from "./execute.ts";
import { parseQuery } from "./parse-query.ts";
import type { Column, Routine, SchemaCache, Table } from "./schema-cache.ts";
import { arrayLiteral, ident, Params, RestError } from "./sql-common.ts";
import { fuzzyMatches } from "./sql-read.ts";

/**
 * /rest/v1/rpc/<function>: a function of the exposed schema called as PostgREST (v13) calls it
 * (docs/rest.md, "Functions (rpc)"). Which function a request means is decided by its name and
 * the names of the arguments given (overloads are told apart by them); which functions exist for a
 * caller is decided by EXECUTE grants alone (the schema cache reads them per request role). The
 * call is the source of an ordinary read, so its rows are selected, filtered, ordered, paged and
 * counted like a table's, in the caller's transaction, role and claims.
 */

/** The query keys that are never a function's arguments (the read's own). */
const RESERVED = new Set(["select", "columns", "on_conflict", "apikey"]);
const RESERVED_LAST = new Set(["order", "limit", "offset", "and", "or"]);

/**
 * A GET's query string, split as PostgREST splits it: a key whose value is not a filter
 * (`name=supabot`, not `name=eq.supabot`) is an argument; everything else is the read's.
 */
export function splitRpcQuery(entries: [string, string][]): {
  args: [string, string][];
  query: ParsedQuery;
} {
  const args: [string, string][] = [];
  const rest: [string, string][] = [];
  for (const entry of entries) {
    const [key, value] = entry;
    const last = key.slice(key.lastIndexOf(".") + 1);
    if (RESERVED.has(key) || RESERVED_LAST.has(last) || /[.]|->/.test(key)) {
      rest.push(entry);
      continue;
    }
    try {
      parseQuery([[key, value]]);
      rest.push(entry);
    } catch (error) {
      if (!(error instanceof ParseError)) throw error;
      args.push(entry);
    }
  }
  return { args, query: parseQuery(rest) };
}

const isJson = (type: string) => type === "json" || type === "jsonb";

/** Whether the argument names fit the function: every required parameter given, the rest among the optional ones. */
function fits(routine: Routine, keys: Set<string>): boolean {
  if (routine.params.length === 0) return keys.size === 0;
  const optional = new Set(routine.params.filter((p) => !p.required).map((p) => p.name));
  const required = routine.params.filter((p) => p.required).map((p) => p.name);
  const rest = [...keys].filter((k) => !optional.has(k));
  return rest.length === required.length && required.every((name) => keys.has(name));
}

export interface FoundRoutine {
  routine: Routine;
  /** Called with the whole body (or the arguments as a JSON object) as its one argument. */
  positional: boolean;
}

/**
 * The function `name` with arguments `keys`, among those `role` may execute, by PostgREST's
 * rules: a function whose parameters the names fit; failing that, on a POST, one whose single
 * parameter is an unnamed json or jsonb (it takes the whole body); with `Prefer:
 * params=single-object`, one whose single parameter is json or jsonb, named or not.
 * None: 404 PGRST202 (a function the role may not execute is not there); several: 300 PGRST203.
 */
export function findRoutine(
  cache: SchemaCache,
  name: string,
  keys: string[],
  role: string,
  /** text: a POST of `text/plain`, which only a single unnamed text parameter takes. */
  options: { post: boolean; singleObject: boolean; text?: boolean },
): FoundRoutine {
  const callable = (r: Routine) => r.executableBy.has(role);
  const overloads = (cache.routines.get(name) ?? []).filter(callable);
  const keySet = new Set(keys);
  const matches: Routine[] = [];
  const fallbacks: Routine[] = [];
  for (const r of overloads) {
    const only = r.params.length === 1 ? r.params[0] : undefined;
    const takesBody = options.text ? (t: string) => t === "text" : isJson;
    if (options.singleObject) {
      if (only && isJson(only.type)) matches.push(r);
    } else if (fits(r, keySet) && !(options.text && r.params.length === 0)) matches.push(r);
    else if (options.post && only && only.name === "" && takesBody(only.type)) fallbacks.push(r);
  }
  const chosen = matches.length > 0 ? matches : fallbacks;
  if (chosen.length === 1) {
    const routine = chosen[0] as Routine;
    const only = routine.params.length === 1 ? routine.params[0] : undefined;
    return { routine, positional: options.singleObject || only?.name === "" };
  }
  if (chosen.length > 1) {
    // Fewest parameters first, then by signature: the order PostgREST's answers show.
    const signature = (r: Routine) =>
      `${r.schema}.${r.name}(${r.params.map((p) => `${p.name} => ${p.type}`).join(", ")})`;
    const listed = [...chosen].sort(
      (a, b) => a.params.length - b.params.length || (signature(a) < signature(b) ? -1 : 1),
    );
    throw new RestError(
      300,
      "PGRST203",
      `Could not choose the best candidate function between: ${listed.map(signature).join(", ")}`,
      null,
      "Try renaming the parameters or the function itself in the database so function overloading can be resolved",
    );
  }
  const sorted = [...keySet].sort();
  const func = `${cache.schema}.${name}`;
  if (options.text) {
    throw new RestError(
      404,
      "PGRST202",
      `Could not find the function ${func} in the schema cache`,
      `Searched for the function ${func} with a single unnamed text parameter, but no matches were found in the schema cache.`,
    );
  }
  const params = sorted.length
    ? ` with parameter${sorted.length > 1 ? "s" : ""} ${sorted.join(", ")}`
    : " without parameters";
  throw new RestError(
    404,
    "PGRST202",
    `Could not find the function ${func}${sorted.length ? `(${sorted.join(", ")})` : " without parameters"} in the schema cache`,
    `Searched for the function ${func}${params}${options.post ? " or with a single unnamed json/jsonb parameter" : ""}, but no matches were found in the schema cache.`,
    noRoutineHint(cache, name, sorted, overloads, callable),
  );
}

/**
 * PGRST202's hint, as PostgREST's: with no function of that name, the closest name the role may
 * call; with some, the closest of their parameter lists (names sorted, `(a, b)`); else null.
 */
function noRoutineHint(
  cache: SchemaCache,
  name: string,
  keys: string[],
  overloads: Routine[],
  callable: (r: Routine) => boolean,
): string | null {
  const prefix = `Perhaps you meant to call the function ${cache.schema}.`;
  // A function of that name that takes a table's row (a computed column or relationship) exists,
  // though no call by name reaches it: PostgREST knows it and suggests nothing else.
  const ofARow =
    [...cache.tables.values()].some((t) => t.computed.has(name)) ||
    [...cache.relationships.values()].some((rs) => rs.some((r) => r.computed === name));
  if (overloads.length === 0 && ofARow) return null;
  if (overloads.length === 0) {
    const names = [...cache.routines.entries()].filter(([, rs]) => rs.some(callable)).map(([n]) => n);
    const best = fuzzyMatches(names, name)[0];
    return best ? `${prefix}${best[1]}` : null;
  }
  const list = (names: string[]) => `(${[...names].sort().join(", ")})`;
  const lists = [...new Set(overloads.map((r) => list(r.params.map((p) => p.name))))];
  const best = fuzzyMatches(lists, list(keys))[0];
  return best ? `${prefix}${name}${best[1]}` : null;
}

/** What a call is given: a GET's query arguments (repeated for a variadic), or a POST's JSON body. */
export type CallArgs =
  | { kind: "query"; values: [string, string][] }
  | { kind: "body"; body: unknown; keys: string[]; raw?: string | undefined }
  | { kind: "text"; text: string };

/** The keys of a POST body: an object's, or (for a call per element) the first object's of an array. */
export function bodyKeys(body: unknown): string[] {
  const first = Array.isArray(body) ? body[0] : body;
  return first !== null && typeof first === "object" && !Array.isArray(first) ? Object.keys(first) : [];
}

const scalarColumn = (routine: Routine, elementType: string | undefined): Column => ({
  name: "pgrst_scalar",
  type: routine.returnType,
  elementType,
  nullable: true,
  hasDefault: false,
  position: 1,
  description: null,
});

/** The rows a call answers with, as a table: an exposed table's own (it embeds), or one made of the result's columns. */
function resultTable(cache: SchemaCache, routine: Routine): Table {
  const own = routine.returnTable ? cache.tables.get(routine.returnTable) : undefined;
  if (own) return own;
  const elementType = routine.returnType.endsWith("[]") ? routine.returnType.slice(0, -2) : undefined;
  const columns =
    routine.returns === "composite" ? routine.returnColumns : [scalarColumn(routine, elementType)];
  return {
    schema: routine.schema,
    name: routine.name,
    columns,
    columnsByName: new Map(columns.map((c) => [c.name, c])),
    primaryKey: [],
    uniqueKeys: [],
    insertable: false,
    isView: false,
    description: null,
    computed: new Map(),
    privileges: new Map(),
  };
}

/**
 * The call as a CTE, `pgrst_call`, with its arguments as parameters: named (`f("a" := $1::int)`),
 * each GET value cast from text to its parameter's type and a variadic's repeated values as an
 * array; a POST body's members converted by json_to_recordset to the parameters' types (an array
 * body calls the function once per element); or the body whole as the one positional argument.
 */
export function callSource(
  cache: SchemaCache,
  found: FoundRoutine,
  args: CallArgs,
  readOnly: boolean,
): { call: CallSource; table: Table } {
  const { routine } = found;
  const params = new Params();
  const fn = `${ident(routine.schema)}.${ident(routine.name)}`;
  let from: string;
  const wrap = (argsSql: string) =>
    routine.returns === "composite"
      ? `${fn}(${argsSql}) as pgrst_call`
      : `(select ${fn}(${argsSql}) as pgrst_scalar) as pgrst_call`;
  if (found.positional) {
    const only = routine.params[0];
    const value =
      args.kind === "text"
        ? args.text
        : args.kind === "body"
          ? (args.raw ?? JSON.stringify(args.body ?? {}))
          : JSON.stringify(Object.fromEntries(args.values.map(([k, v]) => [k, v])));
    from = wrap(only ? `${params.add(value)}::${only.type}` : "");
  } else if (args.kind === "text") {
    // Only a function whose parameters all have defaults gets here: it is called without them.
    from = wrap("");
  } else if (args.kind === "query") {
    const given = new Map<string, string[]>();
    for (const [k, v] of args.values) given.set(k, [...(given.get(k) ?? []), v]);
    const named = routine.params
      .filter((p) => given.has(p.name))
      .map((p) => {
        const values = given.get(p.name) ?? [];
        // A variadic takes every value given; any other parameter the last one, as PostgREST.
        const value = p.variadic ? arrayLiteral(values) : (values[values.length - 1] as string);
        return `${p.variadic ? "VARIADIC " : ""}${ident(p.name)} := ${params.add(value)}::${p.type}`;
      });
    from = wrap(named.join(", "));
  } else {
    const keys = new Set(args.keys);
    const given = routine.params.filter((p) => keys.has(p.name));
    if (given.length === 0) {
      from = wrap("");
    } else {
      const body = `${params.add(args.raw ?? JSON.stringify(args.body))}::json`;
      const record = given.map((p) => `${ident(p.name)} ${p.type}`).join(", ");
      const named = given
        .map((p) => `${p.variadic ? "VARIADIC " : ""}${ident(p.name)} := pgrst_body.${ident(p.name)}`)
        .join(", ");
      from = `json_to_recordset(case when json_typeof(${body}) = 'array' then ${body} else json_build_array(${body}) end)
        as pgrst_body(${record}), lateral ${wrap(named)}`;
    }
  }
  const body: CallSource["body"] =
    routine.returns === "void"
      ? "void"
      : routine.returns === "scalar"
        ? routine.returnsSet
          ? "scalars"
          : "scalar"
        : routine.returnsSet
          ? "rows"
          : "row";
  return {
    call: { cte: `pgrst_call as (select pgrst_call.* from ${from})`, params, body, readOnly },
    table: resultTable(cache, routine),
  };
}
