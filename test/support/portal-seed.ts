import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { Mailer } from "../../src/mail/mailer.ts";
import { importRoyalties } from "../../src/royalties/import.ts";
import { sampleReport } from "../../src/royalties/sample.ts";
import { addMember } from "../../src/tenancy/memberships.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { seedPasswordUser } from "./console.ts";
import { reportFile, seedSampleCatalog } from "./royalties.ts";

/**
 * The portal's browser tests' world (test/portal/), written before the server starts:
 *
 * - "Moonlight Music" (slug moonlight), made as `backline tenants create` makes a tenant (no
 *   settings: e-mail confirmation on, sign-up open, no site_url), then branded as the console's
 *   settings page saves it (display name, a logo from this server, a yellow that white text
 *   cannot sit on, a support address), and given its own domain `music.moonlight.test`;
 * - its label "Moonlight Records" with a release "Harbour Lights" (two tracks), and an invitation
 *   of `viewer@` as viewer, made by the function `backline accounts add-member` runs: the invite
 *   link is read from the local mailbox (internal.mail_outbox) here, before the server starts;
 * - "Far Away Label", another account of the tenant, whose owner `far@` has a password and
 *   a release "Elsewhere Song"; `far@` is also a member of "Second Label" ("Second Song");
 * - "Tidewater", a sandbox artist account (approved without review, delivered to the sandbox
 *   store) whose owner `artist@` has a password and no release yet;
 * - "Lantern Records", whose owner `lantern@` has a password: two delivered releases (Night Drive,
 *   Daybreak) and six months of store reports for them, imported as the operator imports them;
 * - "Vault Records", whose owner requires a second factor (aal2) of its members: `vault@` (a
 *   member, with a password) reaches its release "Locked Away" only from an aal2 session.
 */

export const PASSWORD = "a long portal test password";

export interface PortalWorld {
  /** `serviceKey`: the tenant's service-role key (what the operator's desk acts with on /admin/v1). */
  tenant: { id: string; slug: string; anonKey: string; serviceKey: string };
  label: { id: string; releaseId: string };
  inviteLink: string;
  viewerEmail: string;
  far: { email: string; releaseId: string };
  vault: { email: string };
  /** `artist@`, owner of the sandbox artist account "Tidewater" (approved at once, the sandbox store). */
  artist: { email: string; accountId: string };
  /** `lantern@`, owner of "Lantern Records": two delivered releases with six months of royalties. */
  lantern: { email: string; accountId: string; nightDrive: string; daybreak: string };
}

/** The months of sale the royalty story's reports cover (each reported the month after). */
export const ROYALTY_MONTHS = ["2026-01", "2026-02", "2026-03", "2026-04", "2026-05", "2026-06"];

/** Six monthly reports (the backline format, generated for the two releases) imported as the operator would. */
async function seedRoyalties(
  db: Db,
  tenantId: string,
  catalog: { id: string; title: string; upc: string; isrcs: string[] }[],
) {
  const stores = ["spotify", "apple_music", "amazon_music", "deezer", "youtube_music"].map((code) => ({
    code,
    kind: "dsp",
  }));
  for (const [m, salePeriod] of ROYALTY_MONTHS.entries())
    for (const [i, r] of catalog.entries()) {
      const report = sampleReport(
        {
          id: r.id,
          title: r.title,
          artistName: "Nova Lights",
          upc: r.upc,
          tracks: r.isrcs.map((isrc) => ({ title: r.title, isrc })),
          stores,
        },
        { format: "backline", salePeriod, seed: 100 + m * 10 + i },
      );
      await importRoyalties(db, { tenantId, format: "backline", file: reportFile(report.text) });
    }
}

export const BRAND = {
  display_name: "Moonlight Music",
  primary_color: "#f5c518",
  support_email: "help@moonlight.test",
  /** The operator's own style sheet, loaded after the portal's (docs/portal.md). */
  custom_css: '[data-testid="brand-name"] { letter-spacing: 0.1em; }',
};

async function releaseOf(db: Db, accountId: string, artist: string, title: string, tracks: string[]) {
  return db.asService(async (tx) => {
    const a = await tx.query<{ id: string }>(
      "insert into public.artist_profiles (account_id, name) values ($1, $2) returning id",
      [accountId, artist],
    );
    const r = await tx.query<{ id: string }>(
      `insert into public.releases (account_id, artist_id, title, status, release_date)
       values ($1, $2, $3, 'draft', current_date + 40) returning id`,
      [accountId, a.rows[0]?.id, title],
    );
    const releaseId = r.rows[0]?.id as string;
    for (const [i, t] of tracks.entries())
      await tx.query(
        "insert into public.tracks (release_id, account_id, title, track_number, duration) values ($1, $2, $3, $4, $5)",
        [releaseId, accountId, t, i + 1, 200 + i * 13],
      );
    return releaseId;
  });
}

export async function seedPortalWorld(db: Db, config: Config): Promise<PortalWorld> {
  const { tenant, keys } = await createTenant(db, { name: "Moonlight", slug: "moonlight" });
  await db.asService(async (tx) => {
    await tx.query(
      `update internal.organization_settings
       set display_name = $2, logo_url = $3, primary_color = $4, support_email = $5, custom_css = $6
       where tenant_id = $1`,
      [
        tenant.id,
        BRAND.display_name,
        `${config.publicUrl}/portal/favicon.svg`,
        BRAND.primary_color,
        BRAND.support_email,
        BRAND.custom_css,
      ],
    );
    await tx.query(
      `update internal.tenants set settings = settings || '{"portal":{"domains":["music.moonlight.test"]}}'::jsonb
       where id = $1`,
      [tenant.id],
    );
  });
  const label = await createAccount(db, { tenantId: tenant.id, name: "Moonlight Records", kind: "label" });
  const releaseId = await releaseOf(db, label.id, "Mira Vale", "Harbour Lights", [
    "Harbour Lights",
    "Low Tide",
  ]);
  const viewerEmail = "viewer@moonlight.test";
  const mailer = new Mailer(db, { smtpUrl: undefined, from: config.mail.from });
  await addMember(
    db,
    { accountId: label.id, email: viewerEmail, role: "viewer" },
    { mailer, publicUrl: config.publicUrl },
  );
  const inviteLink = await db.asService(async (tx) => {
    const mail = await tx.query<{ text_body: string }>(
      "select text_body from internal.mail_outbox where to_address = $1 order by created_at desc limit 1",
      [viewerEmail],
    );
    const m = mail.rows[0]?.text_body.match(/https?:\/\/\S+\/auth\/v1\/verify\?\S+/);
    if (!m) throw new Error(`no invite link in the mail to ${viewerEmail}`);
    return m[0];
  });

  const farAccount = await createAccount(db, { tenantId: tenant.id, name: "Far Away Label", kind: "label" });
  const far = await seedPasswordUser(db, tenant.id, "far@faraway.test", PASSWORD);
  await db.asService((tx) =>
    tx.query(
      "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
      [tenant.id, farAccount.id, far.id],
    ),
  );
  const farRelease = await releaseOf(db, farAccount.id, "Distant", "Elsewhere Song", ["Elsewhere Song"]);
  const second = await createAccount(db, { tenantId: tenant.id, name: "Second Label", kind: "label" });
  await releaseOf(db, second.id, "Second", "Second Song", ["Second Song"]);
  const vaultAccount = await createAccount(db, { tenantId: tenant.id, name: "Vault Records", kind: "label" });
  await releaseOf(db, vaultAccount.id, "Keeper", "Locked Away", ["Locked Away"]);
  const vault = await seedPasswordUser(db, tenant.id, "vault@vault.test", PASSWORD);
  await db.asService(async (tx) => {
    await tx.query(
      "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'member'), ($1, $4, $5, 'member')",
      [tenant.id, second.id, far.id, vaultAccount.id, vault.id],
    );
    await tx.query("update internal.accounts set require_aal2 = true where id = $1", [vaultAccount.id]);
  });
  const tidewater = await createAccount(db, {
    tenantId: tenant.id,
    name: "Tidewater",
    kind: "artist",
    isSandbox: true,
  });
  const artist = await seedPasswordUser(db, tenant.id, "artist@tidewater.test", PASSWORD);
  await db.asService((tx) =>
    tx.query(
      "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
      [tenant.id, tidewater.id, artist.id],
    ),
  );
  const lanternAccount = await createAccount(db, {
    tenantId: tenant.id,
    name: "Lantern Records",
    kind: "label",
  });
  const lantern = await seedPasswordUser(db, tenant.id, "lantern@lantern.test", PASSWORD);
  await db.asService((tx) =>
    tx.query(
      "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
      [tenant.id, lanternAccount.id, lantern.id],
    ),
  );
  const catalog = await seedSampleCatalog(db, lanternAccount);
  await seedRoyalties(db, tenant.id, [
    {
      id: catalog.nightDrive,
      title: "Night Drive",
      upc: "012345000010",
      isrcs: ["QZABC2600001", "QZABC2600002"],
    },
    { id: catalog.daybreak, title: "Daybreak", upc: "012345000027", isrcs: ["QZABC2600003"] },
  ]);
  return {
    tenant: { id: tenant.id, slug: tenant.slug, anonKey: keys.anon_key, serviceKey: keys.service_role_key },
    label: { id: label.id, releaseId },
    inviteLink,
    viewerEmail,
    far: { email: far.email, releaseId: farRelease },
    vault: { email: vault.email },
    artist: { email: artist.email, accountId: tidewater.id },
    lantern: {
      email: lantern.email,
      accountId: lanternAccount.id,
      nightDrive: catalog.nightDrive,
      daybreak: catalog.daybreak,
    },
  };
}
