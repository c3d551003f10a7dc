import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import { generated, type Prepared, textOf } from "../db/prepared.ts";
import type { Claims, Tx } from "../db/types.ts";
import type { ParsedQuery } from "./ast.ts";
import { apply, type Preferences } from "./prefer.ts";
import type { SchemaCache, Table } from "./schema-cache.ts";
import { Params, RestError, referencingAll } from "./sql-common.ts";
import { checkEmbedPaths, type ReadShape, rootRead } from "./sql-read.ts";
import { deleteCte, insertCte, payloadColumns, putCte, updateCte } from "./sql-write.ts";

/**
 * Runs one /rest/v1 request in the caller's transaction: one statement that does the work and
 * builds the JSON (PostgREST's approach), plus an EXPLAIN for planned counts.
 */

export type Representation = "json" | "object" | "csv";
export type Method = "GET" | "HEAD" | "POST" | "PATCH" | "PUT" | "DELETE";

export interface RestRequest {
  method: Method;
  table: Table;
  query: ParsedQuery;
  prefer: Preferences;
  accept: Representation;
  body: unknown;
  /** From the Range header. */
  range: { offset: number; limit: number | undefined } | undefined;
  /** `nulls=stripped` on the JSON media types: null members are left out of every object. */
  stripNulls?: boolean;
  /** /rest/v1/rpc: the function call the rows are read from, instead of `table` (src/rest/rpc.ts). */
  call?: CallSource;
  /** `Accept: application/vnd.pgrst.plan`: answer the statement's plan, not its result. */
  plan?: PlanRequest;
}

/** EXPLAIN's format and options, as `application/vnd.pgrst.plan+<format>; options=a|b` asks. */
export interface PlanRequest {
  format: "text" | "json";
  options: ("analyze" | "verbose" | "settings" | "buffers" | "wal")[];
  /** The planner's estimates (costs and rows): only for the installation's own service role. */
  costs: boolean;
}

/**
 * A function call as the source of a read: `pgrst_call as (select ... from f(...))`, run once
 * whatever reads it (the count too), with its arguments already in `params`.
 */
export interface CallSource {
  cte: string;
  params: Params;
  /**
   * How the answer is shaped: rows (an array of objects), scalars (an array of values), one row
   * (an object, or null), one scalar (the value), or nothing (void: 204).
   */
  body: "rows" | "scalars" | "row" | "scalar" | "void";
  /** A GET or HEAD, or a stable or immutable function: the transaction is read-only. */
  readOnly: boolean;
}

/**
 * The body of an answer from the rows of `source`: JSON (nulls stripped when asked), or CSV as
 * PostgREST writes it: the first row's keys, then each row as PostgreSQL prints a record (its
 * values in their text form, quoted where needed), an empty result being a single newline.
 */
function bodySql(
  source: string,
  accept: Representation,
  stripNulls: boolean | undefined,
  shape: CallSource["body"] = "rows",
): string {
  if (accept === "csv") {
    return `(select coalesce(string_agg(k, ','), '') from (select json_object_keys(row_to_json(hh)) as k from (select * from ${source} limit 1) as hh) as h)
      || chr(10) || coalesce(string_agg(substring(_p::text, 2, length(_p::text) - 2), chr(10)), '')`;
  }
  const strip = (json: string) => (stripNulls ? `json_strip_nulls(${json})` : json);
  // A function's scalar results are the values of its one column, pgrst_scalar (as PostgREST names it).
  if (shape === "scalars") return `coalesce(${strip("json_agg(_p.pgrst_scalar)")}, '[]'::json)::text`;
  if (shape === "scalar" || shape === "void")
    return `coalesce(${strip("json_agg(_p.pgrst_scalar)")}->0, 'null'::json)::text`;
  if (shape === "row") return `coalesce(${strip("json_agg(_p)")}->0, 'null'::json)::text`;
  return `${strip("coalesce(json_agg(_p), '[]'::json)")}::text`;
}

export interface RestResult {
  status: number;
  headers: Record<string, string>;
  /** JSON text (an array, or one object for the object representation), or undefined for no body. */
  body: string | undefined;
}

/** Thrown inside the transaction to roll it back while still answering with `result`. */
class Rollback extends Error {
  readonly result: RestResult;
  constructor(result: RestResult) {
    super("rollback");
    this.result = result;
  }
}

interface Page {
  total: number | undefined;
  body: string;
  count: number;
}

async function planned(tx: Tx, sql: string, params: unknown[]): Promise<number> {
  const r = await tx.query<{ "QUERY PLAN": unknown }>(`explain (format json) ${sql}`, params);
  const raw = r.rows[0]?.["QUERY PLAN"];
  const plan = (typeof raw === "string" ? JSON.parse(raw) : raw) as { Plan?: { "Plan Rows"?: number } }[];
  return Math.round(plan[0]?.Plan?.["Plan Rows"] ?? 0);
}

function contentRange(offset: number, count: number, total: number | undefined): string {
  const totalPart = total === undefined ? "*" : String(total);
  return count === 0 ? `*/${totalPart}` : `${offset}-${offset + count - 1}/${totalPart}`;
}

/** One row exactly, for the object representation; otherwise PGRST116 (and the transaction is rolled back). */
function singleObject(page: Page): string {
  if (page.count !== 1) {
    throw new RestError(
      406,
      "PGRST116",
      "Cannot coerce the result to a single JSON object",
      `The result contains ${page.count} rows`,
    );
  }
  const rows = JSON.parse(page.body) as unknown[];
  return JSON.stringify(rows[0]);
}

export async function execute(
  db: Db,
  claims: Claims,
  cache: SchemaCache,
  req: RestRequest,
  maxRows: number,
): Promise<RestResult> {
  checkEmbedPaths(req.query);
  try {
    return await attempt(db, claims, cache, req, maxRows);
  } catch (error) {
    // A statement prepared on this connection before a migration changed what it returns: the
    // engine has deallocated it and rolled back, so the request runs again once, prepared afresh.
    const e = asDbError(error);
    if (e?.sqlstate !== "0A000" || !/cached plan/.test(e.message)) throw error;
    return await attempt(db, claims, cache, req, maxRows);
  }
}

async function attempt(
  db: Db,
  claims: Claims,
  cache: SchemaCache,
  req: RestRequest,
  maxRows: number,
): Promise<RestResult> {
  const readOnly = req.call ? req.call.readOnly : req.method === "GET" || req.method === "HEAD";
  try {
    return await db.withRequestContext(
      claims,
      async (requestTx) => {
        const tx = req.plan ? explaining(requestTx, req.plan) : requestTx;
        // A function's rows are counted exactly: the planner cannot estimate a call's result.
        const result =
          readOnly || req.call
            ? await read(tx, cache, req, maxRows, !req.call && estimatesAllowed(claims))
            : await write(tx, cache, req);
        if (req.prefer.handling) apply(req.prefer, "handling", req.prefer.handling);
        if (req.prefer.tx) apply(req.prefer, "tx", req.prefer.tx);
        if (req.prefer.tx === "rollback") throw new Rollback(result);
        return result;
      },
      { readOnly },
    );
  } catch (error) {
    if (error instanceof Rollback) return error.result;
    throw error;
  }
}

/**
 * A transaction whose first statement — the one that does the request's work, read or write — is
 * explained instead of answered: the plan is the response, and the transaction is rolled back,
 * so `options=analyze` on a write changes nothing.
 */
function explaining(tx: Tx, plan: PlanRequest): Tx {
  const options = [`format ${plan.format}`, ...plan.options, `costs ${plan.costs}`].join(", ");
  const query = async (sql: string | Prepared, params?: readonly unknown[]): Promise<never> => {
    const r = await tx.query<{ "QUERY PLAN": unknown }>(`explain (${options}) ${textOf(sql)}`, params);
    const lines = r.rows.map((row) => row["QUERY PLAN"]);
    const body =
      plan.format === "json"
        ? typeof lines[0] === "string"
          ? lines[0]
          : JSON.stringify(lines[0])
        : `${lines.join("\n")}`;
    throw new Rollback({ status: 200, headers: {}, body });
  };
  return { query, exec: (sql) => tx.exec(sql), copyFrom: (sql, source) => tx.copyFrom(sql, source) };
}

/**
 * Whether `count=planned|estimated` may answer with the planner's estimate. The planner counts
 * from the table's statistics, which hold every tenant's rows: an estimate would tell a caller
 * another tenant's volume. Only the operator's service_role, which sees every row anyway, gets
 * estimates; everyone else gets the exact count under row security (docs/rest.md).
 */
function estimatesAllowed(claims: Claims): boolean {
  return claims.role === "service_role";
}

function shapeOf(cache: SchemaCache, query: ParsedQuery, params = new Params()): ReadShape {
  return { cache, query, params, next: { n: 0 } };
}

/** The statement behind a read: exported so the benchmark's baseline runs exactly the same SQL. */
export function buildRead(
  cache: SchemaCache,
  req: Pick<RestRequest, "table" | "query" | "prefer" | "range"> &
    Partial<Pick<RestRequest, "accept" | "stripNulls" | "call">>,
  maxRows: number,
  /** Count exactly whatever count was asked for (planned and estimated included). */
  countExactly = false,
) {
  const shape = shapeOf(cache, req.query, req.call?.params);
  const root = req.query.limits.find((l) => l.path.length === 0);
  const offset = req.range?.offset ?? root?.offset ?? 0;
  const limits = [root?.limit, req.range?.limit, maxRows].filter((x): x is number => x !== undefined);
  const limit = Math.min(...limits);
  const table = req.call ? "pgrst_call" : `"${req.table.schema}"."${req.table.name.replace(/"/g, '""')}"`;
  const rows = rootRead(
    shape,
    req.table,
    table,
    { limit, offset },
    { applyConditions: true, rowFromColumns: req.call !== undefined },
  );
  const countSql = `select 1 from ${table} as t0${rows.where.length ? ` where ${rows.where.join(" and ")}` : ""}`;
  const exact = req.prefer.count === "exact" || (countExactly && req.prefer.count !== undefined);
  const sql = `with ${req.call ? `${req.call.cte}, ` : ""}pgrst_source as (${rows.rows}) select ${exact ? `(select count(*) from (${countSql}) as c)` : "null"}::bigint as total,
    ${bodySql("pgrst_source", req.accept ?? "json", req.stripNulls, req.call?.body)} as body, count(_p)::bigint as n from pgrst_source as _p`;
  return { sql, params: shape.params.values, countSql, offset };
}

async function read(
  tx: Tx,
  cache: SchemaCache,
  req: RestRequest,
  maxRows: number,
  estimates: boolean,
): Promise<RestResult> {
  const { sql, params, countSql, offset } = buildRead(cache, req, maxRows, !estimates);
  // Prepared per connection, by shape: the values are all parameters (src/db/prepared.ts).
  const r = await tx.query<{ total: string | null; body: string; n: string }>(generated(sql), params);
  const row = r.rows[0];
  const page: Page = {
    total: row?.total === null || row?.total === undefined ? undefined : Number(row.total),
    body: row?.body ?? "[]",
    count: Number(row?.n ?? 0),
  };
  if (estimates && (req.prefer.count === "planned" || req.prefer.count === "estimated")) {
    // Run on its own, the count must still accept the whole parameter list.
    const standalone = referencingAll(countSql, params.length);
    if (req.prefer.count === "estimated") {
      // PostgREST's rule: count exactly up to max-rows + 1; only a result larger than max-rows
      // takes the planner's estimate (or the count, if larger).
      const c = await tx.query<{ n: string }>(
        `select count(*)::bigint as n from (${standalone} limit ${maxRows + 1}) as c`,
        params,
      );
      const counted = Number(c.rows[0]?.n ?? 0);
      page.total = counted > maxRows ? Math.max(counted, await planned(tx, standalone, params)) : counted;
    } else {
      page.total = await planned(tx, standalone, params);
    }
  }
  if (req.prefer.count) apply(req.prefer, "count", req.prefer.count);
  // A function's rows are what it "affects" (PostgREST 13): more than max-affected fails, rolled back.
  if (req.call && req.prefer.maxAffected !== undefined && req.prefer.handling === "strict") {
    if (page.count > req.prefer.maxAffected) {
      throw new RestError(
        400,
        "PGRST124",
        "Query result exceeds max-affected preference constraint",
        `The query affects ${page.count} rows`,
      );
    }
    apply(req.prefer, "max-affected", req.prefer.maxAffected);
  }

  const headers: Record<string, string> = { "Content-Range": contentRange(offset, page.count, page.total) };
  // A range that starts past the end (not at it) cannot be satisfied.
  if (page.total !== undefined && offset > 0 && offset > page.total) {
    throw new RestError(
      416,
      "PGRST103",
      "Requested range not satisfiable",
      `An offset of ${offset} was requested, but there are only ${page.total} rows.`,
      null,
      { "Content-Range": `*/${page.total}` },
    );
  }
  const partial = page.total !== undefined && (offset > 0 || offset + page.count < page.total);
  const shape = req.call?.body ?? "rows";
  // A function returning void answers 204 without a body, as PostgREST does.
  if (shape === "void") return { status: 204, headers, body: undefined };
  // One row or one value is already the object asked for.
  const single = shape === "row" || shape === "scalar";
  const body = req.accept === "object" && !single ? singleObject(page) : page.body;
  return { status: partial ? 206 : 200, headers, body };
}

async function write(tx: Tx, cache: SchemaCache, req: RestRequest): Promise<RestResult> {
  const shape = shapeOf(cache, req.query);
  const { table, prefer, query } = req;
  let cte: string;
  let status: number;
  if (req.method === "POST" || req.method === "PUT") {
    if (req.body === undefined || req.body === null || typeof req.body !== "object") {
      throw new RestError(
        400,
        "PGRST102",
        "Empty or invalid json",
        "The body must be a JSON object or an array of objects",
      );
    }
    const columns = payloadColumns(table, req.body, query);
    if (req.method === "PUT") {
      if (Array.isArray(req.body))
        throw new RestError(400, "PGRST102", "PUT takes one JSON object, not an array");
      cte = putCte(table, req.body as Record<string, unknown>, columns, query, shape.params);
      status = 200;
    } else {
      if (prefer.resolution) apply(prefer, "resolution", prefer.resolution);
      if (prefer.missing === "default") apply(prefer, "missing", "default");
      cte = insertCte(table, req.body, columns, shape.params, {
        resolution: prefer.resolution,
        onConflict: query.onConflict,
        missingDefault: prefer.missing === "default",
      });
      status = 201;
    }
  } else if (req.method === "PATCH") {
    if (typeof req.body !== "object" || req.body === null || Array.isArray(req.body)) {
      throw new RestError(400, "PGRST102", "Empty or invalid json", "PATCH takes one JSON object");
    }
    const columns = payloadColumns(table, req.body, query);
    cte = updateCte(table, req.body as Record<string, unknown>, columns, query, shape.params);
    status = 200;
  } else {
    cte = deleteCte(table, query, shape.params);
    status = 200;
  }

  const representation = prefer.return === "representation" || req.accept === "object";
  let location: string | undefined;
  let inserted = 0;
  let body = "[]";
  let count: number;
  if (representation) {
    const rows = rootRead(
      shape,
      table,
      "pgrst_rows",
      { limit: undefined, offset: undefined },
      { applyConditions: false },
    );
    const r = await tx.query<{ body: string; affected: string; inserted: string }>(
      generated(`with ${cte}, pgrst_source as (${rows.rows}) select ${bodySql("pgrst_source", req.accept === "csv" ? "csv" : "json", req.stripNulls)} as body,
         (select count(*) from pgrst_rows) as affected,
         (select count(*) filter (where pgrst_inserted) from pgrst_rows) as inserted
       from pgrst_source as _p`),
      shape.params.values,
    );
    body = r.rows[0]?.body ?? "[]";
    count = Number(r.rows[0]?.affected ?? 0);
    inserted = Number(r.rows[0]?.inserted ?? 0);
  } else {
    const pk = table.primaryKey;
    const r = await tx.query<{ n: string; inserted: string; location: string | null }>(
      generated(
        `with ${cte} select count(*)::bigint as n, count(*) filter (where pgrst_inserted) as inserted, ${pk.length ? `(array_agg(json_build_object(${pk.map((k) => `'${k.replace(/'/g, "''")}', "${k.replace(/"/g, '""')}"`).join(", ")})))[1]::text` : "null"} as location from pgrst_rows`,
      ),
      shape.params.values,
    );
    count = Number(r.rows[0]?.n ?? 0);
    inserted = Number(r.rows[0]?.inserted ?? 0);
    if (req.method === "POST" && count === 1 && r.rows[0]?.location) {
      const keys = JSON.parse(r.rows[0].location) as Record<string, unknown>;
      const qs = Object.entries(keys).map(
        ([k, v]) => `${encodeURIComponent(k)}=eq.${encodeURIComponent(String(v))}`,
      );
      location = `/${table.name}?${qs.join("&")}`;
    }
  }

  if (prefer.maxAffected !== undefined && prefer.handling === "strict") {
    if (count > prefer.maxAffected) {
      throw new RestError(
        400,
        "PGRST124",
        "Query result exceeds max-affected preference constraint",
        `The query affects ${count} rows`,
      );
    }
    apply(prefer, "max-affected", prefer.maxAffected);
  }
  const total = prefer.count === "exact" ? String(count) : "*";
  // PATCH reports the range of rows it touched; the other writes only a total, as PostgREST does.
  const headers: Record<string, string> = {
    "Content-Range": req.method === "PATCH" && count > 0 ? `0-${count - 1}/${total}` : `*/${total}`,
  };
  if (prefer.count) apply(prefer, "count", prefer.count);
  // An upsert that only updated rows answers 200, not 201.
  if (status === 201 && prefer.resolution === "merge-duplicates" && count > 0 && inserted === 0) status = 200;
  if (prefer.return) apply(prefer, "return", prefer.return);
  if (location && prefer.return === "headers-only") headers.Location = location;

  if (req.accept === "object") {
    const objectBody = singleObject({
      total: undefined,
      body,
      count: (JSON.parse(body) as unknown[]).length,
    });
    if (prefer.return === "representation" || req.method === "GET")
      return { status, headers, body: objectBody };
    // The object representation was asked for only to enforce a single row.
    return { status: status === 201 ? 201 : 204, headers, body: undefined };
  }
  if (representation) return { status, headers, body };
  return { status: status === 201 ? 201 : 204, headers, body: undefined };
}
