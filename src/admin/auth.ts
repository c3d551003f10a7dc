import type { FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { type OperatorCaller, STAFF_NEEDS, type StaffNeed } from "../db/operator-scope.ts";
import type { Claims } from "../db/types.ts";
import { identify } from "../http/gateway.ts";
import { HttpError } from "../http/problem.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";

export type StaffRole = "reviewer" | "operator" | "admin";
export const STAFF_ROLES: readonly StaffRole[] = ["reviewer", "operator", "admin"];

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * The staff role an /admin/v1 route needs (docs/console.md, "Staff roles"): reviewer <
     * operator < admin on the target tenant, or "platform" (platform staff with role admin).
     * A route that does not say needs "admin": the hook fails closed. "signed_in" (GET /me
     * only): any caller the gateway accepts, staff of any tenant or of none yet.
     */
    staffRole?: StaffNeed | "signed_in";
  }
}

/** Who is calling /admin/v1, once authenticated (src/admin/routes.ts keeps it per request). */
export interface AdminCaller {
  /** The tenant acted on: Backline-Tenant, else the key's or the token's own tenant. */
  tenantId: string;
  /** "service_key": the tenant's service-role key (that tenant's admin); "staff": a user's token. */
  kind: "service_key" | "staff";
  /** The verified claims of the request (what the database checks again). */
  claims: Claims;
  /** The signed-in user (kind "staff"). */
  user: { id: string; tenantId: string } | undefined;
  /** The caller's role on `tenantId` as the database computed it (null: not staff there). */
  role: StaffRole | null;
  /** The caller's platform role (null: not platform staff). */
  platformRole: StaffRole | null;
  /** What the route needs. */
  need: StaffNeed | "signed_in";
}

const rank = (role: StaffRole | null): number => (role ? STAFF_ROLES.indexOf(role) + 1 : 0);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Whether `caller` holds `need` (the same rule as auth.has_staff_role in migration 0019). */
export function holds(caller: Pick<AdminCaller, "role" | "platformRole">, need: StaffNeed): boolean {
  return need === "platform" ? caller.platformRole === "admin" : rank(caller.role) >= rank(need);
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return (Array.isArray(value) ? value[0] : value)?.trim() || undefined;
}

/**
 * Who may call /admin/v1, and with which staff role (docs/operator.md, "The admin API";
 * docs/console.md, "Staff roles"):
 *
 * - `apikey: <tenant service-role key>` (and optionally `Authorization: Bearer <same key>`): that
 *   tenant's admin, on that tenant only; never "platform".
 * - `apikey: <anon key of the user's tenant>` + `Authorization: Bearer <user access token>`: the
 *   user's staff role, read from the database (auth.staff_role) on every request, for the tenant
 *   named by `Backline-Tenant: <tenant id or slug>` (default: the user's own tenant).
 *
 * Refusals: no apikey -> 401 missing_api_key (the ?apikey= query parameter is not accepted here:
 * a key in a URL ends up in access logs); a key or bearer that is not valid (unknown, tampered,
 * expired, another tenant's) -> 401 invalid_api_key; the anon key without a user's token -> 403
 * service_role_required; a user with no staff role on the target tenant (or a target that does
 * not exist) -> 403 not_staff; a role below the route's `staffRole` -> 403 insufficient_role.
 *
 * The route's handler then runs inside the operator scope (src/db/operator-scope.ts): every
 * operator transaction it opens starts with the database's own check, internal.require_staff.
 */
export async function adminCaller(
  db: Db,
  directory: TenantDirectory,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<AdminCaller> {
  const given = headerOf(request, "apikey");
  if (!given) {
    reply.header("www-authenticate", 'Bearer realm="backline-admin"');
    throw new HttpError(
      401,
      "missing_api_key",
      "Send the tenant's service-role key, or a staff user's tenant anon key with their access token, in the apikey header.",
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
    throw new HttpError(
      401,
      "invalid_api_key",
      `${why} Use the tenant's service-role key, or a staff user's access token with their tenant's anon key.`,
    );
  }
  const { claims, tenant, user } = who.caller;
  const routeNeed = request.routeOptions.config?.staffRole;
  const need: StaffNeed | "signed_in" =
    routeNeed === "signed_in" || (routeNeed !== undefined && STAFF_NEEDS.includes(routeNeed))
      ? routeNeed
      : "admin";

  if (claims.role === "anon") {
    throw new HttpError(
      403,
      "service_role_required",
      "The anon key alone is not enough: send a staff user's access token as Authorization: Bearer, or use the tenant's service-role key.",
    );
  }

  // The target tenant: Backline-Tenant (an id or a slug), else the caller's own.
  const named = headerOf(request, "backline-tenant");
  let tenantId = tenant.id;
  if (named !== undefined && named !== tenant.id) {
    if (!UUID.test(named) && !SLUG.test(named)) {
      throw new HttpError(
        400,
        "invalid_tenant",
        "Backline-Tenant must be a tenant's id or slug.",
        "backline-tenant",
      );
    }
    const found = UUID.test(named)
      ? named.toLowerCase()
      : named === tenant.slug
        ? tenant.id
        : await db.asService(
            async (tx) =>
              (await tx.query<{ id: string }>("select id from internal.tenants where slug = $1", [named]))
                .rows[0]?.id,
            { readOnly: true },
          );
    // An unknown tenant is refused exactly as one the caller is not staff of: no probing for names.
    tenantId = found ?? "00000000-0000-0000-0000-000000000000";
  }

  let role: StaffRole | null;
  let platformRole: StaffRole | null;
  if (claims.role === "tenant_service") {
    role = tenantId === tenant.id ? "admin" : null;
    platformRole = null;
  } else {
    // The database decides (migration 0019), from the request's own claims, as a policy would.
    const row = await db.withRequestContext(
      claims,
      async (tx) =>
        (
          await tx.query<{ role: StaffRole | null; platform: StaffRole | null }>(
            "select auth.staff_role($1) as role, auth.platform_staff_role() as platform",
            [tenantId],
          )
        ).rows[0],
      { readOnly: true },
    );
    role = row?.role ?? null;
    platformRole = row?.platform ?? null;
  }

  const caller: AdminCaller = {
    tenantId,
    kind: claims.role === "tenant_service" ? "service_key" : "staff",
    claims,
    user: user ? { id: user.id, tenantId: tenant.id } : undefined,
    role,
    platformRole,
    need,
  };
  if (need === "signed_in" || request.is404) return caller;
  if (role === null && !(need === "platform" && platformRole !== null)) {
    throw new HttpError(
      403,
      "not_staff",
      claims.role === "tenant_service"
        ? "A tenant's service-role key acts on its own tenant only."
        : `You are not staff of tenant ${named ?? tenantId}. Ask an admin: backline staff add.`,
    );
  }
  if (!holds(caller, need)) {
    throw new HttpError(
      403,
      "insufficient_role",
      need === "platform"
        ? "This needs platform staff with the role admin."
        : `This needs the staff role ${need} or higher; you have ${role}.`,
    );
  }
  return caller;
}

/** The operator scope a route's handler runs in (src/db/operator-scope.ts), or none for "signed_in". */
export function operatorCallerOf(caller: AdminCaller): OperatorCaller | undefined {
  if (caller.need === "signed_in") return undefined;
  return { claims: caller.claims, tenantId: caller.tenantId, need: caller.need };
}
