import { authSettings } from "../auth/settings.ts";
import { rotateSigningKey, type SigningKeyInfo } from "../auth/signing-keys.ts";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { newJwtSecret, type TenantKeys, tenantKeys } from "./keys.ts";

/** Tenants (white-label customers) and their accounts: the operator's side, on the service path. */

export const POLICY_PRESETS = ["account-members", "owner-only"] as const;
export type PolicyPreset = (typeof POLICY_PRESETS)[number];
export const ACCOUNT_KINDS = ["label", "artist"] as const;
export type AccountKind = (typeof ACCOUNT_KINDS)[number];

export interface Tenant {
  id: string;
  slug: string;
  name: string;
  policy_preset: PolicyPreset;
  plan: string;
  is_development: boolean;
  created_at: Date;
}

export interface Account {
  id: string;
  tenant_id: string;
  name: string;
  kind: AccountKind;
  is_sandbox: boolean;
  created_at: Date;
}

const TENANT_COLUMNS = "id, slug, name, policy_preset, plan, is_development, created_at";
const ACCOUNT_COLUMNS = "id, tenant_id, name, kind, is_sandbox, created_at";

export function slugify(name: string): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/, "");
  return slug || "tenant";
}

export interface CreateTenantInput {
  name: string;
  slug?: string;
  policyPreset?: PolicyPreset;
  plan?: string;
  isDevelopment?: boolean;
  settings?: Record<string, unknown>;
}

export async function createTenant(
  db: Db,
  input: CreateTenantInput,
): Promise<{ tenant: Tenant; keys: TenantKeys }> {
  // Kept only sealed with the server's master key (docs/security.md, "Where secrets live").
  const jwtSecret = newJwtSecret();
  const tenant = await db.asService(async (tx) => {
    const r = await tx.query<Tenant>(
      `insert into internal.tenants (name, slug, policy_preset, plan, is_development, settings, jwt_secret_sealed)
       values ($1, $2, $3, $4, $5, $6, $7)
       returning ${TENANT_COLUMNS}`,
      [
        input.name,
        input.slug ?? slugify(input.name),
        input.policyPreset ?? "account-members",
        input.plan ?? "standard",
        input.isDevelopment ?? false,
        JSON.stringify(input.settings ?? {}),
        db.secrets.encrypt(jwtSecret),
      ],
    );
    const created = r.rows[0];
    if (!created) throw new Error("insert into internal.tenants returned no row");
    await tx.query("insert into internal.organization_settings (tenant_id, display_name) values ($1, $2)", [
      created.id,
      input.name,
    ]);
    // Its users' sessions are ES256 from the start (docs/auth.md, "Signing keys").
    await rotateSigningKey(tx, db.secrets, created.id, { jwtExpiry: 0 });
    return created;
  });
  return {
    tenant,
    keys: await tenantKeys({ id: tenant.id, jwt_secret: jwtSecret, created_at: tenant.created_at }),
  };
}

export async function listTenants(db: Db): Promise<Tenant[]> {
  return db.asService(
    async (tx) =>
      (await tx.query<Tenant>(`select ${TENANT_COLUMNS} from internal.tenants order by created_at, id`)).rows,
    { readOnly: true },
  );
}

/** Finds a tenant by id or slug. */
export async function findTenant(tx: Tx, idOrSlug: string): Promise<Tenant | undefined> {
  const r = await tx.query<Tenant>(
    `select ${TENANT_COLUMNS} from internal.tenants where slug = $1 or id::text = $1 order by (slug = $1) desc limit 1`,
    [idOrSlug],
  );
  return r.rows[0];
}

/** The tenant's JWT signing secret, opened (the database keeps it sealed); undefined: no such tenant. */
export async function getTenantSigningSecret(db: Db, tenantId: string): Promise<string | undefined> {
  const row = await db.asService(
    async (tx) =>
      (
        await tx.query<{ jwt_secret: string | null; jwt_secret_sealed: string | null }>(
          "select jwt_secret, jwt_secret_sealed from internal.tenants where id = $1",
          [tenantId],
        )
      ).rows[0],
    { readOnly: true },
  );
  return row && openSigningSecret(db, row);
}

/** A tenant row's signing secret: sealed, or plain in a row an older version wrote (sealed at start). */
export function openSigningSecret(
  db: Db,
  row: { jwt_secret: string | null; jwt_secret_sealed: string | null },
): string {
  if (row.jwt_secret_sealed) return db.secrets.decrypt(row.jwt_secret_sealed);
  if (row.jwt_secret) return row.jwt_secret;
  throw new Error("the tenant has no signing secret");
}

export async function getTenantKeys(db: Db, tenantId: string): Promise<TenantKeys | undefined> {
  const row = await db.asService(
    async (tx) =>
      (
        await tx.query<{
          id: string;
          jwt_secret: string | null;
          jwt_secret_sealed: string | null;
          created_at: Date;
        }>("select id, jwt_secret, jwt_secret_sealed, created_at from internal.tenants where id = $1", [
          tenantId,
        ])
      ).rows[0],
    { readOnly: true },
  );
  return row
    ? tenantKeys({ id: row.id, jwt_secret: openSigningSecret(db, row), created_at: row.created_at })
    : undefined;
}

export interface CreateAccountInput {
  tenantId: string;
  name: string;
  kind?: AccountKind;
  isSandbox?: boolean;
}

export async function createAccount(db: Db, input: CreateAccountInput): Promise<Account> {
  return db.asService(async (tx) => {
    const r = await tx.query<Account>(
      `insert into internal.accounts (tenant_id, name, kind, is_sandbox) values ($1, $2, $3, $4)
       returning ${ACCOUNT_COLUMNS}`,
      [input.tenantId, input.name, input.kind ?? "label", input.isSandbox ?? false],
    );
    const account = r.rows[0];
    if (!account) throw new Error("insert into internal.accounts returned no row");
    return account;
  });
}

export async function listAccounts(db: Db, tenantId?: string): Promise<Account[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<Account>(
          `select ${ACCOUNT_COLUMNS} from internal.accounts where $1::uuid is null or tenant_id = $1
           order by created_at, id`,
          [tenantId ?? null],
        )
      ).rows,
    { readOnly: true },
  );
}

/**
 * Replaces a tenant's signing secret: new anon and service-role keys, and every access token
 * issued so far stops verifying (users sign in again; refresh tokens still work, as sessions are
 * kept). A tenant with signing keys gets a new one too and its older ones are withdrawn at once,
 * so its ES256 sessions stop as well. Other processes see the change within seconds
 * (TenantDirectory's cache).
 */
export async function rotateTenantKeys(
  db: Db,
  tenantId: string,
): Promise<TenantKeys & { signing_key_id: string | null }> {
  const jwtSecret = newJwtSecret();
  const row = await db.asService(async (tx) => {
    const updated = (
      await tx.query<{ id: string; created_at: Date; settings: unknown }>(
        `update internal.tenants set jwt_secret_sealed = $2, jwt_secret = null where id = $1
         returning id, created_at, settings`,
        [tenantId, db.secrets.encrypt(jwtSecret)],
      )
    ).rows[0];
    if (!updated) return undefined;
    const hasKeys =
      (await tx.query("select 1 from internal.signing_keys where tenant_id = $1 limit 1", [tenantId]))
        .rowCount > 0;
    const key = hasKeys
      ? await rotateSigningKey(tx, db.secrets, tenantId, {
          jwtExpiry: authSettings(updated.settings).jwt_expiry,
          immediate: true,
        })
      : undefined;
    return { ...updated, signingKeyId: key?.kid ?? null };
  });
  if (!row) throw new Error(`no tenant ${tenantId}`);
  return {
    ...(await tenantKeys({ id: row.id, jwt_secret: jwtSecret, created_at: row.created_at })),
    signing_key_id: row.signingKeyId,
  };
}

/**
 * The graceful rotation of a tenant's session signing key (`backline tenants rotate-keys
 * --signing-key`): a new key signs from now on; the one it replaces stays published and accepted
 * until the last token it signed has expired (jwt_expiry, plus a minute). A tenant without a
 * signing key gets its first: from then on its sessions are ES256, and its HS256 sessions are
 * accepted until they expire. The anon and service-role keys do not change.
 */
export async function rotateTenantSigningKey(db: Db, tenantId: string): Promise<SigningKeyInfo> {
  return db.asService(async (tx) => {
    const settings = (
      await tx.query<{ settings: unknown }>("select settings from internal.tenants where id = $1", [tenantId])
    ).rows[0]?.settings;
    if (settings === undefined) throw new Error(`no tenant ${tenantId}`);
    return rotateSigningKey(tx, db.secrets, tenantId, { jwtExpiry: authSettings(settings).jwt_expiry });
  });
}
