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
// A tenant found is answered from memory for this long (a rotated key or a renamed tenant shows
// within it, as the tenant directory's cache does); the map is bounded.
const TTL_MS = 10_000;
const MAX_ENTRIES = 1000;

interface TenantConfig {
  id: string;
  slug: string;
  name: string;
  anon_key: string;
  url: string;
}

export async function tenantConfigRoutes(app: FastifyInstance, options: TenantConfigOptions): Promise<void> {
  const { db, publicUrl, defaultTenant } = options;
  const cache = new Map<string, { value: TenantConfig; until: number }>();
  const lookup = async (slug: string | undefined): Promise<TenantConfig | undefined> => {
    const key = slug ?? "";
    const hit = cache.get(key);
    if (hit && hit.until > Date.now()) return hit.value;
    const value = await find(slug);
    // Only tenants found are kept: a tenant made a moment ago is found at once.
    if (value) {
      if (cache.size >= MAX_ENTRIES) cache.clear();
      cache.set(key, { value, until: Date.now() + TTL_MS });
    }
    return value;
  };
  const find = async (slug: string | undefined): Promise<TenantConfig | undefined> => {
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
    return tenant && keys ? { ...tenant, anon_key: keys.anon_key, url: publicUrl } : undefined;
  };

  app.get("/console/tenant.json", async (request, reply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    const given = query.slug;
    if (given !== undefined && (typeof given !== "string" || !SLUG.test(given))) {
      throw new HttpError(400, "invalid_request", "slug must be a tenant's slug (a-z, 0-9 and -).", "slug");
    }
    const slug = (given as string | undefined) ?? defaultTenant;
    const found = await lookup(slug);
    if (!found) {
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
    return found;
  });
}
