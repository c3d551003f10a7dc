import type { Db } from "../db/db.ts";
import { isPortalDomain, portalDomains } from "./links.ts";

export class PortalDomainError extends Error {
  override name = "PortalDomainError";
}

/**
 * `backline tenants set-portal-domains` (docs/portal.md, "Custom domains"): the host names whose
 * requests show this tenant's portal, kept in `settings.portal.domains`. Lower-cased; each must be
 * a host name (no scheme, port or path), and none may be another tenant's. An empty list removes
 * them.
 *
 * Mailed links follow: when the tenant has no `settings.auth.site_url`, or its site_url is the
 * portal of one of its previous domains, it becomes `<scheme>//<first domain>/portal/` (removed
 * with the last domain); a site_url of the tenant's own app is left alone. `scheme` is PUBLIC_URL's.
 */
export async function setPortalDomains(
  db: Db,
  tenantId: string,
  given: string[],
  scheme: string,
): Promise<{ domains: string[]; siteUrl: string | null; siteUrlChanged: boolean }> {
  const domains = [...new Set(given.map((d) => d.trim().toLowerCase().replace(/\.$/, "")).filter(Boolean))];
  for (const d of domains)
    if (!isPortalDomain(d))
      throw new PortalDomainError(
        `${JSON.stringify(d)} is not a host name (such as music.example.com: no scheme, port or path)`,
      );
  if (domains.length > 20) throw new PortalDomainError("at most 20 domains per tenant");
  return db.asService(async (tx) => {
    // One tenant per domain: the domain decides which portal a request shows.
    await tx.query("lock table internal.tenants in share row exclusive mode");
    const taken = await tx.query<{ slug: string; domain: string }>(
      `select t.slug, d.domain from internal.tenants t,
         jsonb_array_elements_text(coalesce(t.settings #> '{portal,domains}', '[]'::jsonb)) as d(domain)
       where t.id <> $1 and d.domain = any ($2::text[])`,
      [tenantId, domains],
    );
    const clash = taken.rows[0];
    if (clash)
      throw new PortalDomainError(`${clash.domain} is already the portal domain of tenant ${clash.slug}`);
    const before = (
      await tx.query<{ settings: Record<string, unknown> }>(
        "select settings from internal.tenants where id = $1 for update",
        [tenantId],
      )
    ).rows[0]?.settings;
    const auth = (before?.auth ?? {}) as { site_url?: unknown };
    const current = typeof auth.site_url === "string" ? auth.site_url : null;
    const portalOf = (d: string) => `${scheme}//${d}/portal/`;
    const ours = current === null || portalDomains(before).some((d) => portalOf(d) === current);
    const first = domains[0];
    const siteUrl = ours ? (first ? portalOf(first) : null) : current;
    await tx.query(
      `update internal.tenants
       set settings = jsonb_set(
         case when $3::text is null then settings #- '{auth,site_url}'
              else jsonb_set(settings, '{auth}', coalesce(settings -> 'auth', '{}'::jsonb) || jsonb_build_object('site_url', $3::text))
         end,
         '{portal}', coalesce(settings -> 'portal', '{}'::jsonb) || jsonb_build_object('domains', $2::jsonb))
       where id = $1`,
      [tenantId, JSON.stringify(domains), siteUrl],
    );
    return { domains, siteUrl, siteUrlChanged: siteUrl !== current };
  });
}
