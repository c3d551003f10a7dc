import type { Tx } from "../db/types.ts";
import type { SecretBox } from "../secrets/box.ts";
import { AuthError, Refusal, validationFailed } from "./errors.ts";
import { type SessionContext, sessionJson } from "./sessions.ts";
import { newOpaqueToken, sha256 } from "./tokens.ts";
import { matchTotp, newTotpSecret, otpauthUri, qrSvg } from "./totp.ts";
import type { UserRow } from "./users.ts";

/**
 * TOTP factors behind /auth/v1/factors, answered as Supabase Auth does (docs/auth.md,
 * "Multi-factor authentication"): enroll, challenge, verify (the session becomes aal2) and
 * unenroll. Each function runs in the caller's service transaction, after the session and user
 * were checked.
 */

/** How many factors (verified or not) a user may hold. */
const MAX_FACTORS = 10;
/** How long a challenge can be answered, in seconds. */
export const CHALLENGE_EXPIRY_SECONDS = 300;
/** How long an unverified factor is kept before a new enrolment removes it, in seconds. */
const UNVERIFIED_EXPIRY_SECONDS = 24 * 3600;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface FactorRow {
  id: string;
  friendly_name: string | null;
  factor_type: "totp";
  status: "unverified" | "verified";
  secret_sealed: string;
  last_used_step: string | null;
  last_challenged_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface MfaSession {
  sessionId: string;
  aal: string;
  amr: { method: string; timestamp: number }[];
}

const factorNotFound = () => new AuthError(404, "mfa_factor_not_found", "Factor not found");
const challengeVoid = (id: string) =>
  new AuthError(
    422,
    "mfa_challenge_expired",
    `Too many wrong codes were entered for MFA challenge ${id}: it no longer works. Create a new challenge.`,
  );

/** The factors of the user object (GoTrue's `factors`, absent when there are none). */
export async function factorsJson(tx: Tx, tenantId: string, userId: string): Promise<unknown[]> {
  return (await factorsOfUsers(tx, tenantId, [userId])).get(userId) ?? [];
}

/** The factors of several users at once (auth.admin.listUsers), by user id. */
export async function factorsOfUsers(
  tx: Tx,
  tenantId: string,
  userIds: string[],
): Promise<Map<string, unknown[]>> {
  const rows = (
    await tx.query<FactorRow & { user_id: string }>(
      `select id, user_id, friendly_name, factor_type, status, last_challenged_at, created_at, updated_at
       from internal.mfa_factors where tenant_id = $1 and user_id = any($2::uuid[]) order by created_at, id`,
      [tenantId, userIds],
    )
  ).rows;
  const byUser = new Map<string, unknown[]>();
  for (const f of rows) {
    const list = byUser.get(f.user_id) ?? [];
    list.push(factorJson(f));
    byUser.set(f.user_id, list);
  }
  return byUser;
}

function factorJson(f: FactorRow) {
  return {
    id: f.id,
    friendly_name: f.friendly_name ?? undefined,
    factor_type: f.factor_type,
    status: f.status,
    created_at: f.created_at.toISOString(),
    updated_at: f.updated_at.toISOString(),
    last_challenged_at: f.last_challenged_at ? f.last_challenged_at.toISOString() : null,
  };
}

export async function loadSession(tx: Tx, sessionId: string): Promise<MfaSession> {
  const s = (
    await tx.query<{ aal: string; amr: MfaSession["amr"] }>(
      "select aal, amr from internal.sessions where id = $1 for update",
      [sessionId],
    )
  ).rows[0];
  if (!s)
    throw new AuthError(403, "session_not_found", "Session from session_id claim in JWT does not exist");
  return { sessionId, aal: s.aal, amr: s.amr };
}

async function findFactor(tx: Tx, user: UserRow, factorId: string, lock = false): Promise<FactorRow> {
  if (!UUID.test(factorId)) throw factorNotFound();
  const f = (
    await tx.query<FactorRow>(
      `select * from internal.mfa_factors where id = $1 and tenant_id = $2 and user_id = $3${lock ? " for update" : ""}`,
      [factorId, user.tenant_id, user.id],
    )
  ).rows[0];
  if (!f) throw factorNotFound();
  return f;
}

export async function enrollFactor(
  tx: Tx,
  box: SecretBox,
  ctx: SessionContext & { publicUrl: string },
  user: UserRow,
  session: MfaSession,
  body: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const type = body.factor_type;
  if (type === "phone" || type === "webauthn") {
    throw new AuthError(
      422,
      `mfa_${type}_enroll_not_enabled`,
      `MFA enroll is disabled for ${type === "phone" ? "Phone" : "WebAuthn"}`,
    );
  }
  if (type !== "totp") throw validationFailed("factor_type needs to be totp, phone, or webauthn");
  const name = body.friendly_name === undefined || body.friendly_name === null ? "" : body.friendly_name;
  if (typeof name !== "string" || name.length > 200)
    throw validationFailed("friendly_name must be a string of at most 200 characters");
  if (
    body.issuer !== undefined &&
    body.issuer !== null &&
    (typeof body.issuer !== "string" || body.issuer.length > 200)
  )
    throw validationFailed("issuer must be a string of at most 200 characters");
  const issuer =
    typeof body.issuer === "string" && body.issuer !== ""
      ? body.issuer
      : new URL(ctx.settings.site_url ?? ctx.publicUrl).host;

  await tx.query(
    `delete from internal.mfa_factors where tenant_id = $1 and user_id = $2 and status = 'unverified'
       and created_at < now() - make_interval(secs => $3)`,
    [user.tenant_id, user.id, UNVERIFIED_EXPIRY_SECONDS],
  );
  const existing = (
    await tx.query<{ friendly_name: string | null; status: string }>(
      "select friendly_name, status from internal.mfa_factors where tenant_id = $1 and user_id = $2",
      [user.tenant_id, user.id],
    )
  ).rows;
  if (name !== "" && existing.some((f) => f.friendly_name === name)) {
    throw new AuthError(
      422,
      "mfa_factor_name_conflict",
      `A factor with the friendly name "${name}" for this user already exists`,
    );
  }
  if (existing.length >= MAX_FACTORS) {
    throw new AuthError(
      422,
      "too_many_enrolled_mfa_factors",
      "Maximum number of verified factors reached, unenroll to continue",
    );
  }
  if (existing.some((f) => f.status === "verified") && session.aal !== "aal2") {
    throw new AuthError(403, "insufficient_aal", "AAL2 required to enroll a new factor");
  }
  const secret = newTotpSecret();
  const uri = otpauthUri(secret, issuer, user.email ?? user.id);
  const factor = (
    await tx.query<{ id: string }>(
      `insert into internal.mfa_factors (tenant_id, user_id, friendly_name, secret_sealed)
       values ($1, $2, $3, $4) returning id`,
      [user.tenant_id, user.id, name === "" ? null : name, box.encrypt(secret)],
    )
  ).rows[0];
  if (!factor) throw new Error("insert into mfa_factors returned no row");
  return {
    id: factor.id,
    type: "totp",
    friendly_name: name,
    totp: { qr_code: qrSvg(uri), secret, uri },
  };
}

export async function challengeFactor(
  tx: Tx,
  user: UserRow,
  factorId: string,
  ip: string | undefined,
): Promise<Record<string, unknown>> {
  const factor = await findFactor(tx, user, factorId, true);
  const challenge = (
    await tx.query<{ id: string; created_at: Date }>(
      "insert into internal.mfa_challenges (factor_id, ip) values ($1, $2) returning id, created_at",
      [factor.id, ip ?? null],
    )
  ).rows[0];
  if (!challenge) throw new Error("insert into mfa_challenges returned no row");
  await tx.query("update internal.mfa_factors set last_challenged_at = now() where id = $1", [factor.id]);
  // Challenges answered or expired long ago are of no further use.
  await tx.query(
    "delete from internal.mfa_challenges where factor_id = $1 and created_at < now() - interval '1 day'",
    [factor.id],
  );
  return {
    id: challenge.id,
    type: factor.factor_type,
    expires_at: Math.floor(challenge.created_at.getTime() / 1000) + CHALLENGE_EXPIRY_SECONDS,
  };
}

/**
 * Checks the code against the factor's secret and, when it matches a time step later than the
 * last accepted one, records that step, marks the factor verified, and makes the session aal2
 * with "totp" in its amr. Returns the new session (access and refresh token), as GoTrue does.
 */
export async function verifyFactor(
  tx: Tx,
  box: SecretBox,
  ctx: SessionContext,
  user: UserRow,
  session: MfaSession,
  factorId: string,
  body: Record<string, unknown>,
): Promise<Record<string, unknown> | Refusal> {
  const challengeId = body.challenge_id;
  const code = typeof body.code === "string" ? body.code.trim() : body.code;
  if (typeof challengeId !== "string" || !UUID.test(challengeId))
    throw validationFailed("challenge_id must be a UUID");
  if (typeof code !== "string" || code === "") throw validationFailed("Code needs to be non-empty");
  const factor = await findFactor(tx, user, factorId, true);
  const challenge = (
    await tx.query<{
      id: string;
      ip: string | null;
      created_at: Date;
      verified_at: Date | null;
      failed_attempts: number;
    }>(
      `select id, ip, created_at, verified_at, failed_attempts from internal.mfa_challenges
       where id = $1 and factor_id = $2 for update`,
      [challengeId, factor.id],
    )
  ).rows[0];
  if (!challenge || challenge.verified_at) {
    throw new AuthError(422, "mfa_factor_not_found", "MFA factor with the provided challenge ID not found");
  }
  if ((challenge.ip ?? null) !== (ctx.ip ?? null)) {
    throw new AuthError(422, "mfa_ip_address_mismatch", "Challenge and verify IP addresses mismatch.");
  }
  if (Date.now() - challenge.created_at.getTime() > CHALLENGE_EXPIRY_SECONDS * 1000) {
    throw new AuthError(
      422,
      "mfa_challenge_expired",
      `MFA challenge ${challenge.id} has expired, verify against another challenge or create a new challenge.`,
    );
  }
  if (challenge.failed_attempts >= ctx.settings.max_code_attempts)
    return new Refusal(challengeVoid(challenge.id));
  const secret = box.decrypt(factor.secret_sealed);
  const lastUsed = factor.last_used_step === null ? null : Number(factor.last_used_step);
  const step = matchTotp(secret, code, lastUsed);
  if (step === undefined) {
    // Counted on the challenge (the transaction commits; the caller throws after it): at
    // max_code_attempts the challenge is void, whatever the client address.
    const counted = await tx.query<{ failed_attempts: number }>(
      "update internal.mfa_challenges set failed_attempts = failed_attempts + 1 where id = $1 returning failed_attempts",
      [challenge.id],
    );
    const failures = counted.rows[0]?.failed_attempts ?? ctx.settings.max_code_attempts;
    return new Refusal(
      failures >= ctx.settings.max_code_attempts
        ? challengeVoid(challenge.id)
        : new AuthError(422, "mfa_verification_failed", "Invalid TOTP code entered"),
    );
  }
  await tx.query("update internal.mfa_factors set last_used_step = $2, status = 'verified' where id = $1", [
    factor.id,
    step,
  ]);
  await tx.query("update internal.mfa_challenges set verified_at = now() where id = $1", [challenge.id]);
  // Unverified factors of the same kind are abandoned enrolments: removed, as GoTrue does.
  await tx.query(
    "delete from internal.mfa_factors where tenant_id = $1 and user_id = $2 and status = 'unverified' and factor_type = 'totp'",
    [user.tenant_id, user.id],
  );
  const now = Math.floor(Date.now() / 1000);
  const amr = [{ method: "totp", timestamp: now }, ...session.amr.filter((a) => a.method !== "totp")].sort(
    (a, b) => b.timestamp - a.timestamp,
  );
  await tx.query("update internal.sessions set aal = 'aal2', amr = $2 where id = $1", [
    session.sessionId,
    JSON.stringify(amr),
  ]);
  // The user's other sessions below aal2 end, as GoTrue ends them: a second factor now protects the account.
  await tx.query(
    "delete from internal.sessions where tenant_id = $1 and user_id = $2 and id <> $3 and aal = 'aal1'",
    [user.tenant_id, user.id, session.sessionId],
  );
  const refreshToken = newOpaqueToken();
  await tx.query("insert into internal.refresh_tokens (session_id, token_hash) values ($1, $2)", [
    session.sessionId,
    sha256(refreshToken),
  ]);
  return sessionJson(tx, ctx, user, session.sessionId, "aal2", amr, refreshToken);
}

export async function unenrollFactor(
  tx: Tx,
  user: UserRow,
  session: MfaSession,
  factorId: string,
): Promise<Record<string, unknown>> {
  const factor = await findFactor(tx, user, factorId, true);
  if (factor.status === "verified" && session.aal !== "aal2") {
    throw new AuthError(422, "insufficient_aal", "AAL2 required to unenroll verified factor");
  }
  await tx.query("delete from internal.mfa_factors where id = $1", [factor.id]);
  await downgradeWithoutFactors(tx, user.tenant_id, user.id);
  return { id: factor.id };
}

/** With no verified factor left, the user's sessions are aal1 again (their amr loses "totp"). */
export async function downgradeWithoutFactors(tx: Tx, tenantId: string, userId: string): Promise<void> {
  await tx.query(
    `update internal.sessions s set aal = 'aal1',
       amr = coalesce((select jsonb_agg(e) from jsonb_array_elements(s.amr) e where e ->> 'method' <> 'totp'), '[]')
     where s.tenant_id = $1 and s.user_id = $2 and s.aal = 'aal2'
       and not exists (select 1 from internal.mfa_factors f
         where f.tenant_id = $1 and f.user_id = $2 and f.status = 'verified')`,
    [tenantId, userId],
  );
}
