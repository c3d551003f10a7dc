import { RPC_PARAMETERS, RPC_RESPONSES, rpcPaths } from "./openapi-rpc.ts";
import {
  ERROR_SCHEMAS,
  errorResponses,
  ref,
  type TableView,
  tableSchemas,
  tableView,
} from "./openapi-schemas.ts";
import type { SchemaCache } from "./schema-cache.ts";

/**
 * The description PostgREST serves at the root (GET /rest/v1/): every exposed table with its
 * columns, and the operations on it. OpenAPI 3.0, generated from the schema cache, shaped as
 * PostgREST's own (one path per table; `select`, `order`, `limit`, `offset` and one filter
 * parameter per column; Prefer and Range headers) with what PostgREST's leaves out: nullability,
 * request bodies that require only what the database requires, and the error answers.
 * Linted by redocly-rest.yaml (`npm run openapi:lint`); docs/rest.md#the-openapi-description.
 */

type Obj = Record<string, unknown>;

const header = (name: string, description: string, extra: Obj = {}): Obj => ({
  name,
  in: "header",
  required: false,
  description,
  schema: { type: "string", ...extra },
});

const query = (name: string, description: string, example?: string): Obj => ({
  name,
  in: "query",
  required: false,
  description,
  schema: { type: "string" },
  ...(example ? { example } : {}),
});

const FILTER_HELP =
  "A filter: `operator.value` (`eq`, `neq`, `gt`, `gte`, `lt`, `lte`, `like`, `ilike`, `match`, `imatch`, `in`, `is`, `isdistinct`, `cs`, `cd`, `ov`, `fts`, …), with `not.` to negate (docs/rest.md#query-grammar).";

const PARAMETERS: Obj = {
  select: query(
    "select",
    "The columns to answer, renamed (`alias:column`), cast (`column::text`), embedded (`*,tracks(*)`) or aggregated (`count()`). Without it: every column.",
    "*",
  ),
  order: query(
    "order",
    "Ordering: `column.asc|desc.nullsfirst|nullslast`, comma-separated.",
    "created_at.desc",
  ),
  limit: {
    ...query("limit", "The most rows to answer (at most REST_MAX_ROWS, 1000 by default)."),
    schema: { type: "integer", minimum: 0 },
  },
  offset: { ...query("offset", "Rows to skip."), schema: { type: "integer", minimum: 0 } },
  or: query("or", "Filters of which one must hold: `(column.op.value,column.op.value)`; `and=(…)` alike."),
  on_conflict: query(
    "on_conflict",
    "With `Prefer: resolution=merge-duplicates|ignore-duplicates`: the unique columns a conflict is found on (default: the primary key).",
  ),
  columns: query("columns", "The body keys to insert (others are ignored), comma-separated."),
  range: header("Range", "A page of rows, `first-last` (0-based, inclusive), e.g. `0-24`.", {
    pattern: "^(items=)?\\d+-\\d*$",
  }),
  preferGet: header("Prefer", "`count=exact|planned|estimated`: the total in `Content-Range`.", {
    example: "count=exact",
  }),
  preferPost: header(
    "Prefer",
    "`return=minimal|headers-only|representation`, `resolution=merge-duplicates|ignore-duplicates`, `missing=default`, `count=exact`, `tx=commit|rollback`, `handling=strict|lenient`; comma-separated. The ones honoured come back in `Preference-Applied`.",
    { example: "return=representation" },
  ),
  preferWrite: header(
    "Prefer",
    "`return=minimal|representation`, `count=exact`, `tx=commit|rollback`, `handling=strict|lenient`, `max-affected=n`; comma-separated. The ones honoured come back in `Preference-Applied`.",
    { example: "return=representation" },
  ),
};

/**
 * `Accept-Profile`/`Content-Profile`: the schema a request reads or writes, one of those exposed.
 * Each schema has its own description (ask for it with `Accept-Profile`); the first is the default.
 */
function profileParameters(schema: string, exposed: readonly string[]): Obj {
  const others = exposed.length > 1 ? ` Exposed: ${exposed.map((s) => `\`${s}\``).join(", ")}.` : "";
  const options = { enum: [...exposed], default: exposed[0] ?? schema };
  return {
    acceptProfile: header(
      "Accept-Profile",
      `The schema to read: this description's is \`${schema}\`.${others}`,
      options,
    ),
    contentProfile: header(
      "Content-Profile",
      `The schema to write: this description's is \`${schema}\`.${others}`,
      options,
    ),
  };
}

const CONTENT_RANGE = {
  description: "The rows answered and the total when counted: `0-24/100`, `0-24/*`, `*/0`.",
  schema: { type: "string" },
};
const PREFERENCE_APPLIED = {
  description: "The preferences of `Prefer` the server honoured.",
  schema: { type: "string" },
};

const error = (description: string, headers?: Obj): Obj => ({
  description,
  ...(headers ? { headers } : {}),
  content: { "application/json": { schema: ref("schemas", "Error") } },
});

const RETRY_AFTER = { "Retry-After": { description: "Seconds to wait.", schema: { type: "integer" } } };

const RESPONSES: Obj = {
  BadRequest: error(
    "A request the grammar or the database refuses: a query that does not parse (PGRST100), a body that is not JSON, or not sent as `application/json` (PGRST102) or names no column (PGRST204), an unknown column (42703), a malformed value (22P02), a missing required column (23502), a failed check (23514), a request limit (BL400).",
  ),
  Unauthorized: {
    description:
      "No `Authorization` (PGRST302), a bad or expired token (PGRST301, PGRST303), a privilege `anon` lacks (42501); or, from the apikey gateway, no or an unknown `apikey` (a body without `code`).",
    headers: {
      "WWW-Authenticate": { description: "`Bearer`, as RFC 6750 asks.", schema: { type: "string" } },
    },
    content: {
      "application/json": {
        schema: { anyOf: [ref("schemas", "Error"), ref("schemas", "GatewayError")] },
      },
    },
  },
  Forbidden: error(
    "A privilege the caller lacks: a column it may not write, a row row-level security refuses (42501), an operator-only change (BL004).",
  ),
  NotAcceptable: error(
    "An `Accept` it cannot produce (PGRST107), another schema than `public` (PGRST106), or the object representation of not exactly one row (PGRST116; a write is rolled back).",
  ),
  Conflict: error(
    "A duplicate (23505), a reference to a row the caller cannot see or a row still referenced (23503), a lifecycle rule (BL001, BL002, BL003).",
  ),
  PayloadTooLarge: error("A body over 1 MiB (PGRST413)."),
  RangeNotSatisfiable: error("A range that starts past the last row, or ends before it starts (PGRST103).", {
    "Content-Range": CONTENT_RANGE,
  }),
  Ambiguous: error(
    "An embed that several relationships could mean (PGRST201): `details` lists them; name one with `!`.",
  ),
  TooManyRequests: error("Over the tenant's or the caller's rate limit (BL429).", RETRY_AFTER),
  ServerError: error("An unexpected error; the body says nothing of the server's internals."),
  Unavailable: error(
    "The database is out of reach or every connection is busy; retry after `Retry-After`.",
    RETRY_AFTER,
  ),
  Timeout: error("The statement ran past the role's statement timeout (57014)."),
};

/** The media types an answer of rows comes in (docs/rest.md#headers). */
function rowsContent(table: string): Obj {
  const row = ref("schemas", table);
  const rows = { type: "array", items: row };
  return {
    "application/json": { schema: rows },
    "application/vnd.pgrst.object+json": { schema: row },
    "text/csv": { schema: { type: "string" } },
  };
}

/** A table's path: `get`, and the writes the view's role may make. */
function tablePath(view: TableView): Obj {
  const name = view.table.name;
  const params = (...names: string[]) => names.map((p) => ref("parameters", p));
  const filters = view.read.map((c) => ref("parameters", `rowFilter.${name}.${c.name}`));
  const op = (verb: string, summary: string, description: string, parameters: unknown[], rest: Obj) => ({
    tags: [name],
    operationId: `${name}.${verb}`,
    summary: `${summary} ${name}`,
    description,
    parameters,
    ...rest,
  });
  const rows = (description: string, headers: Obj = { "Content-Range": CONTENT_RANGE }) => ({
    description,
    headers,
    content: rowsContent(name),
  });
  const written = { "Content-Range": CONTENT_RANGE, "Preference-Applied": PREFERENCE_APPLIED };
  const none = (description: string) => ({ description, headers: written });
  const body = (schema: string, description: string, array: boolean) => ({
    required: true,
    description,
    content: {
      "application/json": {
        schema: array
          ? { oneOf: [ref("schemas", schema), { type: "array", items: ref("schemas", schema) }] }
          : ref("schemas", schema),
      },
    },
  });
  const writeErrors = errorResponses({ 409: "Conflict", 413: "PayloadTooLarge" });
  const path: Obj = {
    get: op(
      "select",
      "Read rows of",
      "Rows row-level security lets the caller see, filtered, ordered and paged. `select` narrows or widens each row (the schema is the row of `select=*`).",
      [
        ...params("select", "order", "limit", "offset", "or", "range", "preferGet", "acceptProfile"),
        ...filters,
      ],
      {
        responses: {
          200: rows("The rows."),
          206: rows("A part of the rows: `Content-Range` says which, of how many."),
          ...errorResponses({ 300: "Ambiguous", 416: "RangeNotSatisfiable" }),
        },
      },
    ),
  };
  if (view.insert.length) {
    path.post = op(
      "insert",
      "Create rows of",
      "One row, or an array of rows in one statement. With `Prefer: resolution=…` an upsert on `on_conflict`.",
      params("select", "columns", "on_conflict", "preferPost", "contentProfile"),
      {
        requestBody: body(`${name}.insert`, "The row, or rows, to insert.", true),
        responses: {
          200: rows(
            "An upsert that changed existing rows only, with `Prefer: return=representation`.",
            written,
          ),
          201: {
            description:
              "Created. The rows with `Prefer: return=representation`; none otherwise (`Location` with `return=headers-only`).",
            headers: {
              ...written,
              Location: { description: "The new row, `/table?pk=eq.…`.", schema: { type: "string" } },
            },
            content: rowsContent(name),
          },
          204: none("An upsert that changed existing rows only, without a representation."),
          ...writeErrors,
        },
      },
    );
  }
  if (view.update.length) {
    path.patch = op(
      "update",
      "Change rows of",
      "Every row the filters match (and row-level security lets the caller change) takes the body's columns.",
      [...params("select", "or", "preferWrite", "contentProfile"), ...filters],
      {
        requestBody: body(`${name}.update`, "The columns to change.", false),
        responses: {
          200: rows("The changed rows, with `Prefer: return=representation`.", written),
          204: none("Changed, without a representation."),
          ...writeErrors,
        },
      },
    );
  }
  if (view.delete) {
    path.delete = op(
      "delete",
      "Delete rows of",
      "Every row the filters match (and row-level security lets the caller delete).",
      [...params("select", "or", "preferWrite", "contentProfile"), ...filters],
      {
        responses: {
          200: rows("The deleted rows, with `Prefer: return=representation`.", written),
          204: none("Deleted, without a representation."),
          ...errorResponses({ 409: "Conflict" }),
        },
      },
    );
  }
  return path;
}

/**
 * The role a caller's description is written for. The anon key's callers are the apps that sign
 * users in (anon itself may read no table): they are shown a signed-in user's interface.
 */
export function describedRole(role: string): string {
  return role === "anon" ? "authenticated" : role;
}

/** The components no operation refers to, left out (a role that writes nothing needs no Prefer for writes). */
function pruneUnused(paths: Obj, components: Record<string, Obj>): void {
  const text = JSON.stringify({ paths, responses: components.responses });
  for (const kind of ["parameters", "responses"]) {
    const group = components[kind] as Obj;
    for (const name of Object.keys(group)) {
      if (!text.includes(`"#/components/${kind}/${name}"`)) delete group[name];
    }
  }
}

/** The description of the tables `role` (a database role: describedRole()) may read, and what it may do with them. */
export function openApiDocument(
  cache: SchemaCache,
  publicUrl: string,
  role = "authenticated",
  /** The schemas the installation exposes (REST_SCHEMAS); this document describes `cache.schema`. */
  exposed: readonly string[] = [cache.schema],
): Obj {
  const views = [...cache.tables.values()]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((t) => tableView(t, role))
    .filter((v) => v.read.length > 0);
  const paths: Obj = {
    "/": {
      get: {
        tags: ["introspection"],
        operationId: "openapi",
        summary: "This description",
        responses: {
          200: {
            description: "The OpenAPI document of the exposed tables.",
            content: { "application/openapi+json": { schema: { type: "object" } } },
          },
          401: ref("responses", "Unauthorized"),
          429: ref("responses", "TooManyRequests"),
          500: ref("responses", "ServerError"),
          503: ref("responses", "Unavailable"),
        },
      },
    },
  };
  const schemas: Obj = { ...ERROR_SCHEMAS };
  const parameters: Obj = { ...PARAMETERS, ...RPC_PARAMETERS, ...profileParameters(cache.schema, exposed) };
  const responses: Obj = { ...RESPONSES, ...RPC_RESPONSES };
  for (const view of views) {
    const name = view.table.name;
    paths[`/${name}`] = tablePath(view);
    Object.assign(schemas, tableSchemas(view, cache));
    for (const c of view.read) {
      parameters[`rowFilter.${name}.${c.name}`] = {
        ...query(c.name, c.description ? `${c.description}\n\n${FILTER_HELP}` : FILTER_HELP),
        example: "eq.…",
      };
    }
  }
  const functions = rpcPaths(cache, role);
  Object.assign(paths, functions);
  pruneUnused(paths, { parameters, responses });
  return {
    openapi: "3.0.3",
    info: {
      title: "Backline table interface",
      version: "v1",
      description:
        "PostgREST-compatible access to the catalog under row-level security (docs/rest.md). Every request carries `apikey` and `Authorization: Bearer …`.",
      license: { name: "Apache-2.0", url: "https://www.apache.org/licenses/LICENSE-2.0" },
    },
    servers: [{ url: `${publicUrl}/rest/v1` }],
    tags: [
      { name: "introspection", description: "The description of the interface." },
      ...views.map(({ table: t }) => ({
        name: t.name,
        description: t.description ?? `The rows of ${t.name}.`,
      })),
      ...(Object.keys(functions).length
        ? [
            {
              name: "rpc",
              description:
                "The functions of the exposed schema the caller may execute (docs/rest.md#functions-rpc).",
            },
          ]
        : []),
    ],
    paths,
    components: {
      schemas,
      parameters,
      responses,
      securitySchemes: {
        apikey: {
          type: "apiKey",
          in: "header",
          name: "apikey",
          description: "The tenant's anon key (or, server side, its service-role key).",
        },
        bearer: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "A user's access token from /auth/v1, or the same key as `apikey`.",
        },
      },
    },
    security: [{ apikey: [], bearer: [] }],
  };
}
