import type { z } from "zod";
import { type Json, type Named, parametersOf, problemSchema, publish, toSchema } from "../http/openapi.ts";
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
  404: "No such object in the key's account (another account's ids are not found either).",
  409: "The object's state does not allow this (for example a release that is no longer editable).",
  413: "The request body is too large.",
  412: "If-Match named a version this object no longer has (`precondition_failed`): nothing was changed.",
  415: "The request body is not application/json.",
  422: "Validation failed: `errors` lists every failing field.",
  429: "Too many requests: wait for `Retry-After` seconds.",
  500: "An unexpected error; the request changed nothing it could not undo.",
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

const STANDARD_ERRORS = [400, 401, 403, 429, 500];

const TAG_DESCRIPTIONS: Record<string, string> = {
  Releases: "Releases of the account: create, edit while editable, submit, follow, correct, take down.",
  Tracks: "Tracks of a release, with ISRC, contributors, audio metadata and splits.",
  Artists: "Artist profiles and their Official Artist Channel requests.",
  Rules: "The validation catalogues: territories, stores, genres, release types and limits.",
  "API keys": "The account's API keys and their lifecycle.",
  Webhooks:
    "Endpoints that receive the account's events, signed per Standard Webhooks, with their delivery log.",
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
  const problemRef = { $ref: "#/components/schemas/Problem" };
  const paths: Record<string, Json> = {};
  const tags = new Set<string>();
  for (const r of routes) {
    tags.add(r.tag);
    const etagHeader =
      r.etag && r.method !== "DELETE" ? { headers: { ETag: { $ref: "#/components/headers/ETag" } } } : {};
    const responses: Json = {
      [String(r.response.status)]: r.response.schema
        ? {
            description: r.response.description,
            ...etagHeader,
            content: { "application/json": { schema: toSchema(r.response.schema, "output", named) } },
          }
        : { description: r.response.description, ...etagHeader },
    };
    if (r.etag && r.method === "GET") {
      responses["304"] = {
        description: "Not modified: If-None-Match named the current ETag. No body.",
        headers: { ETag: { $ref: "#/components/headers/ETag" } },
      };
    }
    const conditional = r.etag && r.method !== "GET" ? [412] : [];
    for (const status of [...STANDARD_ERRORS, ...(r.errors ?? []), ...conditional].sort()) {
      responses[String(status)] = {
        description: ERROR_DESCRIPTIONS[status] ?? "Error.",
        content: { "application/problem+json": { schema: problemRef } },
        ...(status === 429
          ? { headers: { "Retry-After": { $ref: "#/components/headers/Retry-After" } } }
          : {}),
      };
    }
    const parameters = [
      ...parametersOf(r.params, "path", named),
      ...parametersOf(r.query, "query", named),
      ...(r.etag
        ? [{ $ref: `#/components/parameters/${r.method === "GET" ? "IfNoneMatch" : "IfMatch"}` }]
        : []),
      ...(r.method === "POST" && r.idempotent !== false
        ? [{ $ref: "#/components/parameters/IdempotencyKey" }]
        : []),
    ];
    if (r.deprecated) {
      for (const response of Object.values(responses) as Json[]) {
        response.headers = {
          ...((response.headers as Json | undefined) ?? {}),
          Deprecation: { $ref: "#/components/headers/Deprecation" },
          Sunset: { $ref: "#/components/headers/Sunset" },
          Link: { $ref: "#/components/headers/Link" },
        };
      }
    }
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
      security: r.allowUser ? [{ apiKey: [r.scope] }, { userToken: [] }] : [{ apiKey: [r.scope] }],
      ...(parameters.length ? { parameters } : {}),
      ...(r.body
        ? {
            requestBody: {
              required: true,
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
          description: "A signed-in user's access token from /auth/v1 (key management only).",
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
        IdempotencyKey: {
          name: "Idempotency-Key",
          in: "header",
          required: false,
          description: "Makes a retried POST safe: the first response is replayed for 24 hours.",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
      },
      headers: {
        "Retry-After": { description: "Seconds to wait before retrying.", schema: { type: "integer" } },
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
