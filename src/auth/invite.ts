import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import type { Mailer } from "../mail/mailer.ts";
import { type MailContext, sendEmailToken } from "./email-tokens.ts";
import { AuthError } from "./errors.ts";
import { findUserByEmail, findUserById, insertUser, type UserRow } from "./users.ts";

/**
 * Inviting an address: the one way an invitation reaches its invitee (POST /auth/v1/invite and
 * `backline accounts add-member` both come here). The address gets a user if it has none — no
 * password, unconfirmed, `invited_at` set, as GoTrue's invite does — and a mail with the invite
 * link and code. Using them proves the address: the user is signed in, chooses a password, and
 * the database accepts the address's open invitations (migration 0015).
 *
 * An address already proven is refused with GoTrue's `email_exists`: its owner can sign in, and
 * an operator adds such a user to an account directly.
 */
export async function inviteAddress(
  tx: Tx,
  mailer: Mailer,
  ctx: MailContext,
  email: string,
  options: { data?: Record<string, unknown>; redirectTo?: string | undefined; intro?: string } = {},
): Promise<UserRow> {
  let user = await findUserByEmail(tx, ctx.tenant.id, email);
  if (user?.email_proven_at) {
    throw new AuthError(422, "email_exists", "A user with this email address has already been registered");
  }
  if (!user) {
    user = await insertUser(tx, {
      tenantId: ctx.tenant.id,
      email,
      passwordHash: null,
      userMetadata: options.data ?? {},
      confirmed: false,
      invited: true,
    }).catch((error: unknown) => {
      // Two invitations (or a sign-up) for the address at once: the other one made the user.
      if (asDbError(error)?.sqlstate === "23505")
        throw new AuthError(422, "user_already_exists", "User already registered");
      throw error;
    });
  }
  await sendEmailToken(tx, mailer, ctx, user, "invite", email, options.redirectTo, options.intro);
  return (await findUserById(tx, ctx.tenant.id, user.id)) ?? user;
}
