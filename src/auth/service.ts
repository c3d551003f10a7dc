import { randomUUID } from "node:crypto";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import { consume } from "../http/rate-limit.ts";
import type { Mailer } from "../mail/mailer.ts";
import { isOwnAppUrl, portalPathUrl } from "../portal/links.ts";
import type { TenantAuthInfo } from "../tenancy/directory.ts";
import { displayNameOf, provisionAccounts } from "../tenancy/memberships.ts";
import { AuthAdmin } from "./admin.ts";
import { validateEmail } from "./email-address.ts";
import {
  checkMailInterval,
  forgetCodeFailures,
  sendEmailToken,
  sendReauthenticationCode,
  spendReauthenticationCode,
  useEmailToken,
  type VerifyInput,
} from "./email-tokens.ts";
import {
  AuthError,
  invalidCredentials,
  Refusal,
  refusedAfterCommit,
  sessionNotFound,
  validationFailed,
} from "./errors.ts";
import { inviteAddress } from "./invite.ts";
import { challengeFactor, enrollFactor, loadSession, unenrollFactor, verifyFactor } from "./mfa.ts";
import { enabledProviders, OidcFlows } from "./oidc.ts";
import { Passkeys } from "./passkeys.ts";
import { checkPassword, hashPassword, verifyPassword } from "./passwords.ts";
import {
  endSessions,
  type LogoutScope,
  rotateRefreshToken,
  type SessionContext,
  sessionExists,
  startSession,
} from "./sessions.ts";
import { authSettings, type RateLimitName } from "./settings.ts";
import { sha256 } from "./tokens.ts";
import {
  ensureEmailIdentity,
  findUserByEmail,
  findUserById,
  insertUser,
  type UserRow,
  updateUser,
  userJson,
} from "./users.ts";

/**
 * The GoTrue-compatible flows behind /auth/v1. Auth tables are internal, so every flow runs on the
 * service path; each checks the caller itself (the tenant from the apikey, the user from a
 * verified access token) before it reads or writes anything.
 */

export interface RequestInfo {
  tenant: TenantAuthInfo;
  ip: string | undefined;
  userAgent: string | undefined;
}

/** The user a verified access token names. */
export interface TokenUser {
  userId: string;
  sessionId: string;
}

/** What a sign-up for an already registered address answers when confirmation is on. */
function obfuscatedUser(email: string, data: Record<string, unknown>): Record<string, unknown> {
  const now = new Date().toISOString();
  return {
    id: randomUUID(),
    aud: "authenticated",
    role: "authenticated",
    email,
    phone: "",
    confirmation_sent_at: now,
    app_metadata: { provider: "email", providers: ["email"] },
    user_metadata: data,
    identities: [],
    created_at: now,
    updated_at: now,
    is_anonymous: false,
  };
}

/** GoTrue keeps anonymous users away from second factors. */
function notAnonymous(user: UserRow): UserRow {
  if (user.is_anonymous)
    throw new AuthError(403, "no_authorization", "Anonymous user not allowed to perform these actions");
  return user;
}

const absent = (v: unknown) => v === undefined || v === null || v === "";

/** The columns that make an anonymous user permanent: an e-mail user from now on. */
function permanent(appMetadata: Record<string, unknown>): Record<string, unknown> {
  return {
    is_anonymous: false,
    raw_app_meta_data: JSON.stringify({ ...appMetadata, provider: "email", providers: ["email"] }),
  };
}

/** A user who was anonymous has an address now: its identity, and a personal account as at sign-up. */
async function becamePermanent(tx: Parameters<Parameters<Db["asService"]>[0]>[0], user: UserRow) {
  if (!user.email) return;
  await ensureEmailIdentity(tx, user);
  await provisionAccounts(
    tx,
    { id: user.id, tenant_id: user.tenant_id, email: user.email },
    displayNameOf(user.raw_user_meta_data),
  );
}

export class AuthService {
  private readonly db: Db;
  private readonly mailer: Mailer;
  private readonly publicUrl: string;

  /** GoTrue's admin API for a tenant's service-role key (src/auth/admin.ts). */
  readonly admin: AuthAdmin;

  /** Sign-in with the tenant's OpenID Connect providers (src/auth/oidc.ts). */
  readonly oidc: OidcFlows;

  /** Passkeys (src/auth/passkeys.ts). */
  readonly passkeys: Passkeys;

  constructor(deps: { db: Db; mailer: Mailer; publicUrl: string; oidcAllowPrivate?: boolean }) {
    this.db = deps.db;
    this.mailer = deps.mailer;
    this.publicUrl = deps.publicUrl;
    this.admin = new AuthAdmin({ db: deps.db, publicUrl: deps.publicUrl });
    this.oidc = new OidcFlows({
      db: deps.db,
      publicUrl: deps.publicUrl,
      allowPrivate: deps.oidcAllowPrivate ?? false,
    });
    this.passkeys = new Passkeys({ db: deps.db, publicUrl: deps.publicUrl });
  }

  /**
   * Whether `url` is one of this server's own apps for the tenant: the console (/console,
   * docs/console.md, where a link mailed to staff by `backline staff add` leads) or the tenant's
   * portal (/portal, or its own domains: docs/portal.md), whatever the tenant's site_url says.
   */
  isOwnAppUrl(tenant: { settings?: Record<string, unknown> }, url: string): boolean {
    return isOwnAppUrl(this.publicUrl, tenant, url);
  }

  /**
   * Where a used link goes when neither its redirect_to nor the tenant's site_url says: the
   * tenant's portal under PUBLIC_URL (docs/portal.md, "Links in e-mails").
   */
  portalCallbackUrl(tenant: { slug: string }): string {
    return `${portalPathUrl(this.publicUrl, tenant.slug)}auth/callback`;
  }

  private context(req: RequestInfo): SessionContext & { publicUrl: string } {
    return {
      tenant: req.tenant,
      settings: authSettings(req.tenant.settings),
      issuer: `${this.publicUrl}/auth/v1`,
      userAgent: req.userAgent,
      ip: req.ip,
      publicUrl: this.publicUrl,
    };
  }

  /** Counts a hit against the tenant's limit; 429 over_request_rate_limit when it is exhausted. */
  private async limit(req: RequestInfo, name: RateLimitName, subject: string): Promise<void> {
    const limit = authSettings(req.tenant.settings).rate_limits[name];
    const result = await consume(this.db, `auth:${req.tenant.id}:${name}:${subject}`, limit);
    if (!result.allowed) {
      throw new AuthError(429, "over_request_rate_limit", "Request rate limit reached", {
        retryAfter: result.retryAfter,
      });
    }
  }

  /** Whether the user with this address holds a session started from this client address. */
  private async knownClient(tenantId: string, email: string, ip: string): Promise<boolean> {
    return this.db.asService(
      async (tx) =>
        (
          await tx.query(
            `select 1 from internal.sessions s
             join internal.users u on u.id = s.user_id and u.tenant_id = s.tenant_id
             where u.tenant_id = $1 and u.email = $2 and u.deleted_at is null and s.ip = $3
             limit 1`,
            [tenantId, email, ip],
          )
        ).rowCount > 0,
      { readOnly: true },
    );
  }

  private checkPassword(password: unknown, settings: ReturnType<typeof authSettings>): string {
    return checkPassword(password, settings);
  }

  async signup(
    req: RequestInfo,
    body: { email?: unknown; phone?: unknown; password?: unknown; data?: unknown },
    redirectTo: string | undefined,
  ) {
    const ctx = this.context(req);
    // A sign-up with neither an e-mail address nor a phone number is an anonymous sign-in, as
    // GoTrue's route decides (supabase-js signInAnonymously posts `{data}` here).
    if (absent(body.email)) {
      if (absent(body.phone)) return this.signInAnonymously(req, body);
      throw new AuthError(400, "phone_provider_disabled", "Phone signups are disabled");
    }
    if (ctx.settings.disable_signup)
      throw new AuthError(422, "signup_disabled", "Signups not allowed for this instance");
    const email = validateEmail(body.email);
    await this.limit(req, "signup_per_ip", req.ip ?? "unknown");
    if (ctx.settings.email_confirmation) await this.limit(req, "email_sent_per_address", email);
    const password = this.checkPassword(body.password, ctx.settings);
    const data = body.data === undefined || body.data === null ? {} : body.data;
    if (typeof data !== "object" || Array.isArray(data)) throw validationFailed("data must be an object");
    const passwordHash = await hashPassword(password);
    // A repeated sign-up for an unconfirmed address compares its password with the stored one
    // before the transaction (scrypt is slow; a transaction is not held open for it).
    const prior = await this.db.asService((tx) => findUserByEmail(tx, req.tenant.id, email), {
      readOnly: true,
    });
    const samePassword =
      prior?.encrypted_password && !prior.email_confirmed_at
        ? await verifyPassword(password, prior.encrypted_password)
        : false;

    const result = await this.db.asService(async (tx) => {
      const existing = await findUserByEmail(tx, req.tenant.id, email);
      if (existing && !ctx.settings.email_confirmation) {
        throw new AuthError(422, "user_already_exists", "User already registered");
      }
      if (existing?.email_confirmed_at) {
        // With confirmation on, a sign-up must not reveal that an address is registered: answer as
        // for a new user (no session, no identities), as GoTrue does. The owner can sign in or recover.
        return { user: obfuscatedUser(email, data as Record<string, unknown>) };
      }
      if (existing) {
        // Signed up (or invited) before, never confirmed: send the confirmation again; the newer
        // mail's link and code replace the older ones. Nobody has proven the address yet, so a
        // sign-up with another password means two people claim it, as does a sign-up for an
        // invited address (the inviter claimed it for its owner): no sign-up password is kept,
        // and whoever proves the address chooses one (docs/auth.md, "Sign-up, confirmation and
        // invitations"). A stranger's sign-up password never survives the owner's confirmation.
        const user = (await findUserById(tx, req.tenant.id, existing.id, true)) ?? existing;
        let changes: Record<string, unknown> = {};
        if (user.signup_contested_at) {
          changes = {};
        } else if (user.invited_at) {
          changes = { encrypted_password: null, signup_contested_at: new Date() };
        } else if (user.encrypted_password === null) {
          changes = { encrypted_password: passwordHash };
        } else if (!(samePassword && user.encrypted_password === prior?.encrypted_password)) {
          changes = { encrypted_password: null, signup_contested_at: new Date() };
        }
        const updated = await updateUser(tx, user, changes);
        await sendEmailToken(tx, this.mailer, ctx, updated, "signup", email, redirectTo);
        // The answer shows nothing another person gave for this address: its metadata is this
        // request's, and an invited user's identities are left out, as GoTrue does.
        const shown = await userJson(tx, (await findUserById(tx, req.tenant.id, user.id)) ?? updated);
        return {
          user: {
            ...shown,
            user_metadata: data,
            ...(updated.invited_at ? { identities: [] } : {}),
          },
        };
      }
      const user = await insertUser(tx, {
        tenantId: req.tenant.id,
        email,
        passwordHash,
        userMetadata: data as Record<string, unknown>,
        confirmed: !ctx.settings.email_confirmation,
      }).catch((error: unknown) => {
        // Two sign-ups for the same address at once: the second loses on the unique index.
        if (asDbError(error)?.sqlstate === "23505")
          throw new AuthError(422, "user_already_exists", "User already registered");
        throw error;
      });
      // A personal account, unless the address is invited: it joins those accounts once proven,
      // and the proof (not this sign-up) decides its password.
      const invited = await provisionAccounts(
        tx,
        { id: user.id, tenant_id: user.tenant_id, email },
        displayNameOf(data as Record<string, unknown>),
      );
      if (invited) await updateUser(tx, user, { signup_contested_at: new Date() });
      if (ctx.settings.email_confirmation) {
        await sendEmailToken(tx, this.mailer, ctx, user, "signup", email, redirectTo);
        return { user: await userJson(tx, (await findUserById(tx, req.tenant.id, user.id)) ?? user) };
      }
      return { session: await startSession(tx, ctx, user, "password") };
    });
    void this.mailer.deliver();
    return result.session ?? result.user;
  }

  /**
   * POST /signup without an address (supabase-js signInAnonymously): a user with no address and a
   * session whose token says `is_anonymous: true`. Off unless the tenant turns `anonymous_users`
   * on; limited per client address (`anonymous_per_ip`). The user belongs to no account (the
   * database refuses it, migration 0045) until `updateUser({ email })` makes it permanent.
   */
  async signInAnonymously(req: RequestInfo, body: { data?: unknown }) {
    const ctx = this.context(req);
    if (!ctx.settings.anonymous_users)
      throw new AuthError(422, "anonymous_provider_disabled", "Anonymous sign-ins are disabled");
    await this.limit(req, "anonymous_per_ip", req.ip ?? "unknown");
    if (ctx.settings.disable_signup)
      throw new AuthError(422, "signup_disabled", "Signups not allowed for this instance");
    const data = body.data === undefined || body.data === null ? {} : body.data;
    if (typeof data !== "object" || Array.isArray(data)) throw validationFailed("data must be an object");
    return this.db.asService(async (tx) => {
      const user = await insertUser(tx, {
        tenantId: req.tenant.id,
        email: null,
        passwordHash: null,
        userMetadata: data as Record<string, unknown>,
        confirmed: false,
        anonymous: true,
      });
      return startSession(tx, ctx, user, "anonymous");
    });
  }

  async signInWithPassword(req: RequestInfo, body: { email?: unknown; phone?: unknown; password?: unknown }) {
    const ctx = this.context(req);
    // GoTrue's order: both given, or a phone (no phone sign-in here), before the address is read.
    if (!absent(body.phone)) {
      if (!absent(body.email))
        throw validationFailed("Only an email address or phone number should be provided on login.");
      throw new AuthError(400, "phone_provider_disabled", "Phone logins are disabled");
    }
    if (absent(body.email)) throw validationFailed("missing email or phone");
    const email = validateEmail(body.email);
    if (typeof body.password !== "string" || body.password === "")
      throw validationFailed("Password is required");
    // Throttled per client address, per address and client address together, and — for clients
    // that hold no session of the user — per address over a longer window (docs/auth.md, "Rate
    // limits"): a stranger's wrong guesses lock out their own client address, not the user.
    const ip = req.ip ?? "unknown";
    await this.limit(req, "signin_per_ip", ip);
    await this.limit(req, "signin_per_email_ip", `${email}|${ip}`);
    if (!(await this.knownClient(req.tenant.id, email, ip))) await this.limit(req, "signin_per_email", email);
    const password = body.password;
    return this.db.asService(async (tx) => {
      const user = await findUserByEmail(tx, req.tenant.id, email);
      const ok = await verifyPassword(password, user?.encrypted_password ?? null);
      if (!user || !ok) throw invalidCredentials();
      if (user.banned_until && user.banned_until > new Date())
        throw new AuthError(400, "user_banned", "User is banned");
      if (!user.email_confirmed_at && ctx.settings.email_confirmation) {
        throw new AuthError(400, "email_not_confirmed", "Email not confirmed");
      }
      return startSession(tx, ctx, user, "password");
    });
  }

  async refresh(req: RequestInfo, body: { refresh_token?: unknown }) {
    const ctx = this.context(req);
    if (typeof body.refresh_token !== "string" || body.refresh_token === "") {
      throw validationFailed("refresh_token is required");
    }
    await this.limit(req, "refresh_per_ip", req.ip ?? "unknown");
    const token = body.refresh_token;
    const outcome = await this.db.asService((tx) => rotateRefreshToken(tx, ctx, token));
    if (!outcome.ok) throw outcome.error;
    return outcome.session;
  }

  private async currentUser(
    tx: Parameters<Parameters<Db["asService"]>[0]>[0],
    req: RequestInfo,
    who: TokenUser,
    lock = false,
  ) {
    if (!(await sessionExists(tx, req.tenant.id, who.userId, who.sessionId))) throw sessionNotFound();
    const user = await findUserById(tx, req.tenant.id, who.userId, lock);
    if (!user) throw new AuthError(403, "user_not_found", "User from sub claim in JWT does not exist");
    return user;
  }

  async getUser(req: RequestInfo, who: TokenUser) {
    return this.db.asService(async (tx) => userJson(tx, await this.currentUser(tx, req, who)), {
      readOnly: true,
    });
  }

  async updateUser(
    req: RequestInfo,
    who: TokenUser,
    body: { email?: unknown; password?: unknown; data?: unknown; nonce?: unknown },
    redirectTo: string | undefined,
  ) {
    const ctx = this.context(req);
    if (body.nonce !== undefined && body.nonce !== null && typeof body.nonce !== "string")
      throw validationFailed("nonce must be a string");
    const nonce = typeof body.nonce === "string" ? body.nonce : "";
    const newEmail = body.email === undefined ? undefined : validateEmail(body.email);
    const password =
      body.password === undefined ? undefined : this.checkPassword(body.password, ctx.settings);
    if (
      body.data !== undefined &&
      (typeof body.data !== "object" || body.data === null || Array.isArray(body.data))
    ) {
      throw validationFailed("data must be an object");
    }
    const passwordHash = password === undefined ? undefined : await hashPassword(password);
    const result = await this.db.asService(async (tx) => {
      let user = await this.currentUser(tx, req, who, true);
      const wasAnonymous = user.is_anonymous;
      if (wasAnonymous && passwordHash && newEmail === undefined && !user.email) {
        throw new AuthError(
          422,
          "validation_failed",
          "Updating password of an anonymous user without an email or phone is not allowed",
        );
      }
      if (passwordHash && ctx.settings.secure_password_change && !(await this.recentSignIn(tx, who))) {
        // GoTrue's secure password change: a session older than a day needs the code that
        // reauthenticate mailed. A wrong code voids it, in a transaction that commits.
        if (nonce === "")
          throw new AuthError(400, "reauthentication_needed", "Password update requires reauthentication");
        if (!(await spendReauthenticationCode(tx, req.tenant.id, user.id, nonce)))
          return new Refusal(
            new AuthError(422, "reauthentication_not_valid", "Nonce has expired or is invalid"),
          );
      }
      const changes: Record<string, unknown> = {};
      if (passwordHash) changes.encrypted_password = passwordHash;
      if (body.data !== undefined) {
        // Top-level keys are merged into user_metadata, as GoTrue does; a null value removes the key.
        const merged = { ...user.raw_user_meta_data };
        for (const [k, v] of Object.entries(body.data as Record<string, unknown>)) {
          if (v === null) delete merged[k];
          else merged[k] = v;
        }
        changes.raw_user_meta_data = JSON.stringify(merged);
      }
      if (newEmail !== undefined && newEmail !== user.email) {
        const taken = await findUserByEmail(tx, req.tenant.id, newEmail);
        if (taken)
          throw new AuthError(
            422,
            "email_exists",
            "A user with this email address has already been registered",
          );
        if (ctx.settings.email_confirmation) {
          changes.email_change = newEmail;
        } else {
          changes.email = newEmail;
          // Without confirmation an anonymous user's address makes them permanent at once, as a
          // sign-up would (GoTrue does the same).
          if (wasAnonymous) Object.assign(changes, permanent(user.raw_app_meta_data));
        }
      }
      user = await updateUser(tx, user, changes);
      if (wasAnonymous && !user.is_anonymous) await becamePermanent(tx, user);
      if (changes.email_change) {
        await sendEmailToken(tx, this.mailer, ctx, user, "email_change", newEmail as string, redirectTo);
        user = (await findUserById(tx, req.tenant.id, user.id)) ?? user;
      }
      return userJson(tx, user);
    });
    void this.mailer.deliver();
    return refusedAfterCommit(result);
  }

  /** Whether the token's session signed in (or reauthenticated) within the last 24 hours. */
  private async recentSignIn(tx: Parameters<Parameters<Db["asService"]>[0]>[0], who: TokenUser) {
    const r = await tx.query(
      "select 1 from internal.sessions where id = $1 and created_at > now() - interval '24 hours'",
      [who.sessionId],
    );
    return r.rowCount > 0;
  }

  /**
   * POST /resend (supabase-js resend): the sign-up confirmation, or the e-mail change's, mailed
   * again — at most once per `mail_interval_seconds` — to an address with something to confirm;
   * `{}` whether or not it has (no account enumeration).
   */
  async resend(
    req: RequestInfo,
    body: { type?: unknown; email?: unknown; phone?: unknown },
    redirectTo: string | undefined,
  ) {
    const ctx = this.context(req);
    const type = body.type;
    if (type === "sms" || type === "phone_change")
      throw new AuthError(400, "phone_provider_disabled", "Phone logins are disabled");
    if (type !== "signup" && type !== "email_change")
      throw validationFailed("Missing one of these types: signup, email_change, sms, phone_change");
    if (!absent(body.phone)) {
      if (!absent(body.email))
        throw validationFailed("Only an email address or phone number should be provided.");
      throw new AuthError(400, "phone_provider_disabled", "Phone logins are disabled");
    }
    if (absent(body.email))
      throw validationFailed(
        type === "signup"
          ? "Type provided requires an email address"
          : "Missing email address or phone number",
      );
    const email = validateEmail(body.email);
    await this.limit(req, "email_sent_per_address", email);
    await this.db.asService(async (tx) => {
      const user = await findUserByEmail(tx, req.tenant.id, email);
      if (!user) return;
      const interval = ctx.settings.mail_interval_seconds;
      if (type === "signup") {
        if (user.email_confirmed_at) return;
        await checkMailInterval(tx, req.tenant.id, user.id, "signup", interval);
        await sendEmailToken(tx, this.mailer, ctx, user, "signup", email, redirectTo);
      } else {
        if (!user.email_change) return;
        await checkMailInterval(tx, req.tenant.id, user.id, "email_change", interval);
        await sendEmailToken(tx, this.mailer, ctx, user, "email_change", user.email_change, redirectTo);
      }
    });
    void this.mailer.deliver();
    return {};
  }

  /**
   * GET /reauthenticate (supabase-js reauthenticate): a six-digit code mailed to the signed-in
   * user's confirmed address, for updateUser({ password, nonce }).
   */
  async reauthenticate(req: RequestInfo, who: TokenUser) {
    const ctx = this.context(req);
    await this.db.asService(async (tx) => {
      const user = await this.currentUser(tx, req, who, true);
      if (!user.email)
        throw validationFailed("Reauthentication requires the user to have an email or a phone number");
      if (!user.email_confirmed_at)
        throw new AuthError(422, "email_not_confirmed", "Please verify your email first.");
      await checkMailInterval(
        tx,
        req.tenant.id,
        user.id,
        "reauthentication",
        ctx.settings.mail_interval_seconds,
      );
      await sendReauthenticationCode(tx, this.mailer, ctx, user, user.email);
    });
    void this.mailer.deliver();
    return {};
  }

  async logout(req: RequestInfo, who: TokenUser, scope: LogoutScope) {
    await this.db.asService((tx) => endSessions(tx, req.tenant.id, who.userId, who.sessionId, scope));
  }

  /** POST /factors (supabase-js auth.mfa.enroll): a new TOTP factor, unverified until its first code. */
  async enrollFactor(req: RequestInfo, who: TokenUser, body: Record<string, unknown>) {
    const ctx = this.context(req);
    return this.db.asService(async (tx) => {
      const user = notAnonymous(await this.currentUser(tx, req, who, true));
      return enrollFactor(tx, this.db.secrets, ctx, user, await loadSession(tx, who.sessionId), body);
    });
  }

  /** POST /factors/{id}/challenge. */
  async challengeFactor(req: RequestInfo, who: TokenUser, factorId: string) {
    return this.db.asService(async (tx) => {
      const user = notAnonymous(await this.currentUser(tx, req, who));
      return challengeFactor(tx, user, factorId, req.ip);
    });
  }

  /**
   * POST /factors/{id}/verify: every attempt, right or wrong, counts against the user's limit
   * (mfa_verify_per_user) before the code is looked at.
   */
  async verifyFactor(req: RequestInfo, who: TokenUser, factorId: string, body: Record<string, unknown>) {
    const ctx = this.context(req);
    await this.limit(req, "mfa_verify_per_user", who.userId);
    const outcome = await this.db.asService(async (tx) => {
      const user = notAnonymous(await this.currentUser(tx, req, who, true));
      const session = await loadSession(tx, who.sessionId);
      return verifyFactor(tx, this.db.secrets, ctx, user, session, factorId, body);
    });
    return refusedAfterCommit(outcome);
  }

  /** DELETE /factors/{id}: a verified factor only from an aal2 session. */
  async unenrollFactor(req: RequestInfo, who: TokenUser, factorId: string) {
    return this.db.asService(async (tx) => {
      const user = notAnonymous(await this.currentUser(tx, req, who, true));
      return unenrollFactor(tx, user, await loadSession(tx, who.sessionId), factorId);
    });
  }

  /**
   * POST /otp (signInWithOtp with an e-mail address): mails a sign-in link and code to the
   * address's user. An address with no user gets one made (unless `create_user` is false or
   * sign-ups are off) and a sign-up confirmation instead, whose link and code sign in as well, as
   * GoTrue does. Either way the answer is `{}`: it does not tell whether the address is registered.
   */
  async signInWithOtp(
    req: RequestInfo,
    body: { email?: unknown; phone?: unknown; data?: unknown; create_user?: unknown },
    redirectTo: string | undefined,
  ) {
    const ctx = this.context(req);
    if (!absent(body.phone)) {
      if (!absent(body.email))
        throw validationFailed("Only an email address or phone number should be provided");
      throw new AuthError(400, "phone_provider_disabled", "Unsupported phone provider");
    }
    const email = validateEmail(body.email);
    const data = body.data === undefined || body.data === null ? {} : body.data;
    if (typeof data !== "object" || Array.isArray(data)) throw validationFailed("data must be an object");
    if (body.create_user !== undefined && typeof body.create_user !== "boolean")
      throw validationFailed("create_user must be a boolean");
    const createUser = body.create_user !== false;
    await this.limit(req, "email_sent_per_address", email);
    // The limits are counted outside the transaction (they may need the database themselves).
    const known = await this.db.asService((tx) => findUserByEmail(tx, req.tenant.id, email), {
      readOnly: true,
    });
    if (!known) {
      if (!createUser) throw new AuthError(422, "otp_disabled", "Signups not allowed for otp");
      if (ctx.settings.disable_signup)
        throw new AuthError(422, "signup_disabled", "Signups not allowed for this instance");
      await this.limit(req, "signup_per_ip", req.ip ?? "unknown");
    }
    await this.db.asService(async (tx) => {
      const user = await findUserByEmail(tx, req.tenant.id, email);
      if (user) {
        await sendEmailToken(tx, this.mailer, ctx, user, "magiclink", email, redirectTo);
        return;
      }
      const created = await insertUser(tx, {
        tenantId: req.tenant.id,
        email,
        passwordHash: null,
        userMetadata: data as Record<string, unknown>,
        confirmed: false,
      });
      await sendEmailToken(tx, this.mailer, ctx, created, "signup", email, redirectTo);
    });
    void this.mailer.deliver();
    return {};
  }

  /** Sends a recovery mail if the address has a user; answers the same either way (no account enumeration). */
  async recover(req: RequestInfo, body: { email?: unknown }, redirectTo: string | undefined) {
    const ctx = this.context(req);
    const email = validateEmail(body.email);
    await this.limit(req, "email_sent_per_address", email);
    await this.db.asService(async (tx) => {
      const user = await findUserByEmail(tx, req.tenant.id, email);
      if (user) await sendEmailToken(tx, this.mailer, ctx, user, "recovery", email, redirectTo);
      // An address with no user starts its count of wrong codes again too, as if a code had gone.
      else await forgetCodeFailures(tx, req.tenant.id, email);
    });
    void this.mailer.deliver();
    return {};
  }

  /**
   * Uses a link token or a code from an e-mail and signs the user in. Using it proves the address
   * (the database then accepts the address's open invitations, migration 0015). The first proof
   * of an address also ends whatever was set up before it by someone who had not proven it:
   * unless it confirms an uncontested sign-up (whose password is the one that sign-up chose), the
   * password and every session are dropped, and the user chooses a password with the session
   * this answer returns (as after GoTrue's invite link).
   */
  async verify(req: RequestInfo, input: VerifyInput) {
    const ctx = this.context(req);
    await this.limit(req, "verify_per_ip", req.ip ?? "unknown");
    const bound = {
      tenantId: req.tenant.id,
      maxAttempts: ctx.settings.max_code_attempts,
      windowSeconds: ctx.settings.otp_expiry,
    };
    const outcome = await this.db.asService(async (tx) => {
      const used = await useEmailToken(tx, bound, input);
      // A wrong code: counted in this transaction, which commits; refused after it.
      if (used instanceof Refusal) return used;
      const { user, email, kind } = used;
      const now = new Date();
      let changes: Record<string, unknown>;
      if (kind === "email_change") {
        const taken = await findUserByEmail(tx, req.tenant.id, email);
        if (taken && taken.id !== user.id) {
          throw new AuthError(
            422,
            "email_exists",
            "A user with this email address has already been registered",
          );
        }
        changes = { email, email_change: null, email_confirmed_at: now, email_proven_at: now };
        // An anonymous user who proves an address is a permanent user from now on.
        if (user.is_anonymous) Object.assign(changes, permanent(user.raw_app_meta_data));
      } else {
        changes = { email_proven_at: now };
        if (!user.email_confirmed_at) changes.email_confirmed_at = now;
      }
      const firstProof = user.email_proven_at === null && kind !== "email_change";
      if (firstProof) {
        const keepsPassword = kind === "signup" && user.signup_contested_at === null;
        if (!keepsPassword) {
          changes.encrypted_password = null;
          await tx.query("delete from internal.sessions where tenant_id = $1 and user_id = $2", [
            user.tenant_id,
            user.id,
          ]);
        }
        changes.signup_contested_at = null;
      }
      const updated = await updateUser(tx, user, changes);
      if (user.is_anonymous && !updated.is_anonymous) await becamePermanent(tx, updated);
      if (firstProof && updated.email) {
        // Invited by POST /invite with no account to join: their personal account, now.
        await provisionAccounts(
          tx,
          { id: updated.id, tenant_id: updated.tenant_id, email: updated.email },
          displayNameOf(updated.raw_user_meta_data),
        );
      }
      const method = kind === "recovery" ? "recovery" : kind === "email_change" ? "email_change" : "otp";
      return startSession(tx, ctx, updated, method);
    });
    return refusedAfterCommit(outcome);
  }

  /**
   * POST /invite (service-role key only, as GoTrue): makes an invited user for the address if it
   * has none and mails the invite link and code. Refused for an address already proven.
   */
  async invite(req: RequestInfo, body: { email?: unknown; data?: unknown }, redirectTo: string | undefined) {
    const ctx = this.context(req);
    const email = validateEmail(body.email);
    const data = body.data === undefined || body.data === null ? {} : body.data;
    if (typeof data !== "object" || Array.isArray(data)) throw validationFailed("data must be an object");
    const result = await this.db.asService(async (tx) => {
      const user = await inviteAddress(tx, this.mailer, ctx, email, {
        data: data as Record<string, unknown>,
        redirectTo,
      });
      return userJson(tx, user);
    });
    void this.mailer.deliver();
    return result;
  }

  /** The tenant a link token was issued in (the link in an e-mail carries no apikey). */
  async tenantOfLinkToken(token: string): Promise<string | undefined> {
    return this.db.asService(
      async (tx) =>
        (
          await tx.query<{ tenant_id: string }>(
            "select tenant_id from internal.one_time_tokens where token_hash = $1",
            [sha256(token)],
          )
        ).rows[0]?.tenant_id,
      { readOnly: true },
    );
  }

  async settings(req: RequestInfo) {
    const s = authSettings(req.tenant.settings);
    // The tenant's OpenID Connect providers that are on: true in `external`, as GoTrue's, and
    // their names for buttons in `external_labels` (Backline's own; the portal's sign-in page).
    const providers = await enabledProviders(this.db, req.tenant.id);
    return {
      external: {
        ...Object.fromEntries(providers.map((p) => [p.name, true])),
        email: true,
        phone: false,
        anonymous_users: s.anonymous_users,
      },
      external_labels: Object.fromEntries(providers.map((p) => [p.name, p.display_name])),
      disable_signup: s.disable_signup,
      mailer_autoconfirm: !s.email_confirmation,
      phone_autoconfirm: false,
      sms_provider: "",
      saml_enabled: false,
      password_min_length: s.password_min_length,
    };
  }
}
