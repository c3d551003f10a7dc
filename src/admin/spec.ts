import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { StaffNeed } from "../db/operator-scope.ts";
import { fieldErrors, paramOf } from "../http/field-errors.ts";
import { HttpError } from "../http/problem.ts";
import { FieldsError } from "./errors.ts";

/**
 * One route of /admin/v1 as a spec (the admin twin of src/public-api/route.ts): its contract
 * (path, the staff role it needs, schemas, answers), from which both the request validation and
 * the OpenAPI document (src/admin/openapi.ts) are made, and its handler. The conventions are the
 * admin API's (docs/operator.md, "Admin API"): a path id that does not parse names nothing (404
 * not_found), a bad query or body is 400 invalid_request listing every failing field.
 */
export type Method = "GET" | "POST" | "PATCH" | "DELETE";

/**
 * Who may call a route (CONSOLE.md "Staff"; src/admin/auth.ts enforces it from the route's
 * config.staffRole): cumulative tenant roles reviewer < operator < admin, and `platform` for the
 * installation's own admins (stores). A tenant's service-role key acts as that tenant's admin.
 */
export type StaffRole = StaffNeed | "signed_in";

export interface AdminContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  /** The tenant the request acts on. */
  tenantId: string;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface AdminRouteSpec<P = unknown, Q = unknown, B = unknown> {
  method: Method;
  /** OpenAPI style: /releases/{id}. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /** "signed_in" (GET /me only): any caller the gateway accepts. */
  staffRole: StaffRole | "signed_in";
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** Whether the body may be left out (then it is {}). */
  bodyOptional?: boolean;
  /** A body that is not JSON (a royalty report): its media types and what it is, for the document. */
  rawBody?: { types: string[]; description: string };
  /** The body field a reason_required refusal is about. */
  reasonParam?: string;
  /**
   * The answer; `exports` are other media types the same status may answer in (an export as CSV or
   * JSON lines, chosen by a query parameter), documented beside application/json.
   */
  response: { status: number; description: string; schema: z.ZodType; exports?: string[] };
  /** Other answers with a body of the same schema (an import that was a duplicate: 200). */
  otherResponses?: { status: number; description: string }[];
  /** Error statuses besides 400, 401, 403 and 500. */
  errors?: number[];
  /** Registered by another plugin (the royalty upload, with its own body parser): documented only. */
  external?: boolean;
  handler?: (ctx: AdminContext<P, Q, B>) => Promise<unknown>;
}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds routes of every shape.
export type AnyAdminRoute = AdminRouteSpec<any, any, any>;

export function adminRoute<P, Q, B>(spec: AdminRouteSpec<P, Q, B>): AnyAdminRoute {
  return spec as AnyAdminRoute;
}

function parseParams<T>(schema: z.ZodType<T> | undefined, input: unknown, what: string): T {
  if (!schema) return undefined as T;
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const param = paramOf(r.error.issues[0]?.path ?? []) || "id";
  const given = (input as Record<string, unknown> | undefined)?.[param];
  throw new HttpError(404, "not_found", `no ${what} ${String(given)}`, param);
}

export function parseQuery<T>(schema: z.ZodType<T> | undefined, input: unknown): T {
  if (!schema) return undefined as T;
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  const errors = fieldErrors(r.error, input ?? {}).map((e) =>
    e.code === "unknown_field"
      ? { ...e, message: `${e.param} is not a query parameter of this endpoint` }
      : e,
  );
  throw new FieldsError(
    400,
    "invalid_request",
    errors.length === 1
      ? (errors[0]?.message ?? "Invalid query.")
      : `${errors.length} query parameters are invalid.`,
    errors,
  );
}

export function parseJsonBody<T>(schema: z.ZodType<T>, body: unknown, optional: boolean): T {
  const input = body === undefined && optional ? {} : body;
  if (input === undefined || input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new HttpError(
      400,
      "invalid_request",
      "Send a JSON object as the request body (Content-Type: application/json).",
    );
  }
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const errors = fieldErrors(r.error, input);
  throw new FieldsError(
    400,
    "invalid_request",
    errors.length === 1
      ? (errors[0]?.message ?? "Invalid request body.")
      : `${errors.length} fields are invalid.`,
    errors,
  );
}

const RESOURCES: Record<string, string> = {
  releases: "release",
  deliveries: "delivery",
  "oac-requests": "OAC request",
  "royalty-imports": "royalty import",
  jobs: "job",
  accounts: "account",
  stores: "store",
  "custom-scripts": "custom script",
  partners: "partner",
};

/** What a path's id names, for a 404's message: "no release <id>". */
function resourceOf(path: string): string {
  const first = path.split("/")[1] ?? "";
  return RESOURCES[first] ?? first;
}

function fastifyPath(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ":$1");
}

/** Registers the specs that have a handler on `app`; `tenantOf` is the request's tenant (set by the auth hook). */
export function registerAdminRoutes(
  app: FastifyInstance,
  routes: readonly AnyAdminRoute[],
  tenantOf: (request: FastifyRequest) => string,
): void {
  for (const spec of routes) {
    if (spec.external || !spec.handler) continue;
    const handler = spec.handler;
    const what = resourceOf(spec.path);
    app.route({
      method: spec.method,
      url: fastifyPath(spec.path),
      config: {
        staffRole: spec.staffRole,
        ...(spec.reasonParam ? { reasonParam: spec.reasonParam } : {}),
      },
      handler: async (request, reply) => {
        const params = parseParams(spec.params, request.params, what);
        const query = parseQuery(spec.query, request.query);
        const body = spec.body
          ? parseJsonBody(spec.body, request.body, spec.bodyOptional === true)
          : undefined;
        const out = await handler({ params, query, body, tenantId: tenantOf(request), request, reply });
        if (reply.sent) return reply;
        return reply.status(spec.response.status).send(out);
      },
    });
  }
}

/** Shared schema pieces. */
export const Uuid = z
  .guid()
  .transform((s) => s.toLowerCase())
  .meta({ description: "An id (UUID).", example: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21" });

export const IdParams = z.object({ id: Uuid });

/** `limit` and `starting_after`: keyset pagination (the id of the last item of the previous page). */
export function pageQuery<S extends z.core.$ZodLooseShape>(
  cursor: z.ZodType<string, string>,
  extra: S,
  defaultLimit = 100,
) {
  return z.strictObject({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(100)
      .default(defaultLimit)
      .meta({ description: `Page size: 1 to 100, default ${defaultLimit}.` }),
    starting_after: cursor
      .optional()
      .meta({ description: "The id of the last item of the previous page: the page after it." }),
    ...extra,
  });
}

export function pageOf<T extends z.ZodType, E extends z.core.$ZodLooseShape = Record<never, never>>(
  item: T,
  id: string,
  extra?: E,
) {
  return z
    .object({
      data: z.array(item),
      has_more: z.boolean().meta({ description: "Whether a next page exists (ask with starting_after)." }),
      ...(extra ?? ({} as E)),
    })
    .meta({ id });
}

/** The page of `rows` (asked for limit + 1 rows): the first `limit`, and whether there were more. */
export function page<T>(rows: T[], limit: number): { data: T[]; has_more: boolean } {
  return { data: rows.slice(0, limit), has_more: rows.length > limit };
}

/** A cursor that names nothing in this list: 400, the query parameter at fault. */
export function badCursor(value: string): FieldsError {
  const message = `starting_after ${value} is not an item of this list`;
  return new FieldsError(400, "invalid_request", message, [
    { param: "starting_after", code: "invalid_value", message },
  ]);
}

/** Times as every answer writes them (src/http/formats.ts): RFC 3339, UTC, milliseconds. */
export { timestamp as iso } from "../http/formats.ts";
