/**
 * /auth/v1, GoTrue's endpoints as supabase-js calls them, with the tenant's anon key. Plain fetch:
 * the console needs sign-in (password, e-mailed code or link), refresh and sign-out only.
 */
import { ApiError, errorFrom } from "./errors.ts";
import { type AuthSession, getSession, setSession, type TenantConfig } from "./session.ts";

const LAST_TENANT = "backline-console-tenant";

/** The slug last signed in to on this browser (a link's landing page uses it), if any. */
export function lastTenantSlug(): string | undefined {
  try {
    return localStorage.getItem(LAST_TENANT) ?? undefined;
  } catch {
    return undefined;
  }
}

function rememberTenant(tenant: TenantConfig) {
  try {
    localStorage.setItem(LAST_TENANT, tenant.slug);
  } catch {
    // No storage: nothing to remember.
  }
}

/** The tenant a GoTrue access token was issued by (its tenant_id claim). */
function tokenTenant(token: string): string | undefined {
  try {
    const payload = token.split(".")[1] ?? "";
    const json = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
    return (JSON.parse(json) as { tenant_id?: string }).tenant_id;
  } catch {
    return undefined;
  }
}

export async function loadTenantConfig(slug?: string): Promise<TenantConfig> {
  const query = slug ? `?slug=${encodeURIComponent(slug)}` : "";
  const response = await fetch(`/console/tenant.json${query}`, { headers: { accept: "application/json" } });
  if (!response.ok) {
    const error = await errorFrom(response);
    if (response.status === 404)
      throw new ApiError(
        404,
        "unknown_tenant",
        slug ? `No tenant is called “${slug}”.` : "This installation has no default tenant: enter its slug.",
        "tenant",
      );
    throw error;
  }
  return (await response.json()) as TenantConfig;
}

async function gotrue(tenant: TenantConfig, path: string, init: RequestInit = {}): Promise<unknown> {
  const response = await fetch(`/auth/v1${path}`, {
    ...init,
    headers: { apikey: tenant.anon_key, "content-type": "application/json", ...(init.headers ?? {}) },
  });
  if (!response.ok) throw await errorFrom(response);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

function sessionFrom(body: Record<string, unknown>): AuthSession {
  const expiresIn = Number(body.expires_in ?? 3600);
  const user = body.user as { id: string; email?: string } | undefined;
  return {
    access_token: String(body.access_token),
    refresh_token: String(body.refresh_token),
    expires_at: Number(body.expires_at ?? Math.floor(Date.now() / 1000) + expiresIn),
    ...(user ? { user: { id: user.id, ...(user.email ? { email: user.email } : {}) } } : {}),
  };
}

export async function signInWithPassword(tenant: TenantConfig, email: string, password: string) {
  const body = (await gotrue(tenant, "/token?grant_type=password", {
    method: "POST",
    body: JSON.stringify({ email, password }),
  })) as Record<string, unknown>;
  rememberTenant(tenant);
  setSession({ tenant, session: sessionFrom(body) });
}

/**
 * Mails a sign-in link and code. GoTrue's /otp when the server has it, else the recovery mail
 * (its link and code sign the user in too). Returns the verify type the code is for.
 */
export async function sendSignInCode(tenant: TenantConfig, email: string): Promise<string> {
  // The link lands back here, on this tenant, as a sign-in (not a password reset).
  const redirect = `${location.origin}/console/auth/callback?tenant=${encodeURIComponent(tenant.slug)}&via=code`;
  try {
    await gotrue(tenant, `/otp?redirect_to=${encodeURIComponent(redirect)}`, {
      method: "POST",
      body: JSON.stringify({ email, create_user: false }),
    });
    return "magiclink";
  } catch (error) {
    if (!(error instanceof ApiError) || (error.status !== 404 && error.status !== 405)) throw error;
  }
  await gotrue(tenant, `/recover?redirect_to=${encodeURIComponent(redirect)}`, {
    method: "POST",
    body: JSON.stringify({ email }),
  });
  return "recovery";
}

export async function verifyCode(tenant: TenantConfig, email: string, token: string, type: string) {
  const body = (await gotrue(tenant, "/verify", {
    method: "POST",
    body: JSON.stringify({ type, email, token }),
  })) as Record<string, unknown>;
  rememberTenant(tenant);
  setSession({ tenant, session: sessionFrom(body) });
}

/** The session a mailed link brings in the URL fragment (`#access_token=…`). */
export function sessionFromFragment(
  tenant: TenantConfig,
  hash: string,
): { error: string } | { type: string | null } {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  if (params.get("error"))
    return { error: params.get("error_description") ?? params.get("error") ?? "Sign-in failed" };
  const access = params.get("access_token");
  const refresh = params.get("refresh_token");
  if (!access || !refresh) return { error: "The link carried no session." };
  const issuer = tokenTenant(access);
  if (issuer && issuer !== tenant.id)
    return {
      error: `This link signs in to another tenant than ${tenant.name}: open it again with ?tenant=<its slug> after /console/.`,
    };
  rememberTenant(tenant);
  setSession({
    tenant,
    session: {
      access_token: access,
      refresh_token: refresh,
      expires_at: Number(params.get("expires_at") ?? Math.floor(Date.now() / 1000) + 3600),
    },
  });
  return { type: params.get("type") };
}

let refreshing: Promise<void> | null = null;

/** A fresh access token: refreshed when it expires within a minute. */
export async function accessToken(): Promise<string> {
  const stored = getSession();
  if (!stored) throw new ApiError(401, "signed_out", "Sign in first.");
  if (stored.session.expires_at - 60 > Date.now() / 1000) return stored.session.access_token;
  refreshing ??= (async () => {
    try {
      const body = (await gotrue(stored.tenant, "/token?grant_type=refresh_token", {
        method: "POST",
        body: JSON.stringify({ refresh_token: stored.session.refresh_token }),
      })) as Record<string, unknown>;
      const now = getSession();
      if (now) setSession({ ...now, session: sessionFrom(body) });
    } catch (error) {
      if (error instanceof ApiError && error.status >= 400 && error.status < 500) setSession(null);
      throw error;
    } finally {
      refreshing = null;
    }
  })();
  await refreshing;
  const after = getSession();
  if (!after) throw new ApiError(401, "signed_out", "Sign in again.");
  return after.session.access_token;
}

export async function setPassword(password: string): Promise<void> {
  const stored = getSession();
  if (!stored) throw new ApiError(401, "signed_out", "Sign in first.");
  await gotrue(stored.tenant, "/user", {
    method: "PUT",
    headers: { authorization: `Bearer ${await accessToken()}` },
    body: JSON.stringify({ password }),
  });
}

export async function signOut(): Promise<void> {
  const stored = getSession();
  if (stored) {
    try {
      await gotrue(stored.tenant, "/logout", {
        method: "POST",
        headers: { authorization: `Bearer ${stored.session.access_token}` },
      });
    } catch {
      // Signed out here whatever the server says (an expired token is signed out already).
    }
  }
  // Nothing of the session stays in the browser: the tenant last used is forgotten too.
  try {
    localStorage.removeItem(LAST_TENANT);
  } catch {
    // No storage.
  }
  setSession(null);
}
