import fs from "node:fs";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { type KeySettings, keyFiles, loadSecretBox, readKeyFile, SecretBox, SecretKeyError } from "./box.ts";

/**
 * Every secret the database keeps, sealed with the server's master key (docs/security.md, "Where
 * secrets live"). A new sealed column is added here, so that the start-up upgrade and
 * `backline secrets rotate-master-key` cover it.
 */
export const SEALED_COLUMNS = [
  { name: "tenant_signing_secrets", table: "internal.tenants", id: "id uuid", column: "jwt_secret_sealed" },
  { name: "store_credentials", table: "internal.stores", id: "code text", column: "credentials_sealed" },
  {
    name: "webhook_secrets",
    table: "internal.webhook_endpoints",
    id: "id uuid",
    column: "secret_ciphertext",
  },
  {
    name: "webhook_secrets",
    table: "internal.webhook_endpoints",
    id: "id uuid",
    column: "previous_secret_ciphertext",
  },
  // Stored answers of idempotent requests that showed a secret once (kept 24 h). The key is
  // composite, so a row is named by its ctid, stable while the rotation's transaction holds it.
  {
    name: "idempotent_answers",
    table: "internal.idempotency_keys",
    id: "ctid tid",
    column: "response_ciphertext",
  },
  // TOTP factors' secrets (migration 0020).
  { name: "mfa_secrets", table: "internal.mfa_factors", id: "id uuid", column: "secret_sealed" },
  // Tenants' current session signing keys, private halves (migration 0048; retired keys have none).
  {
    name: "session_signing_keys",
    table: "internal.signing_keys",
    id: "id uuid",
    column: "private_key_sealed",
  },
  // Tenants' OpenID Connect providers' client secrets (migration 0052).
  {
    name: "oidc_client_secrets",
    table: "internal.oidc_providers",
    id: "id uuid",
    column: "client_secret_sealed",
  },
] as const;
export type SealedName = (typeof SEALED_COLUMNS)[number]["name"];
export type SealedCounts = Record<SealedName, number>;

const zero = (): SealedCounts => ({
  tenant_signing_secrets: 0,
  store_credentials: 0,
  webhook_secrets: 0,
  idempotent_answers: 0,
  mfa_secrets: 0,
  session_signing_keys: 0,
  oidc_client_secrets: 0,
});

/**
 * Keys of a settings object that hold credentials: they are kept sealed, never in plain settings.
 * The database refuses them in internal.stores.settings with the same pattern (migration 0016).
 */
export const CREDENTIAL_KEY = /secret|password|passphrase|private_key|token/i;
const CREDENTIAL_PATH = `strict $.** ? (@.type() == "object").keyvalue() ? (@.key like_regex "secret|password|passphrase|private_key|token" flag "i")`;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const holdsCredentials = (v: unknown): boolean =>
  Array.isArray(v)
    ? v.some(holdsCredentials)
    : isObject(v) && Object.entries(v).some(([k, x]) => CREDENTIAL_KEY.test(k) || holdsCredentials(x));

/**
 * Settings without their credentials, and the credentials alone in the same shape (undefined: none).
 * A list that holds a credential anywhere goes whole with the credentials.
 */
export function splitCredentials(value: Json): { settings: Json; credentials: Json | undefined } {
  const settings: Json = {};
  const credentials: Json = {};
  for (const [k, v] of Object.entries(value)) {
    if (CREDENTIAL_KEY.test(k) || (Array.isArray(v) && holdsCredentials(v))) {
      credentials[k] = v;
    } else if (isObject(v)) {
      const inner = splitCredentials(v);
      settings[k] = inner.settings;
      if (inner.credentials) credentials[k] = inner.credentials;
    } else {
      settings[k] = v;
    }
  }
  return { settings, credentials: Object.keys(credentials).length > 0 ? credentials : undefined };
}

/** `settings` with `credentials` put back where they were taken from. */
export function mergeCredentials(settings: Json, credentials: Json | undefined): Json {
  if (!credentials) return settings;
  const merged: Json = { ...settings };
  for (const [k, v] of Object.entries(credentials)) {
    const here = merged[k];
    merged[k] = isObject(here) && isObject(v) ? mergeCredentials(here, v) : v;
  }
  return merged;
}

/** Where the credentials are, as dotted paths (what `backline stores show` prints instead of them). */
export function credentialPaths(credentials: Json | undefined, prefix = ""): string[] {
  if (!credentials) return [];
  return Object.entries(credentials).flatMap(([k, v]) =>
    isObject(v) && !CREDENTIAL_KEY.test(k) ? credentialPaths(v, `${prefix}${k}.`) : [`${prefix}${k}`],
  );
}

/**
 * Refuses to seal with a key that is not the one the database's secrets are sealed with: a
 * process started with another DATA_DIR or ENCRYPTION_KEY would otherwise seal secrets that the
 * servers cannot open.
 */
async function assertKeyFits(tx: Tx, box: SecretBox): Promise<void> {
  for (const c of SEALED_COLUMNS) {
    const ids = await tx.query<{ id: string }>(
      `select distinct split_part(${c.column}, '.', 2) as id from ${c.table} where ${c.column} like 'v2.%'`,
    );
    const unknown = ids.rows.find((r) => !box.keyIds.includes(r.id));
    if (unknown) throw new SecretKeyError(unknown.id, `${c.table}.${c.column}`);
    const legacy = await tx.query<{ v: string }>(
      `select ${c.column} as v from ${c.table} where ${c.column} like 'v1.%' limit 3`,
    );
    for (const r of legacy.rows) {
      try {
        box.decrypt(r.v);
      } catch {
        throw new SecretKeyError(undefined, `${c.table}.${c.column}`);
      }
    }
  }
}

async function sealPlain(tx: Tx, box: SecretBox): Promise<SealedCounts> {
  const counts = zero();
  const tenants = await tx.query<{ id: string; jwt_secret: string }>(
    "select id, jwt_secret from internal.tenants where jwt_secret is not null order by id for update",
  );
  const stores = await tx.query<{ code: string; settings: Json; credentials_sealed: string | null }>(
    `select code, settings, credentials_sealed from internal.stores
     where jsonb_path_exists(settings, '${CREDENTIAL_PATH}') order by code for update`,
  );
  await assertKeyFits(tx, box);
  if (tenants.rows.length + stores.rows.length === 0) return counts;
  for (const t of tenants.rows) {
    await tx.query("update internal.tenants set jwt_secret_sealed = $2, jwt_secret = null where id = $1", [
      t.id,
      box.encrypt(t.jwt_secret),
    ]);
    counts.tenant_signing_secrets++;
  }
  for (const s of stores.rows) {
    const { settings, credentials } = splitCredentials(s.settings);
    const kept = s.credentials_sealed ? (JSON.parse(box.decrypt(s.credentials_sealed)) as Json) : {};
    await tx.query("update internal.stores set settings = $2, credentials_sealed = $3 where code = $1", [
      s.code,
      JSON.stringify(settings),
      box.encrypt(JSON.stringify(mergeCredentials(kept, credentials))),
    ]);
    counts.store_credentials++;
  }
  return counts;
}

/**
 * The upgrade step of the server's start (idempotent): secrets an older version kept in plain
 * text (tenants' signing secrets, credentials in store settings) are sealed, in one transaction.
 * A key that does not open the secrets already sealed is refused first (SecretKeyError): a server
 * started with the wrong ENCRYPTION_KEY or DATA_DIR stops at once instead of failing every request.
 */
export async function sealPlainSecrets(
  db: Db,
  box: SecretBox = db.secrets,
): Promise<{ counts: SealedCounts; total: number }> {
  const counts = await db.asService((tx) => sealPlain(tx, box));
  return { counts, total: Object.values(counts).reduce((a, b) => a + b, 0) };
}

export interface ResealReport {
  /** Plain secrets sealed first (the upgrade step). */
  sealed_plain: SealedCounts;
  /** Secrets sealed with a previous key, now sealed with the current one. */
  resealed: SealedCounts;
  /** Secrets that were sealed with the current key already. */
  already_current: SealedCounts;
}

/**
 * Seals every secret with `box`'s current key, opening each with whichever of its keys sealed it:
 * all in one transaction, so a secret the keys cannot open leaves everything as it was.
 * Idempotent: what the current key sealed is left alone.
 */
export async function resealAll(db: Db, box: SecretBox): Promise<ResealReport> {
  return db.asService(async (tx) => {
    const report: ResealReport = {
      sealed_plain: await sealPlain(tx, box),
      resealed: zero(),
      already_current: zero(),
    };
    for (const c of SEALED_COLUMNS) {
      const [id, type] = c.id.split(" ") as [string, string];
      const rows = await tx.query<{ id: string; v: string }>(
        `select ${id}::text as id, ${c.column} as v from ${c.table} where ${c.column} is not null order by 1 for update`,
      );
      for (const r of rows.rows) {
        if (box.isCurrent(r.v)) {
          report.already_current[c.name]++;
          continue;
        }
        let plain: string;
        try {
          plain = box.decrypt(r.v);
        } catch (error) {
          const where = `${c.table} ${r.id} (${c.column})`;
          if (error instanceof SecretKeyError) throw new SecretKeyError(error.keyId, where);
          throw new Error(`${where}: ${error instanceof Error ? error.message : error}`, { cause: error });
        }
        await tx.query(`update ${c.table} set ${c.column} = $2 where ${id} = $1::${type}`, [
          r.id,
          box.encrypt(plain),
        ]);
        report.resealed[c.name]++;
      }
    }
    return report;
  });
}

export interface RotationReport extends ResealReport {
  /** The id of the key everything is sealed with now. */
  key_id: string;
  /** The ids of the keys that were still accepted (ENCRYPTION_KEY_PREVIOUS, the old key file). */
  previous_key_ids: string[];
  /** Where the key is: "ENCRYPTION_KEY", or the key file of the embedded default. */
  key_source: string;
}

/**
 * `backline secrets rotate-master-key`. With ENCRYPTION_KEY set, the new key is ENCRYPTION_KEY and
 * the old ones ENCRYPTION_KEY_PREVIOUS: every secret is sealed again with the new key. On the
 * embedded default (the key file DATA_DIR/encryption.key) a new key is made: first written to
 * `encryption.key.next` (0600), then every secret is sealed with it in one transaction, then it
 * replaces the old file. An interrupted rotation is finished by running the command again, with the
 * same next key (the server meanwhile opens secrets with both).
 */
export async function rotateMasterKey(db: Db, settings: KeySettings): Promise<RotationReport> {
  if (settings.encryptionKey) {
    const box = loadSecretBox(settings);
    const report = await resealAll(db, box);
    return {
      key_id: box.keyId,
      previous_key_ids: box.keyIds.slice(1),
      key_source: "ENCRYPTION_KEY",
      ...report,
    };
  }
  const files = keyFiles(settings.dataDir);
  const old = readKeyFile(files.current, true) as Buffer;
  const next = readKeyFile(files.next, true) as Buffer;
  const previous = (settings.encryptionKeyPrevious ?? []).map((k) => Buffer.from(k, "base64"));
  const box = new SecretBox(next, [old, ...previous]);
  const report = await resealAll(db, box);
  fs.renameSync(files.next, files.current);
  return { key_id: box.keyId, previous_key_ids: box.keyIds.slice(1), key_source: files.current, ...report };
}
