import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import { loadSigningKeys } from "../../src/auth/signing-keys.ts";
import { signAccessToken } from "../../src/auth/tokens.ts";
import type { Db } from "../../src/db/db.ts";
import type { Claims, Tx } from "../../src/db/types.ts";
import {
  type Account,
  createAccount,
  createTenant,
  getTenantSigningSecret,
  type PolicyPreset,
  type Tenant,
} from "../../src/tenancy/tenants.ts";

/** Seed helpers: tenants, accounts, users and memberships through the service path, and the claims to act as them. */

/**
 * The seven tables of the table interface (seed 000), as migration 0003 creates them; media_assets
 * (migration 0010) joins them as the uploads table of docs/uploads.md.
 */
export const EXPOSED_TABLES = [
  "artist_profiles",
  "releases",
  "tracks",
  "release_analytics",
  "track_analytics",
  "takedown_requests",
  "notifications",
  "media_assets",
] as const;

export interface SeedUser {
  id: string;
  tenant_id: string;
  email: string;
}

/**
 * The GS1 company prefix test tenants draw their releases' GTINs from when a release has no UPC
 * (docs/releases.md, "Identifiers"): 200–299 is GS1's restricted-circulation range, which no
 * product in a store carries.
 */
export const TEST_GS1_PREFIX = "2000000";

/**
 * A tenant for tests. Its releases are submitted without uploaded media (settings.require_media
 * false) unless `requireMedia` is given: only the upload suites exercise that rule end to end.
 */
export async function seedTenant(
  db: Db,
  preset: PolicyPreset = "account-members",
  options: { requireMedia?: boolean } = {},
): Promise<Tenant> {
  const slug = `t-${randomUUID().slice(0, 8)}`;
  return (
    await createTenant(db, {
      name: `Tenant ${slug}`,
      slug,
      policyPreset: preset,
      settings: { require_media: options.requireMedia ?? false, gs1_company_prefix: TEST_GS1_PREFIX },
    })
  ).tenant;
}

export function seedAccount(db: Db, tenant: Tenant, name = "Label"): Promise<Account> {
  return createAccount(db, { tenantId: tenant.id, name });
}

export async function seedUser(
  db: Db,
  tenant: Tenant,
  memberships: { account: Account; role?: "owner" | "admin" | "member" | "viewer" }[] = [],
): Promise<SeedUser> {
  return db.asService(async (tx) => {
    const email = `user-${randomUUID().slice(0, 8)}@example.com`;
    const r = await tx.query<SeedUser>(
      // Confirmed by the link mailed to it, as on a tenant that asks for confirmation (the default):
      // the address is proven.
      "insert into internal.users (tenant_id, email, email_confirmed_at, email_proven_at) values ($1, $2, now(), now()) returning id, tenant_id, email",
      [tenant.id, email],
    );
    const user = r.rows[0];
    if (!user) throw new Error("no user");
    for (const m of memberships) {
      await tx.query(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, $4)",
        [tenant.id, m.account.id, user.id, m.role ?? "member"],
      );
    }
    return user;
  });
}

/**
 * A user of `tenant` who is a member of `accounts`, and an access token for them signed as
 * /auth/v1 signs it (`issuer`: the app's /auth/v1 URL).
 */
export async function memberToken(
  db: Db,
  tenant: Tenant,
  accounts: Account[],
  issuer: string,
): Promise<string> {
  const user = await seedUser(
    db,
    tenant,
    accounts.map((account) => ({ account, role: "member" as const })),
  );
  return userToken(db, tenant, user, issuer);
}

/**
 * An access token for `user` of `tenant`, signed as /auth/v1 signs it (`issuer`: the app's
 * /auth/v1 URL), valid an hour, with a fresh session id.
 */
export async function userToken(
  db: Db,
  tenant: Tenant,
  user: SeedUser,
  issuer: string,
  aal: "aal1" | "aal2" = "aal1",
): Promise<string> {
  const secret = await getTenantSigningSecret(db, tenant.id);
  if (!secret) throw new Error(`tenant ${tenant.id} has no signing secret`);
  // With the tenant's current signing key, as /auth/v1 signs (ES256); HS256 for a tenant without one.
  const signing = await db.asService((tx) => loadSigningKeys(tx, db.secrets, tenant.id, 3600), {
    readOnly: true,
  });
  const { token } = await signAccessToken({
    secret,
    signingKey: signing.current,
    issuer,
    expiresIn: 3600,
    tenantId: tenant.id,
    user: {
      id: user.id,
      email: user.email,
      phone: null,
      app_metadata: {},
      user_metadata: {},
      is_anonymous: false,
    },
    sessionId: randomUUID(),
    aal,
    amr: [],
  });
  return token;
}

/**
 * `claims` signed as /auth/v1 signs a session of `tenantId`: ES256 with its current signing key
 * (named in `kid`), or HS256 with its secret for a tenant without one. For tests that need a
 * session with claims of their own (another exp, a moved clock).
 */
export async function signSessionClaims(
  db: Db,
  tenantId: string,
  claims: Record<string, unknown>,
): Promise<string> {
  const signing = await db.asService((tx) => loadSigningKeys(tx, db.secrets, tenantId, 3600), {
    readOnly: true,
  });
  if (signing.current) {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: signing.current.kid })
      .sign(signing.current.privateKey);
  }
  const secret = await getTenantSigningSecret(db, tenantId);
  if (!secret) throw new Error(`tenant ${tenantId} has no signing secret`);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .sign(new TextEncoder().encode(secret));
}

/** A staff role of a tenant (internal.staff, migration 0019). */
export type StaffRole = "reviewer" | "operator" | "admin";

/**
 * A user of `tenant` (address proven unless `proven: false`) who is staff where `roles` say:
 * of a tenant, or platform staff (`of: "platform"`).
 */
export async function seedStaffUser(
  db: Db,
  tenant: Tenant,
  roles: { of: Tenant | "platform"; role: StaffRole }[],
  options: { proven?: boolean } = {},
): Promise<SeedUser> {
  const user = await seedUser(db, tenant);
  await db.asService(async (tx) => {
    // seedUser's addresses are proven; `proven: false` undoes it.
    if (options.proven === false)
      await tx.query("update internal.users set email_proven_at = null where id = $1", [user.id]);
    for (const r of roles) {
      await tx.query("insert into internal.staff (user_id, tenant_id, role) values ($1, $2, $3)", [
        user.id,
        r.of === "platform" ? null : r.of.id,
        r.role,
      ]);
    }
  });
  return user;
}

/** The claims of a logged-in user's access token. */
export function userClaims(user: SeedUser): Claims {
  return { role: "authenticated", sub: user.id, tenant_id: user.tenant_id, aud: "authenticated" };
}

/** The claims a public-API key of `account` runs with. */
export function keyClaims(account: Account, accountRole: "admin" | "member" | "viewer" = "member"): Claims {
  return {
    role: "authenticated",
    tenant_id: account.tenant_id,
    account_id: account.id,
    account_role: accountRole,
    api_key_id: randomUUID(),
  };
}

export const anonClaims = (tenant: Tenant): Claims => ({ role: "anon", tenant_id: tenant.id });
/** The claims a tenant's own service-role key runs with: every row of that tenant. */
export const tenantServiceClaims = (tenant: Tenant): Claims => ({
  role: "tenant_service",
  tenant_id: tenant.id,
});
export const serviceClaims: Claims = { role: "service_role" };

/** Sets a release's status on the service path, walking the lifecycle as the operator would. */
export async function forceReleaseStatus(db: Db, releaseId: string, status: string): Promise<void> {
  await db.asService((tx: Tx) =>
    tx.query("update public.releases set status = $2 where id = $1", [releaseId, status]),
  );
}
