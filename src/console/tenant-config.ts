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
 *   to"): `{ id, slug, name, anon_key, url, branding }`. Without `slug`: CONSOLE_TENANT, else the
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

/** A slug given in the query, checked (400 when it cannot be a tenant's slug). */
function slugOf(query: unknown): string | undefined {
  const given = ((query ?? {}) as Record<string, unknown>).slug;
  if (given !== undefined && (typeof given !== "string" || !SLUG.test(given))) {
    throw new HttpError(400, "invalid_request", "slug must be a tenant's slug (a-z, 0-9 and -).", "slug");
  }
  return given as string | undefined;
}

/** What GET /portal/tenant.json answers (docs/portal.md, "Which tenant"). */
export interface PortalTenantAnswer {
  id: string;
  slug: string;
  name: string;
  anon_key: string;
  url: string;
  via: "domain" | "slug" | "development";
  portal_url: string;
  branding: Branding;
  signup: boolean;
  /** Whether the tenant turned passkeys on (settings.auth.passkeys): the sign-in page's button. */
  passkeys: boolean;
}

/**
 * Which tenant an address shows, with a short memory. One per app: the tenant files' routes
 * below and the portal's start page (src/console/static.ts writes the portal's answer into its
 * index.html, so the app starts without a round trip to ask) both ask it.
 */
export class TenantConfigs {
  readonly #db: Db;
  readonly #publicUrl: string;
  readonly #defaultTenant: string | undefined;
  readonly #cache = new Map<string, { value: Found; until: number }>();

  constructor(options: TenantConfigOptions) {
    this.#db = options.db;
    this.#publicUrl = options.publicUrl;
    this.#defaultTenant = options.defaultTenant;
  }

  async #lookup(key: Key): Promise<Found | undefined> {
    const id = JSON.stringify(key);
    const hit = this.#cache.get(id);
    if (hit && hit.until > Date.now()) return hit.value;
    const value = await this.#find(key);
    // Only tenants found are kept: a tenant made a moment ago is found at once.
    if (value) {
      if (this.#cache.size >= MAX_ENTRIES) this.#cache.clear();
      this.#cache.set(id, { value, until: Date.now() + TTL_MS });
    }
    return value;
  }

  async #find(key: Key): Promise<Found | undefined> {
    const [where, params] =
      key.by === "slug"
        ? ["t.slug = $1", [key.slug]]
        : key.by === "domain"
          ? ["(t.settings #> '{portal,domains}') @> jsonb_build_array($1::text)", [key.host]]
          : ["t.is_development", []];
    const tenant = await this.#db.asService(
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
    const keys = tenant ? await getTenantKeys(this.#db, tenant.id) : undefined;
    if (!tenant || !keys) return undefined;
    return {
      id: tenant.id,
      slug: tenant.slug,
      name: tenant.name,
      anon_key: keys.anon_key,
      url: this.#publicUrl,
      settings: tenant.settings,
      branding: {
        display_name: tenant.name,
        logo_url: tenant.logo_url,
        primary_color: tenant.primary_color,
        support_email: tenant.support_email,
        custom_css_url: customCssPath(tenant.id, tenant.custom_css) ?? null,
      },
    };
  }

  /** The console's tenant: `slug`, else CONSOLE_TENANT, else the development tenant. */
  async console(slug: string | undefined) {
    const wanted = slug ?? this.#defaultTenant;
    const found = await this.#lookup(
      wanted === undefined ? { by: "development" } : { by: "slug", slug: wanted },
    );
    if (!found) {
      throw new HttpError(
        404,
        "not_found",
        wanted === undefined
          ? "This installation names no default tenant for the console."
          : `No tenant ${wanted}.`,
        wanted === undefined ? undefined : "slug",
      );
    }
    return {
      id: found.id,
      slug: found.slug,
      name: found.name,
      anon_key: found.anon_key,
      url: found.url,
      // The console wears the tenant's branding too (its name and colour in the header).
      branding: found.branding,
    };
  }

  /**
   * The portal's tenant at this address: the host name first (a tenant's own domain; a `slug`
   * naming another tenant there is none), then `slug` (the `/portal/t/<slug>` paths), then the
   * development tenant; undefined when there is no portal here.
   */
  async portal(host: string, slug: string | undefined): Promise<PortalTenantAnswer | undefined> {
    const name = host.toLowerCase().replace(/\.$/, "");
    const byDomain = isPortalDomain(name) ? await this.#lookup({ by: "domain", host: name }) : undefined;
    let found: Found | undefined;
    let via: PortalTenantAnswer["via"];
    if (byDomain) {
      // A tenant's own domain shows that tenant only: never another tenant under its name.
      found = slug === undefined || slug === byDomain.slug ? byDomain : undefined;
      via = "domain";
    } else if (slug !== undefined) {
      found = await this.#lookup({ by: "slug", slug });
      via = "slug";
    } else {
      found = await this.#lookup({ by: "development" });
      via = "development";
    }
    if (!found) return undefined;
    const auth = authSettings(found.settings);
    return {
      id: found.id,
      slug: found.slug,
      name: found.name,
      anon_key: found.anon_key,
      url: found.url,
      via,
      portal_url: portalUrl(this.#publicUrl, found),
      branding: found.branding,
      signup: !auth.disable_signup,
      passkeys: auth.passkeys,
    };
  }
}

export async function tenantConfigRoutes(
  app: FastifyInstance,
  options: { tenants: TenantConfigs },
): Promise<void> {
  const { tenants } = options;

  app.get("/console/tenant.json", async (request, reply) => {
    const answer = await tenants.console(slugOf(request.query));
    // A rotated key must reach browsers soon; the answer is cheap.
    reply.header("cache-control", "no-cache");
    return answer;
  });

  app.get("/portal/tenant.json", async (request, reply) => {
    const slug = slugOf(request.query);
    const found = await tenants.portal(request.hostname, slug);
    reply.header("cache-control", "no-cache");
    if (!found) {
      throw new HttpError(404, "no_portal", "There is no portal at this address.", slug ? "slug" : undefined);
    }
    return found;
  });
}
