import { inviteAddress } from "../auth/invite.ts";
import { authSettings } from "../auth/settings.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import type { Mailer } from "../mail/mailer.ts";

/**
 * Who belongs to which account. An invitation is accepted only when its invitee proves the
 * address — uses the invite link, or confirms the address at sign-up — which the database does
 * (migration 0015: the open invitations of an address are accepted when it becomes proven). A user
 * with no invitation gets a personal account of their own (as its owner). An operator adds members
 * with `backline accounts add-member`, which adds a user whose address is proven at once and
 * otherwise invites the address and mails it the invite link.
 */

export type MembershipRole = "owner" | "admin" | "member" | "viewer";
export const MEMBERSHIP_ROLES: readonly MembershipRole[] = ["owner", "admin", "member", "viewer"];

/**
 * Gives a user their personal account (as its owner) unless they already belong to an account or
 * their address has open invitations (which they join when they prove the address). Called at
 * sign-up and again when an address is proven (a user invited by POST /auth/v1/invite, with no
 * account to join, gets theirs then). Returns whether the address has open invitations.
 */
export async function provisionAccounts(
  tx: Tx,
  user: { id: string; tenant_id: string; email: string },
  displayName: string | undefined,
): Promise<boolean> {
  const invited =
    (
      await tx.query(
        "select 1 from internal.invitations where tenant_id = $1 and email = $2 and accepted_at is null limit 1",
        [user.tenant_id, user.email],
      )
    ).rowCount > 0;
  const member =
    (
      await tx.query("select 1 from internal.memberships where user_id = $1 and tenant_id = $2 limit 1", [
        user.id,
        user.tenant_id,
      ])
    ).rowCount > 0;
  if (invited || member) return invited;
  const name = (displayName?.trim() || user.email.split("@")[0] || "My account").slice(0, 200);
  const account = (
    await tx.query<{ id: string }>(
      "insert into internal.accounts (tenant_id, name, kind) values ($1, $2, 'artist') returning id",
      [user.tenant_id, name],
    )
  ).rows[0];
  if (!account) throw new Error("insert into accounts returned no row");
  await tx.query(
    "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
    [user.tenant_id, account.id, user.id],
  );
  await tx.query("update internal.users set default_account_id = $2 where id = $1", [user.id, account.id]);
  return false;
}

/** The display name a user gave in their metadata, for their personal account. */
export function displayNameOf(meta: Record<string, unknown>): string | undefined {
  return [meta.name, meta.full_name, meta.display_name].find((v): v is string => typeof v === "string");
}

export type AddMemberResult =
  | { status: "added"; user_id: string; account_id: string; role: MembershipRole }
  | { status: "invited"; invitation_id: string; email: string; account_id: string; role: MembershipRole };

/**
 * Adds the user with this address to the account if the address is proven; otherwise records the
 * invitation and mails the address the invite link (making an invited user if it has none yet).
 * Whoever signed up with an address without proving it is not added: only the invite link, or a
 * confirmation of the address, makes them a member.
 */
export async function addMember(
  db: Db,
  input: { accountId: string; email: string; role: MembershipRole },
  mail: { mailer: Mailer; publicUrl: string },
): Promise<AddMemberResult> {
  const email = input.email.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) || email.length > 320)
    throw new MembershipError(`${JSON.stringify(input.email)} is not an e-mail address`);
  const result = await db.asService(async (tx): Promise<AddMemberResult> => {
    const account = (
      await tx.query<{ tenant_id: string; name: string; settings: unknown }>(
        `select a.tenant_id, a.name, t.settings from internal.accounts a
         join internal.tenants t on t.id = a.tenant_id where a.id = $1`,
        [input.accountId],
      )
    ).rows[0];
    if (!account) throw new MembershipError(`no account ${input.accountId}`);
    const user = (
      await tx.query<{ id: string; email_proven_at: Date | null }>(
        "select id, email_proven_at from internal.users where tenant_id = $1 and email = $2 and deleted_at is null",
        [account.tenant_id, email],
      )
    ).rows[0];
    if (user?.email_proven_at) {
      await tx.query(
        `insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, $4)
         on conflict (account_id, user_id) do update set role = excluded.role`,
        [account.tenant_id, input.accountId, user.id, input.role],
      );
      return { status: "added", user_id: user.id, account_id: input.accountId, role: input.role };
    }
    const invitation = (
      await tx.query<{ id: string }>(
        `insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, $4)
         on conflict (account_id, email) where accepted_at is null do update set role = excluded.role
         returning id`,
        [account.tenant_id, input.accountId, email, input.role],
      )
    ).rows[0];
    if (!invitation) throw new Error("insert into invitations returned no row");
    const settings = authSettings(account.settings);
    await inviteAddress(
      tx,
      mail.mailer,
      { tenant: { id: account.tenant_id }, settings, publicUrl: mail.publicUrl },
      email,
      {
        intro: `You have been invited to join ${account.name} (as ${input.role}). Open the link to accept the invitation, then choose a password.`,
      },
    );
    return {
      status: "invited",
      invitation_id: invitation.id,
      email,
      account_id: input.accountId,
      role: input.role,
    };
  });
  await mail.mailer.deliver();
  return result;
}

export class MembershipError extends Error {
  override name = "MembershipError";
}
