import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Catalogue, CatalogueCache } from "../catalog/catalogue.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { type FieldError, fieldErrors, paramOf } from "../http/field-errors.ts";
import type { Mailer } from "../mail/mailer.ts";
import type { ObjectStore } from "../storage/driver.ts";
import type { UploadLimits } from "../storage/uploads.ts";
import type { SecretBox } from "../webhooks/secrets.ts";
import type { Caller, Scope } from "./auth.ts";
import type { Deprecation } from "./deprecation.ts";
import { ApiError, validationFailed } from "./errors.ts";

/**
 * One route of the public API: its contract (path, scope, schemas, responses), from which both
 * the request validation and the OpenAPI document are made (src/public-api/openapi.ts), and its
 * handler. Handlers reach data only through `ctx.read` / `ctx.write`: one transaction as the
 * caller, under row-level security.
 */
export type Method = "GET" | "POST" | "PATCH" | "DELETE";

export interface Reply {
  status?: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** What handlers may use besides their transaction. */
export interface Services {
  db: Db;
  mailer: Mailer;
  publicUrl: string;
  catalogue: CatalogueCache;
  /** Encrypts secrets stored at rest (webhook signing secrets). */
  secrets: SecretBox;
  webhooks: { allowPrivate: boolean };
  /** Where uploaded media goes (local disk or S3), and the upload limits. */
  storage: ObjectStore;
  uploadLimits: UploadLimits;
}

export interface Context<P, Q, B> {
  caller: Caller;
  params: P;
  query: Q;
  body: B;
  request: FastifyRequest;
  reply: FastifyReply;
  read<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  write<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  services: Services;
}

export interface RouteSpec<P = unknown, Q = unknown, B = unknown> {
  method: Method;
  /** OpenAPI style: /releases/{id}. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  scope: Scope;
  /**
   * Whether a signed-in member's access token (with Backline-Account naming the account) is
   * accepted as well as an API key: true unless a route says false.
   */
  allowUser?: boolean;
  /**
   * A person's own route (/me/...): only a signed-in user's access token, never a key, and no
   * Backline-Account — row security reaches the rows that are theirs (their payees, across every
   * account that pays them). `scope` is then documentation only.
   */
  person?: boolean;
  /**
   * POST only: whether Idempotency-Key is honoured (default true). Off where the response holds a
   * secret, which a stored response would keep in the database.
   */
  idempotent?: boolean;
  /**
   * The response holds a secret shown once (a webhook signing secret): an Idempotency-Key answer is
   * then kept only encrypted (Services.secrets) and replayed only to the same key or user.
   */
  secretInResponse?: boolean;
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** Whether the body may be left out (then it is {}). */
  bodyOptional?: boolean;
  /** Checks needing the catalogues (territory, store and genre codes), merged with the schema's errors. */
  check?: (body: unknown, catalogue: Catalogue) => FieldError[];
  /**
   * The success answer. `mediaType` for a file rather than JSON (a statement's PDF: the handler
   * sets content-type in its headers), `headers` the response headers it documents besides the
   * common ones (Content-Disposition).
   */
  response: {
    status: number;
    description: string;
    schema?: z.ZodType;
    mediaType?: string;
    headers?: string[];
  };
  /**
   * The route answers an ETag (src/public-api/etag.ts): a GET honours If-None-Match (304), a PATCH
   * or DELETE honours If-Match (412 when stale). Documents the headers and statuses.
   */
  etag?: boolean;
  /** The route is going away: Deprecation, Sunset and Link headers on every answer (deprecation.ts). */
  deprecated?: Deprecation;
  /** Error statuses this route can answer besides 400, 401, 403, 429 and 500. */
  errors?: number[];
  handler: (ctx: Context<P, Q, B>) => Promise<Reply>;
}

// biome-ignore lint/suspicious/noExplicitAny: a registry holds routes of every shape.
export type AnyRoute = RouteSpec<any, any, any>;

export function route<P, Q, B>(spec: RouteSpec<P, Q, B>): AnyRoute {
  return spec as AnyRoute;
}

export function parseParams<T>(schema: z.ZodType<T> | undefined, input: unknown): T {
  if (!schema) return undefined as T;
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  // A malformed id names nothing that exists: 404, as for another account's id.
  const first = r.error.issues[0];
  throw new ApiError(
    404,
    "resource_missing",
    `No such resource: ${paramOf(first?.path ?? [])} is not a valid id.`,
    {
      param: paramOf(first?.path ?? []),
    },
  );
}

export function parseQuery<T>(schema: z.ZodType<T> | undefined, input: unknown): T {
  if (!schema) return undefined as T;
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const errors = fieldErrors(r.error, input).map((e) =>
    e.code === "unknown_field"
      ? { ...e, message: `${e.param} is not a query parameter of this endpoint` }
      : e,
  );
  throw new ApiError(400, "invalid_parameter", errors[0]?.message ?? "Invalid query parameter.", { errors });
}

export function parseBody<T>(
  schema: z.ZodType<T> | undefined,
  check: ((body: unknown, catalogue: Catalogue) => FieldError[]) | undefined,
  catalogue: Catalogue | undefined,
  input: unknown,
  optional = false,
): T {
  if (!schema) return undefined as T;
  if (input === undefined && optional) input = {};
  if (input === undefined || input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new ApiError(
      400,
      "invalid_body",
      "Send a JSON object as the request body (Content-Type: application/json).",
    );
  }
  const r = schema.safeParse(input);
  const errors = r.success ? [] : fieldErrors(r.error, input);
  if (check && catalogue) {
    for (const e of check(input, catalogue)) if (!errors.some((x) => x.param === e.param)) errors.push(e);
  }
  if (errors.length > 0 || !r.success) throw validationFailed(errors);
  return r.data;
}

/** Shared schema pieces. */
export const Id = z
  .uuid()
  .meta({ description: "An id (UUID).", example: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21" });

const Cursor = z.uuid();

/**
 * `limit` with `offset` (offset pages, with `total`), or with `starting_after` / `ending_before`
 * (cursor pages, by an item's id: no total, so no count on each page). docs/public-api.md, "Lists".
 */
export const Pagination = z
  .object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(100)
      .default(20)
      .meta({ description: "Page size: 1 to 100, default 20." }),
    offset: z.coerce
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .optional()
      .meta({ description: "Items to skip, default 0. Not with starting_after or ending_before." }),
    starting_after: Cursor.optional().meta({
      description:
        "Cursor: the id of the last item of the page you have; answers the items after it (next page). " +
        "The answer has no total.",
    }),
    ending_before: Cursor.optional().meta({
      description:
        "Cursor: the id of the first item of the page you have; answers the items just before it (previous page).",
    }),
  })
  .strict();

/**
 * Offset pages only: the royalty reports, whose groups have no id to name as a cursor and whose
 * answer carries sums over every page anyway.
 */
export const OffsetPagination = Pagination.pick({ limit: true }).extend({
  offset: z.coerce
    .number()
    .int()
    .min(0)
    .max(1_000_000)
    .default(0)
    .meta({ description: "Items to skip, default 0." }),
});

export function listOf<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      object: z.literal("list"),
      data: z.array(item),
      total: z
        .number()
        .int()
        .optional()
        .meta({ description: "Offset pages only: how many items match, over all pages." }),
      limit: z.number().int(),
      offset: z.number().int().optional().meta({ description: "Offset pages only: the offset asked." }),
      has_more: z.boolean().meta({
        description:
          "Whether more items follow this page (with ending_before: precede it). Ask for them with " +
          "starting_after (the last item's id) or ending_before (the first item's id).",
      }),
    })
    .meta({ id });
}

/** The answer for a page: offset pages keep `total` and `offset`; cursor pages have neither. */
export function page<T>(
  rows: T[],
  query: { limit: number; offset?: number | undefined },
  result: { total?: number | undefined; has_more: boolean },
) {
  return result.total === undefined
    ? { object: "list" as const, data: rows, limit: query.limit, has_more: result.has_more }
    : {
        object: "list" as const,
        data: rows,
        total: result.total,
        limit: query.limit,
        offset: query.offset ?? 0,
        has_more: result.has_more,
      };
}

export { fieldErrors, paramOf };
