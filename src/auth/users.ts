import type { Tx } from "../db/types.ts";
import { factorsOfUsers } from "./mfa.ts";

/** The user rows behind /auth/v1, and the user object GoTrue returns. */

export interface UserRow {
  id: string;
  tenant_id: string;
  email: string | null;
  phone: string | null;
  encrypted_password: string | null;
  email_confirmed_at: Date | null;
  phone_confirmed_at: Date | null;
  confirmation_sent_at: Date | null;
  recovery_sent_at: Date | null;
  email_change: string | null;
  email_change_sent_at: Date | null;
  last_sign_in_at: Date | null;
  raw_app_meta_data: Record<string, unknown>;
  raw_user_meta_data: Record<string, unknown>;
  is_anonymous: boolean;
  banned_until: Date | null;
  /** When a link or code mailed to `email` was last used; null while the address is unproven. */
  email_proven_at: Date | null;
  invited_at: Date | null;
  /** Another claim on the unconfirmed address (a second sign-up, an invitation): docs/auth.md. */
  signup_contested_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

interface IdentityRow {
  id: string;
  user_id: string;
  provider: string;
  provider_id: string;
  identity_data: Record<string, unknown>;
  last_sign_in_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const USER_COLUMNS = `id, tenant_id, email, phone, encrypted_password, email_confirmed_at, phone_confirmed_at,
  confirmation_sent_at, recovery_sent_at, email_change, email_change_sent_at, last_sign_in_at,
  raw_app_meta_data, raw_user_meta_data, is_anonymous, banned_until, email_proven_at, invited_at,
  signup_contested_at, created_at, updated_at`;

export async function findUserByEmail(tx: Tx, tenantId: string, email: string): Promise<UserRow | undefined> {
  const r = await tx.query<UserRow>(
    `select ${USER_COLUMNS} from internal.users where tenant_id = $1 and email = $2 and deleted_at is null`,
    [tenantId, email],
  );
  return r.rows[0];
}

export async function findUserById(
  tx: Tx,
  tenantId: string,
  id: string,
  lock = false,
): Promise<UserRow | undefined> {
  const r = await tx.query<UserRow>(
    `select ${USER_COLUMNS} from internal.users where tenant_id = $1 and id = $2 and deleted_at is null${lock ? " for update" : ""}`,
    [tenantId, id],
  );
  return r.rows[0];
}

/** A page of the tenant's users, newest first (auth.admin.listUsers), and how many there are. */
/**
 * Staff (internal.staff: a tenant's reviewers, operators and admins, and the platform's) are not a
 * tenant's users to manage through GoTrue's admin API: a tenant's service-role key must not reset,
 * ban, delete or mint sign-in links for a person whose sign-in opens /admin/v1 — for another
 * tenant, or every tenant. They are managed with `backline staff` (docs/auth.md).
 */
const NOT_STAFF = "not exists (select 1 from internal.staff s where s.user_id = u.id)";

/** Whether the user holds any staff role (see NOT_STAFF). */
export async function isStaffUser(tx: Tx, userId: string): Promise<boolean> {
  const r = await tx.query<{ staff: boolean }>(
    "select exists (select 1 from internal.staff where user_id = $1) as staff",
    [userId],
  );
  return r.rows[0]?.staff === true;
}

/** The tenant's users for the admin API, newest first: staff left out (NOT_STAFF). */
export async function listUsers(
  tx: Tx,
  tenantId: string,
  limit: number,
  offset: number,
): Promise<{ users: UserRow[]; total: number }> {
  const total = Number(
    (
      await tx.query<{ n: string }>(
        `select count(*) as n from internal.users u where u.tenant_id = $1 and u.deleted_at is null and ${NOT_STAFF}`,
        [tenantId],
      )
    ).rows[0]?.n ?? 0,
  );
  const users = (
    await tx.query<UserRow>(
      `select ${USER_COLUMNS} from internal.users u where u.tenant_id = $1 and u.deleted_at is null and ${NOT_STAFF}
       order by u.created_at desc, u.id desc limit $2 offset $3`,
      [tenantId, limit, offset],
    )
  ).rows;
  return { users, total };
}

export async function insertUser(
  tx: Tx,
  input: {
    tenantId: string;
    /** Null for an anonymous user (signInAnonymously). */
    email: string | null;
    /** Null for an invited user, who chooses a password after using the invite link. */
    passwordHash: string | null;
    userMetadata: Record<string, unknown>;
    /** Merged over {provider, providers} (auth.admin.createUser's app_metadata). */
    appMetadata?: Record<string, unknown>;
    confirmed: boolean;
    invited?: boolean;
    anonymous?: boolean;
    /** A chosen id (auth.admin.createUser's `id`); else the database makes one. */
    id?: string;
  },
): Promise<UserRow> {
  const provider = input.anonymous ? "anonymous" : "email";
  const r = await tx.query<UserRow>(
    `insert into internal.users (id, tenant_id, email, encrypted_password, raw_app_meta_data, raw_user_meta_data,
       email_confirmed_at, invited_at, is_anonymous)
     values (coalesce($8::uuid, gen_random_uuid()), $1, $2, $3, $4, $5, case when $6::boolean then now() end,
       case when $7::boolean then now() end, $9)
     returning ${USER_COLUMNS}`,
    [
      input.tenantId,
      input.email,
      input.passwordHash,
      JSON.stringify({ ...input.appMetadata, provider, providers: [provider] }),
      JSON.stringify(input.userMetadata),
      input.confirmed,
      input.invited ?? false,
      input.id ?? null,
      input.anonymous ?? false,
    ],
  );
  const user = r.rows[0];
  if (!user) throw new Error("insert into internal.users returned no row");
  // An anonymous user has no identity, as with GoTrue, until an e-mail address is added.
  if (input.email !== null) await ensureEmailIdentity(tx, user);
  return user;
}

/** The user's `email` identity, made if missing (a user who had no address gets one). */
export async function ensureEmailIdentity(tx: Tx, user: UserRow): Promise<void> {
  if (!user.email) return;
  await tx.query(
    `insert into internal.identities (tenant_id, user_id, provider, provider_id, identity_data)
     values ($1, $2::uuid, 'email', $2::text, $3)
     on conflict (tenant_id, provider, provider_id) do nothing`,
    [
      user.tenant_id,
      user.id,
      JSON.stringify({
        sub: user.id,
        email: user.email,
        email_verified: user.email_confirmed_at !== null,
        phone_verified: false,
      }),
    ],
  );
}

/** Applies `changes` (column -> value; names are this module's own) and returns the updated row. */
export async function updateUser(tx: Tx, user: UserRow, changes: Record<string, unknown>): Promise<UserRow> {
  const columns = Object.keys(changes);
  if (columns.length === 0) return user;
  const sets = columns.map((c, i) => `${c} = $${i + 3}`);
  const r = await tx.query<UserRow>(
    `update internal.users set ${sets.join(", ")} where tenant_id = $1 and id = $2 returning ${USER_COLUMNS}`,
    [user.tenant_id, user.id, ...Object.values(changes)],
  );
  const updated = r.rows[0];
  if (!updated) throw new Error("user vanished during update");
  if ("email" in changes || "email_confirmed_at" in changes) {
    await tx.query(
      `update internal.identities set identity_data = identity_data || jsonb_build_object('email', $3::text, 'email_verified', $4::boolean)
       where tenant_id = $1 and user_id = $2 and provider = 'email'`,
      [updated.tenant_id, updated.id, updated.email, updated.email_confirmed_at !== null],
    );
  }
  return updated;
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : undefined);

/** The user object as GoTrue returns it. */
export async function userJson(tx: Tx, user: UserRow): Promise<Record<string, unknown>> {
  return (await usersJson(tx, user.tenant_id, [user]))[0] as Record<string, unknown>;
}

/** Several users of a tenant as GoTrue returns them, with two queries whatever their number. */
export async function usersJson(
  tx: Tx,
  tenantId: string,
  users: UserRow[],
): Promise<Record<string, unknown>[]> {
  if (users.length === 0) return [];
  const ids = users.map((u) => u.id);
  const identities = (
    await tx.query<IdentityRow>(
      `select id, user_id, provider, provider_id, identity_data, last_sign_in_at, created_at, updated_at
       from internal.identities where tenant_id = $1 and user_id = any($2::uuid[]) order by created_at`,
      [tenantId, ids],
    )
  ).rows;
  const factors = await factorsOfUsers(tx, tenantId, ids);
  return users.map((u) =>
    shapeUser(
      u,
      identities.filter((i) => i.user_id === u.id),
      factors.get(u.id) ?? [],
    ),
  );
}

function shapeUser(user: UserRow, identities: IdentityRow[], factors: unknown[]): Record<string, unknown> {
  return {
    id: user.id,
    aud: "authenticated",
    role: "authenticated",
    email: user.email ?? "",
    email_confirmed_at: iso(user.email_confirmed_at),
    phone: user.phone ?? "",
    confirmation_sent_at: iso(user.confirmation_sent_at),
    invited_at: iso(user.invited_at),
    confirmed_at: iso(user.email_confirmed_at ?? user.phone_confirmed_at),
    recovery_sent_at: iso(user.recovery_sent_at),
    new_email: user.email_change ?? undefined,
    email_change_sent_at: iso(user.email_change_sent_at),
    last_sign_in_at: iso(user.last_sign_in_at),
    banned_until: iso(user.banned_until),
    app_metadata: user.raw_app_meta_data,
    user_metadata: user.raw_user_meta_data,
    identities: identities.map((i) => ({
      identity_id: i.id,
      id: i.provider_id,
      user_id: i.user_id,
      identity_data: i.identity_data,
      provider: i.provider,
      last_sign_in_at: iso(i.last_sign_in_at),
      created_at: iso(i.created_at),
      updated_at: iso(i.updated_at),
      email: typeof i.identity_data.email === "string" ? i.identity_data.email : undefined,
    })),
    // GoTrue leaves `factors` out when the user has none.
    ...(factors.length > 0 ? { factors } : {}),
    created_at: iso(user.created_at),
    updated_at: iso(user.updated_at),
    is_anonymous: user.is_anonymous,
  };
}
