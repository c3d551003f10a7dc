import type { FastifyInstance } from "fastify";
import { authSettings } from "../auth/settings.ts";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import { isPortalDomain, portalUrl } from "../portal/links.ts";
import { customCssPath } from "../tenancy/brand-assets.ts";
import { getTenantKeys } from "../tenancy/tenants.ts";

/**
 * What a web app with no key baked in needs to call a tenant's /auth/v1, one tenant per request,
 * never a list. Public: an anon key is publishable (it is in every web page that uses supabase-js)
 * and opens nothing without a user's token or the policies' consent.
 *
 * - GET /console/tenant.json[?slug=<slug>] (docs/console.md, "Which tenant the console signs in
 *   to"): `{ id, slug, name, anon_key, url }`. Without `slug`: CONSOLE_TENANT, else the
 *   development tenant; 404 not_found when there is none or the slug is unknown.
 * - GET /portal/tenant.json[?slug=<slug>] (docs/portal.md, "Which tenant"): the same and the
 *   tenant's branding and sign-up policy. The request's host name first (a tenant's own domain,
 *   `settings.portal.domains`; a `slug` naming another tenant there is 404), then `slug` (the
 *   portal's `/portal/t/<slug>` paths), then the development tenant; 404 no_portal otherwise.
 *
 * Its own small plugin with exact routes: the apps' static files (/console/*, /portal/*) are
 * served by another plugin, and an exact route wins over a wildcard in Fastify's router.
 */
export interface TenantConfigOptions {
  db: Db;
  publicUrl: string;
  /** CONSOLE_TENANT: the console's default tenant's slug; undefined: the development tenant. */
  defaultTenant: string | undefined;
}

const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
// A tenant found is answered from memory for this long (a rotated key, a renamed tenant or new
// branding shows within it, as the tenant directory's cache does); the map is bounded.
const TTL_MS = 10_000;
const MAX_ENTRIES = 1000;

export interface Branding {
  display_name: string;
  logo_url: string | null;
  primary_color: string | null;
  support_email: string | null;
  /** The custom CSS's address (with a digest of its text), when the tenant has some. */
  custom_css_url: string | null;
}

interface Found {
  id: string;
  slug: string;
  name: string;
  anon_key: string;
  url: string;
  settings: Record<string, unknown>;
  branding: Branding;
}

type Key = { by: "slug"; slug: string } | { by: "domain"; host: string } | { by: "development" };

export async function tenantConfigRoutes(app: FastifyInstance, options: TenantConfigOptions): Promise<void> {
  const { db, publicUrl, defaultTenant } = options;
  const cache = new Map<string, { value: Found; until: number }>();
  const lookup = async (key: Key): Promise<Found | undefined> => {
    const id = JSON.stringify(key);
    const hit = cache.get(id);
    if (hit && hit.until > Date.now()) return hit.value;
    const value = await find(key);
    // Only tenants found are kept: a tenant made a moment ago is found at once.
    if (value) {
      if (cache.size >= MAX_ENTRIES) cache.clear();
      cache.set(id, { value, until: Date.now() + TTL_MS });
    }
    return value;
  };
  const find = async (key: Key): Promise<Found | undefined> => {
    const [where, params] =
      key.by === "slug"
        ? ["t.slug = $1", [key.slug]]
        : key.by === "domain"
          ? ["(t.settings #> '{portal,domains}') @> jsonb_build_array($1::text)", [key.host]]
          : ["t.is_development", []];
    const tenant = await db.asService(
      async (tx) =>
        (
          await tx.query<{
            id: string;
            slug: string;
            name: string;
            settings: Record<string, unknown>;
            logo_url: string | null;
            primary_color: string | null;
            support_email: string | null;
            custom_css: string | null;
          }>(
            `select t.id, t.slug, coalesce(nullif(btrim(o.display_name), ''), t.name) as name, t.settings,
                    o.logo_url, o.primary_color, o.support_email, o.custom_css
             from internal.tenants t left join internal.organization_settings o on o.tenant_id = t.id
             where ${where}
             order by t.created_at, t.id limit 1`,
            params,
          )
        ).rows[0],
      { readOnly: true },
    );
    const keys = tenant ? await getTenantKeys(db, tenant.id) : undefined;
    if (!tenant || !keys) return undefined;
    return {
      id: tenant.id,
      slug: tenant.slug,
      name: tenant.name,
      anon_key: keys.anon_key,
      url: publicUrl,
      settings: tenant.settings,
      branding: {
        display_name: tenant.name,
        logo_url: tenant.logo_url,
        primary_color: tenant.primary_color,
        support_email: tenant.support_email,
        custom_css_url: customCssPath(tenant.id, tenant.custom_css) ?? null,
      },
    };
  };

  const slugOf = (query: unknown): string | undefined => {
    const given = ((query ?? {}) as Record<string, unknown>).slug;
    if (given !== undefined && (typeof given !== "string" || !SLUG.test(given))) {
      throw new HttpError(400, "invalid_request", "slug must be a tenant's slug (a-z, 0-9 and -).", "slug");
    }
    return given as string | undefined;
  };

  app.get("/console/tenant.json", async (request, reply) => {
    const slug = slugOf(request.query) ?? defaultTenant;
    const found = await lookup(slug === undefined ? { by: "development" } : { by: "slug", slug });
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
    return { id: found.id, slug: found.slug, name: found.name, anon_key: found.anon_key, url: found.url };
  });

  app.get("/portal/tenant.json", async (request, reply) => {
    const slug = slugOf(request.query);
    const host = request.hostname.toLowerCase().replace(/\.$/, "");
    const byDomain = isPortalDomain(host) ? await lookup({ by: "domain", host }) : undefined;
    let found: Found | undefined;
    let via: "domain" | "slug" | "development";
    if (byDomain) {
      // A tenant's own domain shows that tenant only: never another tenant under its name.
      found = slug === undefined || slug === byDomain.slug ? byDomain : undefined;
      via = "domain";
    } else if (slug !== undefined) {
      found = await lookup({ by: "slug", slug });
      via = "slug";
    } else {
      found = await lookup({ by: "development" });
      via = "development";
    }
    reply.header("cache-control", "no-cache");
    if (!found) {
      throw new HttpError(404, "no_portal", "There is no portal at this address.", slug ? "slug" : undefined);
    }
    const auth = authSettings(found.settings);
    return {
      id: found.id,
      slug: found.slug,
      name: found.name,
      anon_key: found.anon_key,
      url: found.url,
      via,
      portal_url: portalUrl(publicUrl, found),
      branding: found.branding,
      signup: !auth.disable_signup,
    };
  });
}
