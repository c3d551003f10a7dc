// bench/money's data, written in bulk SQL (the import's parsing is not what is measured): a tenant
// with a 10% distribution fee, one account with an advance to recoup, TRACKS tracks (ten per
// release) whose splits name 1–5 payees each (so payees, split versions and shares are made by the
// tracks' own trigger, as when an artist writes splits), and LINES royalty lines of one usage month
// in one completed import, as the importer leaves them before it allocates.
import { randomBytes, randomUUID } from "node:crypto";
import type { Db } from "../../src/db/db.ts";
import type { Engine } from "../../src/db/types.ts";
import { addRecoupable, setFee } from "../../src/money/operator.ts";
import { createAccount, createTenant, type Tenant } from "../../src/tenancy/tenants.ts";

export interface MoneySeed {
  tenant: Tenant;
  accountId: string;
  importId: string;
  /** Lines with an account (the rest, one in 50, are unmatched and not allocated). */
  matchedLines: number;
}

const STORES = [
  "spotify",
  "apple_music",
  "amazon_music",
  "deezer",
  "tidal",
  "youtube_music",
  "itunes",
  "soundcloud",
];
const TERRITORIES = [
  "US",
  "GB",
  "DE",
  "FR",
  "SE",
  "NL",
  "ES",
  "IT",
  "BR",
  "MX",
  "CA",
  "AU",
  "JP",
  "KR",
  "IN",
  "PL",
  "NO",
  "DK",
  "FI",
  "AT",
  "CH",
  "BE",
  "PT",
  "IE",
  "NZ",
  "AR",
  "CL",
  "CO",
  "ZA",
  "NG",
];
const EURO = ["DE", "FR", "NL", "ES", "IT", "FI", "AT", "BE", "PT", "IE"];
const sqlArray = (xs: string[]) => `array[${xs.map((x) => `'${x}'`).join(",")}]`;

/** Tracks per insert statement: each takes an advisory lock on its ISRC until its transaction ends. */
const TRACK_SLICE = 2000;
/** Lines per insert statement. */
const LINE_SLICE = 1_000_000;

export async function seedMoney(
  db: Db,
  owner: Engine,
  sizes: { lines: number; tracks: number },
  log: (s: string) => void,
): Promise<MoneySeed> {
  const { tenant } = await createTenant(db, {
    name: "Money bench",
    slug: `money-${randomUUID().slice(0, 8)}`,
    // The statement latency loop must not meet the public API's per-caller limit.
    settings: { public_api_rate_limit: { max: 100_000_000, windowSeconds: 1 } },
  });
  const account = await createAccount(db, { tenantId: tenant.id, name: "Bench Records" });
  const T = sizes.tracks;
  // The person payees: a pool of a fifth as many addresses as tracks, each named by several tracks.
  const pool = Math.max(5, Math.floor(T / 5));
  const stride = Math.floor(pool / 5);
  await owner.transaction(
    async (tx) => {
      await tx.exec("create schema if not exists bench");
      const artist = (
        await tx.query<{ id: string }>(
          "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
          [account.id],
        )
      ).rows[0]?.id;
      await tx.exec(
        `create table bench.rel as select n, gen_random_uuid() as id from generate_series(1, ${Math.ceil(T / 10)}) n`,
      );
      await tx.query(
        `insert into public.releases (id, account_id, artist_id, title)
         select id, $1, $2, 'Bench release ' || n from bench.rel order by n`,
        [account.id, artist],
      );
      // Track n: k = 1 + n % 5 payees, the pool's addresses (n·7 + j·stride) mod pool; with five
      // shares the last is the account's own (no e-mail). Shares to four decimals totalling 100.
      await tx.exec(
        `create table bench.trk as
         select g.n, gen_random_uuid() as id, r.id as release_id, 'QZBEN' || lpad(g.n::text, 7, '0') as isrc,
           (select jsonb_agg(case when g.k = 5 and j = 4 then jsonb_build_object('name', 'Bench Records', 'share', s)
               else jsonb_build_object('name', 'Payee ' || p, 'email', 'p' || p || '@bench.test', 'share', s) end order by j)
            from (select j, (g.n * 7 + j * ${stride}) % ${pool} as p,
                (case when j = 0 then 100 - (g.k - 1) * trunc(100.0 / g.k, 4) else trunc(100.0 / g.k, 4) end)::text as s
              from generate_series(0, g.k - 1) j) x) as splits
         from (select n, 1 + n % 5 as k from generate_series(1, ${T}) n) g
         join bench.rel r on r.n = (g.n - 1) / 10 + 1`,
      );
      await tx.exec("create unique index on bench.trk (n)");
    },
    { readOnly: false },
  );
  log(`${T} tracks (${pool} person payees in the pool)`);
  for (let from = 1, slice = 0; from <= T; from += TRACK_SLICE, slice++) {
    // Fresh statistics as the account grows (autovacuum's job on a live database): planned with a
    // first slice's, the tracks' per-row ISRC check scans the account's whole index.
    if (slice % 5 === 1)
      await owner.transaction((tx) => tx.exec("analyze public.tracks"), { readOnly: false });
    await owner.transaction(
      (tx) =>
        tx.query(
          `insert into public.tracks (id, release_id, account_id, title, isrc, duration, track_number, splits)
           select id, release_id, $1, 'Bench track ' || n, isrc, 200, (n - 1) % 10 + 1, splits
           from bench.trk where n between $2 and $3 order by n`,
          [account.id, from, Math.min(T, from + TRACK_SLICE - 1)],
        ),
      { readOnly: false },
    );
  }
  await setFee(db, tenant.id, {}, "10");
  await addRecoupable(
    db,
    tenant.id,
    {
      account_id: account.id,
      kind: "advance",
      currency: "USD",
      amount: "500.00",
      description: "Bench advance",
    },
    "bench",
  );
  const importId = randomUUID();
  await owner.transaction(
    (tx) =>
      tx.query(
        `insert into internal.royalty_imports (id, tenant_id, format, file_sha256, status, lines_total, reporting_period,
           period_from, period_to, account_ids, completed_at)
         values ($1, $2, 'backline', $3, 'completed', $4, '2026-12-01', '2026-11-01', '2026-11-30', array[$5::uuid], now())`,
        [importId, tenant.id, randomBytes(32).toString("hex"), sizes.lines, account.id],
      ),
    { readOnly: false },
  );
  // Line i: track i mod T, and for the same track a new store × territory (240 of them; a track
  // with more lines than that gets earlier months too), so every line is a sum of its own. One in
  // 50 lines names an ISRC the catalog does not have (unmatched: not allocated).
  for (let from = 0; from < sizes.lines; from += LINE_SLICE) {
    const to = Math.min(sizes.lines, from + LINE_SLICE) - 1;
    await owner.transaction(
      (tx) =>
        tx.query(
          `insert into internal.royalty_lines (import_id, tenant_id, account_id, release_id, track_id, line_number,
             reporting_period, period_start, period_end, store, territory, upc, isrc, usage_type, units, gross, fees, net,
             currency)
           select $1, $2, case when m then $3::uuid end, case when m then t.release_id end, case when m then t.id end,
             i + 2, date '2026-12-01', p, (p + interval '1 month - 1 day')::date, st, te, null,
             case when m then t.isrc else 'QZXXX' || lpad((i % 9999999)::text, 7, '0') end,
             case when st = 'itunes' then 'download' else 'stream' end, u, g, round(g * 0.3, 6), g - round(g * 0.3, 6),
             case when te = any (${sqlArray(EURO)}) then 'EUR' else 'USD' end
           from (select i, i % 50 <> 7 as m, 1 + (i * 7919) % 5000 as u,
                   (1 + (i * 7919) % 5000) * 0.004 as g,
                   (${sqlArray(STORES)})[(i / ${T}) % ${STORES.length} + 1] as st,
                   (${sqlArray(TERRITORIES)})[(i / ${T} / ${STORES.length}) % ${TERRITORIES.length} + 1] as te,
                   (date '2026-11-01' - make_interval(months => (i / ${T} / ${STORES.length * TERRITORIES.length})::int))::date as p
                 from generate_series($4::bigint, $5::bigint) i) l
           join bench.trk t on t.n = l.i % ${T} + 1`,
          [importId, tenant.id, account.id, from, to],
        ),
      { readOnly: false },
    );
    log(`${to + 1} lines`);
  }
  const matched = await owner.transaction(
    async (tx) => {
      await tx.exec(
        "analyze internal.royalty_lines, internal.split_versions, internal.split_shares, internal.payees",
      );
      return Number(
        (
          await tx.query<{ n: string }>(
            "select count(*)::text as n from internal.royalty_lines where import_id = $1 and account_id is not null",
            [importId],
          )
        ).rows[0]?.n,
      );
    },
    { readOnly: false },
  );
  return { tenant, accountId: account.id, importId, matchedLines: matched };
}
