import type { Column, SchemaCache } from "./schema-cache.ts";

/**
 * The description PostgREST serves at the root: every exposed table with its columns, and the
 * operations on it. OpenAPI 3.0, generated from the schema cache.
 */

function columnSchema(c: Column): Record<string, unknown> {
  const base = c.elementType ? { type: "array", items: scalar(c.elementType) } : scalar(c.type);
  return { ...base, ...(c.description ? { description: c.description } : {}) };
}

function scalar(type: string): Record<string, unknown> {
  if (type === "uuid") return { type: "string", format: "uuid" };
  if (type === "date") return { type: "string", format: "date" };
  if (type.startsWith("timestamp")) return { type: "string", format: "date-time" };
  if (type === "integer" || type === "smallint") return { type: "integer" };
  if (type === "bigint") return { type: "integer", format: "int64" };
  if (type.startsWith("numeric")) return { type: "string", format: "decimal" };
  if (type === "boolean") return { type: "boolean" };
  if (type === "jsonb" || type === "json") return {};
  return { type: "string" };
}

export function openApiDocument(cache: SchemaCache, publicUrl: string): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = {};
  const ref = { $ref: "#/components/parameters" };
  for (const table of [...cache.tables.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    schemas[table.name] = {
      type: "object",
      required: table.columns.filter((c) => !c.nullable && !c.hasDefault).map((c) => c.name),
      properties: Object.fromEntries(table.columns.map((c) => [c.name, columnSchema(c)])),
      ...(table.description ? { description: table.description } : {}),
    };
    const rows = { type: "array", items: { $ref: `#/components/schemas/${table.name}` } };
    const params = ["select", "order", "limit", "offset", "prefer", "range"].map((p) => ({
      $ref: `${ref.$ref}/${p}`,
    }));
    paths[`/${table.name}`] = {
      get: {
        tags: [table.name],
        summary: `Read ${table.name}`,
        parameters: params,
        responses: {
          200: { description: "OK", content: { "application/json": { schema: rows } } },
          206: { description: "Partial content" },
        },
      },
      post: {
        tags: [table.name],
        summary: `Create ${table.name}`,
        parameters: [{ $ref: `${ref.$ref}/select` }, { $ref: `${ref.$ref}/prefer` }],
        requestBody: {
          content: {
            "application/json": { schema: { oneOf: [{ $ref: `#/components/schemas/${table.name}` }, rows] } },
          },
        },
        responses: { 201: { description: "Created" } },
      },
      patch: {
        tags: [table.name],
        summary: `Update ${table.name}`,
        parameters: [{ $ref: `${ref.$ref}/prefer` }],
        requestBody: {
          content: { "application/json": { schema: { $ref: `#/components/schemas/${table.name}` } } },
        },
        responses: { 200: { description: "OK" }, 204: { description: "No content" } },
      },
      delete: {
        tags: [table.name],
        summary: `Delete ${table.name}`,
        parameters: [{ $ref: `${ref.$ref}/prefer` }],
        responses: { 200: { description: "OK" }, 204: { description: "No content" } },
      },
    };
  }
  const query = (name: string, description: string) => ({
    name,
    in: "query",
    required: false,
    schema: { type: "string" },
    description,
  });
  return {
    openapi: "3.0.3",
    info: {
      title: "Backline table interface",
      version: "v1",
      description: "PostgREST-compatible access to the catalog under row-level security (docs/rest.md).",
    },
    servers: [{ url: `${publicUrl}/rest/v1` }],
    paths,
    components: {
      schemas,
      parameters: {
        select: query("select", "Columns and embedded resources, e.g. *,tracks(*)"),
        order: query("order", "Ordering, e.g. title.desc.nullslast"),
        limit: query("limit", "Rows to return"),
        offset: query("offset", "Rows to skip"),
        prefer: {
          name: "Prefer",
          in: "header",
          required: false,
          schema: { type: "string" },
          description: "return=, count=, resolution=, missing=, tx=, handling=, max-affected=",
        },
        range: {
          name: "Range",
          in: "header",
          required: false,
          schema: { type: "string" },
          description: "e.g. 0-9",
        },
      },
      securitySchemes: {
        apikey: { type: "apiKey", in: "header", name: "apikey" },
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
      },
    },
    security: [{ apikey: [], bearer: [] }],
  };
}
