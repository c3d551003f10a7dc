import type { Tx } from "../db/types.ts";
import { count } from "../http/formats.ts";

/**
 * What GET /royalties and GET /releases/{id}/royalties read, as the caller (row-level security on
 * internal.royalty_lines and internal.royalty_totals decides which accounts' rows): a page of
 * lines, or of groups, and the totals per currency over everything that matches. Totals and
 * groups come from internal.royalty_totals, whose key holds every filter, and per track from
 * public.track_analytics beside it; only the page of lines (and groups per track by territory,
 * which no rollup has) read the lines themselves, by index.
 */

export const GROUP_KEYS = ["period", "store", "territory", "release", "track"] as const;
export type GroupKey = (typeof GROUP_KEYS)[number];

export interface RoyaltyFilter {
  /**
   * The account asked about (an API key's). Row-level security decides regardless; naming the
   * account lets PostgreSQL walk the (account_id, period_start, id) index in order.
   */
  accountId?: string | undefined;
  /** YYYY-MM, inclusive, on the month of sale or use. */
  from?: string | undefined;
  to?: string | undefined;
  store?: string | undefined;
  territory?: string | undefined;
  releaseId?: string | undefined;
  currency?: string | undefined;
}

const SUMS = `sum(lines)::int8 as lines, sum(units)::int8 as units, sum(streams)::int8 as streams,
  sum(downloads)::int8 as downloads, sum(ugc_uses)::int8 as ugc_uses, trim_scale(sum(gross))::text as gross,
  trim_scale(sum(fees))::text as fees, trim_scale(sum(net))::text as net`;

/**
 * Runs a page of lines with the planner told to walk the (account_id, period_start, id) index in
 * order rather than collect every matching line into a bitmap and sort it. Row-level security's
 * conditions (the caller's accounts, an owner-only preset's subplan, voided imports) make the
 * planner expect about one row, so it chose the bitmap and read all of an account's lines before
 * the cursor: 226 ms for a keyset page of an account with 100,000 lines, 3 ms walking the index
 * (bench/README.md, "Royalty lines by keyset"). JIT, which the wrong estimate also switched on,
 * costs more than such a statement. Both settings return to what they were after the statement.
 */
async function inIndexOrder<T>(tx: Tx, read: () => Promise<T>): Promise<T> {
  const before = await tx.query<{ bitmap: string; jit: string }>(
    `select current_setting('enable_bitmapscan') as bitmap, current_setting('jit') as jit,
            set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)`,
  );
  // A failed statement ends the transaction, and its local settings with it: restored on success only.
  const result = await read();
  const was = before.rows[0];
  if (was)
    await tx.query("select set_config('enable_bitmapscan', $1, true), set_config('jit', $2, true)", [
      was.bitmap,
      was.jit,
    ]);
  return result;
}

/** The where clause over either table (both have these columns), with its parameters. */
function where(filter: RoyaltyFilter): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const parts: string[] = ["account_id is not null"];
  const add = (sql: (n: number) => string, value: unknown) => {
    params.push(value);
    parts.push(sql(params.length));
  };
  if (filter.accountId) add((n) => `account_id = $${n}::uuid`, filter.accountId);
  if (filter.from) add((n) => `period_start >= $${n}::date`, `${filter.from}-01`);
  if (filter.to) add((n) => `period_start <= $${n}::date`, `${filter.to}-01`);
  if (filter.store) add((n) => `store = $${n}`, filter.store);
  if (filter.territory) add((n) => `territory = $${n}`, filter.territory);
  if (filter.releaseId) add((n) => `release_id = $${n}::uuid`, filter.releaseId);
  if (filter.currency) add((n) => `currency = $${n}`, filter.currency);
  return { sql: parts.join(" and "), params };
}

export interface CurrencyTotals {
  currency: string;
  lines: number;
  units: number;
  streams: number;
  downloads: number;
  ugc_uses: number;
  gross: string;
  fees: string;
  net: string;
}

const toInt = (v: unknown) => count((v ?? 0) as string);

function sumsOut<T extends Record<string, unknown>>(row: T) {
  return {
    ...row,
    lines: toInt(row.lines),
    units: toInt(row.units),
    streams: toInt(row.streams),
    downloads: toInt(row.downloads),
    ugc_uses: toInt(row.ugc_uses),
  };
}

export async function royaltyTotals(tx: Tx, filter: RoyaltyFilter): Promise<CurrencyTotals[]> {
  const w = where(filter);
  const r = await tx.query<Record<string, unknown>>(
    `select currency, ${SUMS} from internal.royalty_totals where ${w.sql} group by currency order by currency`,
    w.params,
  );
  return r.rows.map((row) => sumsOut(row) as unknown as CurrencyTotals);
}

/** Each group's sums, as numbers and numeric, from the grouped rows of a source below. */
const GROUPED_OUT = `lines::int8 as lines, units::int8 as units, streams::int8 as streams, downloads::int8 as downloads,
  ugc_uses::int8 as ugc_uses, trim_scale(gross)::text as gross, trim_scale(fees)::text as fees, trim_scale(net)::text as net`;

/**
 * Groups per track from the lines themselves: a voided import's lines and their reversing lines
 * are left out (together they sum to zero), so every figure, line counts included, is what the
 * rollups hold for the same lines. Reads every matching line of the account (its index, then the
 * rows): used only with a territory filter, which the per-track rollup does not have.
 */
function trackGroupsFromLines(dims: string[], whereSql: string): string {
  return `select ${dims.join(", ")}, track_id, count(*) as lines, sum(units) as units,
      coalesce(sum(units) filter (where usage_type = 'stream'), 0) as streams,
      coalesce(sum(units) filter (where usage_type = 'download'), 0) as downloads,
      coalesce(sum(units) filter (where usage_type = 'ugc'), 0) as ugc_uses,
      sum(gross) as gross, sum(fees) as fees, sum(net) as net
    from internal.royalty_lines
    where ${whereSql} and reverses_line_id is null
      and import_id <> all (coalesce((select internal.voided_royalty_import_ids()), array[]::uuid[]))
    group by ${dims.join(", ")}, track_id`;
}

/**
 * Groups per track from the rollups an import and a void keep (one row per track, month, store
 * and currency in public.track_analytics; per release in internal.royalty_totals): the tracks'
 * figures, and for each release the sales of the release as a whole (UPC-only lines, no track) as
 * its totals less its tracks'. Both are exact sums of the same lines, so the tracks and the
 * release-level group add up to the release's totals exactly. Reads as many rows as GET
 * /royalties?group_by=release does, per track, whatever the number of lines.
 */
function trackGroupsFromRollups(dims: string[], whereSql: string): string {
  const d = dims.join(", ");
  const diff = (c: string) => `r.${c} - coalesce(ts.${c}, 0) as ${c}`;
  return `with t as (
      select ${d}, track_id, sum(royalty_lines) as lines, sum(streams + downloads + ugc_uses + other_units) as units,
        sum(streams) as streams, sum(downloads) as downloads, sum(ugc_uses) as ugc_uses,
        sum(gross_revenue) as gross, sum(fees) as fees, sum(revenue) as net
      from public.track_analytics where ${whereSql}
      group by ${d}, track_id having sum(royalty_lines) <> 0
    ), ts as (
      select ${d}, sum(lines) as lines, sum(units) as units, sum(streams) as streams, sum(downloads) as downloads,
        sum(ugc_uses) as ugc_uses, sum(gross) as gross, sum(fees) as fees, sum(net) as net
      from t group by ${d}
    ), r as (
      select ${d}, sum(lines) as lines, sum(units) as units, sum(streams) as streams, sum(downloads) as downloads,
        sum(ugc_uses) as ugc_uses, sum(gross) as gross, sum(fees) as fees, sum(net) as net
      from internal.royalty_totals where ${whereSql}
      group by ${d}
    )
    select ${d}, track_id, lines, units, streams, downloads, ugc_uses, gross, fees, net from t
    union all
    select * from (
      select ${dims.map((k) => `r.${k}`).join(", ")}, null::uuid as track_id,
        ${["lines", "units", "streams", "downloads", "ugc_uses", "gross", "fees", "net"].map(diff).join(", ")}
      from r left join ts using (${d})
    ) whole where lines <> 0`;
}

/** Beside a track group's ids: their titles, and the track's ISRC. */
const NAMED: Record<string, string> = {
  release_id: "g.release_id, rel.title as release_title",
  track_id: "g.track_id, t.title as track_title, t.isrc",
};

/** Runs `read` with JIT off: a grouping's row estimate under row-level security switches it on for nothing. */
async function withoutJit<T>(tx: Tx, read: () => Promise<T>): Promise<T> {
  const before = await tx.query<{ jit: string }>(
    "select current_setting('jit') as jit, set_config('jit', 'off', true)",
  );
  const result = await read();
  const was = before.rows[0];
  if (was) await tx.query("select set_config('jit', $1, true)", [was.jit]);
  return result;
}

/**
 * A page of groups per track (and per release for release-level sales, track_id null), with the
 * keys asked for besides, the titles and ISRC, and how many groups there are over all pages.
 */
async function trackGroups(
  tx: Tx,
  filter: RoyaltyFilter,
  groupBy: readonly GroupKey[],
  limit: number,
  offset: number,
): Promise<{ rows: Record<string, unknown>[]; total: number }> {
  const w = where(filter);
  const dims = [
    ...(groupBy.includes("period") ? ["period_start"] : []),
    ...(groupBy.includes("store") ? ["store"] : []),
    ...(groupBy.includes("territory") ? ["territory"] : []),
    "release_id",
    "currency",
  ];
  // Territories are only on the lines: with a territory filter or key, the lines are summed.
  const fromLines = filter.territory !== undefined || groupBy.includes("territory");
  const grouped = fromLines ? trackGroupsFromLines(dims, w.sql) : trackGroupsFromRollups(dims, w.sql);
  const order = [...dims.slice(0, -1), "track_id", "currency"];
  const out = order.map((k) =>
    k === "period_start" ? "to_char(g.period_start, 'YYYY-MM') as period" : (NAMED[k] ?? `g.${k}`),
  );
  const n = w.params.length;
  const r = await withoutJit(tx, () =>
    tx.query<Record<string, unknown>>(
      `select ${out.join(", ")}, g.lines, g.units, g.streams, g.downloads, g.ugc_uses, g.gross, g.fees, g.net, g.total_count__
       from (select *, count(*) over ()::int as total_count__ from (
               select ${order.join(", ")}, ${GROUPED_OUT} from (${grouped}) x
             ) y
             order by ${order.map((k) => `${k} nulls last`).join(", ")}
             limit $${n + 1} offset $${n + 2}) g
       left join public.tracks t on t.id = g.track_id
       left join public.releases rel on rel.id = g.release_id
       order by ${order.map((k) => `g.${k} nulls last`).join(", ")}`,
      [...w.params, limit, offset],
    ),
  );
  let total = Number(r.rows[0]?.total_count__ ?? 0);
  if (r.rows.length === 0 && offset > 0) {
    const c = await withoutJit(tx, () =>
      tx.query<{ n: number }>(`select count(*)::int as n from (${grouped}) g`, w.params),
    );
    total = c.rows[0]?.n ?? 0;
  }
  const rows = r.rows.map(({ total_count__, ...row }) => ({ object: "royalty_group", ...sumsOut(row) }));
  return { rows, total };
}

export async function royaltyGroups(
  tx: Tx,
  filter: RoyaltyFilter,
  groupBy: readonly GroupKey[],
  limit: number,
  offset: number,
): Promise<{ rows: Record<string, unknown>[]; total: number }> {
  if (groupBy.includes("track")) return trackGroups(tx, filter, groupBy, limit, offset);
  const w = where(filter);
  const keys: string[] = [];
  const out: string[] = [];
  for (const g of GROUP_KEYS) {
    if (!groupBy.includes(g)) continue;
    if (g === "period") {
      keys.push("period_start");
      out.push("to_char(period_start, 'YYYY-MM') as period");
    } else if (g === "release") {
      keys.push("release_id");
      out.push("release_id");
    } else {
      keys.push(g);
      out.push(g);
    }
  }
  keys.push("currency");
  out.push("currency");
  const n = w.params.length;
  const r = await tx.query<Record<string, unknown>>(
    `select ${out.join(", ")}, ${SUMS}, count(*) over ()::int as total_count__
     from internal.royalty_totals where ${w.sql}
     group by ${keys.join(", ")}
     order by ${keys.map((k) => `${k} nulls last`).join(", ")}
     limit $${n + 1} offset $${n + 2}`,
    [...w.params, limit, offset],
  );
  let total = Number(r.rows[0]?.total_count__ ?? 0);
  if (r.rows.length === 0 && offset > 0) {
    const c = await tx.query<{ n: number }>(
      `select count(*)::int as n from (select 1 from internal.royalty_totals where ${w.sql} group by ${keys.join(", ")}) g`,
      w.params,
    );
    total = c.rows[0]?.n ?? 0;
  }
  const rows = r.rows.map(({ total_count__, ...row }) => ({ object: "royalty_group", ...sumsOut(row) }));
  return { rows, total };
}

/**
 * The lines after the line `after` in the listing's order (newest month first, then id): a keyset
 * page, read straight from the account's index however deep it is. Undefined when that line is
 * not one the caller can see; `limit + 1` rows are read, so `has_more` needs no count.
 */
export async function royaltyLinesAfter(
  tx: Tx,
  filter: RoyaltyFilter,
  limit: number,
  after: string,
): Promise<{ rows: Record<string, unknown>[]; hasMore: boolean } | undefined> {
  const cursor = await tx.query<{ period_start: string }>(
    "select period_start::text as period_start from internal.royalty_lines where id = $1::bigint and account_id is not null",
    [after],
  );
  const start = cursor.rows[0]?.period_start;
  if (start === undefined) return undefined;
  const w = where(filter);
  const n = w.params.length;
  const r = await inIndexOrder(tx, () =>
    tx.query<Record<string, unknown>>(
      `select id::text as id, import_id, release_id, track_id, isrc, upc, to_char(reporting_period, 'YYYY-MM') as reporting_period,
       period_start::text as period_start, period_end::text as period_end, store, territory, usage_type, units::int8 as units,
       trim_scale(gross)::text as gross, trim_scale(fees)::text as fees, trim_scale(net)::text as net, currency
     from internal.royalty_lines l where ${w.sql}
       and (l.period_start, l.id) < ($${n + 1}::date, $${n + 2}::bigint)
       and l.reverses_line_id is null
       and l.import_id <> all (coalesce((select internal.voided_royalty_import_ids()), array[]::uuid[]))
     order by l.period_start desc, l.id desc limit $${n + 3}`,
      [...w.params, start, after, limit + 1],
    ),
  );
  const rows = r.rows
    .slice(0, limit)
    .map((row) => ({ id: row.id, object: "royalty_line", ...row, units: Number(row.units) }));
  return { rows, hasMore: r.rows.length > limit };
}

export async function royaltyLines(
  tx: Tx,
  filter: RoyaltyFilter,
  limit: number,
  offset: number,
  total: number,
): Promise<Record<string, unknown>[]> {
  const w = where(filter);
  const n = w.params.length;
  if (offset >= total) return [];
  const r = await inIndexOrder(tx, () =>
    tx.query<Record<string, unknown>>(
      `select id::text as id, import_id, release_id, track_id, isrc, upc, to_char(reporting_period, 'YYYY-MM') as reporting_period,
       period_start::text as period_start, period_end::text as period_end, store, territory, usage_type, units::int8 as units,
       trim_scale(gross)::text as gross, trim_scale(fees)::text as fees, trim_scale(net)::text as net, currency
     from internal.royalty_lines l where ${w.sql}
       -- A voided import's lines and their reversing lines leave the listing as they left the totals.
       and l.reverses_line_id is null
       and l.import_id <> all (coalesce((select internal.voided_royalty_import_ids()), array[]::uuid[]))
     order by l.period_start desc, l.id desc limit $${n + 1} offset $${n + 2}`,
      [...w.params, limit, offset],
    ),
  );
  return r.rows.map((row) => ({ id: row.id, object: "royalty_line", ...row, units: Number(row.units) }));
}
