import { z } from "zod";
import { FieldsError } from "../admin/errors.ts";
import { type AnyAdminRoute, adminRoute, IdParams, iso, Uuid } from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import type { FieldError } from "../http/field-errors.ts";
import { Timestamp } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";

/**
 * A tenant's own scripts on its portal (docs/operator.md, "Custom scripts on the portal"):
 * analytics or a chat widget, as external script addresses its admin lists, loaded by that
 * tenant's portal page only and added to that page's Content-Security-Policy (script-src for the
 * script's origin; connect-src for it and the origins it says it talks to). Off unless enabled:
 * a tenant with no enabled script gets the portal's own policy, which loads nothing from another
 * origin. No inline code: a script is an address, optionally pinned by Subresource Integrity.
 *
 *   GET    /admin/v1/custom-scripts        the tenant's scripts
 *   POST   /admin/v1/custom-scripts        add one (enabled false unless said)
 *   GET    /admin/v1/custom-scripts/{id}
 *   PATCH  /admin/v1/custom-scripts/{id}   change any field, enable or disable
 *   DELETE /admin/v1/custom-scripts/{id}
 *
 * Tenant admins (or the tenant's service-role key) of that tenant; another tenant's script is
 * not_found exactly as a missing one is. Every change is in the audit log (internal.custom_scripts,
 * migration 0053's trigger). The database checks the address and origins again (its CHECKs).
 */

/** How many scripts a tenant may list (enabled or not). */
export const MAX_SCRIPTS = 20;
/** How many extra origins one script may connect to. */
export const MAX_CONNECT_ORIGINS = 10;
export const MAX_URL_LENGTH = 2048;

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);
// What a host name may be here (lowercase labels): no wildcard, no IP literal but loopback's.
const HOST = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;
// Never in an address written into a page or a header, even percent-decoded by nobody.
const UNSAFE = /[\s"'<>\\`*]/;

function allowedOrigin(url: URL): string | undefined {
  if (url.username || url.password) return "an address with a user name or password is not accepted";
  if (url.protocol === "https:") {
    if (!HOST.test(url.hostname) || /^[0-9.]+$/.test(url.hostname))
      return "the host must be a plain host name (no wildcard, no IP address)";
    return undefined;
  }
  if (url.protocol === "http:" && LOOPBACK.has(url.hostname)) return undefined;
  return "only https addresses are accepted (http only on loopback, for development)";
}

/** The script's address, checked and normalised; or why not. */
export function checkScriptUrl(input: string): { url: string; origin: string } | { error: string } {
  if (input.includes("*")) return { error: "wildcards are not accepted: name one address" };
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return { error: "not an absolute address (https://host/path.js)" };
  }
  const why = allowedOrigin(url);
  if (why) return { error: why };
  if (url.href.length > MAX_URL_LENGTH) return { error: `at most ${MAX_URL_LENGTH} characters` };
  if (UNSAFE.test(url.href)) return { error: "the address holds a character a script address cannot" };
  return { url: url.href, origin: url.origin };
}

/** An origin the script may connect to: scheme, host and port only. */
export function checkOrigin(input: string): { origin: string } | { error: string } {
  if (input.includes("*")) return { error: "wildcards are not accepted: name each origin" };
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return { error: "not an origin (https://host)" };
  }
  const why = allowedOrigin(url);
  if (why) return { error: why };
  if ((url.pathname !== "/" && url.pathname !== "") || url.search || url.hash) {
    return { error: "an origin has no path, query or fragment (https://host[:port])" };
  }
  return { origin: url.origin };
}

const Placement = z.enum(["head", "body_end"]);
const Integrity = z
  .string()
  .regex(
    /^sha(256|384|512)-[A-Za-z0-9+/]{43,86}={0,2}$/,
    "must be sha256-, sha384- or sha512- and a base64 digest",
  )
  .meta({
    description:
      "Subresource Integrity (`sha384-…`): the browser runs the file only if its digest matches. Recommended for a file that does not change.",
  });

const Fields = {
  name: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .meta({ description: "What it is, for the tenant's staff (unique in the tenant)." }),
  src: z.string().min(1).max(MAX_URL_LENGTH).meta({
    description:
      "The script's address: https (http only on localhost or 127.0.0.1, for development); no wildcard, user name or password.",
    example: "https://plausible.io/js/script.js",
  }),
  placement: Placement.meta({
    description: "`head`: loaded asynchronously in the page's head; `body_end`: at the end of the body.",
  }),
  connect_origins: z
    .array(z.string().min(1).max(300))
    .max(MAX_CONNECT_ORIGINS)
    .meta({
      description: `Other origins the script sends to or fetches from (https://host[:port]), at most ${MAX_CONNECT_ORIGINS}; its own origin is allowed already.`,
    }),
  integrity: Integrity.nullable(),
  enabled: z.boolean().meta({ description: "Whether the portal loads it. A new script is off unless said." }),
};

const NewScript = z
  .strictObject({
    name: Fields.name,
    src: Fields.src,
    placement: Fields.placement.default("head"),
    connect_origins: Fields.connect_origins.default([]),
    integrity: Fields.integrity.default(null),
    enabled: Fields.enabled.default(false),
  })
  .meta({ id: "NewCustomScript" });

const ScriptPatch = z
  .strictObject({
    name: Fields.name.optional(),
    src: Fields.src.optional(),
    placement: Fields.placement.optional(),
    connect_origins: Fields.connect_origins.optional(),
    integrity: Fields.integrity.optional(),
    enabled: Fields.enabled.optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: "name at least one field to change" })
  .meta({ id: "CustomScriptPatch" });

const CustomScript = z
  .object({
    id: Uuid,
    object: z.literal("custom_script"),
    name: z.string(),
    src: z.string(),
    origin: z.string().meta({ description: "The script's origin, added to the portal's script-src." }),
    placement: Placement,
    connect_origins: z.array(z.string()),
    integrity: z.string().nullable(),
    enabled: z.boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "CustomScript" });

interface ScriptRow {
  id: string;
  name: string;
  source: string;
  placement: "head" | "body_end";
  connect_origins: string[];
  integrity: string | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = "id, name, source, placement, connect_origins, integrity, enabled, created_at, updated_at";

function out(row: ScriptRow) {
  return {
    id: row.id,
    object: "custom_script" as const,
    name: row.name,
    src: row.source,
    origin: new URL(row.source).origin,
    placement: row.placement,
    connect_origins: row.connect_origins,
    integrity: row.integrity,
    enabled: row.enabled,
    created_at: iso(row.created_at) as string,
    updated_at: iso(row.updated_at) as string,
  };
}

/** The policy checks a well-formed body still has to pass: 422 listing every field refused. */
function policy(body: { src?: string | undefined; connect_origins?: string[] | undefined }) {
  const errors: FieldError[] = [];
  let src: string | undefined;
  let origins: string[] | undefined;
  if (body.src !== undefined) {
    const r = checkScriptUrl(body.src);
    if ("error" in r) errors.push({ param: "src", code: "invalid_value", message: `src: ${r.error}` });
    else src = r.url;
  }
  if (body.connect_origins !== undefined) {
    origins = [];
    for (const [i, given] of body.connect_origins.entries()) {
      const r = checkOrigin(given);
      if ("error" in r) {
        errors.push({
          param: `connect_origins[${i}]`,
          code: "invalid_value",
          message: `${given}: ${r.error}`,
        });
      } else if (!origins.includes(r.origin)) origins.push(r.origin);
    }
  }
  if (errors.length > 0) {
    throw new FieldsError(
      422,
      "invalid_script",
      errors.length === 1 ? (errors[0]?.message ?? "") : `${errors.length} fields are refused.`,
      errors,
    );
  }
  return { src, origins };
}

function conflictOr(error: unknown, name: string | undefined): never {
  if (asDbError(error)?.sqlstate === "23505") {
    throw new HttpError(409, "conflict", `this tenant already has a script named ${name}`, "name");
  }
  throw error;
}

async function scriptById(tx: Tx, tenantId: string, id: string): Promise<ScriptRow> {
  const row = (
    await tx.query<ScriptRow>(
      `select ${COLUMNS} from internal.custom_scripts where id = $1 and tenant_id = $2`,
      [id, tenantId],
    )
  ).rows[0];
  if (!row) throw new HttpError(404, "not_found", `no custom script ${id}`, "id");
  return row;
}

const TAG = "Custom scripts";

export function customScriptSpecs(options: { db: Db }): AnyAdminRoute[] {
  const { db } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/custom-scripts",
      operationId: "listCustomScripts",
      summary: "The scripts this tenant's portal may load",
      description: "Every script of the tenant, enabled or not, in the order they were added.",
      tag: TAG,
      staffRole: "admin",
      response: {
        status: 200,
        description: "The tenant's scripts.",
        schema: z.object({ data: z.array(CustomScript) }).meta({ id: "CustomScriptList" }),
      },
      handler: async ({ tenantId }) => {
        const rows = await db.asService(
          async (tx) =>
            (
              await tx.query<ScriptRow>(
                `select ${COLUMNS} from internal.custom_scripts where tenant_id = $1 order by created_at, id`,
                [tenantId],
              )
            ).rows,
          { readOnly: true },
        );
        return { data: rows.map(out) };
      },
    }),
    adminRoute({
      method: "POST",
      path: "/custom-scripts",
      operationId: "createCustomScript",
      summary: "Add a script to this tenant's portal",
      description:
        `An external script's address, loaded by this tenant's portal page only, its origin (and \`connect_origins\`) added ` +
        `to that page's Content-Security-Policy while it is enabled. Off unless \`enabled\` is true. At most ${MAX_SCRIPTS} ` +
        "scripts a tenant (422 too_many_scripts); an address or origin that is not https (loopback http aside), names a " +
        "wildcard or carries a user name is 422 invalid_script, every refused field listed.",
      tag: TAG,
      staffRole: "admin",
      body: NewScript,
      response: { status: 201, description: "The script.", schema: CustomScript },
      errors: [409, 422],
      handler: async ({ tenantId, body, reply }) => {
        const { src, origins } = policy(body);
        const row = await db.asService(async (tx) => {
          // One tenant's inserts one at a time, so the count below holds.
          await tx.query("select 1 from internal.tenants where id = $1 for update", [tenantId]);
          const n = (
            await tx.query<{ n: number }>(
              "select count(*)::int as n from internal.custom_scripts where tenant_id = $1",
              [tenantId],
            )
          ).rows[0]?.n;
          if ((n ?? 0) >= MAX_SCRIPTS) {
            throw new HttpError(
              422,
              "too_many_scripts",
              `a tenant lists at most ${MAX_SCRIPTS} scripts: remove one first`,
            );
          }
          try {
            return (
              await tx.query<ScriptRow>(
                `insert into internal.custom_scripts (tenant_id, name, source, placement, connect_origins, integrity, enabled)
                 values ($1, $2, $3, $4, $5, $6, $7) returning ${COLUMNS}`,
                [tenantId, body.name, src, body.placement, origins, body.integrity, body.enabled],
              )
            ).rows[0] as ScriptRow;
          } catch (error) {
            conflictOr(error, body.name);
          }
        });
        reply.status(201);
        return out(row);
      },
    }),
    adminRoute({
      method: "GET",
      path: "/custom-scripts/{id}",
      operationId: "getCustomScript",
      summary: "One of this tenant's scripts",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      response: { status: 200, description: "The script.", schema: CustomScript },
      errors: [404],
      handler: async ({ tenantId, params }) =>
        out(await db.asService((tx) => scriptById(tx, tenantId, params.id), { readOnly: true })),
    }),
    adminRoute({
      method: "PATCH",
      path: "/custom-scripts/{id}",
      operationId: "updateCustomScript",
      summary: "Change, enable or disable one of this tenant's scripts",
      description: "Only the fields sent change. The portal's next page load follows.",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      body: ScriptPatch,
      response: { status: 200, description: "The script.", schema: CustomScript },
      errors: [404, 409, 422],
      handler: async ({ tenantId, params, body }) => {
        const { src, origins } = policy(body);
        const row = await db.asService(async (tx) => {
          await scriptById(tx, tenantId, params.id);
          try {
            return (
              await tx.query<ScriptRow>(
                `update internal.custom_scripts set
                   name = coalesce($3, name), source = coalesce($4, source), placement = coalesce($5, placement),
                   connect_origins = coalesce($6, connect_origins),
                   integrity = case when $7::boolean then $8 else integrity end,
                   enabled = coalesce($9, enabled)
                 where id = $1 and tenant_id = $2 returning ${COLUMNS}`,
                [
                  params.id,
                  tenantId,
                  body.name ?? null,
                  src ?? null,
                  body.placement ?? null,
                  origins ?? null,
                  body.integrity !== undefined,
                  body.integrity ?? null,
                  body.enabled ?? null,
                ],
              )
            ).rows[0] as ScriptRow;
          } catch (error) {
            conflictOr(error, body.name);
          }
        });
        return out(row);
      },
    }),
    adminRoute({
      method: "DELETE",
      path: "/custom-scripts/{id}",
      operationId: "deleteCustomScript",
      summary: "Remove one of this tenant's scripts",
      tag: TAG,
      staffRole: "admin",
      params: IdParams,
      response: {
        status: 200,
        description: "Removed.",
        schema: z
          .object({ id: Uuid, object: z.literal("custom_script"), deleted: z.literal(true) })
          .meta({ id: "DeletedCustomScript" }),
      },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        await db.asService(async (tx) => {
          const r = await tx.query("delete from internal.custom_scripts where id = $1 and tenant_id = $2", [
            params.id,
            tenantId,
          ]);
          if (r.rowCount === 0) throw new HttpError(404, "not_found", `no custom script ${params.id}`, "id");
        });
        return { id: params.id, object: "custom_script" as const, deleted: true as const };
      },
    }),
  ];
}

/** What a tenant's portal page loads besides its own files, and what its CSP then allows. */
export interface PageScripts {
  scripts: { src: string; placement: "head" | "body_end"; integrity: string | null }[];
  scriptOrigins: string[];
  connectOrigins: string[];
}

/**
 * The enabled scripts of a tenant's portal as served at `host` (none: undefined, the portal's own
 * policy). Only at a host that is the tenant's own portal domain and no other tenant's: a host
 * several tenants or the console share is one origin, whose localStorage holds all their sessions
 * (the caller also refuses PUBLIC_URL's host, whatever a tenant's settings name).
 */
export async function portalScripts(
  db: Db,
  tenantId: string,
  host: string,
): Promise<PageScripts | undefined> {
  const rows = await db.asService(
    async (tx) =>
      (
        await tx.query<Pick<ScriptRow, "source" | "placement" | "integrity" | "connect_origins">>(
          `select source, placement, integrity, connect_origins from internal.custom_scripts
           where tenant_id = $1 and enabled
             and (select array_agg(t.id) from internal.tenants t
                  where coalesce(t.settings #> '{portal,domains}', '[]'::jsonb) ? $2) = array[$1::uuid]
           order by created_at, id`,
          [tenantId, host],
        )
      ).rows,
    { readOnly: true },
  );
  if (rows.length === 0) return undefined;
  const scriptOrigins = new Set<string>();
  const connectOrigins = new Set<string>();
  const scripts: PageScripts["scripts"] = [];
  for (const row of rows) {
    // Checked again on the way out: a row the rules would refuse today is left off the page.
    const checked = checkScriptUrl(row.source);
    if ("error" in checked) continue;
    scripts.push({ src: checked.url, placement: row.placement, integrity: row.integrity });
    scriptOrigins.add(checked.origin);
    connectOrigins.add(checked.origin);
    for (const o of row.connect_origins) {
      const c = checkOrigin(o);
      if ("origin" in c) connectOrigins.add(c.origin);
    }
  }
  return { scripts, scriptOrigins: [...scriptOrigins], connectOrigins: [...connectOrigins] };
}

const escapeAttr = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** The script elements of a placement, as HTML. */
export function scriptTags(scripts: PageScripts["scripts"], placement: "head" | "body_end"): string {
  return scripts
    .filter((s) => s.placement === placement)
    .map((s) => {
      const sri = s.integrity ? ` integrity="${escapeAttr(s.integrity)}" crossorigin="anonymous"` : "";
      return `<script src="${escapeAttr(s.src)}"${placement === "head" ? " async" : ""}${sri}></script>`;
    })
    .join("");
}
