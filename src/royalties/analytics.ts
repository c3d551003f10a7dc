import type { Tx } from "../db/types.ts";

/**
 * The rollups an import keeps up to date, in its own transaction (docs/royalties.md, "Analytics"):
 *
 * - internal.royalty_totals: matched lines summed per account, release, month, store, territory
 *   and currency — what GET /royalties answers its totals and groupings from;
 * - public.release_analytics and public.track_analytics (seed 000, readable at /rest/v1 under
 *   RLS): per release or track, month, store and currency — streams, downloads, ugc_uses,
 *   other_units, revenue (net), gross_revenue, fees and royalty_lines.
 *
 * Each is one grouped INSERT ... ON CONFLICT DO UPDATE over the import's lines, adding to what
 * earlier imports left, so the cost is one pass per table over the new lines only.
 */
export async function updateRollups(tx: Tx, importId: string): Promise<void> {
  // Large imports group millions of lines: let the hash aggregates stay in memory (this transaction only).
  await tx.query("set local work_mem = '128MB'");
  await tx.query(
    `insert into internal.royalty_totals as t (tenant_id, account_id, release_id, period_start, period_end, store,
       territory, currency, lines, units, streams, downloads, ugc_uses, gross, fees, net)
     select tenant_id, account_id, release_id, period_start, period_end, store, territory, currency,
       count(*), sum(units),
       coalesce(sum(units) filter (where usage_type = 'stream'), 0),
       coalesce(sum(units) filter (where usage_type = 'download'), 0),
       coalesce(sum(units) filter (where usage_type = 'ugc'), 0),
       sum(gross), sum(fees), sum(net)
     from internal.royalty_lines
     where import_id = $1 and account_id is not null
     group by tenant_id, account_id, release_id, period_start, period_end, store, territory, currency
     -- New rows go in account order: an account's totals sit together, read in few pages.
     order by account_id, period_start, store
     on conflict (account_id, release_id, period_start, period_end, store, territory, currency) do update set
       lines = t.lines + excluded.lines, units = t.units + excluded.units, streams = t.streams + excluded.streams,
       downloads = t.downloads + excluded.downloads, ugc_uses = t.ugc_uses + excluded.ugc_uses,
       gross = t.gross + excluded.gross, fees = t.fees + excluded.fees, net = t.net + excluded.net,
       updated_at = now()`,
    [importId],
  );
  const metrics = `coalesce(sum(units) filter (where usage_type = 'stream'), 0),
       coalesce(sum(units) filter (where usage_type = 'download'), 0),
       coalesce(sum(units) filter (where usage_type = 'ugc'), 0),
       coalesce(sum(units) filter (where usage_type in ('radio', 'other')), 0),
       sum(net), sum(gross), sum(fees), count(*)`;
  const onConflict = `do update set streams = a.streams + excluded.streams, downloads = a.downloads + excluded.downloads,
       ugc_uses = a.ugc_uses + excluded.ugc_uses, other_units = a.other_units + excluded.other_units,
       revenue = a.revenue + excluded.revenue, gross_revenue = a.gross_revenue + excluded.gross_revenue,
       fees = a.fees + excluded.fees, royalty_lines = a.royalty_lines + excluded.royalty_lines`;
  await tx.query(
    `insert into public.release_analytics as a (release_id, account_id, period_start, period_end, store, currency,
       streams, downloads, ugc_uses, other_units, revenue, gross_revenue, fees, royalty_lines)
     select release_id, account_id, period_start, period_end, store, currency, ${metrics}
     from internal.royalty_lines
     where import_id = $1 and account_id is not null
     group by release_id, account_id, period_start, period_end, store, currency
     on conflict (release_id, period_start, period_end, store, currency) ${onConflict}`,
    [importId],
  );
  await tx.query(
    `insert into public.track_analytics as a (track_id, release_id, account_id, period_start, period_end, store, currency,
       streams, downloads, ugc_uses, other_units, revenue, gross_revenue, fees, royalty_lines)
     select track_id, release_id, account_id, period_start, period_end, store, currency, ${metrics}
     from internal.royalty_lines
     where import_id = $1 and track_id is not null
     group by track_id, release_id, account_id, period_start, period_end, store, currency
     on conflict (track_id, period_start, period_end, store, currency) ${onConflict}`,
    [importId],
  );
}
