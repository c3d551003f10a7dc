import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { seedPasswordUser } from "./console.ts";

/**
 * The browser tests' world, written before the server starts (test/support/console.ts):
 *
 * - "Night Owl Distribution" (slug nightowl): reviews by hand (auto_review off, as
 *   /work/shared/STAGE.md asks of review demos), requires valid media, delivers through the
 *   simulated store (delivery_adapter sandbox); its label "Night Owl Records" is not a sandbox and
 *   has a live public-API key;
 * - its staff: `desk@` (admin: every page), `reviewer@` (reviewer only);
 * - `outsider@`, a user of nightowl who is not staff;
 * - "Elsewhere Music" (slug elsewhere) and its admin `boss@elsewhere`, staff there only.
 *
 * Staff rows are written as `backline staff add` writes them (h-staff's internal.staff).
 */

export const PASSWORD = "a long console test password";

export interface DeskWorld {
  tenant: { id: string; slug: string; anonKey: string };
  other: { id: string; slug: string; anonKey: string };
  accountId: string;
  apiKey: string;
  desk: { id: string; email: string };
  reviewer: { id: string; email: string };
  outsider: { id: string; email: string };
  otherAdmin: { id: string; email: string };
}

export async function seedDeskWorld(db: Db, config: Config): Promise<DeskWorld> {
  const { tenant, keys } = await createTenant(db, {
    name: "Night Owl Distribution",
    slug: "nightowl",
    settings: {
      auto_review: false,
      require_media: true,
      delivery_adapter: "sandbox",
      gs1_company_prefix: "2000000",
      auth: { email_confirmation: false, site_url: `${config.publicUrl}/console/` },
    },
  });
  const { tenant: other, keys: otherKeys } = await createTenant(db, {
    name: "Elsewhere Music",
    slug: "elsewhere",
    settings: { auto_review: false, gs1_company_prefix: "2000000", auth: { email_confirmation: false } },
  });
  const account = await createAccount(db, { tenantId: tenant.id, name: "Night Owl Records", kind: "label" });
  const key = await issueKey(db, { accountId: account.id, mode: "live", name: "console e2e" });
  const desk = await seedPasswordUser(db, tenant.id, "desk@nightowl.example", PASSWORD);
  const reviewer = await seedPasswordUser(db, tenant.id, "reviewer@nightowl.example", PASSWORD);
  const outsider = await seedPasswordUser(db, tenant.id, "outsider@nightowl.example", PASSWORD);
  const otherAdmin = await seedPasswordUser(db, other.id, "boss@elsewhere.example", PASSWORD);
  await addStaff(db, desk.id, tenant.id, "admin");
  await addStaff(db, reviewer.id, tenant.id, "reviewer");
  await addStaff(db, otherAdmin.id, other.id, "admin");
  return {
    tenant: { id: tenant.id, slug: tenant.slug, anonKey: keys.anon_key },
    other: { id: other.id, slug: other.slug, anonKey: otherKeys.anon_key },
    accountId: account.id,
    apiKey: key.secret,
    desk,
    reviewer,
    outsider,
    otherAdmin,
  };
}

export async function addStaff(
  db: Db,
  userId: string,
  tenantId: string | null,
  role: "reviewer" | "operator" | "admin",
): Promise<void> {
  await db.asService((tx) =>
    tx.query("insert into internal.staff (user_id, tenant_id, role) values ($1, $2, $3)", [
      userId,
      tenantId,
      role,
    ]),
  );
}
