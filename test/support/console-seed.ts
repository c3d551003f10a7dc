import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { Mailer } from "../../src/mail/mailer.ts";
import { issueKey } from "../../src/public-api/keys/service.ts";
import { addStaff as addStaffMember } from "../../src/tenancy/staff.ts";
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
 * Staff are made by the function `backline staff add` runs (src/tenancy/staff.ts).
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
  await addStaff(db, config, desk.email, tenant.slug, "admin");
  await addStaff(db, config, reviewer.email, tenant.slug, "reviewer");
  await addStaff(db, config, otherAdmin.email, other.slug, "admin");
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

/** `backline staff add --tenant <slug> --email <email> --role <role>`, by the function the command runs. */
export async function addStaff(
  db: Db,
  config: Config,
  email: string,
  tenant: string,
  role: "reviewer" | "operator" | "admin",
): Promise<void> {
  const mailer = new Mailer(db, { smtpUrl: undefined, from: config.mail.from });
  const result = await addStaffMember(db, { tenant, email, role }, { mailer, publicUrl: config.publicUrl });
  if (result.status !== "added") throw new Error(`${email} was not made staff at once: ${result.status}`);
}
