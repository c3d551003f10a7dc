import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { asDbError, isRetryable, mapDbError } from "../db/errors.ts";
import { checkJsonLimits } from "../http/body-limits.ts";
import { identify, postgrestGatewayError } from "../http/gateway.ts";
import { type Limit, MemoryRateLimiter } from "../http/rate-limit.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import { type ParsedQuery, ParseError } from "./ast.ts";
import { execute, type Method, type PlanRequest, type Representation } from "./execute.ts";
import { checkQueryLength, checkQueryLimits } from "./limits.ts";
import { describedRole, openApiDocument } from "./openapi.ts";
import { parseQuery } from "./parse-query.ts";
import { parsePrefer } from "./prefer.ts";
import { bodyKeys, type CallArgs, callSource, findRoutine, splitRpcQuery } from "./rpc.ts";
import type { SchemaCache } from "./schema-cache.ts";
import { RestError } from "./sql-common.ts";

/**
 * /rest/v1: the table interface of seed 000, PostgREST-compatible so that supabase-js's
 * `from(...)` works unchanged (docs/rest.md). Each request: the gateway decides the role and
 * claims, the grammar is parsed, one statement runs in the caller's transaction under RLS.
 */

export interface RestOptions {
  db: Db;
  directory: TenantDirectory;
  /** The schema cache of one exposed schema (read once, again on `NOTIFY pgrst`). */
  schemaCache: (schema: string) => Promise<SchemaCache>;
  /** The schemas requests may name with Accept-Profile/Content-Profile (REST_SCHEMAS); the first is the default. */
  schemas?: readonly string[];
  /** The most rows one response returns (PostgREST's db-max-rows). */
  maxRows: number;
  /** Whether the service role may ask for a statement's plan (PostgREST's db-plan-enabled). */
  planEnabled?: boolean;
  publicUrl: string;
  /** The app's rate limiter (shared with the other processes on PostgreSQL); its own when unset. */
  limiter?: MemoryRateLimiter;
}

/**
 * Request limits per plan (seed 000: "rate limits ... may depend on plan and usage profile"): for
 * the whole tenant, and for each caller (a user, or a key). A tenant's settings.rest_rate_limits
 * overrides its plan's. Counted in the process, shared with the others on PostgreSQL (MemoryRateLimiter).
 */
const PLAN_LIMITS: Record<string, { tenant: Limit; caller: Limit }> = {
  free: { tenant: { max: 300, windowSeconds: 10 }, caller: { max: 100, windowSeconds: 10 } },
  standard: { tenant: { max: 3000, windowSeconds: 10 }, caller: { max: 600, windowSeconds: 10 } },
  pro: { tenant: { max: 20000, windowSeconds: 10 }, caller: { max: 3000, windowSeconds: 10 } },
};

function limitsFor(plan: string, settings: Record<string, unknown>): { tenant: Limit; caller: Limit } {
  const base = PLAN_LIMITS[plan] ?? (PLAN_LIMITS.standard as { tenant: Limit; caller: Limit });
  const custom = settings.rest_rate_limits as Partial<{ tenant: Limit; caller: Limit }> | undefined;
  const valid = (l: unknown): l is Limit =>
    typeof l === "object" &&
    l !== null &&
    Number.isInteger((l as Limit).max) &&
    Number.isInteger((l as Limit).windowSeconds) &&
    (l as Limit).max > 0 &&
    (l as Limit).windowSeconds > 0;
  return {
    tenant: valid(custom?.tenant) ? custom.tenant : base.tenant,
    caller: valid(custom?.caller) ? custom.caller : base.caller,
  };
}

const MEDIA: Record<Representation, string> = {
  json: "application/json; charset=utf-8",
  object: "application/vnd.pgrst.object+json; charset=utf-8",
  csv: "text/csv; charset=utf-8",
};

interface Negotiated {
  representation: Representation;
  /** `nulls=stripped`: the answer leaves null members out (PostgREST's vnd.pgrst media types). */
  stripNulls: boolean;
  /** The Content-Type of the answer. */
  mediaType: string;
  /** `application/vnd.pgrst.plan`: the statement's plan instead of its rows. */
  plan?: PlanRequest;
}

const PLAN_OPTIONS = new Set<PlanRequest["options"][number]>([
  "analyze",
  "verbose",
  "settings",
  "buffers",
  "wal",
]);

/**
 * `application/vnd.pgrst.plan[+text|+json]; for="<media type>"; options=analyze|verbose|…`, as
 * PostgREST reads it (and postgrest-js's explain() writes it); undefined for any other type.
 */
function planMediaType(part: string): Negotiated | undefined {
  const [type = "", ...params] = part.split(";").map((x) => x.trim());
  const lower = type.toLowerCase();
  if (lower !== "application/vnd.pgrst.plan" && !lower.startsWith("application/vnd.pgrst.plan+"))
    return undefined;
  const format = lower === "application/vnd.pgrst.plan+json" ? "json" : "text";
  if (lower !== "application/vnd.pgrst.plan" && lower !== `application/vnd.pgrst.plan+${format}`)
    return undefined;
  let forType = "application/json";
  const options: PlanRequest["options"] = [];
  for (const param of params) {
    const [key = "", value = ""] = param.split("=").map((x) => x.trim());
    if (key.toLowerCase() === "for") forType = value.replace(/^"|"$/g, "");
    if (key.toLowerCase() === "options") {
      for (const o of value.toLowerCase().split("|")) {
        if (PLAN_OPTIONS.has(o as PlanRequest["options"][number]) && !options.includes(o as never)) {
          options.push(o as PlanRequest["options"][number]);
        }
      }
    }
  }
  // What the plan is for: the media type the rows would have been answered in.
  const target = negotiate(forType === "" ? undefined : forType);
  if (target.plan) return undefined;
  const optionText = options.length ? `; options=${options.join("|")}` : "";
  return {
    representation: target.representation,
    stripNulls: target.stripNulls,
    mediaType: `application/vnd.pgrst.plan+${format}; for="${forType || "application/json"}"${optionText}; charset=utf-8`,
    plan: { format, options, costs: false },
  };
}

function negotiate(accept: string | undefined): Negotiated {
  const plain = (representation: Representation): Negotiated => ({
    representation,
    stripNulls: false,
    mediaType: MEDIA[representation],
  });
  if (!accept) return plain("json");
  for (const part of accept.split(",")) {
    const [type = "", ...params] = part.split(";").map((x) => x.trim().toLowerCase());
    const stripped = params.includes("nulls=stripped");
    if (type === "application/json" || type === "*/*" || type === "application/*" || type === "")
      return plain("json");
    if (type === "application/vnd.pgrst.array+json" || type === "application/vnd.pgrst.array") {
      return stripped
        ? {
            representation: "json",
            stripNulls: true,
            mediaType: "application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8",
          }
        : plain("json");
    }
    if (type === "application/vnd.pgrst.object+json" || type === "application/vnd.pgrst.object") {
      return stripped
        ? {
            representation: "object",
            stripNulls: true,
            mediaType: "application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8",
          }
        : plain("object");
    }
    if (type === "text/csv") return plain("csv");
    const plan = planMediaType(part);
    if (plan) return plan;
  }
  throw new RestError(406, "PGRST107", `None of these media types are available: ${accept}`);
}

function parseRange(header: string | undefined): { offset: number; limit: number | undefined } | undefined {
  if (!header) return undefined;
  const m = /^(?:items=)?\s*(\d+)-(\d*)\s*$/i.exec(header);
  if (!m?.[1]) return undefined;
  const from = Number(m[1]);
  const to = m[2] ? Number(m[2]) : undefined;
  if (to !== undefined && to < from) {
    throw new RestError(
      416,
      "PGRST103",
      "Requested range not satisfiable",
      `The range ${header} ends before it starts.`,
    );
  }
  return { offset: from, limit: to === undefined ? undefined : to - from + 1 };
}

function errorBody(
  error: unknown,
  role: string,
  request: FastifyRequest,
): { status: number; body: Record<string, unknown>; headers?: Record<string, string> } {
  if (error instanceof ParseError) {
    return {
      status: 400,
      body: { code: error.code, message: error.message, details: error.details, hint: error.hint ?? null },
    };
  }
  if (error instanceof RestError) {
    return {
      status: error.status,
      body: { code: error.code, message: error.message, details: error.details, hint: error.hint },
      headers: error.headers,
    };
  }
  const db = asDbError(error);
  if (db) {
    // A function's "no such row" (P0002, PL/pgSQL's no_data_found) is the caller's miss, not the
    // server's failure: 404 rather than PostgREST's 500 (request_payout raises it for a payee that
    // is not the caller's).
    const mapped =
      db.sqlstate === "P0002" ? { status: 404, code: "no_data_found" } : mapDbError(db, role as "anon");
    const hidden = mapped.status >= 500 && !isRetryable(mapped);
    if (hidden) request.log.error({ err: error }, "rest request failed in the database");
    return {
      status: mapped.status,
      body: hidden
        ? {
            code: db.sqlstate,
            message: "The database could not complete the request",
            details: null,
            hint: null,
          }
        : { code: db.sqlstate, message: db.message, details: db.detail ?? null, hint: db.hint ?? null },
    };
  }
  const status = (error as { statusCode?: number }).statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    // Fastify's body errors: unparseable JSON is PostgREST's "Empty or invalid json".
    const badJson = status === 400 && /^FST_ERR_CTP_/.test(String((error as { code?: string }).code));
    return {
      status,
      body: {
        code: status === 413 ? "PGRST413" : "PGRST102",
        message: badJson ? "Empty or invalid json" : (error as Error).message,
        details: badJson ? (error as Error).message : null,
        hint: null,
      },
    };
  }
  request.log.error({ err: error }, "rest request failed");
  return {
    status: 500,
    body: { code: "PGRST000", message: "An unexpected error occurred", details: null, hint: null },
  };
}

export async function restRoutes(app: FastifyInstance, opts: RestOptions) {
  const limiter = opts.limiter ?? new MemoryRateLimiter();

  app.setErrorHandler((error, request, reply) => {
    const { status, body, headers } = errorBody(
      error,
      String(request.caller?.claims.role ?? "anon"),
      request,
    );
    if (headers) reply.headers(headers);
    // A caller refused for lack of a login is told how to log in (RFC 6750), as PostgREST does.
    if (status === 401 && !reply.hasHeader("WWW-Authenticate")) reply.header("WWW-Authenticate", "Bearer");
    return reply.status(status).type("application/json; charset=utf-8").send(body);
  });

  app.addHook("onRequest", async (request, reply) => {
    const identified = await identify(opts.directory, request, { requireAuthorization: true });
    if (!identified.ok) {
      const e = postgrestGatewayError(identified.failure);
      return reply.status(e.status).headers(e.headers).type("application/json; charset=utf-8").send(e.body);
    }
    request.caller = identified.caller;
    const { tenant, claims } = identified.caller;
    const limits = limitsFor(tenant.plan, tenant.settings);
    const who = String(claims.sub ?? claims.api_key_id ?? claims.role);
    for (const [key, limit, scope] of [
      [`rest:${tenant.id}`, limits.tenant, "tenant"],
      [`rest:${tenant.id}:${who}`, limits.caller, "caller"],
    ] as const) {
      const r = limiter.hit(key, limit);
      if (!r.allowed) {
        return reply
          .status(429)
          .header("Retry-After", String(r.retryAfter))
          .type("application/json; charset=utf-8")
          .send({
            code: "BL429",
            message: "Too many requests",
            details: `The ${scope} limit is ${limit.max} requests per ${limit.windowSeconds} seconds.`,
            hint: `Retry after ${r.retryAfter} seconds.`,
          });
      }
    }
  });

  // The description of one schema cache for one role is written once (~150 KB, a few ms), and
  // forgotten with the cache when the schema is read again.
  const descriptions = new WeakMap<SchemaCache, Map<string, string>>();
  app.get("/", async (request, reply) => {
    const cache = await opts.schemaCache(profileOf(request, "GET"));
    const role = describedRole(String(request.caller?.claims.role ?? "anon"));
    let byRole = descriptions.get(cache);
    if (!byRole) {
      byRole = new Map();
      descriptions.set(cache, byRole);
    }
    let text = byRole.get(role);
    if (text === undefined) {
      text = JSON.stringify(openApiDocument(cache, opts.publicUrl, role, exposed));
      byRole.set(role, text);
    }
    return reply.type("application/openapi+json; charset=utf-8").send(text);
  });

  const exposed = opts.schemas?.length ? opts.schemas : ["public"];
  /** The schema a request names (Accept-Profile to read, Content-Profile to write), or the first exposed. */
  const profileOf = (request: FastifyRequest, method: Method): string => {
    const profileHeader = method === "GET" || method === "HEAD" ? "accept-profile" : "content-profile";
    const profile = request.headers[profileHeader];
    if (typeof profile !== "string") return exposed[0] as string;
    if (!exposed.includes(profile)) {
      throw new RestError(406, "PGRST106", `The schema must be one of the following: ${exposed.join(", ")}`);
    }
    return profile;
  };
  // A plan is for a service key, and only where the installation turned plans on. A tenant's plan
  // leaves out the planner's estimates (costs off): they come from statistics that count every
  // tenant's rows, as estimated counts would.
  const negotiateFor = (request: FastifyRequest): Negotiated => {
    const negotiated = negotiate(request.headers.accept);
    if (!negotiated.plan) return negotiated;
    const role = request.caller?.claims.role;
    if (!opts.planEnabled || (role !== "tenant_service" && role !== "service_role")) {
      throw new RestError(
        406,
        "PGRST107",
        `None of these media types are available: ${request.headers.accept}`,
      );
    }
    const operator = role === "service_role";
    // `analyze` and `buffers` measure the scan before row security filters it ("Rows Removed by
    // Filter" counts another tenant's rows): the installation's own role only.
    if (!operator && negotiated.plan.options.some((o) => o === "analyze" || o === "buffers")) {
      throw new RestError(
        406,
        "PGRST107",
        `None of these media types are available: ${request.headers.accept}`,
        null,
        "A tenant's plan is given without analyze and buffers: they would count other tenants' rows.",
      );
    }
    return { ...negotiated, plan: { ...negotiated.plan, costs: operator } };
  };
  const pathName = (request: FastifyRequest) => {
    const name = (request.params as { "*": string })["*"];
    if (name === "" || name.includes("/")) {
      throw new RestError(404, "PGRST125", "Invalid path specified in request URL");
    }
    return name;
  };

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const caller = request.caller;
    if (!caller) throw new Error("rest route without a caller");
    const method = request.method as Method;
    const cache = await opts.schemaCache(profileOf(request, method));
    const name = pathName(request);
    const table = cache.tables.get(name);
    if (!table) {
      throw new RestError(
        404,
        "PGRST205",
        `Could not find the table '${cache.schema}.${name}' in the schema cache`,
      );
    }
    const rawQuery = request.url.includes("?") ? request.url.slice(request.url.indexOf("?") + 1) : "";
    checkQueryLength(rawQuery);
    const query = parseQuery([...new URLSearchParams(rawQuery)]);
    checkQueryLimits(query);
    const prefer = parsePrefer(request.headers.prefer);
    const negotiated = negotiateFor(request);
    const accept = negotiated.representation;
    const range =
      method === "GET" || method === "HEAD"
        ? parseRange(request.headers.range as string | undefined)
        : undefined;
    const result = await execute(
      opts.db,
      caller.claims,
      cache,
      {
        method,
        table,
        query,
        prefer,
        accept,
        body: request.body,
        range,
        stripNulls: negotiated.stripNulls,
        plan: negotiated.plan,
      },
      opts.maxRows,
    );
    reply.status(result.status).headers(result.headers);
    if (prefer.applied.length) reply.header("Preference-Applied", prefer.applied.join(", "));
    if (result.body !== undefined || method === "HEAD") reply.type(negotiated.mediaType);
    if (result.body === undefined || method === "HEAD") return reply.send();
    // The body is already what the media type asks for (CSV is written by the database).
    return reply.type(negotiated.mediaType).send(result.body);
  };

  // /rpc/<function> (src/rest/rpc.ts): GET and HEAD with the arguments in the query string, in a
  // read-only transaction; POST with a JSON body, read-only too for a stable or immutable function.
  const rawBodies = new WeakMap<FastifyRequest, string>();
  const rpcHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    const caller = request.caller;
    if (!caller) throw new Error("rest route without a caller");
    const method = request.method as Method;
    if (method !== "GET" && method !== "HEAD" && method !== "POST") {
      throw new RestError(405, "PGRST101", `Cannot use the ${method} method on RPC`);
    }
    const cache = await opts.schemaCache(profileOf(request, method));
    const name = pathName(request);
    const rawQuery = request.url.includes("?") ? request.url.slice(request.url.indexOf("?") + 1) : "";
    checkQueryLength(rawQuery);
    const entries = [...new URLSearchParams(rawQuery)];
    const prefer = parsePrefer(request.headers.prefer);
    const post = method === "POST";
    let query: ParsedQuery;
    let args: CallArgs;
    let keys: string[];
    // A text/plain body is the one argument of a function taking a single unnamed text (PostgREST's).
    const text =
      post &&
      typeof request.body === "string" &&
      /^text\/plain\b/i.test(request.headers["content-type"] ?? "");
    if (text) {
      query = parseQuery(entries);
      keys = [];
      args = { kind: "text", text: request.body as string };
    } else if (post) {
      query = parseQuery(entries);
      keys = query.columns ?? bodyKeys(request.body);
      args = { kind: "body", body: request.body, raw: rawBodies.get(request), keys };
    } else {
      const split = splitRpcQuery(entries);
      query = split.query;
      keys = [...new Set(split.args.map(([k]) => k))];
      args = { kind: "query", values: split.args };
    }
    checkQueryLimits(query);
    const found = findRoutine(cache, name, keys, String(caller.claims.role), {
      post,
      singleObject: post && !text && prefer.params === "single-object",
      text,
    });
    if (prefer.maxAffected !== undefined && prefer.handling === "strict" && !found.routine.returnsSet) {
      throw new RestError(
        400,
        "PGRST128",
        "Function must return SETOF or TABLE when max-affected preference is used with handling=strict",
      );
    }
    const readOnly = !post || found.routine.volatility !== "volatile";
    const { call, table } = callSource(cache, found, args, readOnly);
    // A scalar result is its one value: there is nothing to select from it.
    if (found.routine.returns !== "composite") query = { ...query, select: undefined };
    const negotiated = negotiateFor(request);
    const range = post ? undefined : parseRange(request.headers.range as string | undefined);
    const result = await execute(
      opts.db,
      caller.claims,
      cache,
      {
        method,
        table,
        query,
        prefer,
        accept: negotiated.representation,
        body: undefined,
        range,
        stripNulls: negotiated.stripNulls,
        call,
        plan: negotiated.plan,
      },
      opts.maxRows,
    );
    reply.status(result.status).headers(result.headers);
    if (prefer.applied.length) reply.header("Preference-Applied", prefer.applied.join(", "));
    if (result.body === undefined) return reply.send();
    reply.type(negotiated.mediaType);
    return method === "HEAD" ? reply.send() : reply.send(result.body);
  };
  // The rpc route reads JSON bodies itself too: the arguments go to the database as the text the
  // client sent, so a number keeps every digit (JavaScript's numbers would round a bigint or a long
  // numeric). Parsed as well, with the app's limits, for the argument names.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.register(async (rpc) => {
    rpc.removeContentTypeParser("application/json");
    rpc.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
      const text = String(body);
      if (text.trim() === "") return done(null, undefined);
      try {
        checkJsonLimits(text);
      } catch (error) {
        return done(error as Error, undefined);
      }
      rawBodies.set(request, text);
      parseJson(request, text, done);
    });
    rpc.route({
      method: ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"],
      url: "/rpc/*",
      handler: rpcHandler,
    });
  });

  // A wildcard rather than /:table: any name, however long or odd, reaches the handler and gets
  // PostgREST's answer (PGRST205 for an unknown table, PGRST125 for a deeper path).
  app.route({ method: ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"], url: "/*", handler });
  app.setNotFoundHandler((_request, reply) =>
    reply.status(404).type("application/json; charset=utf-8").send({
      code: "PGRST125",
      message: "Invalid path specified in request URL",
      details: null,
      hint: null,
    }),
  );
}
