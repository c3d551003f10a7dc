import type { FastifyReply, FastifyRequest } from "fastify";
import { identify } from "../http/gateway.ts";
import { HttpError } from "../http/problem.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";

/**
 * Who may call /admin/v1: a tenant's operator team, with THAT tenant's service-role key, sent as
 * supabase's service key is (`apikey: <key>`, and optionally `Authorization: Bearer <key>`). The
 * gateway (src/http/gateway.ts) decides the tenant and the role; only the service role
 * (claims.role tenant_service) passes, and what it may touch is its own tenant's.
 *
 * - no apikey header -> 401 missing_api_key (the ?apikey= query parameter the table interface
 *   takes is not accepted here: a service key in a URL ends up in access logs);
 * - a key or bearer that is not valid (unknown, tampered, expired, another tenant's) -> 401
 *   invalid_api_key;
 * - a valid anon key or user's access token -> 403 service_role_required.
 */
export async function operatorTenantId(
  directory: TenantDirectory,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<string> {
  const header = request.headers.apikey;
  const given = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!given) {
    reply.header("www-authenticate", 'Bearer realm="backline-admin"');
    throw new HttpError(
      401,
      "missing_api_key",
      "Send the tenant's service-role key in the apikey header.",
      "apikey",
    );
  }
  const who = await identify(directory, request);
  if (!who.ok) {
    const why =
      who.failure.kind === "expired_jwt"
        ? "The token has expired."
        : who.failure.kind === "wrong_tenant"
          ? "The bearer token was issued for another tenant."
          : who.failure.kind === "bad_jwt"
            ? `The bearer token is not valid: ${who.failure.message}.`
            : "The API key is not valid.";
    reply.header("www-authenticate", 'Bearer realm="backline-admin", error="invalid_token"');
    throw new HttpError(401, "invalid_api_key", `${why} Use the tenant's service-role key.`);
  }
  if (who.caller.claims.role !== "tenant_service") {
    throw new HttpError(
      403,
      "service_role_required",
      "The admin API takes the tenant's service-role key, not the anon key or a user's token.",
    );
  }
  return who.caller.tenant.id;
}
