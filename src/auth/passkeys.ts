import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import { currentAuditScope } from "../db/audit-context.ts";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import { consume } from "../http/rate-limit.ts";
import { portalDomains } from "../portal/links.ts";
import { checkUserId } from "./admin.ts";
import { AuthError, sessionNotFound, validationFailed } from "./errors.ts";
import { loadSession } from "./mfa.ts";
import type { RequestInfo, TokenUser } from "./service.ts";
import { type SessionContext, startSession } from "./sessions.ts";
import { type AuthSettings, authSettings } from "./settings.ts";
import { findUserById, isStaffUser, type UserRow } from "./users.ts";

/**
 * Passkeys (supabase-js `auth.passkey`, `signInWithPasskey`, `registerPasskey`; docs/auth.md
 * "Passkeys"), as GoTrue answers them, with @simplewebauthn/server checking the WebAuthn side.
 *
 * - Off unless the tenant turns `settings.auth.passkeys` on: every route answers GoTrue's
 *   404 `passkey_disabled` until then.
 * - A challenge is stored (internal.passkey_challenges, migration 0054), expires after five
 *   minutes and is used once: the verify deletes it before it looks at the credential, in a
 *   transaction of its own that commits whatever the verification then decides.
 * - The relying party is the tenant's: its id is `passkey_rp_id` when the tenant set one, else
 *   the host of the page asking (the request's Origin, when that is one of the tenant's own
 *   addresses), else the site URL's host, the portal's first domain, or PUBLIC_URL's host. An
 *   assertion or attestation is accepted only from one of the tenant's addresses on that host
 *   (or under it): the site URL, the redirect URLs, the portal's domains, PUBLIC_URL.
 * - A sign-in counts against `signin_per_ip`, the same count as a password sign-in, once per
 *   ceremony (at its options; a verify needs a challenge, which is used once).
 */

const CHALLENGE_SECONDS = 5 * 60;
const MAX_PASSKEYS_PER_USER = 10;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const passkeysDisabled = () => new AuthError(404, "passkey_disabled", "Passkeys are disabled");
const challengeNotFound = () =>
  new AuthError(400, "webauthn_challenge_not_found", "Challenge not found or already used");
const challengeExpired = () => new AuthError(400, "webauthn_challenge_expired", "Challenge has expired");
const verificationFailed = () =>
  new AuthError(400, "webauthn_verification_failed", "Credential verification failed");
const passkeyNotFound = () => new AuthError(404, "validation_failed", "Passkey not found");

interface PasskeyRow {
  id: string;
  tenant_id: string;
  user_id: string;
  credential_id: string;
  public_key: Uint8Array;
  sign_count: string | number;
  transports: string[];
  friendly_name: string | null;
  created_at: Date;
  last_used_at: Date | null;
}

interface ChallengeRow {
  id: string;
  user_id: string | null;
  challenge: string;
  rp_id: string;
  expired: boolean;
}

/** GoTrue's PasskeyListItem: empty name and never-used date left out. */
function item(row: PasskeyRow): Record<string, unknown> {
  return {
    id: row.id,
    ...(row.friendly_name ? { friendly_name: row.friendly_name } : {}),
    created_at: row.created_at.toISOString(),
    ...(row.last_used_at ? { last_used_at: row.last_used_at.toISOString() } : {}),
  };
}

function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    return u.protocol === "https:" || u.protocol === "http:" ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

const hostOf = (origin: string) => new URL(origin).hostname;
const underRp = (host: string, rpId: string) => host === rpId || host.endsWith(`.${rpId}`);

/** The tenant's own addresses (origins) a passkey ceremony may run on. */
export function tenantOrigins(publicUrl: string, tenant: RequestInfo["tenant"], settings: AuthSettings) {
  const origins = new Set<string>();
  const add = (url: string | undefined) => {
    const o = url ? originOf(url) : undefined;
    if (o) origins.add(o);
  };
  add(settings.site_url);
  for (const r of settings.redirect_urls) add(r.endsWith("*") ? r.slice(0, -1) : r);
  const scheme = new URL(publicUrl).protocol;
  for (const d of portalDomains(tenant.settings)) add(`${scheme}//${d}`);
  add(publicUrl);
  return [...origins];
}

/** The relying party id of a new ceremony (see the module's comment). */
export function relyingPartyId(
  publicUrl: string,
  tenant: RequestInfo["tenant"],
  settings: AuthSettings,
  origin: string | undefined,
): string {
  if (settings.passkey_rp_id) return settings.passkey_rp_id;
  const origins = tenantOrigins(publicUrl, tenant, settings);
  if (origin && origins.includes(origin)) return hostOf(origin);
  if (settings.site_url) return new URL(settings.site_url).hostname;
  const [domain] = portalDomains(tenant.settings);
  return domain ?? new URL(publicUrl).hostname;
}

function credentialOf(body: Record<string, unknown>): {
  challengeId: string;
  credential: Record<string, unknown>;
} {
  const id = body.challenge_id;
  if (typeof id !== "string" || id === "") throw validationFailed("challenge_id is required");
  const credential = body.credential;
  if (credential === undefined || credential === null) throw validationFailed("credential is required");
  if (!UUID.test(id)) throw validationFailed("challenge_id must be a valid UUID");
  if (typeof credential !== "object" || Array.isArray(credential))
    throw new AuthError(400, "webauthn_verification_failed", "Invalid credential response");
  return { challengeId: id.toLowerCase(), credential: credential as Record<string, unknown> };
}

/** The name an authenticator shows for the relying party: the tenant's brand, else its slug. */
function displayName(tenant: RequestInfo["tenant"]): string | undefined {
  const branding = tenant.settings?.branding as { display_name?: unknown } | undefined;
  const name = branding?.display_name;
  return typeof name === "string" && name.trim() !== "" ? name.trim().slice(0, 64) : tenant.slug;
}

export class Passkeys {
  private readonly db: Db;
  private readonly publicUrl: string;

  constructor(deps: { db: Db; publicUrl: string }) {
    this.db = deps.db;
    this.publicUrl = deps.publicUrl;
  }

  /** The tenant's settings, or GoTrue's 404 passkey_disabled where passkeys are off. */
  settings(req: RequestInfo): AuthSettings {
    const s = authSettings(req.tenant.settings);
    if (!s.passkeys) throw passkeysDisabled();
    return s;
  }

  private context(req: RequestInfo, settings: AuthSettings): SessionContext {
    return {
      tenant: req.tenant,
      settings,
      issuer: `${this.publicUrl}/auth/v1`,
      userAgent: req.userAgent,
      ip: req.ip,
    };
  }

  /** Names the acting user for the audit rows of the transactions that follow. */
  private actAs(userId: string): void {
    const scope = currentAuditScope();
    if (scope && !scope.actor) scope.actor = { type: "user", id: userId };
  }

  private async audit(tx: Tx, tenantId: string, action: string, userId: string, after: unknown) {
    await tx.query("select internal.audit($1, 'internal.users', $2, $3, null, $4)", [
      action,
      userId,
      tenantId,
      JSON.stringify(after),
    ]);
  }

  /** The token's user, with its session still there; anonymous users have no passkeys. */
  private async user(tx: Tx, req: RequestInfo, who: TokenUser): Promise<UserRow> {
    const s = await tx.query(
      "select 1 from internal.sessions where id = $1 and tenant_id = $2 and user_id = $3",
      [who.sessionId, req.tenant.id, who.userId],
    );
    if (s.rowCount === 0) throw sessionNotFound();
    const user = await findUserById(tx, req.tenant.id, who.userId);
    if (!user) throw new AuthError(403, "user_not_found", "User from sub claim in JWT does not exist");
    if (user.is_anonymous)
      throw new AuthError(403, "no_authorization", "Anonymous user not allowed to perform these actions");
    return user;
  }

  /** GoTrue asks an aal2 session to add or remove a passkey of a user with a verified factor. */
  private async requireManagementAal(tx: Tx, user: UserRow, who: TokenUser): Promise<void> {
    const verified = await tx.query(
      "select 1 from internal.mfa_factors where user_id = $1 and tenant_id = $2 and status = 'verified' limit 1",
      [user.id, user.tenant_id],
    );
    if (verified.rowCount === 0) return;
    const session = await loadSession(tx, who.sessionId);
    if (session.aal !== "aal2")
      throw new AuthError(403, "insufficient_aal", "AAL2 required to manage passkeys");
  }

  /** Stores a challenge, and drops the tenant's expired ones. */
  private async storeChallenge(
    tx: Tx,
    tenantId: string,
    kind: "registration" | "authentication",
    userId: string | null,
    challenge: string,
    rpId: string,
  ): Promise<{ id: string; expiresAt: number }> {
    await tx.query("delete from internal.passkey_challenges where tenant_id = $1 and expires_at < now()", [
      tenantId,
    ]);
    const row = (
      await tx.query<{ id: string; expires_at: Date }>(
        `insert into internal.passkey_challenges (tenant_id, user_id, kind, challenge, rp_id, expires_at)
         values ($1, $2, $3, $4, $5, now() + make_interval(secs => $6)) returning id, expires_at`,
        [tenantId, userId, kind, challenge, rpId, CHALLENGE_SECONDS],
      )
    ).rows[0];
    if (!row) throw new Error("insert into passkey_challenges returned no row");
    return { id: row.id, expiresAt: Math.floor(row.expires_at.getTime() / 1000) };
  }

  /** Uses a challenge up: deleted in a transaction that commits before anything else is checked. */
  private async consumeChallenge(
    req: RequestInfo,
    id: string,
    kind: "registration" | "authentication",
    userId: string | null,
  ): Promise<ChallengeRow> {
    const row = await this.db.asService(
      async (tx) =>
        (
          await tx.query<ChallengeRow>(
            `delete from internal.passkey_challenges
             where id = $1 and tenant_id = $2 and kind = $3 and user_id is not distinct from $4::uuid
             returning id, user_id, challenge, rp_id, expires_at <= now() as expired`,
            [id, req.tenant.id, kind, userId],
          )
        ).rows[0],
    );
    if (!row) throw challengeNotFound();
    if (row.expired) throw challengeExpired();
    return row;
  }

  /** The origins an answer to a challenge for `rpId` may come from. */
  private expectedOrigins(req: RequestInfo, settings: AuthSettings, rpId: string): string[] {
    const origins = tenantOrigins(this.publicUrl, req.tenant, settings).filter((o) =>
      underRp(hostOf(o), rpId),
    );
    // None: nothing can match (verifyRegistrationResponse needs one to compare with).
    return origins.length > 0 ? origins : ["null:"];
  }

  /** POST /passkeys/registration/options: a challenge for the signed-in user's new passkey. */
  async registrationOptions(req: RequestInfo, who: TokenUser, origin: string | undefined) {
    const settings = this.settings(req);
    const rpId = relyingPartyId(this.publicUrl, req.tenant, settings, origin);
    return this.db.asService(async (tx) => {
      const user = await this.user(tx, req, who);
      await this.requireManagementAal(tx, user, who);
      const existing = (
        await tx.query<{ credential_id: string; transports: string[] }>(
          "select credential_id, transports from internal.passkeys where tenant_id = $1 and user_id = $2 order by created_at",
          [req.tenant.id, user.id],
        )
      ).rows;
      if (existing.length >= MAX_PASSKEYS_PER_USER)
        throw new AuthError(422, "too_many_passkeys", "Maximum number of passkeys reached");
      const options = await generateRegistrationOptions({
        rpName: displayName(req.tenant) ?? rpId,
        rpID: rpId,
        // The user handle is the user's id, as GoTrue makes it: an assertion's userHandle names them.
        userID: new TextEncoder().encode(user.id),
        userName: user.email ?? user.id,
        userDisplayName: user.email ?? "",
        attestationType: "none",
        excludeCredentials: existing.map((c) => ({ id: c.credential_id, transports: c.transports })),
        authenticatorSelection: { residentKey: "required", userVerification: "preferred" },
        timeout: CHALLENGE_SECONDS * 1000,
      });
      const stored = await this.storeChallenge(
        tx,
        req.tenant.id,
        "registration",
        user.id,
        options.challenge,
        rpId,
      );
      return { challenge_id: stored.id, options, expires_at: stored.expiresAt };
    });
  }

  /** POST /passkeys/registration/verify: the attestation checked, the passkey stored. */
  async registrationVerify(req: RequestInfo, who: TokenUser, body: Record<string, unknown>) {
    const settings = this.settings(req);
    const { challengeId, credential } = credentialOf(body);
    await this.db.asService(async (tx) => {
      const user = await this.user(tx, req, who);
      await this.requireManagementAal(tx, user, who);
    });
    const challenge = await this.consumeChallenge(req, challengeId, "registration", who.userId);
    let info: Awaited<ReturnType<typeof verifyRegistrationResponse>>["registrationInfo"];
    try {
      const verified = await verifyRegistrationResponse({
        response: credential as unknown as RegistrationResponseJSON,
        expectedChallenge: challenge.challenge,
        expectedOrigin: this.expectedOrigins(req, settings, challenge.rp_id),
        expectedRPID: challenge.rp_id,
        requireUserVerification: false,
      });
      info = verified.verified ? verified.registrationInfo : undefined;
    } catch {
      info = undefined;
    }
    if (!info) throw verificationFailed();
    const registered = info;
    this.actAs(who.userId);
    return this.db.asService(async (tx) => {
      const user = await this.user(tx, req, who);
      // Counted again under the user's lock: two registrations at once make no eleventh passkey.
      await tx.query("select 1 from internal.users where id = $1 for update", [user.id]);
      const count = (
        await tx.query<{ n: string }>(
          "select count(*) as n from internal.passkeys where tenant_id = $1 and user_id = $2",
          [req.tenant.id, user.id],
        )
      ).rows[0];
      if (Number(count?.n ?? 0) >= MAX_PASSKEYS_PER_USER)
        throw new AuthError(422, "too_many_passkeys", "Maximum number of passkeys reached");
      const c = registered.credential;
      let row: PasskeyRow | undefined;
      try {
        row = (
          await tx.query<PasskeyRow>(
            `insert into internal.passkeys (tenant_id, user_id, credential_id, public_key, sign_count,
               transports, aaguid, device_type, backed_up, rp_id)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning *`,
            [
              req.tenant.id,
              user.id,
              c.id,
              Buffer.from(c.publicKey),
              c.counter,
              (c.transports ?? []).slice(0, 10),
              registered.aaguid,
              registered.credentialDeviceType,
              registered.credentialBackedUp,
              challenge.rp_id,
            ],
          )
        ).rows[0];
      } catch (error) {
        if (asDbError(error)?.sqlstate === "23505")
          throw new AuthError(422, "webauthn_credential_exists", "This credential is already registered");
        throw error;
      }
      if (!row) throw new Error("insert into passkeys returned no row");
      await this.audit(tx, req.tenant.id, "auth.passkey_created", user.id, { passkey_id: row.id });
      const { last_used_at: _unused, ...created } = item(row);
      return created;
    });
  }

  /** POST /passkeys/authentication/options: a challenge any of the tenant's passkeys may answer. */
  async authenticationOptions(req: RequestInfo, origin: string | undefined) {
    const settings = this.settings(req);
    const limit = settings.rate_limits.signin_per_ip;
    const counted = await consume(
      this.db,
      `auth:${req.tenant.id}:signin_per_ip:${req.ip ?? "unknown"}`,
      limit,
    );
    if (!counted.allowed)
      throw new AuthError(429, "over_request_rate_limit", "Request rate limit reached", {
        retryAfter: counted.retryAfter,
      });
    const rpId = relyingPartyId(this.publicUrl, req.tenant, settings, origin);
    const options = await generateAuthenticationOptions({
      rpID: rpId,
      allowCredentials: [],
      userVerification: "preferred",
      timeout: CHALLENGE_SECONDS * 1000,
    });
    const stored = await this.db.asService((tx) =>
      this.storeChallenge(tx, req.tenant.id, "authentication", null, options.challenge, rpId),
    );
    return { challenge_id: stored.id, options, expires_at: stored.expiresAt };
  }

  /** POST /passkeys/authentication/verify: the assertion checked, a session as any sign-in's. */
  async authenticationVerify(req: RequestInfo, body: Record<string, unknown>) {
    const settings = this.settings(req);
    const { challengeId, credential } = credentialOf(body);
    const challenge = await this.consumeChallenge(req, challengeId, "authentication", null);
    const response = credential as unknown as AuthenticationResponseJSON;
    const credentialId = typeof response.id === "string" ? response.id : "";
    const passkey = await this.db.asService(
      async (tx) =>
        (
          await tx.query<PasskeyRow>(
            "select * from internal.passkeys where tenant_id = $1 and credential_id = $2",
            [req.tenant.id, credentialId],
          )
        ).rows[0],
      { readOnly: true },
    );
    // Another tenant's passkey, or one removed: nothing here knows it.
    if (!passkey) throw verificationFailed();
    // The authenticator's user handle, when it gives one, must name the passkey's user.
    const handle = response.response?.userHandle;
    if (handle && Buffer.from(handle, "base64url").toString("utf8") !== passkey.user_id)
      throw verificationFailed();
    let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>> | undefined;
    try {
      verified = await verifyAuthenticationResponse({
        response,
        expectedChallenge: challenge.challenge,
        expectedOrigin: this.expectedOrigins(req, settings, challenge.rp_id),
        expectedRPID: challenge.rp_id,
        credential: {
          id: passkey.credential_id,
          publicKey: new Uint8Array(passkey.public_key),
          counter: Number(passkey.sign_count),
          transports: passkey.transports as never,
        },
        requireUserVerification: false,
      });
    } catch {
      verified = undefined;
    }
    if (!verified?.verified) throw verificationFailed();
    const newCounter = verified.authenticationInfo.newCounter;
    const ctx = this.context(req, settings);
    this.actAs(passkey.user_id);
    return this.db.asService(async (tx) => {
      // The counter again, under the passkey's lock: two uses of one assertion at once, or a
      // clone's, cannot both pass.
      const current = (
        await tx.query<{ sign_count: string }>(
          "select sign_count from internal.passkeys where id = $1 for update",
          [passkey.id],
        )
      ).rows[0];
      if (!current) throw verificationFailed();
      const stored = Number(current.sign_count);
      if ((stored > 0 || newCounter > 0) && newCounter <= stored) throw verificationFailed();
      const user = await findUserById(tx, req.tenant.id, passkey.user_id);
      if (!user) throw verificationFailed();
      if (user.email && !user.email_confirmed_at && settings.email_confirmation)
        throw new AuthError(403, "email_not_confirmed", "Email not confirmed");
      await tx.query("update internal.passkeys set sign_count = $2, last_used_at = now() where id = $1", [
        passkey.id,
        newCounter,
      ]);
      await this.audit(tx, req.tenant.id, "auth.passkey_sign_in", user.id, { passkey_id: passkey.id });
      return startSession(tx, ctx, user, "passkey");
    });
  }

  /** GET /passkeys: the signed-in user's passkeys, oldest first. */
  async list(req: RequestInfo, who: TokenUser) {
    this.settings(req);
    return this.db.asService(
      async (tx) => {
        const user = await this.user(tx, req, who);
        return listOf(tx, req.tenant.id, user.id);
      },
      { readOnly: true },
    );
  }

  /** PATCH /passkeys/{id}: a new friendly name. */
  async update(req: RequestInfo, who: TokenUser, id: string, body: Record<string, unknown>) {
    this.settings(req);
    if (!UUID.test(id)) throw passkeyNotFound();
    const name = body.friendly_name;
    if (typeof name !== "string" || name.trim() === "") throw validationFailed("friendly_name is required");
    if ([...name].length > 120) throw validationFailed("friendly_name must be 120 characters or less");
    this.actAs(who.userId);
    return this.db.asService(async (tx) => {
      const user = await this.user(tx, req, who);
      const row = (
        await tx.query<PasskeyRow>(
          "update internal.passkeys set friendly_name = $4 where id = $1 and tenant_id = $2 and user_id = $3 returning *",
          [id.toLowerCase(), req.tenant.id, user.id, name.trim()],
        )
      ).rows[0];
      if (!row) throw passkeyNotFound();
      await this.audit(tx, req.tenant.id, "auth.passkey_updated", user.id, { passkey_id: row.id });
      return item(row);
    });
  }

  /** DELETE /passkeys/{id}. */
  async remove(req: RequestInfo, who: TokenUser, id: string): Promise<void> {
    this.settings(req);
    this.actAs(who.userId);
    await this.db.asService(async (tx) => {
      const user = await this.user(tx, req, who);
      await this.requireManagementAal(tx, user, who);
      if (!UUID.test(id)) throw passkeyNotFound();
      const row = (
        await tx.query<{ id: string }>(
          "delete from internal.passkeys where id = $1 and tenant_id = $2 and user_id = $3 returning id",
          [id.toLowerCase(), req.tenant.id, user.id],
        )
      ).rows[0];
      if (!row) throw passkeyNotFound();
      await this.audit(tx, req.tenant.id, "auth.passkey_deleted", user.id, { passkey_id: row.id });
    });
  }

  /** GET /admin/users/{id}/passkeys (auth.admin.passkey.listPasskeys): the tenant's user's. */
  async adminList(req: RequestInfo, userId: string) {
    this.settings(req);
    return this.db.asService(
      async (tx) => {
        const user = await this.adminUser(tx, req, userId);
        return listOf(tx, req.tenant.id, user.id);
      },
      { readOnly: true },
    );
  }

  /** DELETE /admin/users/{id}/passkeys/{passkeyId} (auth.admin.passkey.deletePasskey). */
  async adminRemove(req: RequestInfo, userId: string, passkeyId: string): Promise<void> {
    this.settings(req);
    await this.db.asService(async (tx) => {
      const user = await this.adminUser(tx, req, userId);
      if (!UUID.test(passkeyId)) throw passkeyNotFound();
      const row = (
        await tx.query<{ id: string }>(
          "delete from internal.passkeys where id = $1 and tenant_id = $2 and user_id = $3 returning id",
          [passkeyId.toLowerCase(), req.tenant.id, user.id],
        )
      ).rows[0];
      if (!row) throw passkeyNotFound();
      await this.audit(tx, req.tenant.id, "auth.passkey_deleted", user.id, { passkey_id: row.id });
    });
  }

  private async adminUser(tx: Tx, req: RequestInfo, userId: string): Promise<UserRow> {
    const user = await findUserById(tx, req.tenant.id, checkUserId(userId));
    if (!user || (await isStaffUser(tx, user.id)))
      throw new AuthError(404, "user_not_found", "User not found");
    return user;
  }
}

async function listOf(tx: Tx, tenantId: string, userId: string) {
  const rows = (
    await tx.query<PasskeyRow>(
      "select * from internal.passkeys where tenant_id = $1 and user_id = $2 order by created_at, id",
      [tenantId, userId],
    )
  ).rows;
  return rows.map(item);
}
