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
 * earlier imports left, so the cost is one pass per table over the new lines only. `workMem`: the
 * transaction's work_mem, bulkWorkMem(db.kind) (src/db/memory.ts).
 */
export async function updateRollups(tx: Tx, importId: string, workMem: string): Promise<void> {
  // Large imports group millions of lines: work_mem for this transaction only, as large as the
  // engine affords (src/db/memory.ts: on PGlite a sort's memory is never given back).
  await tx.query(`set local work_mem = '${workMem}'`);
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

/**
 * A voided import's reversing lines (src/royalties/void.ts), rolled up as its lines were: each
 * figure goes back exactly to what it was without the import, in numeric arithmetic (the line
 * counts too: a reversing line counts -1). Updates of the rows the import added to (an insert of
 * negative figures would break the analytics' checks even on its way to ON CONFLICT); a row the
 * import alone had made, now all zero, goes — the rollups are derived from the lines, which stay.
 */
export async function reverseRollups(tx: Tx, importId: string, workMem: string): Promise<void> {
  await tx.query(`set local work_mem = '${workMem}'`);
  const sums = `count(*) as lines, sum(units) as units,
       coalesce(sum(units) filter (where usage_type = 'stream'), 0) as streams,
       coalesce(sum(units) filter (where usage_type = 'download'), 0) as downloads,
       coalesce(sum(units) filter (where usage_type = 'ugc'), 0) as ugc_uses,
       coalesce(sum(units) filter (where usage_type in ('radio', 'other')), 0) as other_units,
       sum(gross) as gross, sum(fees) as fees, sum(net) as net`;
  const reversal = "import_id = $1 and reverses_line_id is not null";
  const totals = await tx.query<{ account_id: string }>(
    `update internal.royalty_totals t set lines = t.lines - r.lines, units = t.units + r.units,
       streams = t.streams + r.streams, downloads = t.downloads + r.downloads, ugc_uses = t.ugc_uses + r.ugc_uses,
       gross = t.gross + r.gross, fees = t.fees + r.fees, net = t.net + r.net, updated_at = now()
     from (select account_id, release_id, period_start, period_end, store, territory, currency, ${sums}
           from internal.royalty_lines where ${reversal} and account_id is not null
           group by account_id, release_id, period_start, period_end, store, territory, currency) r
     where t.account_id = r.account_id and t.release_id = r.release_id and t.period_start = r.period_start
       and t.period_end = r.period_end and t.store = r.store and t.territory is not distinct from r.territory
       and t.currency = r.currency
     returning t.account_id`,
    [importId],
  );
  const set = `streams = a.streams + r.streams, downloads = a.downloads + r.downloads,
       ugc_uses = a.ugc_uses + r.ugc_uses, other_units = a.other_units + r.other_units, revenue = a.revenue + r.net,
       gross_revenue = a.gross_revenue + r.gross, fees = a.fees + r.fees, royalty_lines = a.royalty_lines - r.lines`;
  const key =
    "a.period_start = r.period_start and a.period_end = r.period_end and a.store = r.store and a.currency = r.currency";
  // The same reversal for a release's figures and a track's, keyed by their own id.
  for (const [table, id, known] of [
    ["release_analytics", "release_id", "account_id is not null"],
    ["track_analytics", "track_id", "track_id is not null"],
  ] as const) {
    await tx.query(
      `update public.${table} a set ${set}
       from (select ${id}, period_start, period_end, store, currency, ${sums}
             from internal.royalty_lines where ${reversal} and ${known}
             group by ${id}, period_start, period_end, store, currency) r
       where a.${id} = r.${id} and ${key}`,
      [importId],
    );
  }
  if (totals.rowCount === 0) return;
  const accounts = [...new Set(totals.rows.map((r) => r.account_id))];
  await tx.query(
    "delete from internal.royalty_totals where account_id = any ($1::uuid[]) and lines = 0 and units = 0 and gross = 0 and fees = 0 and net = 0",
    [accounts],
  );
  const empty = `account_id = any ($1::uuid[]) and royalty_lines = 0 and streams = 0 and downloads = 0 and ugc_uses = 0
       and other_units = 0 and revenue = 0 and gross_revenue = 0 and fees = 0`;
  await tx.query(`delete from public.release_analytics where ${empty}`, [accounts]);
  await tx.query(`delete from public.track_analytics where ${empty}`, [accounts]);
}
