import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";

/**
 * Who belongs to which account. A user who signs up joins the accounts they were invited to, or
 * else gets a personal account of their own (as its owner); an operator adds members with
 * `backline accounts add-member`, which invites the address when it has no user yet.
 */

export type MembershipRole = "owner" | "admin" | "member" | "viewer";
export const MEMBERSHIP_ROLES: readonly MembershipRole[] = ["owner", "admin", "member", "viewer"];

/** Gives a new user their accounts: open invitations for their address, or a personal account. */
export async function provisionAccounts(
  tx: Tx,
  user: { id: string; tenant_id: string; email: string },
  displayName: string | undefined,
): Promise<void> {
  const invited = (
    await tx.query<{ id: string; account_id: string; role: MembershipRole }>(
      `update internal.invitations set accepted_at = now()
       where tenant_id = $1 and email = $2 and accepted_at is null
       returning id, account_id, role`,
      [user.tenant_id, user.email],
    )
  ).rows;
  let defaultAccount: string | undefined;
  if (invited.length > 0) {
    for (const inv of invited) {
      await tx.query(
        `insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, $4)
         on conflict (account_id, user_id) do nothing`,
        [user.tenant_id, inv.account_id, user.id, inv.role],
      );
    }
    defaultAccount = invited.find((i) => i.role !== "viewer")?.account_id;
  } else {
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
    defaultAccount = account.id;
  }
  if (defaultAccount) {
    await tx.query("update internal.users set default_account_id = $2 where id = $1", [
      user.id,
      defaultAccount,
    ]);
  }
}

export type AddMemberResult =
  | { status: "added"; user_id: string; account_id: string; role: MembershipRole }
  | { status: "invited"; invitation_id: string; email: string; account_id: string; role: MembershipRole };

/** Adds the user with this address to the account, or invites the address if it has no user yet. */
export async function addMember(
  db: Db,
  input: { accountId: string; email: string; role: MembershipRole },
): Promise<AddMemberResult> {
  const email = input.email.trim().toLowerCase();
  return db.asService(async (tx) => {
    const account = (
      await tx.query<{ tenant_id: string }>("select tenant_id from internal.accounts where id = $1", [
        input.accountId,
      ])
    ).rows[0];
    if (!account) throw new MembershipError(`no account ${input.accountId}`);
    const user = (
      await tx.query<{ id: string }>(
        "select id from internal.users where tenant_id = $1 and email = $2 and deleted_at is null",
        [account.tenant_id, email],
      )
    ).rows[0];
    if (user) {
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
    return {
      status: "invited",
      invitation_id: invitation.id,
      email,
      account_id: input.accountId,
      role: input.role,
    };
  });
}

export class MembershipError extends Error {
  override name = "MembershipError";
}
