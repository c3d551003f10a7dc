import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import type { AdminCaller, StaffRole } from "./auth.ts";

/**
 * GET /admin/v1/me (docs/console.md, "Staff roles"): who the caller is and where they are staff,
 * for the console's tenant chooser. Any caller the gateway accepts may ask (route config
 * staffRole "signed_in"); a user who is staff of no tenant at all is 403 not_staff. The list is
 * the database's answer (auth.staff_tenants, from the request's own claims).
 *
 *   { user: {id, email} | null, tenant_id, platform_role, staff: [{tenant_id, tenant_slug, tenant_name, role}] }
 *
 * `tenant_id` is the caller's own tenant (the token's or the key's); `user` is null for a
 * service-role key, whose list is its own tenant as admin.
 */
export interface MeOptions {
  db: Db;
  callerOf: (request: FastifyRequest) => AdminCaller;
}

interface StaffTenant {
  tenant_id: string;
  tenant_slug: string;
  tenant_name: string;
  role: StaffRole;
}

export async function meRoutes(app: FastifyInstance, options: MeOptions): Promise<void> {
  const { db, callerOf } = options;
  app.get("/me", { config: { staffRole: "signed_in" } }, async (request) => {
    const caller = callerOf(request);
    const found = await db.withRequestContext(
      caller.claims,
      async (tx) => {
        const staff = (
          await tx.query<StaffTenant>(
            "select tenant_id, tenant_slug, tenant_name, role from auth.staff_tenants() limit 1000",
          )
        ).rows;
        const platform = (
          await tx.query<{ role: StaffRole | null }>("select auth.platform_staff_role() as role")
        ).rows[0]?.role;
        return { staff, platform: platform ?? null };
      },
      { readOnly: true },
    );
    if (caller.kind === "staff" && found.staff.length === 0) {
      throw new HttpError(
        403,
        "not_staff",
        "You are not staff of any tenant. An admin makes you staff with: backline staff add.",
      );
    }
    return {
      user: caller.user
        ? { id: caller.user.id, email: typeof caller.claims.email === "string" ? caller.claims.email : null }
        : null,
      tenant_id: caller.user?.tenantId ?? caller.claims.tenant_id ?? caller.tenantId,
      platform_role: found.platform,
      staff: found.staff,
    };
  });
}
