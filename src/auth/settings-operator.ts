import type { Db } from "../db/db.ts";
import { findTenant } from "../tenancy/tenants.ts";
import { type AuthSettings, authSettingsSchema } from "./settings.ts";

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

/** A value given on the command line: JSON when it parses (true, 60, {"max": 5, ...}), else a string. */
export function parseSettingValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const TOP_KEYS = new Set(Object.keys(authSettingsSchema.shape));
const LIMIT_KEYS = new Set(
  Object.keys((authSettingsSchema.shape.rate_limits.unwrap() as { shape: Record<string, unknown> }).shape),
);

function checkKey(key: string): string[] {
  const path = key.split(".");
  const ok =
    (path.length === 1 && TOP_KEYS.has(key)) ||
    (path.length === 2 && path[0] === "rate_limits" && LIMIT_KEYS.has(path[1] as string));
  if (!ok) {
    throw new AuthSettingsError(
      `no auth setting ${key}: one of ${[...TOP_KEYS].join(", ")}, or rate_limits.<${[...LIMIT_KEYS].join("|")}>`,
    );
  }
  return path;
}

/**
 * `backline auth settings`: shows a tenant's auth settings with their defaults, and changes them
 * (`set`, `unset` to the default). The result is checked against the schema as a whole, and an
 * unknown key is refused, before anything is written.
 */
export async function updateAuthSettings(
  db: Db,
  input: { tenant: string; set?: Record<string, unknown>; unset?: string[] },
): Promise<{ tenant_id: string; settings: Record<string, unknown>; effective: AuthSettings }> {
  const set = input.set ?? {};
  const unset = input.unset ?? [];
  for (const key of [...Object.keys(set), ...unset]) checkKey(key);
  return db.asService(async (tx) => {
    const tenant = await findTenant(tx, input.tenant);
    if (!tenant) throw new AuthSettingsError(`no tenant ${input.tenant}`);
    const row = (
      await tx.query<{ settings: Record<string, unknown> }>(
        "select settings from internal.tenants where id = $1 for update",
        [tenant.id],
      )
    ).rows[0];
    const next = structuredClone((row?.settings.auth ?? {}) as Record<string, unknown>);
    const limits = () => {
      const l = next.rate_limits;
      if (typeof l !== "object" || l === null || Array.isArray(l)) next.rate_limits = {};
      return next.rate_limits as Record<string, unknown>;
    };
    for (const key of unset) {
      const [a, b] = checkKey(key) as [string, string | undefined];
      if (b === undefined) delete next[a];
      else delete limits()[b];
    }
    for (const [key, value] of Object.entries(set)) {
      const [a, b] = checkKey(key) as [string, string | undefined];
      if (b === undefined) next[a] = value;
      else limits()[b] = value;
    }
    const checked = authSettingsSchema.safeParse(next);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      throw new AuthSettingsError(
        `settings.auth would not be valid: ${issue?.path.join(".") || "auth"}: ${issue?.message ?? "invalid"}`,
      );
    }
    const changed = Object.keys(set).length > 0 || unset.length > 0;
    if (changed) {
      await tx.query(
        "update internal.tenants set settings = jsonb_set(settings, '{auth}', $2::jsonb, true) where id = $1",
        [tenant.id, JSON.stringify(next)],
      );
    }
    return { tenant_id: tenant.id, settings: next, effective: checked.data };
  });
}
