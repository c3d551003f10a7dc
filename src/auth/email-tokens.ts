import type { Tx } from "../db/types.ts";
import type { Mailer } from "../mail/mailer.ts";
import { AuthError, codesVoid, otpExpired, Refusal } from "./errors.ts";
import type { AuthSettings } from "./settings.ts";
import { newOpaqueToken, newOtp, otpHash, sha256 } from "./tokens.ts";
import { findUserByEmail, type UserRow } from "./users.ts";

/**
 * Links and codes sent by e-mail. Each mail carries both a link (to GET /auth/v1/verify, which
 * redirects to the app with a session) and a six-digit code (for verifyOtp); both are stored only
 * as hashes and work once, until they expire. A newer one of the same kind replaces older ones.
 */

export type EmailTokenKind =
  | "signup"
  | "recovery"
  | "email_change"
  | "invite"
  | "magiclink"
  | "reauthentication";

const SUBJECTS: Record<EmailTokenKind, string> = {
  signup: "Confirm your sign-up",
  recovery: "Reset your password",
  email_change: "Confirm your new e-mail address",
  invite: "You have been invited",
  magiclink: "Your sign-in link",
  reauthentication: "Your confirmation code",
};

const INTROS: Record<EmailTokenKind, string> = {
  signup: "Confirm your e-mail address to finish signing up.",
  recovery: "Someone asked to reset the password of this account. If it was you, continue below.",
  email_change: "Confirm this address as the new e-mail address of your account.",
  invite: "You have been invited. Open the link to accept the invitation, then choose a password.",
  magiclink: "Someone asked to sign in to this account. If it was you, continue below.",
  reauthentication:
    "Someone signed in to this account asked to confirm it is you before changing its password.",
};

const SENT_AT: Record<EmailTokenKind, string> = {
  signup: "confirmation_sent_at = now()",
  recovery: "recovery_sent_at = now()",
  email_change: "email_change_sent_at = now()",
  // GoTrue reports an invitation as both.
  invite: "invited_at = now(), confirmation_sent_at = now()",
  // GoTrue records a sign-in link as a recovery mail.
  magiclink: "recovery_sent_at = now()",
  // Its own time is its token's created_at.
  reauthentication: "",
};

/** What sending a link needs to know: the tenant, its auth settings, and where the server answers. */
export interface MailContext {
  tenant: { id: string };
  settings: AuthSettings;
  publicUrl: string;
}

/** A link token and a code just issued: what a mail carries, or what generateLink answers. */
export interface IssuedToken {
  /** The link's token; verifyOtp takes it as `token_hash`. */
  token: string;
  otp: string;
  /** <PUBLIC_URL>/auth/v1/verify?token=…&type=…[&redirect_to=…] */
  link: string;
}

/**
 * Issues a link token and a six-digit code of this kind for the user, sent (or to be sent) to
 * `to`; a newer one of a kind replaces the older. Stores only their hashes.
 */
export async function issueEmailToken(
  tx: Tx,
  ctx: MailContext,
  user: UserRow,
  kind: EmailTokenKind,
  to: string,
  redirectTo: string | undefined,
): Promise<IssuedToken> {
  const token = newOpaqueToken();
  const otp = newOtp();
  await tx.query("delete from internal.one_time_tokens where tenant_id = $1 and user_id = $2 and kind = $3", [
    ctx.tenant.id,
    user.id,
    kind,
  ]);
  await forgetCodeFailures(tx, ctx.tenant.id, to);
  await tx.query(
    `insert into internal.one_time_tokens (tenant_id, user_id, kind, email, token_hash, otp_hash, expires_at)
     values ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))`,
    [ctx.tenant.id, user.id, kind, to, sha256(token), otpHash(user.id, otp), ctx.settings.otp_expiry],
  );
  if (SENT_AT[kind]) await tx.query(`update internal.users set ${SENT_AT[kind]} where id = $1`, [user.id]);

  const link = new URL(`${ctx.publicUrl}/auth/v1/verify`);
  link.searchParams.set("token", token);
  link.searchParams.set("type", kind);
  const redirect = redirectTo ?? ctx.settings.site_url;
  if (redirect) link.searchParams.set("redirect_to", redirect);
  return { token, otp, link: link.toString() };
}

export async function sendEmailToken(
  tx: Tx,
  mailer: Mailer,
  ctx: MailContext,
  user: UserRow,
  kind: EmailTokenKind,
  to: string,
  redirectTo: string | undefined,
  intro: string = INTROS[kind],
): Promise<void> {
  const { otp, link } = await issueEmailToken(tx, ctx, user, kind, to, redirectTo);
  const minutes = Math.round(ctx.settings.otp_expiry / 60);
  await mailer.enqueue(tx, {
    tenantId: ctx.tenant.id,
    to,
    kind: `auth.${kind}`,
    secretTtlSeconds: ctx.settings.otp_expiry,
    subject: SUBJECTS[kind],
    text: [
      intro,
      "",
      `Open this link: ${link}`,
      "",
      `Or enter this code: ${otp}`,
      "",
      `The link and the code work once, for ${minutes} minutes. If you did not ask for this, ignore this e-mail.`,
    ].join("\n"),
  });
}

/** A reauthentication code: a mail with the code only (it is typed into the app, never followed). */
export async function sendReauthenticationCode(
  tx: Tx,
  mailer: Mailer,
  ctx: MailContext,
  user: UserRow,
  to: string,
): Promise<void> {
  const { otp } = await issueEmailToken(tx, ctx, user, "reauthentication", to, undefined);
  const minutes = Math.round(ctx.settings.otp_expiry / 60);
  await mailer.enqueue(tx, {
    tenantId: ctx.tenant.id,
    to,
    kind: "auth.reauthentication",
    secretTtlSeconds: ctx.settings.otp_expiry,
    subject: SUBJECTS.reauthentication,
    text: [
      INTROS.reauthentication,
      "",
      `Enter this code: ${otp}`,
      "",
      `The code works once, for ${minutes} minutes. If you did not ask for this, change your password.`,
    ].join("\n"),
  });
}

/**
 * GoTrue's interval between two mails of a kind to a user (settings.auth.mail_interval_seconds):
 * 429 over_email_send_rate_limit while the last one is younger.
 */
export async function checkMailInterval(
  tx: Tx,
  tenantId: string,
  userId: string,
  kind: EmailTokenKind,
  intervalSeconds: number,
): Promise<void> {
  if (intervalSeconds <= 0) return;
  const left = (
    await tx.query<{ left: number }>(
      `select ceil(extract(epoch from (max(created_at) + make_interval(secs => $4) - now())))::int as left
       from internal.one_time_tokens where tenant_id = $1 and user_id = $2 and kind = $3`,
      [tenantId, userId, kind, intervalSeconds],
    )
  ).rows[0]?.left;
  if (left !== undefined && left !== null && left > 0) {
    throw new AuthError(
      429,
      "over_email_send_rate_limit",
      `For security purposes, you can only request this after ${left} seconds.`,
      { retryAfter: left },
    );
  }
}

/**
 * Uses up the user's reauthentication code (updateUser's `nonce`): true when it matched. One try:
 * a wrong nonce voids the code, so a code cannot be guessed; the user asks for a new one.
 */
export async function spendReauthenticationCode(tx: Tx, tenantId: string, userId: string, nonce: string) {
  const row = (
    await tx.query<{ id: string; otp_hash: string }>(
      `update internal.one_time_tokens set used_at = now()
       where tenant_id = $1 and user_id = $2 and kind = 'reauthentication' and used_at is null and expires_at > now()
       returning id, otp_hash`,
      [tenantId, userId],
    )
  ).rows[0];
  return row !== undefined && row.otp_hash === otpHash(userId, nonce.trim());
}

/**
 * What the client names in verifyOtp: a token kind, or GoTrue's `email`, which is either the code
 * of a sign-up confirmation or of a sign-in link (POST /otp sends one or the other).
 */
export type VerifyType = EmailTokenKind | "email";

export type VerifyInput =
  | { type: VerifyType; tokenHash: string }
  | { type: VerifyType; email: string; otp: string };

function kindsOf(type: VerifyType): EmailTokenKind[] {
  return type === "email" ? ["signup", "magiclink"] : [type];
}

/** How wrong codes are bounded: the tenant's max_code_attempts, counted while codes live (otp_expiry). */
export interface CodeGuessBound {
  tenantId: string;
  maxAttempts: number;
  windowSeconds: number;
}

export interface UsedToken {
  user: UserRow;
  email: string;
  kind: EmailTokenKind;
}

type TokenRow = { id: string; user_id: string; email: string; kind: EmailTokenKind };

/**
 * Finds and uses up the token: the user it belongs to and the address it was sent to. A link token
 * (256 random bits) that matches nothing is otp_expired. A code (six digits) is bounded per address
 * (docs/security.md, "Guessing codes"): its wrong tries are counted in this transaction, which the
 * caller commits before it answers the Refusal this returns; at `maxAttempts` the address's
 * outstanding codes are void, and every answer says so until a new code is mailed to it.
 */
export async function useEmailToken(
  tx: Tx,
  bound: CodeGuessBound,
  input: VerifyInput,
): Promise<UsedToken | Refusal> {
  const { tenantId } = bound;
  const kinds = kindsOf(input.type);
  if ("tokenHash" in input) {
    const row = (
      await tx.query<TokenRow>(
        `select id, user_id, email, kind from internal.one_time_tokens
         where token_hash = $1 and tenant_id = $2 and kind = any($3::text[]) and used_at is null and expires_at > now()
         for update`,
        [sha256(input.tokenHash), tenantId, kinds],
      )
    ).rows[0];
    if (!row) throw otpExpired();
    return spendToken(tx, tenantId, row);
  }
  // Guesses for one address wait for each other here, so none is judged on a stale count.
  await tx.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [
    `email-code:${tenantId}:${input.email}`,
  ]);
  const failures =
    (
      await tx.query<{ failures: number }>(
        `select failures from internal.email_code_failures
         where tenant_id = $1 and email = $2 and last_failed_at > now() - make_interval(secs => $3)`,
        [tenantId, input.email, bound.windowSeconds],
      )
    ).rows[0]?.failures ?? 0;
  if (failures >= bound.maxAttempts) return new Refusal(codesVoid());
  // For an e-mail change the code went to the new address; otherwise to the user's address.
  const userId =
    input.type === "email_change"
      ? (
          await tx.query<{ id: string }>(
            "select id from internal.users where tenant_id = $1 and email_change = $2 and deleted_at is null",
            [tenantId, input.email],
          )
        ).rows[0]?.id
      : (await findUserByEmail(tx, tenantId, input.email))?.id;
  const row = userId
    ? (
        await tx.query<TokenRow>(
          `select id, user_id, email, kind from internal.one_time_tokens
           where user_id = $1 and tenant_id = $2 and kind = any($3::text[]) and otp_hash = $4 and used_at is null and expires_at > now()
           order by created_at desc limit 1
           for update`,
          [userId, tenantId, kinds, otpHash(userId, input.otp)],
        )
      ).rows[0]
    : undefined;
  if (row) {
    await forgetCodeFailures(tx, tenantId, input.email);
    return spendToken(tx, tenantId, row);
  }
  const counted = (
    await tx.query<{ failures: number }>(
      `insert into internal.email_code_failures as f (tenant_id, email, failures, last_failed_at)
       values ($1, $2, 1, now())
       on conflict (tenant_id, email) do update set
         failures = case when f.last_failed_at > now() - make_interval(secs => $3) then f.failures + 1 else 1 end,
         last_failed_at = now()
       returning failures`,
      [tenantId, input.email, bound.windowSeconds],
    )
  ).rows[0];
  // Now and then, forget addresses whose last wrong code is long past.
  if (Math.random() < 0.01) {
    await tx.query(
      "delete from internal.email_code_failures where last_failed_at < now() - interval '1 day'",
    );
  }
  if ((counted?.failures ?? 1) < bound.maxAttempts) return new Refusal(otpExpired());
  if (userId) {
    await tx.query(
      "update internal.one_time_tokens set used_at = now() where tenant_id = $1 and user_id = $2 and used_at is null",
      [tenantId, userId],
    );
  }
  return new Refusal(codesVoid());
}

/** A code mailed to the address (or asked for) starts its count of wrong codes again. */
export async function forgetCodeFailures(tx: Tx, tenantId: string, email: string): Promise<void> {
  await tx.query("delete from internal.email_code_failures where tenant_id = $1 and email = $2", [
    tenantId,
    email,
  ]);
}

async function spendToken(tx: Tx, tenantId: string, row: TokenRow): Promise<UsedToken> {
  await tx.query("update internal.one_time_tokens set used_at = now() where id = $1", [row.id]);
  const user = (
    await tx.query<UserRow>(
      "select * from internal.users where id = $1 and tenant_id = $2 and deleted_at is null for update",
      [row.user_id, tenantId],
    )
  ).rows[0];
  if (!user) throw otpExpired();
  return { user, email: row.email, kind: row.kind };
}
