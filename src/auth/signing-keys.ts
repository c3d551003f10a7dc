import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import type { SecretBox } from "../secrets/box.ts";

/**
 * Tenants' asymmetric signing keys (docs/auth.md, "Signing keys"; migration 0048): an ES256 key
 * pair per tenant signs its users' access tokens, which name it in the `kid` header, and
 * GET /auth/v1/.well-known/jwks.json publishes the public halves, so that supabase-js's
 * `auth.getClaims()` (or any JWT library) verifies a session without asking the server.
 *
 * One key is current and signs. A graceful rotation retires it: its private half is dropped at
 * once, its public half stays published and accepted until the last token it signed has expired
 * (the tenant's jwt_expiry, plus PROPAGATION_S for other processes still signing with it from
 * their cache). An emergency rotation (`backline tenants rotate-keys`) withdraws it at once.
 * The tenant's HS256 secret keeps signing the anon and service-role keys; HS256 sessions are
 * accepted only from before the tenant's first key, until they have expired.
 */

/** Seconds another process may go on signing with a retired key (TenantDirectory's cache is 10 s). */
export const PROPAGATION_S = 60;

export interface PublicJwk {
  kty: "EC";
  crv: "P-256";
  x: string;
  y: string;
}

export interface PublishedKey {
  kid: string;
  jwk: PublicJwk;
  key: KeyObject;
  /** Epoch ms after which tokens it signed are refused; undefined: the current key. */
  verifyUntil: number | undefined;
}

export interface TenantSigningKeys {
  /** The key sessions are signed with; undefined: the tenant still signs sessions with its secret. */
  current: { kid: string; privateKey: KeyObject } | undefined;
  /** Every key whose tokens are still accepted (the current one first). */
  published: PublishedKey[];
  /**
   * Epoch ms until which HS256 sessions (issued before the tenant's first key) are still
   * accepted; undefined: the tenant has no key, HS256 sessions are its only kind.
   */
  hs256SessionsUntil: number | undefined;
  /** Epoch ms of the tenant's first key: an HS256 session issued after it is refused. */
  since: number | undefined;
}

export const NO_SIGNING_KEYS: TenantSigningKeys = {
  current: undefined,
  published: [],
  hs256SessionsUntil: undefined,
  since: undefined,
};

interface KeyRow {
  id: string;
  public_jwk: PublicJwk;
  private_key_sealed: string | null;
  created_at: Date;
  verify_until: Date | null;
}

/**
 * A tenant's keys as the gateway needs them: the current private key opened, the public keys
 * whose tokens are still accepted (`box` may be a getter: only a tenant with a key needs it). `jwtExpiry` (seconds) bounds how long HS256 sessions issued
 * before the switch are accepted.
 */
export async function loadSigningKeys(
  tx: Tx,
  box: SecretBox | (() => SecretBox),
  tenantId: string,
  jwtExpiry: number,
  now: number = Date.now(),
): Promise<TenantSigningKeys> {
  const rows = (
    await tx.query<KeyRow>(
      `select id, public_jwk, private_key_sealed, created_at, verify_until from internal.signing_keys
       where tenant_id = $1 order by retired_at is null desc, created_at desc, id`,
      [tenantId],
    )
  ).rows;
  if (rows.length === 0) return NO_SIGNING_KEYS;
  const since = Math.min(...rows.map((r) => r.created_at.getTime()));
  const first = rows[0];
  const current =
    first && first.private_key_sealed !== null
      ? {
          kid: first.id,
          privateKey: createPrivateKey({
            key: (typeof box === "function" ? box() : box).decrypt(first.private_key_sealed),
            format: "pem",
          }),
        }
      : undefined;
  const published = rows
    .filter((r) => r.verify_until === null || r.verify_until.getTime() > now)
    .map((r) => ({
      kid: r.id,
      jwk: r.public_jwk,
      key: createPublicKey({ key: { ...r.public_jwk }, format: "jwk" }),
      verifyUntil: r.verify_until?.getTime(),
    }));
  return {
    current,
    published,
    since,
    hs256SessionsUntil: since + (jwtExpiry + PROPAGATION_S) * 1000,
  };
}

/** The JWKS document: the public keys whose tokens are accepted, in the form RFC 7517 gives. */
export function jwks(keys: TenantSigningKeys, now: number = Date.now()): { keys: Record<string, unknown>[] } {
  return {
    keys: keys.published
      .filter((k) => k.verifyUntil === undefined || k.verifyUntil > now)
      .map((k) => ({ ...k.jwk, kid: k.kid, alg: "ES256", use: "sig", key_ops: ["verify"] })),
  };
}

export interface SigningKeyInfo {
  kid: string;
  algorithm: string;
  /** current: signs; previous: retired, its tokens still accepted; withdrawn: its tokens are refused. */
  status: "current" | "previous" | "withdrawn";
  created_at: Date;
  retired_at: Date | null;
  verify_until: Date | null;
}

/**
 * Makes a new current key for the tenant. The key it replaces is retired: kept published until
 * `now + jwtExpiry + PROPAGATION_S` (graceful), or withdrawn at once (`immediate`). The tenant's
 * row is locked, so two rotations at once leave one current key.
 */
export async function rotateSigningKey(
  tx: Tx,
  box: SecretBox,
  tenantId: string,
  options: { jwtExpiry: number; immediate?: boolean },
): Promise<SigningKeyInfo> {
  await tx.query("select 1 from internal.tenants where id = $1 for update", [tenantId]);
  const grace = options.immediate ? 0 : options.jwtExpiry + PROPAGATION_S;
  await tx.query(
    `update internal.signing_keys
     set retired_at = now(), private_key_sealed = null, verify_until = now() + make_interval(secs => $2)
     where tenant_id = $1 and retired_at is null`,
    [tenantId, grace],
  );
  if (options.immediate) {
    // Withdrawn keys that were still published (earlier graceful rotations) are withdrawn too.
    await tx.query(
      "update internal.signing_keys set verify_until = now() where tenant_id = $1 and verify_until > now()",
      [tenantId],
    );
  }
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const { kty, crv, x, y } = publicKey.export({ format: "jwk" });
  const jwk = { kty, crv, x, y };
  const pem = privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  const row = (
    await tx.query<SigningKeyInfo>(
      `insert into internal.signing_keys (tenant_id, algorithm, public_jwk, private_key_sealed)
       values ($1, 'ES256', $2, $3)
       returning id as kid, algorithm, 'current' as status, created_at, retired_at, verify_until`,
      [tenantId, JSON.stringify(jwk), box.encrypt(pem)],
    )
  ).rows[0];
  if (!row) throw new Error("insert into internal.signing_keys returned no row");
  return row;
}

/** The tenant's keys, newest first, with what each does now. */
export async function listSigningKeys(db: Db, tenantId: string): Promise<SigningKeyInfo[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<SigningKeyInfo>(
          `select id as kid, algorithm,
             case when retired_at is null then 'current'
                  when verify_until > now() then 'previous' else 'withdrawn' end as status,
             created_at, retired_at, verify_until
           from internal.signing_keys where tenant_id = $1 order by created_at desc, id`,
          [tenantId],
        )
      ).rows,
    { readOnly: true },
  );
}
