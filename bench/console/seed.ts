import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { seedPasswordUser } from "../../test/support/console.ts";
import { addStaff } from "../../test/support/console-seed.ts";

/**
 * The benchmark's tenant: `releases` releases waiting in review (status in_review, submitted a
 * minute apart, oldest first), written by one INSERT … SELECT on the operator's path, and a
 * reviewer who signs in to the console with a password.
 */
export interface BenchSeed {
  tenantId: string;
  slug: string;
  email: string;
  password: string;
  releases: number;
}

export async function seedReviewQueue(db: Db, config: Config, releases: number): Promise<BenchSeed> {
  const slug = "bench-desk";
  const { tenant } = await createTenant(db, {
    name: "Bench Desk",
    slug,
    settings: {
      auto_review: false,
      require_media: false,
      gs1_company_prefix: "2000000",
      auth: { email_confirmation: false },
    },
  });
  const account = await createAccount(db, { tenantId: tenant.id, name: "Bench Records", kind: "label" });
  await db.asService(async (tx) => {
    const artist = await tx.query<{ id: string }>(
      "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
      [account.id],
    );
    await tx.query(
      `insert into public.releases (account_id, artist_id, title, release_type, artist_name, primary_genre,
         release_date, licensed_territories_include, status, submitted_at)
       select $1, $2, 'Bench release ' || g, 'single', 'Bench Artist', 'electronic',
         current_date + 60, 'WW', 'in_review', now() - ($3 - g) * interval '1 minute'
       from generate_series(1, $3::int) g`,
      [account.id, artist.rows[0]?.id, releases],
    );
  });
  const email = "bench-reviewer@example.com";
  const password = "bench reviewer password 1";
  const user = await seedPasswordUser(db, tenant.id, email, password);
  await addStaff(db, config, user.email, slug, "reviewer");
  return { tenantId: tenant.id, slug, email, password, releases };
}
