/**
 * Where a tenant's portal answers (docs/portal.md): at its own domain when it has named one in
 * `settings.portal.domains` (host names pointed at this server), else at
 * `<PUBLIC_URL>/portal/t/<slug>/`. The links of the mails Backline sends for a tenant with no
 * `settings.auth.site_url` of its own land in the portal under PUBLIC_URL (`portalPathUrl`): a
 * tenant whose portal is at its own domain sets its site_url to that address (docs/portal.md).
 */

const HOST = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

/** A host name as a tenant may record it: lower-case, no scheme, port, path or trailing dot. */
export function isPortalDomain(value: unknown): value is string {
  return typeof value === "string" && HOST.test(value);
}

/** The host names a tenant's portal answers at (`settings.portal.domains`), the valid ones only. */
export function portalDomains(settings: Record<string, unknown> | undefined): string[] {
  const portal = settings?.portal;
  if (!portal || typeof portal !== "object") return [];
  const domains = (portal as { domains?: unknown }).domains;
  return Array.isArray(domains) ? domains.filter(isPortalDomain) : [];
}

/** The tenant's portal under PUBLIC_URL, ending in a slash: `<PUBLIC_URL>/portal/t/<slug>/`. */
export function portalPathUrl(publicUrl: string, slug: string): string {
  const base = new URL(publicUrl);
  return `${base.origin}${base.pathname.replace(/\/+$/, "")}/portal/t/${encodeURIComponent(slug)}/`;
}

/**
 * The portal's address for a tenant, ending in a slash: its first domain (with PUBLIC_URL's
 * scheme, since a deployment that serves its domains serves them as it serves PUBLIC_URL), else
 * its path under PUBLIC_URL.
 */
export function portalUrl(
  publicUrl: string,
  tenant: { slug: string; settings?: Record<string, unknown> | undefined },
): string {
  const base = new URL(publicUrl);
  const [domain] = portalDomains(tenant.settings);
  if (domain) return `${base.protocol}//${domain}/portal/`;
  return portalPathUrl(publicUrl, tenant.slug);
}

/**
 * Whether a redirect target is one of this server's own apps for this tenant: the console or the
 * portal on PUBLIC_URL's origin, or the portal on one of the tenant's own domains. Mailed links may
 * lead there whatever the tenant's `redirect_urls` say.
 */
export function isOwnAppUrl(
  publicUrl: string,
  tenant: { settings?: Record<string, unknown> | undefined },
  url: string,
): boolean {
  let parsed: URL;
  let own: URL;
  try {
    parsed = new URL(url);
    own = new URL(publicUrl);
  } catch {
    return false;
  }
  const under = (prefix: string) => parsed.pathname === prefix || parsed.pathname.startsWith(`${prefix}/`);
  if (parsed.origin === own.origin) return under("/console") || under("/portal");
  return (
    parsed.protocol === own.protocol &&
    parsed.port === "" &&
    portalDomains(tenant.settings).includes(parsed.hostname) &&
    under("/portal")
  );
}
