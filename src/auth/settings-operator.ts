import type { Db } from "../db/db.ts";
import { findTenant } from "../tenancy/tenants.ts";
import { authSettingsSchema } from "./settings.ts";

/**
 * The operator's side of a tenant's auth settings (`backline auth anonymous`, docs/auth.md
 * "Anonymous sign-ins"): the change is checked against the settings' schema as a whole before it
 * is written, so a command never leaves `settings.auth` in a shape /auth/v1 would have to ignore.
 * The tenants table's audit trigger records the change (actor "cli:<command>").
 */

export class AuthSettingsError extends Error {}

export interface AnonymousSettings {
  tenant_id: string;
  anonymous_users: boolean;
  anonymous_per_ip: { max: number; windowSeconds: number };
}

export async function setAnonymousSignIns(
  db: Db,
  input: { tenant: string; enabled: boolean; perHour?: number | undefined },
): Promise<AnonymousSettings> {
  return db.asService(async (tx) => {
    const tenant = await findTenant(tx, input.tenant);
    if (!tenant) throw new AuthSettingsError(`no tenant ${input.tenant}`);
    const row = (
      await tx.query<{ settings: Record<string, unknown> }>(
        "select settings from internal.tenants where id = $1 for update",
        [tenant.id],
      )
    ).rows[0];
    const current = (row?.settings.auth ?? {}) as Record<string, unknown>;
    const limits = (current.rate_limits ?? {}) as Record<string, unknown>;
    const next: Record<string, unknown> = { ...current, anonymous_users: input.enabled };
    if (input.perHour !== undefined) {
      next.rate_limits = { ...limits, anonymous_per_ip: { max: input.perHour, windowSeconds: 3600 } };
    }
    const checked = authSettingsSchema.safeParse(next);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      throw new AuthSettingsError(
        `settings.auth would not be valid: ${issue?.path.join(".") || "auth"}: ${issue?.message ?? "invalid"}`,
      );
    }
    await tx.query(
      "update internal.tenants set settings = jsonb_set(settings, '{auth}', $2::jsonb, true) where id = $1",
      [tenant.id, JSON.stringify(next)],
    );
    return {
      tenant_id: tenant.id,
      anonymous_users: checked.data.anonymous_users,
      anonymous_per_ip: checked.data.rate_limits.anonymous_per_ip,
    };
  });
}
