// The benchmark's catalog and the credentials of its user (shared by run.ts and ad-hoc profiling).
import { signAccessToken } from "../../src/auth/tokens.ts";
import type { Engine } from "../../src/db/types.ts";
import { newJwtSecret, tenantKeys } from "../../src/tenancy/keys.ts";
import { SMOKE } from "../support.ts";

export interface Seeded {
  tenantId: string;
  secret: string;
  createdAt: Date;
  userId: string;
  artistId: string;
}

const UNLIMITED = { max: 100_000_000, windowSeconds: 10 };

/** The headers a request of the benchmark user carries: the anon key and an access token. */
export async function userHeaders(s: Seeded): Promise<Record<string, string>> {
  const keys = await tenantKeys({ id: s.tenantId, jwt_secret: s.secret, created_at: s.createdAt });
  const { token } = await signAccessToken({
    secret: s.secret,
    issuer: "bench",
    expiresIn: 3600,
    tenantId: s.tenantId,
    user: {
      id: s.userId,
      email: "bench@example.com",
      phone: null,
      app_metadata: {},
      user_metadata: {},
      is_anonymous: false,
    },
    sessionId: "00000000-0000-4000-8000-000000000000",
    aal: "aal1",
    amr: [],
  });
  return { apikey: keys.anon_key, authorization: `Bearer ${token}` };
}

/**
 * A catalog of 51 accounts x 3 artists x 40 releases x 12 tracks; the benchmark user owns one
 * account. BENCH_SMOKE=1 (bench/smoke.ts): 3 accounts, the same shape per artist; BENCH_ACCOUNTS=n:
 * n accounts (the user's rows are the same, the tables they are filtered from smaller).
 */
const ACCOUNTS = SMOKE ? 3 : Math.max(1, Number(process.env.BENCH_ACCOUNTS ?? 51));

export async function seed(engine: Engine): Promise<Seeded> {
  return engine.transaction(
    async (tx) => {
      const t = (
        await tx.query<{ id: string; jwt_secret: string; created_at: Date }>(
          // Backline's request limits would cap the load: the bench tenant gets room.
          `insert into internal.tenants (name, slug, jwt_secret, settings) values ('Bench', 'bench', $1, $2)
           returning id, jwt_secret, created_at`,
          [newJwtSecret(), JSON.stringify({ rest_rate_limits: { tenant: UNLIMITED, caller: UNLIMITED } })],
        )
      ).rows[0] as { id: string; jwt_secret: string; created_at: Date };
      const user = (
        await tx.query<{ id: string }>(
          "insert into internal.users (tenant_id, email) values ($1, 'bench@example.com') returning id",
          [t.id],
        )
      ).rows[0] as { id: string };
      await tx.exec(`
      insert into internal.accounts (tenant_id, name) select '${t.id}', 'Account ' || g from generate_series(0, ${ACCOUNTS - 1}) g;
      insert into internal.memberships (tenant_id, account_id, user_id, role)
        select '${t.id}', id, '${user.id}', 'owner' from internal.accounts where tenant_id = '${t.id}' and name = 'Account 0';
      insert into public.artist_profiles (account_id, name)
        select a.id, 'Artist ' || a.name || ' ' || g from internal.accounts a, generate_series(1, 3) g where a.tenant_id = '${t.id}';
      insert into public.releases (account_id, artist_id, title, release_date)
        select ap.account_id, ap.id, 'Release ' || g || ' of ' || ap.name, date '2026-01-01' + g
        from public.artist_profiles ap, generate_series(1, 40) g;
      insert into public.tracks (release_id, account_id, title, duration, track_number)
        select r.id, r.account_id, 'Track ' || g || ' of ' || r.title, 60 + (g * 37) % 300, g
        from public.releases r, generate_series(1, 12) g;
      analyze;
    `);
      const artist = (
        await tx.query<{ id: string }>(
          `select ap.id from public.artist_profiles ap join internal.accounts a on a.id = ap.account_id
         where a.name = 'Account 0' and a.tenant_id = $1 order by ap.name limit 1`,
          [t.id],
        )
      ).rows[0] as { id: string };
      return {
        tenantId: t.id,
        secret: t.jwt_secret,
        createdAt: t.created_at,
        userId: user.id,
        artistId: artist.id,
      };
    },
    { readOnly: false },
  );
}
