import type { Tx } from "../db/types.ts";
import type { TenantAuthInfo } from "../tenancy/directory.ts";
import { AuthError } from "./errors.ts";
import type { AuthSettings } from "./settings.ts";
import { newOpaqueToken, sha256, signAccessToken } from "./tokens.ts";
import { type UserRow, userJson } from "./users.ts";

/**
 * Sessions and refresh tokens. A session is one signed-in device; its refresh tokens form a
 * chain: each refresh marks the presented token used and issues its child. A used token presented
 * again means a copy leaked, so the whole session is revoked (refresh-token reuse detection).
 */

export interface SessionContext {
  tenant: TenantAuthInfo;
  settings: AuthSettings;
  /** The `iss` of access tokens: <PUBLIC_URL>/auth/v1. */
  issuer: string;
  userAgent: string | undefined;
  ip: string | undefined;
}

export interface AmrEntry {
  method:
    | "password"
    | "otp"
    | "recovery"
    | "email/signup"
    | "email_change"
    | "anonymous"
    | "passkey"
    | "oauth";
  timestamp: number;
}

/** GoTrue's answer to a banned user's sign-in or refresh (auth.admin.updateUserById's ban_duration). */
export const userBanned = () => new AuthError(400, "user_banned", "User is banned");

export const isBanned = (user: UserRow): boolean =>
  user.banned_until !== null && user.banned_until > new Date();

export async function startSession(tx: Tx, ctx: SessionContext, user: UserRow, method: AmrEntry["method"]) {
  // Every way in (password, link, code, anonymous) comes here: a banned user gets no session.
  if (isBanned(user)) throw userBanned();
  const amr: AmrEntry[] = [{ method, timestamp: Math.floor(Date.now() / 1000) }];
  const session = (
    await tx.query<{ id: string }>(
      `insert into internal.sessions (tenant_id, user_id, amr, user_agent, ip) values ($1, $2, $3, $4, $5) returning id`,
      [ctx.tenant.id, user.id, JSON.stringify(amr), ctx.userAgent?.slice(0, 1000) ?? null, ctx.ip ?? null],
    )
  ).rows[0];
  if (!session) throw new Error("insert into sessions returned no row");
  const refreshToken = newOpaqueToken();
  await tx.query("insert into internal.refresh_tokens (session_id, token_hash) values ($1, $2)", [
    session.id,
    sha256(refreshToken),
  ]);
  const signedIn =
    (
      await tx.query<UserRow>("update internal.users set last_sign_in_at = now() where id = $1 returning *", [
        user.id,
      ])
    ).rows[0] ?? user;
  await tx.query(
    "update internal.identities set last_sign_in_at = now() where tenant_id = $1 and user_id = $2",
    [ctx.tenant.id, user.id],
  );
  return sessionJson(tx, ctx, signedIn, session.id, "aal1", amr, refreshToken);
}

/** The session object GoTrue returns: access token, refresh token and the user. */
export async function sessionJson(
  tx: Tx,
  ctx: SessionContext,
  user: UserRow,
  sessionId: string,
  aal: string,
  amr: unknown[],
  refreshToken: string,
): Promise<Record<string, unknown>> {
  const { token, expiresAt } = await signAccessToken({
    secret: ctx.tenant.jwtSecret,
    signingKey: ctx.tenant.signing.current,
    issuer: ctx.issuer,
    expiresIn: ctx.settings.jwt_expiry,
    tenantId: ctx.tenant.id,
    user: {
      id: user.id,
      email: user.email,
      phone: user.phone,
      app_metadata: user.raw_app_meta_data,
      user_metadata: user.raw_user_meta_data,
      is_anonymous: user.is_anonymous,
    },
    sessionId,
    aal,
    amr,
  });
  return {
    access_token: token,
    token_type: "bearer",
    expires_in: ctx.settings.jwt_expiry,
    expires_at: expiresAt,
    refresh_token: refreshToken,
    user: await userJson(tx, user),
  };
}

export type RefreshOutcome = { ok: true; session: Record<string, unknown> } | { ok: false; error: AuthError };

/**
 * Rotates a refresh token. Returns (rather than throws) the reuse error, so that the caller
 * commits the revocation it made.
 */
export async function rotateRefreshToken(
  tx: Tx,
  ctx: SessionContext,
  presented: string,
): Promise<RefreshOutcome> {
  const found = (
    await tx.query<{
      id: string;
      session_id: string;
      used_at: Date | null;
      user_id: string;
      aal: string;
      amr: unknown[];
    }>(
      `select rt.id, rt.session_id, rt.used_at, s.user_id, s.aal, s.amr
       from internal.refresh_tokens rt join internal.sessions s on s.id = rt.session_id
       where rt.token_hash = $1 and s.tenant_id = $2
       for update of rt, s`,
      [sha256(presented), ctx.tenant.id],
    )
  ).rows[0];
  if (!found) {
    return {
      ok: false,
      error: new AuthError(400, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found"),
    };
  }
  if (found.used_at) {
    // A used token came back: someone holds a copy. Revoke the session and every token in it.
    await tx.query("delete from internal.sessions where id = $1", [found.session_id]);
    return {
      ok: false,
      error: new AuthError(400, "refresh_token_already_used", "Invalid Refresh Token: Already Used"),
    };
  }
  const user = (
    await tx.query<UserRow>(
      "select * from internal.users where id = $1 and tenant_id = $2 and deleted_at is null",
      [found.user_id, ctx.tenant.id],
    )
  ).rows[0];
  if (!user) {
    await tx.query("delete from internal.sessions where id = $1", [found.session_id]);
    return {
      ok: false,
      error: new AuthError(400, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found"),
    };
  }
  // Banned: refused as GoTrue does, the session kept (it refreshes again once the ban ends).
  if (isBanned(user)) return { ok: false, error: userBanned() };
  const next = newOpaqueToken();
  await tx.query("update internal.refresh_tokens set used_at = now() where id = $1", [found.id]);
  await tx.query(
    "insert into internal.refresh_tokens (session_id, token_hash, parent_id) values ($1, $2, $3)",
    [found.session_id, sha256(next), found.id],
  );
  await tx.query("update internal.sessions set refreshed_at = now() where id = $1", [found.session_id]);
  return {
    ok: true,
    session: await sessionJson(tx, ctx, user, found.session_id, found.aal, found.amr, next),
  };
}

export type LogoutScope = "global" | "local" | "others";

export async function endSessions(
  tx: Tx,
  tenantId: string,
  userId: string,
  sessionId: string,
  scope: LogoutScope,
) {
  const condition = { global: "$3::uuid is not null", local: "id = $3::uuid", others: "id <> $3::uuid" }[
    scope
  ];
  await tx.query(`delete from internal.sessions where tenant_id = $1 and user_id = $2 and ${condition}`, [
    tenantId,
    userId,
    sessionId,
  ]);
}

export async function sessionExists(
  tx: Tx,
  tenantId: string,
  userId: string,
  sessionId: string,
): Promise<boolean> {
  const r = await tx.query(
    "select 1 from internal.sessions where id = $1 and tenant_id = $2 and user_id = $3",
    [sessionId, tenantId, userId],
  );
  return r.rowCount > 0;
}
