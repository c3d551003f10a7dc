import { randomBytes } from "node:crypto";
import { SignJWT } from "jose";

/**
 * A tenant's API keys, in the form supabase-js expects: HS256 JWTs signed with the tenant's own
 * secret, carrying the database role they grant and the tenant. They are derived from the secret
 * and the tenant's creation time, so they can be shown again at any time and change only when
 * the secret is rotated.
 */
export interface TenantKeys {
  anon_key: string;
  service_role_key: string;
}

const TEN_YEARS_S = 10 * 365 * 24 * 3600;

export function newJwtSecret(): string {
  return randomBytes(32).toString("base64url");
}

export async function tenantKeys(tenant: {
  id: string;
  jwt_secret: string;
  created_at: Date;
}): Promise<TenantKeys> {
  const secret = new TextEncoder().encode(tenant.jwt_secret);
  const iat = Math.floor(tenant.created_at.getTime() / 1000);
  const sign = (role: "anon" | "service_role") =>
    new SignJWT({ role, tenant_id: tenant.id })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuer("backline")
      .setIssuedAt(iat)
      .setExpirationTime(iat + TEN_YEARS_S)
      .sign(secret);
  return { anon_key: await sign("anon"), service_role_key: await sign("service_role") };
}
