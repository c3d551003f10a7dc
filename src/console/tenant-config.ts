import type { FastifyInstance } from "fastify";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import { getTenantKeys } from "../tenancy/tenants.ts";

/**
 * GET /console/tenant.json[?slug=<slug>] (docs/console.md, "Which tenant the console signs in
 * to"): what the console, a page with no key baked in, needs to call a tenant's /auth/v1 —
 * `{ id, slug, name, anon_key, url }`. Public: an anon key is publishable (it is in every web
 * page that uses supabase-js) and opens nothing without a user's token or the policies' consent.
 * One tenant per request, by its slug, never a list. Without `slug`: CONSOLE_TENANT, else the
 * development tenant; 404 not_found when there is none or the slug is unknown.
 *
 * Its own small plugin with one exact route: the console's static files (/console/*) are served
 * by another plugin, and an exact route wins over a wildcard in Fastify's router.
 */
export interface TenantConfigOptions {
  db: Db;
  publicUrl: string;
  /** CONSOLE_TENANT: the default tenant's slug; undefined: the development tenant. */
  defaultTenant: string | undefined;
}

const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;

export async function tenantConfigRoutes(app: FastifyInstance, options: TenantConfigOptions): Promise<void> {
  const { db, publicUrl, defaultTenant } = options;
  app.get("/console/tenant.json", async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const given = query.slug;
    if (given !== undefined && (typeof given !== "string" || !SLUG.test(given))) {
      throw new HttpError(400, "invalid_request", "slug must be a tenant's slug (a-z, 0-9 and -).", "slug");
    }
    const slug = (given as string | undefined) ?? defaultTenant;
    const tenant = await db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string; slug: string; name: string }>(
            `select t.id, t.slug, coalesce(nullif(btrim(o.display_name), ''), t.name) as name
             from internal.tenants t left join internal.organization_settings o on o.tenant_id = t.id
             where ${slug === undefined ? "t.is_development" : "t.slug = $1"}
             order by t.created_at, t.id limit 1`,
            slug === undefined ? [] : [slug],
          )
        ).rows[0],
      { readOnly: true },
    );
    const keys = tenant ? await getTenantKeys(db, tenant.id) : undefined;
    if (!tenant || !keys) {
      throw new HttpError(
        404,
        "not_found",
        slug === undefined
          ? "This installation names no default tenant for the console."
          : `No tenant ${slug}.`,
        slug === undefined ? undefined : "slug",
      );
    }
    // A rotated key must reach browsers soon; the answer is cheap.
    reply.header("cache-control", "no-cache");
    return { id: tenant.id, slug: tenant.slug, name: tenant.name, anon_key: keys.anon_key, url: publicUrl };
  });
}
