import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import { isOwnAppUrl, portalPathUrl } from "../portal/links.ts";
import { displayNameOf, provisionAccounts } from "../tenancy/memberships.ts";
import { validateEmail } from "./email-address.ts";
import { type EmailTokenKind, issueEmailToken, type MailContext } from "./email-tokens.ts";
import { AuthError, validationFailed } from "./errors.ts";
import { downgradeWithoutFactors, factorsJson } from "./mfa.ts";
import { checkPassword, hashPassword } from "./passwords.ts";
import { authSettings, redirectAllowed } from "./settings.ts";
import {
  ensureEmailIdentity,
  findUserByEmail,
  findUserById,
  insertUser,
  isStaffUser,
  listUsers,
  type UserRow,
  updateUser,
  userJson,
  usersJson,
} from "./users.ts";

/**
 * GoTrue's admin API (/auth/v1/admin/*, supabase-js `auth.admin`): a tenant's own server manages
 * that tenant's users with its service-role key. Every statement names the tenant of the key, so a
 * user of another tenant is "User not found" whatever id or address is given. The routes check the
 * key (src/auth/admin-routes.ts); this module does the work, on the service path, and writes an
 * audit row for each act (docs/auth.md, "Admin API").
 */

export interface AdminRequest {
  tenant: { id: string; slug: string; settings: Record<string, unknown> };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const DEFAULT_PER_PAGE = 50;
export const MAX_PER_PAGE = 1000;
const DUPLICATE_EMAIL = "A user with this email address has already been registered";

const emailExists = () => new AuthError(422, "email_exists", DUPLICATE_EMAIL);
const userNotFound = () => new AuthError(404, "user_not_found", "User not found");

/** GoTrue's answer for a user id that is not a UUID (404, as its router does). */
export function checkUserId(id: string): string {
  if (!UUID.test(id)) throw new AuthError(404, "validation_failed", "user_id must be an UUID");
  return id.toLowerCase();
}

function objectOf(value: unknown, field: string): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) throw validationFailed(`${field} must be an object`);
  return value as Record<string, unknown>;
}

function booleanOf(value: unknown, field: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw validationFailed(`${field} must be a boolean`);
  return value;
}

/** Top-level keys merged in, as GoTrue's metadata updates do; a null value removes its key. */
function merged(base: Record<string, unknown>, changes: Record<string, unknown>): Record<string, unknown> {
  const out = { ...base };
  for (const [k, v] of Object.entries(changes)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
// About 10,000 years: a longer ban is not a date PostgreSQL keeps.
const MAX_BAN_MS = 10_000 * 365 * 24 * 3_600_000;

/**
 * `ban_duration` as GoTrue reads it: "none" lifts a ban, otherwise a Go duration ("24h",
 * "1h30m", "90s", "0"). Returns the ban's length in milliseconds, 0 for none.
 */
export function parseBanDuration(value: unknown): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  const invalid = () =>
    validationFailed(`invalid format for ban duration: time: invalid duration ${JSON.stringify(value)}`);
  if (typeof value !== "string") throw invalid();
  if (value === "none" || value === "0") return 0;
  const m = /^([-+]?)(.+)$/.exec(value);
  const body = m?.[2] ?? "";
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let ms = 0;
  let at = 0;
  while (at < body.length) {
    part.lastIndex = at;
    const p = part.exec(body);
    if (!p) throw invalid();
    ms += Number(p[1]) * (UNIT_MS[p[2] as string] ?? Number.NaN);
    at = part.lastIndex;
  }
  if (at === 0 || !Number.isFinite(ms) || ms > MAX_BAN_MS) throw invalid();
  return m?.[1] === "-" ? -ms : ms;
}

function bannedUntil(ms: number): Date | null {
  return ms === 0 ? null : new Date(Date.now() + ms);
}

export class AuthAdmin {
  private readonly db: Db;
  private readonly publicUrl: string;

  constructor(deps: { db: Db; publicUrl: string }) {
    this.db = deps.db;
    this.publicUrl = deps.publicUrl;
  }

  private mailContext(req: AdminRequest): MailContext {
    return { tenant: req.tenant, settings: authSettings(req.tenant.settings), publicUrl: this.publicUrl };
  }

  private async audit(tx: Tx, req: AdminRequest, action: string, userId: string, after: unknown) {
    await tx.query("select internal.audit($1, 'internal.users', $2, $3, null, $4)", [
      action,
      userId,
      req.tenant.id,
      JSON.stringify(after),
    ]);
  }

  private async load(tx: Tx, req: AdminRequest, id: string, lock = false): Promise<UserRow> {
    const user = await findUserById(tx, req.tenant.id, checkUserId(id), lock);
    // Staff are not the tenant's to manage here (users.ts, NOT_STAFF): as if there were none.
    if (!user || (await isStaffUser(tx, user.id))) throw userNotFound();
    return user;
  }

  /** A user found by address, unless staff (who are not the tenant's to manage here). */
  private async byEmail(tx: Tx, req: AdminRequest, email: string): Promise<UserRow | undefined> {
    const user = await findUserByEmail(tx, req.tenant.id, email);
    if (user && (await isStaffUser(tx, user.id))) throw userNotFound();
    return user;
  }

  /** GET /admin/users?page=&per_page= : newest first, with the total for the Link and X-Total-Count headers. */
  async listUsers(req: AdminRequest, page: number, perPage: number) {
    return this.db.asService(
      async (tx) => {
        const { users, total } = await listUsers(tx, req.tenant.id, perPage, (page - 1) * perPage);
        return { users: await usersJson(tx, req.tenant.id, users), total };
      },
      { readOnly: true },
    );
  }

  async getUser(req: AdminRequest, id: string) {
    return this.db.asService(async (tx) => userJson(tx, await this.load(tx, req, id)), { readOnly: true });
  }

  /** POST /admin/users (auth.admin.createUser). */
  async createUser(req: AdminRequest, body: Record<string, unknown>) {
    const settings = authSettings(req.tenant.settings);
    if (body.email === undefined || body.email === null || body.email === "") {
      if (typeof body.phone === "string" && body.phone !== "")
        throw new AuthError(400, "phone_provider_disabled", "Phone signups are disabled");
      throw validationFailed("Cannot create a user without either an email or phone");
    }
    const email = validateEmail(body.email);
    if (body.password_hash !== undefined && body.password_hash !== null && body.password_hash !== "")
      throw validationFailed("password_hash is not supported: give a password");
    if (body.role !== undefined && body.role !== null && body.role !== "" && body.role !== "authenticated")
      throw validationFailed("role: only authenticated is supported");
    let id: string | undefined;
    if (body.id !== undefined && body.id !== null && body.id !== "") {
      if (typeof body.id !== "string" || !UUID.test(body.id))
        throw validationFailed("ID must conform to the uuid v4 format");
      if (/^0{8}-0{4}-0{4}-0{4}-0{12}$/.test(body.id)) throw validationFailed("ID cannot be a nil uuid");
      id = body.id.toLowerCase();
    }
    const userMetadata = objectOf(body.user_metadata, "user_metadata") ?? {};
    const appMetadata = objectOf(body.app_metadata, "app_metadata") ?? {};
    const confirm = booleanOf(body.email_confirm, "email_confirm");
    const ban = parseBanDuration(body.ban_duration);
    const password =
      body.password === undefined || body.password === null || body.password === ""
        ? undefined
        : checkPassword(body.password, settings);
    const passwordHash = password === undefined ? null : await hashPassword(password);
    return this.db.asService(async (tx) => {
      if (await findUserByEmail(tx, req.tenant.id, email)) throw emailExists();
      let user = await insertUser(tx, {
        tenantId: req.tenant.id,
        email,
        passwordHash,
        userMetadata,
        appMetadata,
        confirmed: confirm,
        id,
      }).catch((error: unknown) => {
        if (asDbError(error)?.sqlstate === "23505")
          throw new AuthError(422, "user_already_exists", "User already registered");
        throw error;
      });
      if (ban !== undefined) user = await updateUser(tx, user, { banned_until: bannedUntil(ban) });
      // As at sign-up: a personal account, unless the address is invited (it joins those once proven).
      await provisionAccounts(
        tx,
        { id: user.id, tenant_id: user.tenant_id, email },
        displayNameOf(userMetadata),
      );
      await this.audit(tx, req, "auth.user_created", user.id, { email, email_confirm: confirm });
      return userJson(tx, (await findUserById(tx, req.tenant.id, user.id)) ?? user);
    });
  }

  /** PUT /admin/users/{id} (auth.admin.updateUserById). */
  async updateUser(req: AdminRequest, id: string, body: Record<string, unknown>) {
    const settings = authSettings(req.tenant.settings);
    checkUserId(id);
    const email =
      body.email === undefined || body.email === null || body.email === ""
        ? undefined
        : validateEmail(body.email);
    if (typeof body.phone === "string" && body.phone !== "")
      throw new AuthError(400, "phone_provider_disabled", "Phone signups are disabled");
    if (body.role !== undefined && body.role !== null && body.role !== "" && body.role !== "authenticated")
      throw validationFailed("role: only authenticated is supported");
    const userMetadata = objectOf(body.user_metadata, "user_metadata");
    const appMetadata = objectOf(body.app_metadata, "app_metadata");
    const confirm = booleanOf(body.email_confirm, "email_confirm");
    const ban = parseBanDuration(body.ban_duration);
    const password =
      body.password === undefined || body.password === null
        ? undefined
        : checkPassword(body.password, settings);
    const passwordHash = password === undefined ? undefined : await hashPassword(password);
    return this.db.asService(async (tx) => {
      let user = await this.load(tx, req, id, true);
      const wasAnonymous = user.is_anonymous;
      const changes: Record<string, unknown> = {};
      const changed: string[] = [];
      if (email !== undefined && email !== user.email) {
        const taken = await findUserByEmail(tx, req.tenant.id, email);
        if (taken && taken.id !== user.id) throw emailExists();
        changes.email = email;
        changes.email_change = null;
        changed.push("email");
      }
      if (confirm && (user.email_confirmed_at === null || changes.email !== undefined)) {
        changes.email_confirmed_at = new Date();
        changed.push("email_confirmed_at");
      }
      // An anonymous user given a confirmed address is a permanent user from now on, as with GoTrue.
      if (wasAnonymous && confirm && (changes.email ?? user.email)) {
        changes.is_anonymous = false;
        changes.raw_app_meta_data = JSON.stringify({
          ...user.raw_app_meta_data,
          provider: "email",
          providers: ["email"],
        });
        changed.push("is_anonymous");
      }
      if (passwordHash !== undefined) {
        changes.encrypted_password = passwordHash;
        changed.push("password");
      }
      if (userMetadata) {
        changes.raw_user_meta_data = JSON.stringify(merged(user.raw_user_meta_data, userMetadata));
        changed.push("user_metadata");
      }
      if (appMetadata) {
        const base =
          typeof changes.raw_app_meta_data === "string"
            ? (JSON.parse(changes.raw_app_meta_data) as Record<string, unknown>)
            : user.raw_app_meta_data;
        changes.raw_app_meta_data = JSON.stringify(merged(base, appMetadata));
        changed.push("app_metadata");
      }
      if (ban !== undefined) {
        changes.banned_until = bannedUntil(ban);
        changed.push("banned_until");
      }
      user = await updateUser(tx, user, changes);
      if (changes.email !== undefined) await ensureEmailIdentity(tx, user);
      if (passwordHash !== undefined) {
        // A new password: every link and code sent so far, and every session, end (the password
        // may have been changed because the old one leaked).
        await tx.query("delete from internal.one_time_tokens where tenant_id = $1 and user_id = $2", [
          user.tenant_id,
          user.id,
        ]);
        await tx.query("delete from internal.sessions where tenant_id = $1 and user_id = $2", [
          user.tenant_id,
          user.id,
        ]);
      }
      if (wasAnonymous && !user.is_anonymous && user.email) {
        await provisionAccounts(
          tx,
          { id: user.id, tenant_id: user.tenant_id, email: user.email },
          displayNameOf(user.raw_user_meta_data),
        );
      }
      if (changed.length > 0) {
        await this.audit(tx, req, "auth.user_updated", user.id, {
          changed,
          ...(changes.banned_until !== undefined ? { banned_until: changes.banned_until } : {}),
        });
      }
      return userJson(tx, (await findUserById(tx, req.tenant.id, user.id)) ?? user);
    });
  }

  /**
   * DELETE /admin/users/{id} (auth.admin.deleteUser). Hard: the row goes, and with it the user's
   * memberships, sessions, factors, identities and codes; rows the user created keep existing with
   * `created_by` emptied, and the audit log keeps every row naming the user's id. Soft
   * (`should_soft_delete`): the row stays (its id still names who did what) with its address,
   * password and metadata removed, and the same memberships, sessions, factors, identities and
   * codes end. Either way the user's accounts stay, with their other members.
   */
  async deleteUser(req: AdminRequest, id: string, soft: boolean) {
    await this.db.asService(async (tx) => {
      const user = await this.load(tx, req, id, true);
      await this.audit(tx, req, soft ? "auth.user_soft_deleted" : "auth.user_deleted", user.id, {
        email: user.email,
      });
      if (!soft) {
        await tx.query("delete from internal.users where tenant_id = $1 and id = $2", [
          user.tenant_id,
          user.id,
        ]);
        return;
      }
      for (const table of ["memberships", "sessions", "mfa_factors", "identities", "one_time_tokens"]) {
        await tx.query(`delete from internal.${table} where tenant_id = $1 and user_id = $2`, [
          user.tenant_id,
          user.id,
        ]);
      }
      await updateUser(tx, user, {
        email: null,
        phone: null,
        email_change: null,
        encrypted_password: null,
        raw_user_meta_data: "{}",
        default_account_id: null,
        deleted_at: new Date(),
      });
    });
    return {};
  }

  /** GET /admin/users/{id}/factors (auth.admin.mfa.listFactors). */
  async listFactors(req: AdminRequest, id: string) {
    return this.db.asService(
      async (tx) => factorsJson(tx, req.tenant.id, (await this.load(tx, req, id)).id),
      { readOnly: true },
    );
  }

  /**
   * DELETE /admin/users/{id}/factors/{factorId} (auth.admin.mfa.deleteFactor): a lost factor
   * removed; with no verified factor left the user's sessions are aal1 again.
   */
  async deleteFactor(req: AdminRequest, id: string, factorId: string) {
    if (!UUID.test(factorId)) throw new AuthError(404, "validation_failed", "factor_id must be an UUID");
    return this.db.asService(async (tx) => {
      const user = await this.load(tx, req, id, true);
      const factor = (await factorsJson(tx, req.tenant.id, user.id)).find(
        (f) => (f as { id: string }).id === factorId.toLowerCase(),
      );
      if (!factor) throw new AuthError(404, "mfa_factor_not_found", "Factor not found");
      await tx.query("delete from internal.mfa_factors where tenant_id = $1 and user_id = $2 and id = $3", [
        req.tenant.id,
        user.id,
        factorId.toLowerCase(),
      ]);
      await downgradeWithoutFactors(tx, req.tenant.id, user.id);
      await this.audit(tx, req, "auth.factor_deleted", user.id, { factor_id: factorId.toLowerCase() });
      return factor;
    });
  }

  /** Where a generated link leads: an allowed redirect_to, else the tenant's site_url, else its portal. */
  private referrer(req: AdminRequest, wanted: unknown): string {
    const settings = authSettings(req.tenant.settings);
    if (
      typeof wanted === "string" &&
      wanted !== "" &&
      (redirectAllowed(settings, wanted) || isOwnAppUrl(this.publicUrl, req.tenant, wanted))
    )
      return wanted;
    return settings.site_url ?? `${portalPathUrl(this.publicUrl, req.tenant.slug)}auth/callback`;
  }

  /**
   * POST /admin/generate_link (auth.admin.generateLink): the link and code a mail would carry,
   * returned to the tenant's server to send itself; no mail is sent. `magiclink` for an address
   * with no user makes one and answers a sign-up link, as GoTrue does.
   */
  async generateLink(req: AdminRequest, body: Record<string, unknown>, wantedRedirect: unknown) {
    const ctx = this.mailContext(req);
    let type = typeof body.type === "string" ? body.type : "";
    const email = validateEmail(body.email);
    const data = objectOf(body.data, "data") ?? {};
    const redirectTo = this.referrer(req, wantedRedirect);
    const kinds = ["signup", "invite", "magiclink", "recovery", "email_change_current", "email_change_new"];
    if (!kinds.includes(type)) throw validationFailed(`Invalid email action link type requested: ${type}`);
    const known = await this.db.asService((tx) => this.byEmail(tx, req, email), {
      readOnly: true,
    });
    if (!known && (type === "recovery" || type.startsWith("email_change")))
      throw new AuthError(404, "user_not_found", "User with this email not found");
    if (type === "email_change_current")
      // Backline confirms an e-mail change at the new address only (GoTrue's answer without
      // secure e-mail change).
      throw validationFailed("Enable secure email change to generate link for current email");
    // A sign-up link asks for the password the user will have; a magic link's user has none (it
    // signs in by the link, and may choose a password later).
    const password = type === "signup" && !known ? checkPassword(body.password, ctx.settings) : undefined;
    if (!known && type === "magiclink") type = "signup";
    const passwordHash = password === undefined ? null : await hashPassword(password);
    const newEmail = type === "email_change_new" ? validateEmail(body.new_email) : undefined;

    return this.db.asService(async (tx) => {
      let user = await this.byEmail(tx, req, email);
      let kind: EmailTokenKind;
      let to = email;
      if (type === "signup") {
        kind = "signup";
        if (user?.email_confirmed_at) throw emailExists();
        if (user) {
          user = await updateUser(tx, user, {
            raw_user_meta_data: JSON.stringify(merged(user.raw_user_meta_data, data)),
          });
        } else {
          user = await this.insert(tx, req, { email, passwordHash, data });
          await provisionAccounts(tx, { id: user.id, tenant_id: user.tenant_id, email }, displayNameOf(data));
        }
      } else if (type === "invite") {
        kind = "invite";
        if (user?.email_proven_at) throw emailExists();
        user ??= await this.insert(tx, req, { email, passwordHash: null, data, invited: true });
      } else if (type === "email_change_new") {
        kind = "email_change";
        if (!user) throw new AuthError(404, "user_not_found", "User with this email not found");
        const taken = await findUserByEmail(tx, req.tenant.id, newEmail as string);
        if (taken && taken.id !== user.id) throw emailExists();
        user = await updateUser(tx, user, { email_change: newEmail });
        to = newEmail as string;
      } else {
        kind = type === "recovery" ? "recovery" : "magiclink";
        if (!user) throw new AuthError(404, "user_not_found", "User with this email not found");
      }
      const issued = await issueEmailToken(tx, ctx, user, kind, to, redirectTo);
      await this.audit(tx, req, "auth.link_generated", user.id, { type });
      const shown = await userJson(tx, (await findUserById(tx, req.tenant.id, user.id)) ?? user);
      return {
        ...shown,
        action_link: issued.link,
        email_otp: issued.otp,
        hashed_token: issued.token,
        verification_type: type,
        redirect_to: redirectTo,
      };
    });
  }

  private async insert(
    tx: Tx,
    req: AdminRequest,
    input: { email: string; passwordHash: string | null; data: Record<string, unknown>; invited?: boolean },
  ): Promise<UserRow> {
    return insertUser(tx, {
      tenantId: req.tenant.id,
      email: input.email,
      passwordHash: input.passwordHash,
      userMetadata: input.data,
      confirmed: false,
      invited: input.invited ?? false,
    }).catch((error: unknown) => {
      if (asDbError(error)?.sqlstate === "23505")
        throw new AuthError(422, "user_already_exists", "User already registered");
      throw error;
    });
  }
}
