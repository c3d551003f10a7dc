import type { FastifyRequest } from "fastify";
import { peekClaims, TokenError, verifyBearerToken } from "../auth/tokens.ts";
import type { Db } from "../db/db.ts";
import { prepared } from "../db/prepared.ts";
import type { Claims, Tx } from "../db/types.ts";
import { bearerOf } from "../http/gateway.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import type { MembershipRole } from "../tenancy/memberships.ts";
import { ApiError } from "./errors.ts";
import { hashApiKey, type KeyMode, looksLikeApiKey, parseApiKey } from "./keys/format.ts";

/**
 * Who is calling /api/public/v1 (docs/public-api.md, "Authentication"). An API key acts for its
 * one account: its claims carry account_id, account_role (from its scopes) and api_key_id, and
 * the same row-level security as /rest/v1 scopes every query to that account. A logged-in user's
 * access token from /auth/v1 is accepted only where a route says so (key management).
 */
export const SCOPES = [
  "catalog:read",
  "catalog:write",
  "royalties:read",
  "payouts:read",
  "webhooks:manage",
  "keys:manage",
] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * The header in which a signed-in member names the account they act for (docs/public-api.md,
 * "A member's access token"), as Stripe's `Stripe-Account` names a connected account.
 */
export const ACCOUNT_HEADER = "backline-account";

/**
 * What a member may do through the public API, by their role in the account they name: the same
 * split as the membership roles' rights in the database (docs/security.md, "Membership roles"),
 * which row security enforces in any case.
 */
export const ROLE_SCOPES: Record<MembershipRole, readonly Scope[]> = {
  owner: SCOPES,
  admin: SCOPES,
  member: ["catalog:read", "catalog:write", "royalties:read"],
  viewer: ["catalog:read", "royalties:read"],
};

export interface Caller {
  kind: "api_key" | "user";
  tenantId: string;
  claims: Claims;
  /** An API key's account and mode; undefined for a user, who names the account per request. */
  accountId: string | undefined;
  mode: KeyMode | undefined;
  keyId: string | undefined;
  userId: string | undefined;
  scopes: readonly Scope[];
  /** An API key's hash: its requests' transactions check the key again in their first statement. */
  keyHash?: string | undefined;
  /** A member acting for the account they named: their role in it. */
  memberRole?: MembershipRole | undefined;
}

interface KeyRow {
  id: string;
  tenant_id: string;
  account_id: string;
  mode: KeyMode;
  status: "pending_reveal" | "active" | "frozen" | "revoked";
  expired: boolean;
  scopes: Scope[];
  account_role: "admin" | "member" | "viewer";
  last_used_at: Date | null;
}

const unauthorized = (code: string, message: string) =>
  new ApiError(401, code, message, {
    headers: { "WWW-Authenticate": `Bearer realm="backline", error="invalid_token"` },
  });

// Last-use times are written at most once a minute per key, outside the request's transaction.
const LAST_USED_EVERY_MS = 60_000;

/**
 * A key known to this process, checked again as the first statement of a request's transaction
 * (verifyInTransaction): its row, and the switch to `authenticated` with its claims only when it
 * is active and unexpired. Planned once per connection.
 */
const VERIFY_KEY =
  prepared(`select k.id, k.tenant_id, k.account_id, k.mode, k.status, k.expired, k.scopes, k.account_role, k.last_used_at,
        k.ok,
        set_config('role', case when k.ok then 'authenticated' else 'service_role' end, true) as _role,
        set_config('request.jwt.claims', case when k.ok then jsonb_build_object(
          'role', 'authenticated', 'tenant_id', k.tenant_id, 'account_id', k.account_id,
          'account_role', k.account_role, 'api_key_id', k.id)::text else '{}' end, true) as _claims
 from (select a.*, coalesce(a.expires_at <= now(), false) as expired,
              a.status = 'active' and not coalesce(a.expires_at <= now(), false) as ok
       from internal.api_keys a where a.key_hash = $1) k`);

/**
 * A member's role in the account they name, read on the server's path: a membership of the account
 * itself, or (owners and admins) of the live account a sandbox twin belongs to, as
 * auth.manageable_account_ids() reaches it; with whether the account asks aal2 of its members.
 */
const MEMBER_ROLE = prepared(`select m.role, a.require_aal2
 from internal.accounts a
 join internal.memberships m on m.tenant_id = a.tenant_id and m.user_id = $1
   and (m.account_id = a.id or (a.sandbox_of = m.account_id and m.role in ('owner', 'admin')))
 where a.id = $2 and a.tenant_id = $3
 order by m.account_id = a.id desc
 limit 1`);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The account id a Backline-Account header names, or 400 naming the header. */
export function namedAccount(header: string | string[]): string {
  const value = (Array.isArray(header) ? header.join(",") : header).trim();
  if (!UUID.test(value)) {
    throw new ApiError(400, "validation_failed", "Backline-Account must be an account id (a UUID).", {
      param: "Backline-Account",
      errors: [{ param: "Backline-Account", code: "invalid_string", message: "must be a UUID" }],
    });
  }
  return value.toLowerCase();
}

export class Authenticator {
  private readonly db: Db;
  private readonly directory: TenantDirectory;
  private readonly lastUsedWritten = new Map<string, number>();
  private readonly onError: (error: unknown) => void;

  constructor(db: Db, directory: TenantDirectory, onError: (error: unknown) => void) {
    this.db = db;
    this.directory = directory;
    this.onError = onError;
  }

  async identify(request: FastifyRequest, allowUser: boolean): Promise<Caller> {
    const token = bearerOf(request);
    if (!token) {
      throw new ApiError(401, "missing_api_key", "Send your API key as Authorization: Bearer <API_KEY>.", {
        headers: { "WWW-Authenticate": `Bearer realm="backline"` },
      });
    }
    if (looksLikeApiKey(token)) return this.byKey(token);
    if (!allowUser) {
      throw unauthorized(
        "api_key_required",
        "This endpoint takes an API key (bk_live_... or bk_test_...), not a user's access token.",
      );
    }
    const user = await this.byUserToken(token);
    const named = request.headers[ACCOUNT_HEADER];
    return named === undefined ? user : this.actingFor(user, named);
  }

  /**
   * A member acting for one account: the claims name the account and the member's role in it,
   * so row security reaches that account alone with that role's rights (the helpers of migration
   * 0002/0020 read `account_id` and `account_role` from the claims). The role is read here from
   * the memberships, per request; one the member does not hold is refused before any handler runs.
   */
  private async actingFor(user: Caller, accountId: string | string[]): Promise<Caller> {
    const id = namedAccount(accountId);
    const membership = await this.db.asService(
      async (tx) =>
        (
          await tx.query<{ role: MembershipRole; require_aal2: boolean }>(MEMBER_ROLE, [
            user.userId,
            id,
            user.tenantId,
          ])
        ).rows[0],
      { readOnly: true },
    );
    if (!membership) {
      throw new ApiError(
        403,
        "account_not_accessible",
        `You are not a member of account ${id}: name one of your accounts in Backline-Account.`,
        { param: "Backline-Account" },
      );
    }
    if (membership.require_aal2 && user.claims.aal !== "aal2") {
      throw new ApiError(
        403,
        "aal2_required",
        "This account asks its members to sign in with a second factor: verify one (aal2) and use the new access token.",
        { param: "Backline-Account" },
      );
    }
    return {
      ...user,
      accountId: id,
      memberRole: membership.role,
      scopes: ROLE_SCOPES[membership.role],
      claims: { ...user.claims, account_id: id, account_role: membership.role },
    };
  }

  /**
   * Inside a request's transaction (Db.withResolvedContext), as its first statement: reads the
   * key's row and, only when it is active and unexpired, switches to `authenticated` with the key's
   * claims, in the same statement. A key frozen, revoked or expired since this process learned it
   * stops here, in every process, at its next request; no transaction of its own is spent.
   */
  async verifyInTransaction(tx: Tx, keyHash: string): Promise<KeyRow> {
    const key = (await tx.query<KeyRow & { ok: boolean }>(VERIFY_KEY, [keyHash])).rows[0];
    // Not active: refused (the transaction is rolled back before anything else runs in it).
    this.check(key);
    if (!key?.ok) throw unauthorized("api_key_unknown", "No such API key.");
    this.touch(key);
    return key;
  }

  private check(key: KeyRow | undefined): asserts key is KeyRow {
    if (!key) throw unauthorized("api_key_unknown", "No such API key.");
    if (key.status === "revoked") throw unauthorized("api_key_revoked", "This API key was revoked.");
    if (key.status === "frozen") {
      throw unauthorized(
        "api_key_frozen",
        "This API key is frozen; an admin of the account can unfreeze it.",
      );
    }
    if (key.expired) throw unauthorized("api_key_expired", "This API key has expired.");
    if (key.status !== "active") throw unauthorized("api_key_unknown", "No such API key.");
  }

  private async byKey(token: string): Promise<Caller> {
    if (!parseApiKey(token)) {
      throw unauthorized("api_key_invalid", "The API key is malformed: it is not a key this server issued.");
    }
    const keyHash = hashApiKey(token);
    const key = await this.db.asService(
      async (tx) =>
        (
          await tx.query<KeyRow>(
            `select id, tenant_id, account_id, mode, status, coalesce(expires_at <= now(), false) as expired,
                    scopes, account_role, last_used_at
             from internal.api_keys where key_hash = $1`,
            [keyHash],
          )
        ).rows[0],
      { readOnly: true },
    );
    this.check(key);
    this.touch(key);
    return {
      keyHash,
      kind: "api_key",
      tenantId: key.tenant_id,
      accountId: key.account_id,
      mode: key.mode,
      keyId: key.id,
      userId: undefined,
      scopes: key.scopes,
      claims: {
        role: "authenticated",
        tenant_id: key.tenant_id,
        account_id: key.account_id,
        account_role: key.account_role,
        api_key_id: key.id,
      },
    };
  }

  private async byUserToken(token: string): Promise<Caller> {
    const tenantId = peekClaims(token)?.tenant_id;
    const tenant = typeof tenantId === "string" ? await this.directory.get(tenantId) : undefined;
    if (!tenant) throw unauthorized("invalid_token", "The access token is not one this server issued.");
    let payload: Record<string, unknown>;
    try {
      payload = await verifyBearerToken(token, tenant);
    } catch (error) {
      if (error instanceof TokenError && error.reason === "expired") {
        throw unauthorized("token_expired", "The access token has expired; refresh the session.");
      }
      throw unauthorized("invalid_token", "The access token is not one this server issued.");
    }
    if (
      payload.role !== "authenticated" ||
      typeof payload.sub !== "string" ||
      payload.tenant_id !== tenant.id
    ) {
      throw unauthorized("invalid_token", "Only a signed-in user's access token is accepted here.");
    }
    return {
      kind: "user",
      tenantId: tenant.id,
      accountId: undefined,
      mode: undefined,
      keyId: undefined,
      userId: payload.sub,
      // A user's authority comes from their memberships, checked by the database per account;
      // without Backline-Account only key management, over every account they manage.
      scopes: ["keys:manage"],
      // aal: an account may require aal2 of its members (migration 0020).
      claims: { role: "authenticated", sub: payload.sub, tenant_id: tenant.id, aal: payload.aal ?? "aal1" },
    };
  }

  private touch(key: KeyRow): void {
    const now = Date.now();
    const written = this.lastUsedWritten.get(key.id) ?? key.last_used_at?.getTime() ?? 0;
    if (now - written < LAST_USED_EVERY_MS) return;
    this.lastUsedWritten.set(key.id, now);
    if (this.lastUsedWritten.size > 100_000) this.lastUsedWritten.clear();
    this.db
      .asService((tx) =>
        tx.query(
          `update internal.api_keys set last_used_at = now()
           where id = $1 and (last_used_at is null or last_used_at < now() - interval '60 seconds')`,
          [key.id],
        ),
      )
      .catch(this.onError);
  }
}
