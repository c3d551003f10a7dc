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
import type { AnyAdminRoute } from "./spec.ts";

/**
 * The OpenAPI 3.1 document of /admin/v1, made from the same route specs and zod schemas that
 * validate requests (src/admin/spec.ts) with the machinery the public API's document uses
 * (src/http/openapi.ts). Served at /admin/v1/openapi.json and linted in CI (`npm run openapi:lint`).
 */

export const ADMIN_API_VERSION = "1.0.0";

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "Bad request: a body or query parameter that is not valid (`errors` lists every failing field), bad JSON, or a blank reason.",
  401: "No key, or a key or token that is not valid (unknown, tampered, expired, another tenant's).",
  403: "The caller may not do this: not staff of the tenant (`not_staff`), a role too low for the route (`insufficient_role`), or a key that is not the service-role key.",
  404: "No such object in this tenant (another tenant's ids, and ids that are not ids, are not found either).",
  409: "The object's state does not allow this action (`invalid_state`, `already_voided`, `not_voidable`).",
  413: "The body is too large (`body_too_large`). The connection is closed after the answer.",
  415: "The body's media type is not accepted (`invalid_media_type`).",
  422: "The request is well formed but cannot be carried out (`release_incomplete` lists the failing checks; `invalid_settings`; a rejected royalty report).",
  500: "An unexpected error; the request changed nothing it could not undo.",
  503: "The database is busy (`too_many_connections`: no connection within the bounded wait) or the server is shutting down: retry after `Retry-After` seconds. Nothing was started.",
  504: "The request ran longer than its statement timeout and was cancelled (`statement_timeout`).",
};

/** What a route can answer, derived from its spec (as the public API's document does). */
function errorStatuses(r: AnyAdminRoute): number[] {
  return [...EVERY_OPERATION_ERRORS, ...requestErrors(r), ...(r.params ? [404] : []), ...(r.errors ?? [])];
}

const TAG_DESCRIPTIONS: Record<string, string> = {
  Staff: "Who is calling and the tenants they are staff of (docs/console.md, Staff roles).",
  Review: "The review queue, a release's review page, approval and rejection.",
  Deliveries:
    "Deliveries to stores: per release and across the tenant, their history, retries and the stores' reports.",
  Takedowns: "Takedown requests and where each store stands.",
  "OAC requests": "Official Artist Channel requests and their decisions.",
  Jobs: "The background jobs working for the tenant: dead ones with their last error, and their retry.",
  "Royalty imports": "Store reports imported into royalties: upload, progress, report, void.",
  Transfers: "Catalogue transfers: a label's back catalogue imported, identifiers kept (docs/catalogue.md).",
  People: "A person's own data: find them by address, export it, erase it (docs/privacy.md).",
  Accounts: "The tenant's accounts, their members, invitations and API keys (never their secrets).",
  Stores: "The installation's stores and their delivery adapters.",
  Settings: "The tenant's settings: lead days, auto-review, media requirement and branding.",
  Audit: "The tenant's audit log: who changed what, when and from where; exports as CSV or JSON lines.",
};

/** The response headers only this API sends (the shared ones are src/http/openapi.ts's). */
const ADMIN_HEADERS: Json = {
  "Cache-Control": {
    description: "`no-store`: the answers hold a tenant's data and are never cached.",
    schema: { type: "string", enum: ["no-store"] },
  },
  "Content-Disposition": {
    description: "On an export (CSV, JSON lines): `attachment` with the file's name.",
    schema: { type: "string", example: 'attachment; filename="audit.csv"' },
  },
};

const ROLE_WORDS: Record<string, string> = {
  reviewer: "Staff role: reviewer (or higher); the tenant's service-role key.",
  operator: "Staff role: operator (or higher); the tenant's service-role key.",
  admin: "Staff role: admin; the tenant's service-role key.",
  platform: "Platform staff with the admin role only (stores belong to the installation).",
  signed_in:
    "Any caller /admin/v1 accepts: a staff user's access token (staff of any tenant) or a tenant's service-role key.",
};

export function adminOpenApiDocument(routes: readonly AnyAdminRoute[], serverUrl: string): Json {
  const named: Named = { input: new Map(), output: new Map() };
  const paths: Record<string, Json> = {};
  const tags: string[] = [];
  for (const r of routes) {
    if (!tags.includes(r.tag)) tags.push(r.tag);
    const body = toSchema(r.response.schema, "output", named);
    const responses: Json = {
      [String(r.response.status)]: {
        description: r.response.description,
        content: {
          "application/json": { schema: body },
          ...Object.fromEntries(
            (r.response.exports ?? []).map((type) => [
              type,
              { schema: { type: "string", contentMediaType: type } },
            ]),
          ),
        },
      },
    };
    for (const o of r.otherResponses ?? []) {
      responses[String(o.status)] = {
        description: o.description,
        content: { "application/json": { schema: body } },
      };
    }
    Object.assign(
      responses,
      problemResponses(errorStatuses(r), ERROR_DESCRIPTIONS, (status) => [
        ...(status === 401 ? ["WWW-Authenticate"] : []),
        ...(status === 503 ? ["Retry-After"] : []),
      ]),
    );
    for (const response of Object.values(responses) as Json[]) {
      addHeaders(response, ["X-Request-Id", "Cache-Control"]);
    }
    if (r.response.exports) addHeaders(responses[String(r.response.status)] as Json, ["Content-Disposition"]);
    const parameters = [
      ...parametersOf(r.params, "path", named),
      ...parametersOf(r.query, "query", named),
      { $ref: "#/components/parameters/BacklineTenant" },
    ];
    const security =
      r.staffRole === "platform" ? [{ staffToken: [] }] : [{ serviceKey: [] }, { staffToken: [] }];
    const requestBody = r.rawBody
      ? {
          required: true,
          description: r.rawBody.description,
          content: Object.fromEntries(
            r.rawBody.types.map((t) => [t, { schema: { type: "string", contentMediaType: t } }]),
          ),
        }
      : r.body
        ? {
            required: r.bodyOptional !== true,
            content: { "application/json": { schema: toSchema(r.body, "input", named) } },
          }
        : undefined;
    const operation: Json = {
      operationId: r.operationId,
      summary: r.summary,
      description: [r.description, ROLE_WORDS[r.staffRole]].filter(Boolean).join("\n\n"),
      tags: [r.tag],
      "x-staff-role": r.staffRole,
      security,
      parameters,
      ...(requestBody ? { requestBody } : {}),
      responses,
    };
    paths[r.path] ??= {};
    (paths[r.path] as Json)[r.method.toLowerCase()] = operation;
  }
  const { schemas, render } = publish(named);
  schemas.Problem = problemSchema("docs/operator.md");
  return {
    openapi: "3.1.0",
    info: {
      title: "Backline admin API",
      version: ADMIN_API_VERSION,
      summary:
        "The operator's desk of one tenant: review, deliveries, takedowns, OAC, jobs, royalty imports, accounts, stores and settings.",
      description:
        "Every request carries either the tenant's service-role key (`apikey: <key>`), acting as the tenant's admin, or a staff " +
        "user's access token (`apikey: <the tenant's anon key>` and `Authorization: Bearer <access token>`), acting with the user's " +
        "staff role; `Backline-Tenant` names the tenant a staff member of several acts on. Each operation names the role it needs " +
        "(`x-staff-role`). Errors are RFC 9457 problem details with `code`, `param` and `request_id`. Lists are pages: `limit` " +
        "(1–100) and `starting_after` (the last id of the previous page) give `{data, has_more}`. See docs/operator.md.",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [{ url: serverUrl, description: "This Backline server." }],
    security: [{ serviceKey: [] }, { staffToken: [] }],
    tags: tags.map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? name })),
    paths: render(paths),
    components: {
      schemas,
      securitySchemes: {
        serviceKey: {
          type: "apiKey",
          in: "header",
          name: "apikey",
          description:
            "The tenant's service-role key (`backline tenants keys <tenant>`): the tenant's admin.",
        },
        staffToken: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description:
            "A staff user's access token from /auth/v1, sent with the user's tenant's anon key in the `apikey` header.",
        },
      },
      headers: { ...SHARED_HEADERS, ...ADMIN_HEADERS },
      parameters: {
        BacklineTenant: {
          name: "Backline-Tenant",
          in: "header",
          required: false,
          description:
            "The tenant to act on, for staff of several tenants (default: the token's own tenant).",
          schema: { type: "string", format: "uuid" },
        },
      },
    },
  };
}
