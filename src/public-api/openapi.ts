import { isDeepStrictEqual } from "node:util";
import { z } from "zod";
import type { AnyRoute } from "./route.ts";

/**
 * The OpenAPI 3.1 document of /api/public/v1, made from the same route specs and zod schemas that
 * validate requests (src/public-api/route.ts): a change to a schema changes the document.
 * Served at /api/public/v1/openapi.json and linted in CI (`npm run openapi:lint`).
 */
type Json = Record<string, unknown>;

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Malformed request: bad JSON, a bad query parameter or a missing body.",
  401: "No API key, or a key that is malformed, unknown, frozen, revoked or expired.",
  403: "The key lacks the scope this endpoint needs.",
  404: "No such object in the key's account (another account's ids are not found either).",
  409: "The object's state does not allow this (for example a release that is no longer editable).",
  413: "The request body is too large.",
  415: "The request body is not application/json.",
  422: "Validation failed: `errors` lists every failing field.",
  429: "Too many requests: wait for `Retry-After` seconds.",
  500: "An unexpected error; the request changed nothing it could not undo.",
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

type Io = "input" | "output";

/**
 * The named schemas (`.meta({ id })`) met while converting, per direction. Until `publish()`, their
 * references read `#/components/schemas/<name>@<io>`: the input and the output shape of one named
 * schema may differ (defaults make fields required on output; responses stay open to new fields
 * while requests refuse unknown ones), and only then are they published apart.
 */
interface Named {
  input: Map<string, Json>;
  output: Map<string, Json>;
}

const REF_PREFIX = "#/components/schemas/";

/** A zod schema as JSON Schema 2020-12; named schemas are collected in `named`. */
function toSchema(schema: z.ZodType, io: Io, named: Named): Json {
  const out = z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any" }) as Json;
  delete out.$schema;
  const defs = out.$defs as Record<string, Json> | undefined;
  delete out.$defs;
  const fix = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(fix);
    if (node && typeof node === "object") {
      const o: Json = {};
      for (const [k, v] of Object.entries(node)) {
        // A response may gain fields within v1 (docs/public-api.md, "Versioning"): clients must
        // ignore unknown fields, so no response schema forbids them. Requests still refuse them.
        if (io === "output" && k === "additionalProperties" && v === false) continue;
        o[k] =
          k === "$ref" && typeof v === "string" && v.startsWith("#/$defs/")
            ? `${REF_PREFIX}${v.slice("#/$defs/".length)}@${io}`
            : fix(v);
      }
      return o;
    }
    return node;
  };
  for (const [name, def] of Object.entries(defs ?? {})) {
    if (!named[io].has(name)) named[io].set(name, fix(def) as Json);
  }
  return fix(out) as Json;
}

/**
 * The components.schemas of the collected named schemas, and `render`, which turns the
 * `<name>@<io>` references anywhere in the document into real ones. A named schema whose input
 * shape equals its output shape is published once; otherwise the input shape is `<name>Input`.
 */
function publish(named: Named): { schemas: Json; render: (node: unknown) => unknown } {
  const apart = new Set<string>();
  const nameOf = (name: string, io: Io): string =>
    io === "input" && named.output.has(name) && apart.has(name) ? `${name}Input` : name;
  const render = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(render);
    if (node && typeof node === "object") {
      const o: Json = {};
      for (const [k, v] of Object.entries(node)) {
        const ref =
          k === "$ref" && typeof v === "string"
            ? /^#\/components\/schemas\/(.+)@(input|output)$/.exec(v)
            : null;
        o[k] = ref ? `${REF_PREFIX}${nameOf(ref[1] as string, ref[2] as Io)}` : render(v);
      }
      return o;
    }
    return node;
  };
  // Which shapes differ, directly or through a schema they name: repeated until nothing changes.
  for (let changed = true; changed; ) {
    changed = false;
    for (const [name, input] of named.input) {
      const output = named.output.get(name);
      if (output && !apart.has(name) && !isDeepStrictEqual(render(input), render(output))) {
        apart.add(name);
        changed = true;
      }
    }
  }
  const schemas: Json = {};
  for (const [name, output] of named.output) schemas[name] = render(output);
  for (const [name, input] of named.input) {
    const published = nameOf(name, "input");
    if (published !== name && named.output.has(published)) {
      throw new Error(`OpenAPI: the input shape of ${name} would replace the schema ${published}`);
    }
    if (published !== name || !named.output.has(name)) schemas[published] = render(input);
  }
  return { schemas, render };
}

function parametersOf(schema: z.ZodType | undefined, where: "path" | "query", named: Named): Json[] {
  if (!schema) return [];
  const js = toSchema(schema, "input", named);
  const props = (js.properties ?? {}) as Record<string, Json>;
  const required = new Set((js.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, s]) => {
    const { description, ...rest } = s;
    return {
      name,
      in: where,
      required: where === "path" || required.has(name),
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

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
    const responses: Json = {
      [String(r.response.status)]: r.response.schema
        ? {
            description: r.response.description,
            content: { "application/json": { schema: toSchema(r.response.schema, "output", named) } },
          }
        : { description: r.response.description },
    };
    for (const status of [...STANDARD_ERRORS, ...(r.errors ?? [])].sort()) {
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
      ...(r.method === "POST" && r.idempotent !== false
        ? [{ $ref: "#/components/parameters/IdempotencyKey" }]
        : []),
    ];
    const operation: Json = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tags: [r.tag],
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
  schemas.Problem = {
    type: "object",
    description: "RFC 9457 problem details, with Backline's code, the field at fault and the request id.",
    required: ["type", "title", "status", "code", "detail", "request_id"],
    properties: {
      type: { type: "string", format: "uri", description: "A URI naming the error code." },
      title: { type: "string" },
      status: { type: "integer" },
      code: { type: "string", description: "Machine-readable error code (docs/public-api.md lists them)." },
      detail: { type: "string", description: "What went wrong, for people." },
      param: { type: "string", description: "The field or parameter at fault, when there is one." },
      errors: {
        type: "array",
        description: "Every failing field (validation errors).",
        items: {
          type: "object",
          required: ["param", "code", "message"],
          properties: { param: { type: "string" }, code: { type: "string" }, message: { type: "string" } },
        },
      },
      request_id: { type: "string", description: "The X-Request-Id of the request." },
    },
  };
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
        "Lists take `limit` and `offset`. POST requests honour `Idempotency-Key`. " +
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
      },
    },
  };
}
