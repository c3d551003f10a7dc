import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { seedPasswordUser } from "../../test/support/console.ts";

export const PASSWORD = "a long portal bench password";

export interface PortalBenchWorld {
  slug: string;
  /** Owner of both accounts: "Big Catalogue" (the measured size) and "Small Label" (the baseline). */
  email: string;
  big: { id: string; releaseId: string };
  small: { id: string; releaseId: string };
}

/**
 * `releases` releases of `tracksPer` tracks each in one account, by one INSERT … SELECT each (a
 * minute apart, so the newest-first list has an order), all drafts of one artist.
 */
async function catalogue(db: Db, accountId: string, releases: number, tracksPer: number): Promise<string> {
  return db.asService(async (tx) => {
    const artist = (
      await tx.query<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
        [accountId],
      )
    ).rows[0]?.id;
    await tx.query(
      `insert into public.releases (account_id, artist_id, title, status, release_date, created_at)
       select $1, $2, 'Release ' || n, 'draft', current_date + 40, now() - make_interval(mins => n)
       from generate_series(1, $3::int) n`,
      [accountId, artist, releases],
    );
    await tx.query(
      `insert into public.tracks (release_id, account_id, title, track_number, duration)
       select r.id, r.account_id, 'Track ' || t, t, 180 + t from public.releases r, generate_series(1, $2::int) t
       where r.account_id = $1`,
      [accountId, tracksPer],
    );
    const newest = await tx.query<{ id: string }>(
      "select id from public.releases where account_id = $1 order by created_at desc, id desc limit 1",
      [accountId],
    );
    return newest.rows[0]?.id as string;
  });
}

export async function seedPortalBench(
  db: Db,
  _config: Config,
  sizes: { releases: number; tracksPer: number; baseline: number },
): Promise<PortalBenchWorld> {
  const { tenant } = await createTenant(db, { name: "Bench Music", slug: "benchmusic" });
  const user = await seedPasswordUser(db, tenant.id, "owner@bench.test", PASSWORD);
  const accounts: { id: string; releaseId: string }[] = [];
  for (const [name, releases] of [
    ["Big Catalogue", sizes.releases],
    ["Small Label", sizes.baseline],
  ] as const) {
    const account = await createAccount(db, { tenantId: tenant.id, name, kind: "label" });
    await db.asService((tx) =>
      tx.query(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
        [tenant.id, account.id, user.id],
      ),
    );
    accounts.push({ id: account.id, releaseId: await catalogue(db, account.id, releases, sizes.tracksPer) });
  }
  return { slug: tenant.slug, email: user.email, big: accounts[0] as never, small: accounts[1] as never };
}
