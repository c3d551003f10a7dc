/**
 * /auth/v1, GoTrue's endpoints as supabase-js calls them, with the tenant's anon key. Plain fetch:
 * the console needs sign-in (password, e-mailed code or link, then the second factor when the user
 * has one), its own TOTP factors, refresh and sign-out only.
 */
import { ApiError, errorFrom } from "./errors.ts";
import {
  type AuthSession,
  getSession,
  type SecondFactor,
  type StoredSession,
  setSession,
  type TenantConfig,
} from "./session.ts";

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

/** A GoTrue access token's claims (read, not verified: the server verifies it on every call). */
function tokenClaims(token: string): { tenant_id?: string; aal?: string } {
  try {
    const payload = token.split(".")[1] ?? "";
    const json = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
    return JSON.parse(json) as { tenant_id?: string; aal?: string };
  } catch {
    return {};
  }
}

/** A TOTP factor of the signed-in user, as GoTrue lists them in `user.factors`. */
export interface Factor {
  id: string;
  friendly_name?: string | null;
  factor_type: string;
  status: "verified" | "unverified";
  created_at?: string;
}

/**
 * The factor a session still has to be verified with: the user's first verified TOTP factor while
 * the session is below aal2 (GoTrue's nextLevel aal2 above currentLevel aal1), else none.
 */
function pendingFactor(accessToken: string, factors: Factor[] | undefined): SecondFactor | undefined {
  if (tokenClaims(accessToken).aal === "aal2") return undefined;
  const factor = (factors ?? []).find((f) => f.factor_type === "totp" && f.status === "verified");
  return factor ? { factorId: factor.id, name: factor.friendly_name ?? null } : undefined;
}

/** Keeps a new session: waiting for its second factor when the user has one (App shows that step). */
function keepSession(tenant: TenantConfig, body: Record<string, unknown>) {
  rememberTenant(tenant);
  const session = sessionFrom(body);
  const user = body.user as { factors?: Factor[] } | undefined;
  const secondFactor = pendingFactor(session.access_token, user?.factors);
  setSession({ tenant, session, ...(secondFactor ? { secondFactor } : {}) });
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
  keepSession(tenant, body);
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
  keepSession(tenant, body);
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
  const issuer = tokenClaims(access).tenant_id;
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

/**
 * After a mailed link (whose fragment carries no user): asks /user for the user's factors and, when
 * one is verified, holds the session at the second-factor step.
 */
export async function checkSecondFactor(): Promise<void> {
  const stored = getSession();
  if (!stored) return;
  const secondFactor = pendingFactor(stored.session.access_token, (await currentUser()).factors);
  if (secondFactor) setSession({ ...stored, secondFactor });
}

async function currentUser(): Promise<{ id: string; email?: string; factors?: Factor[] }> {
  const stored = signedIn();
  return (await gotrue(stored.tenant, "/user", {
    headers: { authorization: `Bearer ${await accessToken()}` },
  })) as { id: string; email?: string; factors?: Factor[] };
}

function signedIn(): StoredSession {
  const stored = getSession();
  if (!stored) throw new ApiError(401, "signed_out", "Sign in first.");
  return stored;
}

/** The signed-in user's TOTP factors (GET /user). */
export async function listFactors(): Promise<Factor[]> {
  return ((await currentUser()).factors ?? []).filter((f) => f.factor_type === "totp");
}

/**
 * Challenges the factor and verifies `code` (supabase-js's mfa.challengeAndVerify): the session
 * becomes aal2 (a new access and refresh token) and the second-factor step ends.
 */
export async function verifyFactor(factorId: string, code: string): Promise<void> {
  const stored = signedIn();
  const headers = { authorization: `Bearer ${await accessToken()}` };
  const path = `/factors/${encodeURIComponent(factorId)}`;
  const challenge = (await gotrue(stored.tenant, `${path}/challenge`, { method: "POST", headers })) as {
    id: string;
  };
  const body = (await gotrue(stored.tenant, `${path}/verify`, {
    method: "POST",
    headers,
    body: JSON.stringify({ challenge_id: challenge.id, code }),
  })) as Record<string, unknown>;
  const now = getSession() ?? stored;
  const { secondFactor: _done, ...rest } = now;
  setSession({ ...rest, session: sessionFrom(body) });
}

/** Starts a TOTP enrolment (POST /factors): the QR code and secret to put in an authenticator app. */
export async function enrolTotp(
  friendlyName: string,
): Promise<{ id: string; totp: { qr_code: string; secret: string; uri: string } }> {
  const stored = signedIn();
  return (await gotrue(stored.tenant, "/factors", {
    method: "POST",
    headers: { authorization: `Bearer ${await accessToken()}` },
    body: JSON.stringify({ factor_type: "totp", friendly_name: friendlyName }),
  })) as { id: string; totp: { qr_code: string; secret: string; uri: string } };
}

/** Removes a factor (DELETE /factors/{id}; a verified one only from an aal2 session). */
export async function removeFactor(factorId: string): Promise<void> {
  const stored = signedIn();
  await gotrue(stored.tenant, `/factors/${encodeURIComponent(factorId)}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${await accessToken()}` },
  });
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
  const stored = signedIn();
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
