import type { AdminMe } from "./api/types.ts";

export type Role = "reviewer" | "operator" | "admin";
const RANK: Record<Role, number> = { reviewer: 1, operator: 2, admin: 3 };

/** The role the user has on a tenant: its staff row there or their platform role, the higher. */
export function roleOn(me: AdminMe | undefined, tenantId: string | undefined): Role | null {
  if (!me) return null;
  const own = me.staff.find((s) => s.tenant_id === tenantId)?.role ?? null;
  const platform = me.platform_role;
  if (own && platform) return RANK[own] >= RANK[platform] ? own : platform;
  return own ?? platform ?? null;
}

export function atLeast(role: Role | null, needed: Role): boolean {
  return role !== null && RANK[role] >= RANK[needed];
}

export function isPlatformAdmin(me: AdminMe | undefined): boolean {
  return me?.platform_role === "admin";
}
