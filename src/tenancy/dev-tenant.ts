import fs from "node:fs";
import path from "node:path";
import type { Db } from "../db/db.ts";
import { hashApiKey } from "../public-api/keys/format.ts";
import { issueKey } from "../public-api/keys/service.ts";
import {
  createAccount,
  createTenant,
  getTenantKeys,
  listAccounts,
  rotateTenantSigningKey,
} from "./tenants.ts";

/**
 * The development tenant, as `supabase start` has its local project: created on the first start,
 * reused on every later one, its URL and keys written to <DATA_DIR>/dev-tenant.json.
 */
export interface DevTenantFile {
  url: string;
  anon_key: string;
  service_role_key: string;
  tenant_id: string;
  account_id: string;
  /** A test-mode public-API key of the account's sandbox (docs/public-api.md, quickstart). */
  api_key: string;
}

export const DEV_TENANT_FILE = "dev-tenant.json";

export async function ensureDevTenant(
  db: Db,
  options: { dataDir: string; url: string },
): Promise<{ file: DevTenantFile; path: string; created: boolean }> {
  let created = false;
  let tenantId = await db.asService(
    async (tx) =>
      (
        await tx.query<{ id: string }>(
          "select id from internal.tenants where is_development order by created_at, id limit 1",
        )
      ).rows[0]?.id,
    { readOnly: true },
  );
  if (!tenantId) {
    const { tenant } = await createTenant(db, {
      name: "Development",
      slug: "dev",
      isDevelopment: true,
      // Local development needs no mail server and no review queue (docs/auth.md, docs/operator.md),
      // and it delivers to the simulated store (docs/operator.md). Releases without a UPC get one
      // from GS1's restricted-circulation range, which no product in a store carries (docs/releases.md).
      settings: {
        auth: { email_confirmation: false },
        auto_review: true,
        delivery_adapter: "sandbox",
        gs1_company_prefix: "2000000",
      },
    });
    tenantId = tenant.id;
    created = true;
  } else {
    // A development tenant made before signing keys existed gets its first (docs/auth.md, "Signing keys").
    const id = tenantId;
    const hasKey = await db.asService(
      async (tx) =>
        (await tx.query("select 1 from internal.signing_keys where tenant_id = $1 limit 1", [id])).rowCount >
        0,
      { readOnly: true },
    );
    if (!hasKey) await rotateTenantSigningKey(db, id);
  }
  let account = (await listAccounts(db, tenantId))[0];
  if (!account) account = await createAccount(db, { tenantId, name: "Development label", kind: "label" });
  const keys = await getTenantKeys(db, tenantId);
  if (!keys) throw new Error(`development tenant ${tenantId} vanished`);

  const target = path.join(options.dataDir, DEV_TENANT_FILE);
  const apiKey = await devApiKey(db, account.id, target);
  const file: DevTenantFile = {
    url: options.url,
    ...keys,
    tenant_id: tenantId,
    account_id: account.id,
    api_key: apiKey,
  };
  fs.mkdirSync(options.dataDir, { recursive: true });
  // The service-role key gives full access: readable by this user only.
  fs.writeFileSync(target, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  return { file, path: target, created };
}

/**
 * The development account's test-mode API key: the one in dev-tenant.json while it is still
 * active, else a new one (its secret exists only in that file, which only this user can read).
 */
async function devApiKey(db: Db, accountId: string, file: string): Promise<string> {
  let previous: unknown;
  try {
    previous = JSON.parse(fs.readFileSync(file, "utf8")).api_key;
  } catch {
    previous = undefined;
  }
  if (typeof previous === "string") {
    const active = await db.asService(
      (tx) =>
        tx.query("select 1 from internal.api_keys where key_hash = $1 and status = 'active'", [
          hashApiKey(previous),
        ]),
      { readOnly: true },
    );
    if (active.rowCount > 0) return previous;
  }
  return (await issueKey(db, { accountId, mode: "test", name: "development" })).secret;
}
