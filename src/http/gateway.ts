import type { FastifyRequest } from "fastify";
import { peekClaims, TokenError, verifyBearerToken, verifyToken } from "../auth/tokens.ts";
import { noteTenant } from "../billing/api-calls.ts";
import { setRequestActor } from "../db/audit-context.ts";
import type { Claims } from "../db/types.ts";
import type { TenantAuthInfo, TenantDirectory } from "../tenancy/directory.ts";

/**
 * The gateway rules shared by /auth/v1, /rest/v1 and /storage/v1 (docs/auth.md):
 *
 * - `apikey` (header, or query parameter) must be one of a tenant's keys: it decides the tenant.
 * - `Authorization: Bearer <jwt>` decides the role: a user's access token -> authenticated with
 *   its claims; the anon key -> anon; the tenant's service-role key -> tenant_service (every row
 *   of that tenant, nothing else). Without a bearer, the apikey itself is the bearer.
 * - A bearer must be signed by the apikey's tenant and name it: a token of another tenant is refused.
 *   A user's token is ES256 with one of the tenant's published signing keys, or HS256 with its
 *   secret from before the tenant's first signing key (verifyBearerToken); the apikey is HS256.
 *
 * Each interface renders a failure in its own error shape.
 */

export type GatewayFailure =
  | { kind: "no_apikey" }
  | { kind: "no_authorization" }
  | { kind: "invalid_apikey" }
  | { kind: "bad_jwt"; message: string }
  | { kind: "expired_jwt" }
  | { kind: "wrong_tenant" };

export interface Caller {
  tenant: TenantAuthInfo;
  /** The claims the request's transaction runs with. */
  claims: Claims;
  /** For a user's access token: who, and which session. */
  user: { id: string; sessionId: string | undefined } | undefined;
}

export type Identified = { ok: true; caller: Caller } | { ok: false; failure: GatewayFailure };

// Claims that only Backline itself sets (public-API keys; the operator scope's staff_caller,
// src/db/operator-scope.ts); never taken from a JWT.
const SERVER_ONLY_CLAIMS = ["account_id", "account_role", "api_key_id", "staff_caller"];

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

export function apikeyOf(request: FastifyRequest): string | undefined {
  const header = headerValue(request.headers.apikey);
  if (header) return header.trim();
  const query = (request.query as Record<string, unknown> | undefined)?.apikey;
  return typeof query === "string" && query !== "" ? query : undefined;
}

export function bearerOf(request: FastifyRequest): string | undefined {
  const auth = headerValue(request.headers.authorization);
  const m = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return m?.[1];
}

// A tenant has two keys and every request carries one: remembering the verified ones for a few
// seconds saves an HMAC per request. An entry lives no longer than the directory's cache of the
// tenant, so a rotated secret stops old keys within the same time.
const KEY_TTL_MS = 10_000;
const MAX_KEYS = 10_000;
const verifiedKeys = new Map<
  string,
  { value: { tenant: TenantAuthInfo; role: "anon" | "service_role" }; until: number }
>();

async function verifyKey(
  directory: TenantDirectory,
  key: string,
): Promise<{ tenant: TenantAuthInfo; role: "anon" | "service_role" } | undefined> {
  const hit = verifiedKeys.get(key);
  if (hit && hit.until > Date.now() && directory.has(hit.value.tenant)) return hit.value;
  const value = await verifyKeyNow(directory, key);
  if (value) {
    if (verifiedKeys.size >= MAX_KEYS) verifiedKeys.clear();
    verifiedKeys.set(key, { value, until: Date.now() + KEY_TTL_MS });
  }
  return value;
}

async function verifyKeyNow(
  directory: TenantDirectory,
  key: string,
): Promise<{ tenant: TenantAuthInfo; role: "anon" | "service_role" } | undefined> {
  const peek = peekClaims(key);
  const tenantId = peek?.tenant_id;
  if (typeof tenantId !== "string" || (peek?.role !== "anon" && peek?.role !== "service_role"))
    return undefined;
  const tenant = await directory.get(tenantId);
  if (!tenant) return undefined;
  try {
    const claims = await verifyToken(key, tenant.jwtSecret);
    if (claims.tenant_id !== tenant.id || claims.iss !== "backline") return undefined;
    return { tenant, role: claims.role as "anon" | "service_role" };
  } catch {
    return undefined;
  }
}

/**
 * Who is calling. With `requireAuthorization` (the table and storage interfaces: seed 000 wants
 * a token on every request) a missing Authorization header is a failure; otherwise the apikey
 * stands in for it.
 */
export async function identify(
  directory: TenantDirectory,
  request: FastifyRequest,
  options: { requireAuthorization?: boolean } = {},
): Promise<Identified> {
  const apikey = apikeyOf(request);
  if (!apikey) return { ok: false, failure: { kind: "no_apikey" } };
  const key = await verifyKey(directory, apikey);
  if (!key) return { ok: false, failure: { kind: "invalid_apikey" } };
  const { tenant } = key;

  const given = bearerOf(request);
  if (!given && options.requireAuthorization) return { ok: false, failure: { kind: "no_authorization" } };
  const bearer = given ?? apikey;
  let payload: Record<string, unknown>;
  try {
    payload =
      bearer === apikey ? { role: key.role, tenant_id: tenant.id } : await verifyBearerToken(bearer, tenant);
  } catch (error) {
    if (error instanceof TokenError && error.reason === "expired")
      return { ok: false, failure: { kind: "expired_jwt" } };
    return {
      ok: false,
      failure: { kind: "bad_jwt", message: error instanceof Error ? error.message : "invalid JWT" },
    };
  }
  if (payload.tenant_id !== tenant.id) return { ok: false, failure: { kind: "wrong_tenant" } };
  // Counted for the tenant's invoice once answered below 400 (src/billing/api-calls.ts).
  noteTenant(request, tenant.id);

  switch (payload.role) {
    case "anon":
      return {
        ok: true,
        caller: { tenant, claims: { role: "anon", tenant_id: tenant.id }, user: undefined },
      };
    case "service_role":
      setRequestActor(request, { type: "service_key", id: tenant.id });
      return {
        ok: true,
        caller: { tenant, claims: { role: "tenant_service", tenant_id: tenant.id }, user: undefined },
      };
    case "authenticated": {
      if (typeof payload.sub !== "string")
        return { ok: false, failure: { kind: "bad_jwt", message: "JWT has no sub claim" } };
      const claims: Claims = { ...payload, role: "authenticated", tenant_id: tenant.id };
      for (const c of SERVER_ONLY_CLAIMS) delete claims[c];
      const sessionId = typeof payload.session_id === "string" ? payload.session_id : undefined;
      setRequestActor(request, {
        type: "user",
        id: payload.sub,
        detail: { email: payload.email, aal: payload.aal ?? "aal1" },
      });
      return { ok: true, caller: { tenant, claims, user: { id: payload.sub, sessionId } } };
    }
    default:
      return {
        ok: false,
        failure: { kind: "bad_jwt", message: "JWT role is not one of anon, authenticated, service_role" },
      };
  }
}

/**
 * A gateway failure as the table and storage interfaces answer it: 401 with PostgREST's body
 * ({code, message, details, hint}) and, for a bad token, a WWW-Authenticate header (RFC 6750).
 */
export function postgrestGatewayError(failure: GatewayFailure): {
  status: number;
  headers: Record<string, string>;
  body: { code?: string; message: string; details?: string | null; hint?: string | null };
} {
  const invalidToken = (description: string) => ({
    "WWW-Authenticate": `Bearer error="invalid_token", error_description="${description.replace(/"/g, "'")}"`,
  });
  switch (failure.kind) {
    // A missing or unknown apikey never reaches PostgREST on Supabase: its gateway answers, with
    // its own body ({message, hint}, no PostgREST code), as /auth/v1 does here (docs/errors.md).
    case "no_apikey":
      return {
        status: 401,
        headers: {},
        body: {
          message: "No API key found in request",
          hint: "No `apikey` request header or url param was found.",
        },
      };
    case "invalid_apikey":
      return {
        status: 401,
        headers: {},
        body: {
          message: "Invalid API key",
          hint: "Double check your Supabase `anon` or `service_role` API key.",
        },
      };
    case "no_authorization":
      return {
        status: 401,
        headers: { "WWW-Authenticate": "Bearer" },
        body: {
          code: "PGRST302",
          message: "Anonymous access is disabled",
          details: null,
          hint: "Send Authorization: Bearer <access token> (or the anon key).",
        },
      };
    case "expired_jwt":
      return {
        status: 401,
        headers: invalidToken("JWT expired"),
        body: {
          code: "PGRST303",
          message: "JWT expired",
          details: null,
          hint: "Refresh the session and retry.",
        },
      };
    case "wrong_tenant":
      return {
        status: 401,
        headers: invalidToken("JWT was issued for another tenant"),
        body: { code: "PGRST301", message: "JWT was issued for another tenant", details: null, hint: null },
      };
    case "bad_jwt":
      return {
        status: 401,
        headers: invalidToken(failure.message),
        body: { code: "PGRST301", message: failure.message, details: null, hint: null },
      };
  }
}
