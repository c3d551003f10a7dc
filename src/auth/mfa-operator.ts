import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { findTenant } from "../tenancy/tenants.ts";
import { downgradeWithoutFactors } from "./mfa.ts";

/**
 * The operator's side of multi-factor sign-in (docs/operator.md, "Multi-factor sign-in"):
 * recovery when a user lost their factor, and where aal2 is required. Run by the CLI on the
 * service path; each act leaves an audit row (actor "cli:<command>").
 */

export class MfaOperatorError extends Error {}

async function tenantId(tx: Tx, ref: string): Promise<string> {
  const tenant = await findTenant(tx, ref);
  if (!tenant) throw new MfaOperatorError(`no tenant ${ref}`);
  return tenant.id;
}

/**
 * Removes every factor of the user with this address (a lost phone) and ends their sessions, so
 * that they sign in with their password again and enrol a new factor. Returns how many factors
 * were removed.
 */
export async function resetMfa(
  db: Db,
  input: { tenant: string; email: string; reason?: string | undefined },
): Promise<{ user_id: string; factors_removed: number; sessions_ended: number }> {
  return db.asService(async (tx) => {
    const tid = await tenantId(tx, input.tenant);
    const user = (
      await tx.query<{ id: string }>(
        "select id from internal.users where tenant_id = $1 and email = $2 and deleted_at is null",
        [tid, input.email.trim().toLowerCase()],
      )
    ).rows[0];
    if (!user) throw new MfaOperatorError(`no user ${input.email} in tenant ${input.tenant}`);
    const removed = await tx.query("delete from internal.mfa_factors where tenant_id = $1 and user_id = $2", [
      tid,
      user.id,
    ]);
    await downgradeWithoutFactors(tx, tid, user.id);
    const ended = await tx.query("delete from internal.sessions where tenant_id = $1 and user_id = $2", [
      tid,
      user.id,
    ]);
    await tx.query("select internal.audit('mfa.reset', 'internal.users', $1, $2, null, $3)", [
      user.id,
      tid,
      JSON.stringify({
        email: input.email.trim().toLowerCase(),
        factors_removed: removed.rowCount,
        sessions_ended: ended.rowCount,
        ...(input.reason ? { reason: input.reason } : {}),
      }),
    ]);
    return { user_id: user.id, factors_removed: removed.rowCount, sessions_ended: ended.rowCount };
  });
}

/** Requires (or stops requiring) aal2 of staff: of one tenant's staff, or of every tenant's (platform). */
export async function requireStaffAal2(
  db: Db,
  target: { tenant?: string | undefined; platform?: boolean | undefined },
  required: boolean,
): Promise<{ tenant_id: string | null; require_staff_aal2: boolean }> {
  return db.asService(async (tx) => {
    if (target.platform) {
      await tx.query("update internal.platform_settings set require_staff_aal2 = $1 where id", [required]);
      return { tenant_id: null, require_staff_aal2: required };
    }
    if (!target.tenant) throw new MfaOperatorError("name a tenant (--tenant) or --platform");
    const tid = await tenantId(tx, target.tenant);
    await tx.query("update internal.tenants set require_staff_aal2 = $2 where id = $1", [tid, required]);
    return { tenant_id: tid, require_staff_aal2: required };
  });
}

/** An account's requirement of aal2 from its members (what its owner sets; the operator may too). */
export async function requireAccountAal2(
  db: Db,
  accountId: string,
  required: boolean,
): Promise<{ account_id: string; require_aal2: boolean }> {
  if (!/^[0-9a-f-]{36}$/i.test(accountId)) throw new MfaOperatorError(`no account ${accountId}`);
  return db.asService(async (tx) => {
    const found = await tx.query("select 1 from internal.accounts where id = $1", [accountId]);
    if (found.rowCount === 0) throw new MfaOperatorError(`no account ${accountId}`);
    await tx.query("select internal.set_account_require_aal2($1, $2)", [accountId, required]);
    return { account_id: accountId, require_aal2: required };
  });
}
