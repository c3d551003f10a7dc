import { authSettings } from "../auth/settings.ts";
import { loadSigningKeys, type TenantSigningKeys } from "../auth/signing-keys.ts";
import type { Db } from "../db/db.ts";
import { openSigningSecret } from "./tenants.ts";

/**
 * What the HTTP layer needs to know about a tenant on every request (its signing secret, its
 * signing keys and settings), cached briefly so that verifying a key costs no database round trip. A rotated
 * secret takes effect in this process at once (`forget`) and in other processes within TTL_MS.
 */
export interface TenantAuthInfo {
  id: string;
  slug: string;
  jwtSecret: string;
  /** Its ES256 session signing keys (docs/auth.md, "Signing keys"), opened. */
  signing: TenantSigningKeys;
  policyPreset: string;
  plan: string;
  settings: Record<string, unknown>;
}

const TTL_MS = 10_000;

export class TenantDirectory {
  private readonly db: Db;
  private readonly cache = new Map<string, { info: TenantAuthInfo | undefined; until: number }>();

  constructor(db: Db) {
    this.db = db;
  }

  async get(tenantId: string): Promise<TenantAuthInfo | undefined> {
    if (!/^[0-9a-f-]{36}$/i.test(tenantId)) return undefined;
    const hit = this.cache.get(tenantId);
    if (hit && hit.until > Date.now()) return hit.info;
    const found = await this.db.asService(
      async (tx) => {
        const row = (
          await tx.query<
            Omit<TenantAuthInfo, "jwtSecret" | "signing"> & {
              jwt_secret: string | null;
              jwt_secret_sealed: string | null;
            }
          >(
            `select id, slug, jwt_secret, jwt_secret_sealed, policy_preset as "policyPreset", plan, settings
             from internal.tenants where id = $1`,
            [tenantId],
          )
        ).rows[0];
        if (!row) return undefined;
        const expiry = authSettings(row.settings).jwt_expiry;
        return { row, signing: await loadSigningKeys(tx, () => this.db.secrets, row.id, expiry) };
      },
      { readOnly: true },
    );
    // The secret and keys are opened once per cache fill, not per request.
    let info: TenantAuthInfo | undefined;
    if (found) {
      const { jwt_secret, jwt_secret_sealed, ...rest } = found.row;
      info = {
        ...rest,
        jwtSecret: openSigningSecret(this.db, { jwt_secret, jwt_secret_sealed }),
        signing: found.signing,
      };
    }
    this.cache.set(tenantId, { info, until: Date.now() + TTL_MS });
    return info;
  }

  /** Whether `info` is still what this directory holds for its tenant (not forgotten, not replaced). */
  has(info: TenantAuthInfo): boolean {
    const hit = this.cache.get(info.id);
    return hit !== undefined && hit.info === info && hit.until > Date.now();
  }

  forget(tenantId: string): void {
    this.cache.delete(tenantId);
  }
}
