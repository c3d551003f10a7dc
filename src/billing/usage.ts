import type { Tx } from "../db/types.ts";

/**
 * What a tenant used in a month (docs/operator.md, "Plans and invoices", "What is metered"),
 * counted from its own records when asked, so a month can be metered again and gives the same
 * figures as long as the records stand:
 *
 * - `accounts`: its accounts (sandbox accounts of test keys left out) made before the month ended;
 * - `releases_delivered`: distinct releases with a delivery to a store (a new release or an
 *   update, not a takedown) that arrived in the month (release_deliveries.delivered_at);
 * - `tracks`: the tracks of those accounts made before the month ended;
 * - `storage_bytes`: the bytes of its uploaded media (media_assets) and of its storage objects
 *   (storage.objects' size) uploaded before the month ended and still held;
 * - `api_calls`: the successful API calls counted per day in internal.tenant_api_calls
 *   (src/billing/api-calls.ts) over the month's days (UTC).
 *
 * Counts (storage bytes too) are numbers: a tenant's are far below 2^53.
 */
export interface Usage {
  month: string;
  accounts: number;
  releases_delivered: number;
  tracks: number;
  storage_bytes: number;
  api_calls: number;
}

export async function usageOf(tx: Tx, tenantId: string, month: string): Promise<Usage> {
  const start = `${month}-01`;
  const row = (
    await tx.query<{
      accounts: string;
      releases: string;
      tracks: string;
      media: string;
      objects: string;
      calls: string;
    }>(
      `with bounds as (select $2::date as day0, ($2::date + interval '1 month')::date as day1,
                             ($2::date)::timestamp at time zone 'UTC' as start,
                             ($2::date + interval '1 month')::timestamp at time zone 'UTC' as finish),
            accts as (select a.id from internal.accounts a, bounds b
                       where a.tenant_id = $1 and not a.is_sandbox and a.created_at < b.finish)
       select
         (select count(*) from accts)::text as accounts,
         (select count(distinct d.release_id) from internal.release_deliveries d, bounds b
           where d.account_id in (select id from accts) and d.action <> 'takedown'
             and d.delivered_at >= b.start and d.delivered_at < b.finish)::text as releases,
         (select count(*) from public.tracks t, bounds b
           where t.account_id in (select id from accts) and t.created_at < b.finish)::text as tracks,
         (select coalesce(sum(m.bytes), 0) from public.media_assets m, bounds b
           where m.account_id in (select id from accts) and m.bytes is not null
             and coalesce(m.uploaded_at, m.created_at) < b.finish)::text as media,
         (select coalesce(sum(case when o.metadata ->> 'size' ~ '^[0-9]{1,18}$' then (o.metadata ->> 'size')::bigint else 0 end), 0)
            from storage.objects o, bounds b where o.tenant_id = $1 and o.created_at < b.finish)::text as objects,
         (select coalesce(sum(c.calls), 0) from internal.tenant_api_calls c, bounds b
           where c.tenant_id = $1 and c.day >= b.day0 and c.day < b.day1)::text as calls`,
      [tenantId, start],
    )
  ).rows[0];
  return {
    month,
    accounts: Number(row?.accounts ?? 0),
    releases_delivered: Number(row?.releases ?? 0),
    tracks: Number(row?.tracks ?? 0),
    storage_bytes: Number(BigInt(row?.media ?? "0") + BigInt(row?.objects ?? "0")),
    api_calls: Number(row?.calls ?? 0),
  };
}
