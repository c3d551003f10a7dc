import { isDeepStrictEqual } from "node:util";
import { z } from "zod";

/**
 * What the OpenAPI documents of Backline's HTTP interfaces share (/api/public/v1,
 * src/public-api/openapi.ts; /admin/v1, src/admin/openapi.ts): zod schemas turned into JSON Schema
 * 2020-12, the named schemas (`.meta({ id })`) collected and published once per shape, parameters
 * made of a params or query schema, and the RFC 9457 problem document every error answer has.
 */
export type Json = Record<string, unknown>;

export type Io = "input" | "output";

/**
 * The named schemas (`.meta({ id })`) met while converting, per direction. Until `publish()`, their
 * references read `#/components/schemas/<name>@<io>`: the input and the output shape of one named
 * schema may differ (defaults make fields required on output; responses stay open to new fields
 * while requests refuse unknown ones), and only then are they published apart.
 */
export interface Named {
  input: Map<string, Json>;
  output: Map<string, Json>;
}

const REF_PREFIX = "#/components/schemas/";

/** A zod schema as JSON Schema 2020-12; named schemas are collected in `named`. */
export function toSchema(schema: z.ZodType, io: Io, named: Named): Json {
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
export function publish(named: Named): { schemas: Json; render: (node: unknown) => unknown } {
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

export function parametersOf(schema: z.ZodType | undefined, where: "path" | "query", named: Named): Json[] {
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

/** The RFC 9457 problem document (components.schemas.Problem); `codes` says where the codes are listed. */
export function problemSchema(codes: string): Json {
  return {
    type: "object",
    description: "RFC 9457 problem details, with Backline's code, the field at fault and the request id.",
    required: ["type", "title", "status", "code", "detail", "request_id"],
    properties: {
      type: { type: "string", format: "uri", description: "A URI naming the error code." },
      title: { type: "string" },
      status: { type: "integer" },
      code: { type: "string", description: `Machine-readable error code (${codes} lists them).` },
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
}

/**
 * Response headers both documents share (components.headers). Every answer carries X-Request-Id
 * (src/http/app.ts); a 503 (a busy database, a server shutting down) and a 429 say when to come
 * back; a 401 names the scheme (RFC 6750).
 */
export const SHARED_HEADERS: Json = {
  "X-Request-Id": {
    description:
      "The request's id: yours when you sent a sane X-Request-Id (1–128 of A-Z a-z 0-9 . _ : -), else a new UUID. " +
      "Problem documents repeat it as `request_id`; quote it when you report a problem.",
    schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
  },
  "Retry-After": {
    description: "Seconds to wait before retrying.",
    schema: { type: "integer", minimum: 0 },
  },
  "WWW-Authenticate": {
    description:
      'RFC 6750: the Bearer challenge — `error="invalid_token"` for a credential that is not valid, ' +
      '`error="insufficient_scope"` with the `scope` needed.',
    schema: { type: "string", example: 'Bearer realm="backline", error="invalid_token"' },
  },
};

const headerRef = (name: string): Json => ({ $ref: `#/components/headers/${name}` });

/** Adds headers (components.headers names) to a response object. */
export function addHeaders(response: Json, names: readonly string[]): void {
  if (names.length === 0) return;
  const headers = (response.headers as Json | undefined) ?? {};
  for (const name of names) headers[name] = headerRef(name);
  response.headers = headers;
}

/**
 * What any operation can answer whatever its route: 401, 403, 500, and 503 / 504 (the bounded wait
 * for a database connection and the statement timeout, docs/security.md).
 */
export const EVERY_OPERATION_ERRORS = [401, 403, 500, 503, 504] as const;

/**
 * The methods whose requests the server reads a body of, when one is sent (Fastify parses it
 * whether or not the route takes one): a body that is not JSON is 400, one past the body limit
 * 413, one of a media type the interface does not parse 415 — so an operation without a request
 * body (POST /releases/{id}/submit, a DELETE) can answer all three too. GET bodies are never read.
 */
export const BODY_READING_METHODS: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * What an operation can answer because of how its request is made, from its spec: 400 where there
 * is a query to get wrong or a body to parse, and 413 past the body limit and 415 for a media type
 * the interface does not take wherever a body is read (BODY_READING_METHODS; src/http/app.ts,
 * body-limits.ts), whether or not the operation documents a request body.
 */
export function requestErrors(r: { method: string; query?: unknown }): number[] {
  const readsBody = BODY_READING_METHODS.has(r.method.toUpperCase());
  return [...(readsBody || r.query ? [400] : []), ...(readsBody ? [413, 415] : [])];
}

/**
 * The problem+json answers of an operation: each status once, in order, with its description and
 * the headers `headersOf` names for it.
 */
export function problemResponses(
  statuses: readonly number[],
  descriptions: Record<number, string>,
  headersOf: (status: number) => readonly string[],
): Json {
  const out: Json = {};
  for (const status of [...new Set(statuses)].sort((a, b) => a - b)) {
    const response: Json = {
      description: descriptions[status] ?? "Error.",
      content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
    };
    addHeaders(response, headersOf(status));
    out[String(status)] = response;
  }
  return out;
}
