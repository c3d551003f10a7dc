import type { Tx } from "../db/types.ts";
import { factorsJson } from "./mfa.ts";

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

export async function insertUser(
  tx: Tx,
  input: {
    tenantId: string;
    email: string;
    /** Null for an invited user, who chooses a password after using the invite link. */
    passwordHash: string | null;
    userMetadata: Record<string, unknown>;
    confirmed: boolean;
    invited?: boolean;
  },
): Promise<UserRow> {
  const r = await tx.query<UserRow>(
    `insert into internal.users (tenant_id, email, encrypted_password, raw_app_meta_data, raw_user_meta_data, email_confirmed_at, invited_at)
     values ($1, $2, $3, $4, $5, case when $6::boolean then now() end, case when $7::boolean then now() end)
     returning ${USER_COLUMNS}`,
    [
      input.tenantId,
      input.email,
      input.passwordHash,
      JSON.stringify({ provider: "email", providers: ["email"] }),
      JSON.stringify(input.userMetadata),
      input.confirmed,
      input.invited ?? false,
    ],
  );
  const user = r.rows[0];
  if (!user) throw new Error("insert into internal.users returned no row");
  await tx.query(
    `insert into internal.identities (tenant_id, user_id, provider, provider_id, identity_data)
     values ($1, $2::uuid, 'email', $2::text, $3)`,
    [
      input.tenantId,
      user.id,
      JSON.stringify({
        sub: user.id,
        email: input.email,
        email_verified: input.confirmed,
        phone_verified: false,
      }),
    ],
  );
  return user;
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
  const identities = (
    await tx.query<IdentityRow>(
      `select id, user_id, provider, provider_id, identity_data, last_sign_in_at, created_at, updated_at
       from internal.identities where tenant_id = $1 and user_id = $2 order by created_at`,
      [user.tenant_id, user.id],
    )
  ).rows;
  const factors = await factorsJson(tx, user.tenant_id, user.id);
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
