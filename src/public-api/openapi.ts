import type { z } from "zod";
import {
  addHeaders,
  EVERY_OPERATION_ERRORS,
  type Json,
  type Named,
  parametersOf,
  problemResponses,
  problemSchema,
  publish,
  requestErrors,
  SHARED_HEADERS,
  toSchema,
} from "../http/openapi.ts";
import type { AnyRoute } from "./route.ts";

/**
 * The OpenAPI 3.1 document of /api/public/v1, made from the same route specs and zod schemas that
 * validate requests (src/public-api/route.ts): a change to a schema changes the document.
 * Served at /api/public/v1/openapi.json and linted in CI (`npm run openapi:lint`).
 */

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Malformed request: bad JSON, a bad query parameter or a missing body.",
  401: "No API key, or a key that is malformed, unknown, frozen, revoked or expired.",
  403: "The key lacks the scope this endpoint needs.",
  404: "No such object in the key's account (another account's ids, and ids that are not ids, are not found either).",
  409: "The object's state does not allow this (for example a release that is no longer editable); for a POST, also an Idempotency-Key whose first request is still running (with Retry-After).",
  412: "If-Match named a version this object no longer has (`precondition_failed`): nothing was changed.",
  413: "The request body is too large (`body_too_large`; 1 MiB for JSON). The connection is closed after the answer.",
  415: "The request body is not application/json (`unsupported_media_type`).",
  422: "Validation failed: `errors` lists every failing field. For a POST, also an Idempotency-Key reused with another request (`idempotency_key_reused`).",
  429: "Too many requests: wait for `Retry-After` seconds.",
  500: "An unexpected error; the request changed nothing it could not undo.",
  503: "The database is busy (`too_many_connections`: no connection within the bounded wait) or the server is shutting down: retry after `Retry-After` seconds. Nothing was started.",
  504: "The request ran longer than its statement timeout and was cancelled (`statement_timeout`); nothing was changed.",
};

/** Published only when a route is deprecated (an unused component is a lint error). */
const DEPRECATION_HEADERS: Json = {
  Deprecation: {
    description: "RFC 9745: this endpoint is deprecated, since the date given (@<unix seconds>).",
    schema: { type: "string", example: "@1767225600" },
  },
  Sunset: {
    description: "RFC 8594: the endpoint may stop answering after this date (at least twelve months on).",
    schema: { type: "string", example: "Fri, 01 Jan 2027 00:00:00 GMT" },
  },
  Link: {
    description: 'The changelog entry (rel="deprecation") and the replacement (rel="successor-version").',
    schema: { type: "string" },
  },
};

/** The response headers only this API sends (the shared ones are src/http/openapi.ts's). */
const PUBLIC_HEADERS: Json = {
  RateLimit: {
    description:
      "draft-ietf-httpapi-ratelimit-headers: what is left of the caller's limit (`r`, requests) and when the " +
      "window resets (`t`, seconds). Sent once the caller is identified (not on a refused credential).",
    schema: { type: "string", example: '"default";r=97;t=8' },
  },
  "RateLimit-Policy": {
    description: "The caller's limit: `q` requests per `w` seconds (per API key, or per signed-in user).",
    schema: { type: "string", example: '"default";q=100;w=10' },
  },
  "Content-Disposition": {
    description: "A file's answer: `attachment` with the file name to save it as.",
    schema: { type: "string", example: 'attachment; filename="statement-2026-11-3f2b6a5e.pdf"' },
  },
  "Idempotent-Replayed": {
    description:
      "`true` on an answer replayed for a repeated Idempotency-Key (the first request's status and body); absent otherwise.",
    schema: { type: "string", enum: ["true"] },
  },
};

/**
 * The statuses a route can answer, derived from its spec: what every operation can answer, what its
 * request can get wrong (400; 413 and 415 for every method whose body is read, with a request body
 * documented or not), 429 (rate limits), 404 where a path names an object, 422 where it takes a
 * body, 409/422 for a POST honouring Idempotency-Key, 412 for a conditional write, and the route's
 * own `errors`.
 */
function errorStatuses(r: AnyRoute): number[] {
  return [
    ...EVERY_OPERATION_ERRORS,
    ...requestErrors(r),
    // A malformed Backline-Account header, or a member's token without it (a person's own
    // routes take no such header).
    ...(r.allowUser !== false && !r.person ? [400] : []),
    429,
    ...(r.params ? [404] : []),
    ...(r.body ? [422] : []),
    ...(idempotent(r) ? [409, 422] : []),
    ...(r.etag && r.method !== "GET" ? [412] : []),
    ...(r.errors ?? []),
  ];
}

const idempotent = (r: AnyRoute): boolean => r.method === "POST" && r.idempotent !== false;

const TAG_DESCRIPTIONS: Record<string, string> = {
  Releases: "Releases of the account: create, edit while editable, submit, follow, correct, take down.",
  Tracks: "Tracks of a release, with ISRC, contributors, audio metadata and splits.",
  Artists: "Artist profiles and their Official Artist Channel requests.",
  Rules: "The validation catalogues: territories, stores, genres, release types and limits.",
  "API keys": "The account's API keys and their lifecycle.",
  Webhooks:
    "Endpoints that receive the account's events, signed per Standard Webhooks, with their delivery log.",
  Me: "The signed-in person's own data: everything Backline holds about them (docs/privacy.md).",
};

/** An event sent to webhook endpoints: the document's `webhooks` section (OpenAPI 3.1). */
export interface WebhookSpec {
  type: string;
  summary: string;
  schema: z.ZodType;
}

export function openApiDocument(
  routes: readonly AnyRoute[],
  serverUrl: string,
  version: string,
  events: readonly WebhookSpec[] = [],
): Json {
  const named: Named = { input: new Map(), output: new Map() };
  const paths: Record<string, Json> = {};
  const tags = new Set<string>();
  for (const r of routes) {
    tags.add(r.tag);
    const etag = r.etag && r.method !== "DELETE" ? ["ETag"] : [];
    const success: Json = { description: r.response.description };
    addHeaders(success, [...etag, ...(r.response.headers ?? [])]);
    if (r.response.mediaType) {
      success.content = { [r.response.mediaType]: { schema: { type: "string", format: "binary" } } };
    } else if (r.response.schema) {
      success.content = { "application/json": { schema: toSchema(r.response.schema, "output", named) } };
    }
    const responses: Json = { [String(r.response.status)]: success };
    if (r.etag && r.method === "GET") {
      responses["304"] = { description: "Not modified: If-None-Match named the current ETag. No body." };
      addHeaders(responses["304"] as Json, ["ETag"]);
    }
    Object.assign(
      responses,
      problemResponses(errorStatuses(r), ERROR_DESCRIPTIONS, (status) => [
        ...(status === 401 || status === 403 ? ["WWW-Authenticate"] : []),
        ...(status === 429 || status === 503 || (status === 409 && idempotent(r)) ? ["Retry-After"] : []),
      ]),
    );
    // Headers every answer of the route may carry: the request id, the rate limit once the caller is
    // known, a replay's mark (a failed first attempt, 5xx, is not kept), a deprecation's notice.
    for (const [status, response] of Object.entries(responses) as [string, Json][]) {
      addHeaders(response, [
        "X-Request-Id",
        "RateLimit",
        "RateLimit-Policy",
        ...(idempotent(r) && Number(status) < 500 ? ["Idempotent-Replayed"] : []),
        ...(r.deprecated ? ["Deprecation", "Sunset", "Link"] : []),
      ]);
    }
    const parameters = [
      ...parametersOf(r.params, "path", named),
      ...parametersOf(r.query, "query", named),
      ...(r.etag
        ? [{ $ref: `#/components/parameters/${r.method === "GET" ? "IfNoneMatch" : "IfMatch"}` }]
        : []),
      ...(idempotent(r) ? [{ $ref: "#/components/parameters/IdempotencyKey" }] : []),
      ...(r.allowUser !== false && !r.person ? [{ $ref: "#/components/parameters/BacklineAccount" }] : []),
    ];
    const operation: Json = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [r.tag],
      ...(r.deprecated
        ? {
            deprecated: true,
            description: `${r.description ?? r.summary} Deprecated since ${r.deprecated.since}; answers until at least ${r.deprecated.sunset}${r.deprecated.successor ? `; use ${r.deprecated.successor}` : ""}.`,
          }
        : {}),
      security: r.person
        ? [{ userToken: [] }]
        : r.allowUser !== false
          ? [{ apiKey: [r.scope] }, { userToken: [] }]
          : [{ apiKey: [r.scope] }],
      ...(parameters.length ? { parameters } : {}),
      ...(r.body
        ? {
            requestBody: {
              required: r.bodyOptional !== true,
              content: { "application/json": { schema: toSchema(r.body, "input", named) } },
            },
          }
        : {}),
      responses,
    };
    paths[r.path] ??= {};
    (paths[r.path] as Json)[r.method.toLowerCase()] = operation;
  }
  const webhooks: Record<string, Json> = {};
  for (const e of events) {
    webhooks[e.type] = {
      post: {
        operationId: `event_${e.type.replace(/\./g, "_")}`,
        summary: e.type,
        description: `${e.summary} Signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature); see docs/webhooks.md.`,
        tags: ["Webhooks"],
        requestBody: {
          required: true,
          content: { "application/json": { schema: toSchema(e.schema, "output", named) } },
        },
        responses: {
          "200": { description: "Any 2xx answer acknowledges the event; anything else is retried." },
          "410": { description: "Gone: the endpoint is disabled and no more events are sent to it." },
        },
      },
    };
  }
  const { schemas, render } = publish(named);
  schemas.Problem = problemSchema("docs/public-api.md");
  return {
    openapi: "3.1.0",
    info: {
      title: "Backline public API",
      version,
      summary:
        "Account-scoped distribution API: releases, tracks, artists, submission, status and takedowns.",
      description:
        "Every request carries `Authorization: Bearer <API_KEY>` and acts on the key's account. " +
        "Errors are RFC 9457 problem details with `code`, `param` and `request_id`. " +
        "Lists take `limit` with `offset` (answers carry `total`) or with the cursors `starting_after` / `ending_before` (no total). " +
        "Releases, tracks and artists answer `ETag`; writes honour `If-Match` (412 when stale). POST requests honour `Idempotency-Key`. " +
        "Responses carry `RateLimit` and `RateLimit-Policy` headers. See docs/public-api.md.",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [{ url: serverUrl, description: "This Backline server." }],
    security: [{ apiKey: [] }],
    tags: [...tags].map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? name })),
    paths: render(paths),
    ...(events.length ? { webhooks: render(webhooks) } : {}),
    components: {
      schemas,
      securitySchemes: {
        apiKey: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "bk_live_… / bk_test_… API key",
          description: "An API key of the account. Scopes: catalog:read, catalog:write, keys:manage, …",
        },
        userToken: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description:
            "A signed-in member's access token from /auth/v1, with Backline-Account naming the account to act for " +
            "(without it: key management only).",
        },
      },
      parameters: {
        IfMatch: {
          name: "If-Match",
          in: "header",
          required: false,
          description:
            "The ETag you last read: the write happens only if the object is still at that version, else 412 " +
            "precondition_failed and nothing changes. `*` matches any version.",
          schema: { type: "string" },
        },
        IfNoneMatch: {
          name: "If-None-Match",
          in: "header",
          required: false,
          description: "The ETag you hold: 304 without a body while the object is unchanged.",
          schema: { type: "string" },
        },
        BacklineAccount: {
          name: "Backline-Account",
          in: "header",
          required: false,
          description:
            "With a member's access token: the id of the account to act for, one the member belongs to. Their role in " +
            "it decides what they may do (owner and admin: every scope; member: catalog:read, catalog:write, " +
            "royalties:read; viewer: catalog:read, royalties:read). Needed on every route but /api-keys, where without " +
            "it the member reaches every account they manage. With an API key it may only name the key's own account.",
          schema: { type: "string", format: "uuid" },
        },
        IdempotencyKey: {
          name: "Idempotency-Key",
          in: "header",
          required: false,
          description: "Makes a retried POST safe: the first response is replayed for 24 hours.",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
      },
      headers: {
        ...SHARED_HEADERS,
        ...PUBLIC_HEADERS,
        ...(routes.some((r) => r.deprecated) ? DEPRECATION_HEADERS : {}),
        ETag: {
          description:
            "Strong entity tag of the object's current version: send it back in If-Match to edit only that " +
            "version, or in If-None-Match to get 304 while it is unchanged.",
          schema: { type: "string", example: '"1764120305123456-9fQ2kLx0aB3cD4eF"' },
        },
      },
    },
  };
}
