-- Royalty import allocation (issue 45, item 3): the same ledger entries as 0057's allocate_import,
-- with less work per sum. At a million lines (about one sum per line) the cost was per sum:
--   - the split-version lookup ran for every sum, though most tracks have no split version: it now
--     runs only for the sums of tracks that have one (found once per track of the import);
--   - the fee was a second pass rewriting every sum: the rate (once per release) is now joined as the
--     sums are made;
--   - the sums were numbered in their recoupment order (a sort of every sum) even when nothing is
--     to be recouped: they are numbered only when an advance or expense of their accounts exists;
--   - each sum's payees came from a per-sum subquery: now one join to the split shares for the sums
--     with a version, and one to the accounts' own payees for the others;
--   - the store and fee entries come from one grouping instead of two.
-- The ledger index on txn_id goes: no query reads entries by their transaction (the balance check
-- reads the statement's own new rows), and it was one of five indexes written per entry.
drop index if exists internal.ledger_txn;

create or replace function internal.allocate_import(import uuid) returns bigint
language plpgsql security definer set search_path = ''
as $$
declare
  tenant uuid;
  txn uuid := gen_random_uuid();
  posting date;
  r record;
  posted bigint;
  recouping boolean;
begin
  select tenant_id into tenant from internal.royalty_imports where id = import;
  if tenant is null then
    raise exception 'no royalty import %', import using errcode = 'P0002';
  end if;
  if exists (select 1 from internal.ledger_entries where import_id = import and txn_kind = 'allocation') then
    return 0;
  end if;
  posting := internal.posting_period(tenant);

  -- The import's accounts, releases and tracks (one pass over its lines; a few per thousand lines).
  create temporary table alloc_keys on commit drop as
  select distinct l.account_id, l.release_id, l.track_id
  from internal.royalty_lines l
  where l.import_id = import and l.account_id is not null and l.reverses_line_id is null;

  -- The fee rate once per release, where there is one. × 0.01, not / 100: numeric multiplication is
  -- exact, while division rounds to about 16 significant digits.
  -- (Materialized: a condition on the rate pushed below the distinct would call fee_rate per track.)
  create temporary table alloc_rates on commit drop as
  with k as materialized (
    select d.account_id, d.release_id, internal.fee_rate(tenant, d.account_id, d.release_id) as rate
    from (select distinct account_id, release_id from alloc_keys) d
  )
  select k.account_id, k.release_id, k.rate from k where k.rate > 0;

  -- The tracks with a split version: only their sums look one up.
  create temporary table alloc_versioned on commit drop as
  select distinct k.track_id from alloc_keys k
  where k.track_id is not null and exists (select 1 from internal.split_versions w where w.track_id = k.track_id);

  -- Temporary tables have no statistics until analyzed: without them the sums below were sorted to
  -- be merged with the rates instead of hashed.
  analyze alloc_rates;
  analyze alloc_versioned;

  -- The sums are numbered in their recoupment order only if something may be recouped from them.
  recouping := exists (
    select 1 from internal.recoupables c
    where c.tenant_id = tenant and c.account_id in (select account_id from alloc_keys)
  );

  -- Each sum with its fee and the split version in force for it (none: the account's own payee
  -- takes it all).
  create temporary table alloc_sums (
    n bigint, account_id uuid, release_id uuid, track_id uuid, usage_period date, store text, territory text,
    currency char(3), net numeric, fee numeric, recouped numeric, version_id bigint
  ) on commit drop;
  insert into alloc_sums
  select g.n, g.account_id, g.release_id, g.track_id, g.usage_period, g.store, g.territory, g.currency, g.net,
    coalesce(g.net * k.rate * 0.01, 0::numeric), 0::numeric,
    case when g.track_id in (select v.track_id from alloc_versioned v) then (
      select w.id from internal.split_versions w
      where w.track_id = g.track_id
        and (w.store is null or w.store = g.store) and (w.territory is null or w.territory = g.territory)
        and (w.effective_from <= g.usage_period or (w.store is null and w.territory is null))
      order by (w.effective_from <= g.usage_period) desc, (w.store is not null) desc, (w.territory is not null) desc,
        case when w.effective_from <= g.usage_period then g.usage_period - w.effective_from
          else w.effective_from - g.usage_period end, w.id desc
      limit 1
    ) end
  from (
    select case when recouping then row_number() over (order by l.account_id, l.currency, l.period_start,
        l.release_id, min(l.isrc) nulls first, l.track_id, l.store, l.territory nulls first) end as n,
      l.account_id, l.release_id, l.track_id, l.period_start as usage_period, l.store, l.territory, l.currency,
      sum(l.net) as net
    from internal.royalty_lines l
    where l.import_id = import and l.account_id is not null and l.reverses_line_id is null and recouping
    group by l.account_id, l.release_id, l.track_id, l.period_start, l.store, l.territory, l.currency
    union all
    select null, l.account_id, l.release_id, l.track_id, l.period_start, l.store, l.territory, l.currency, sum(l.net)
    from internal.royalty_lines l
    where l.import_id = import and l.account_id is not null and l.reverses_line_id is null and not recouping
    group by l.account_id, l.release_id, l.track_id, l.period_start, l.store, l.territory, l.currency
  ) g
  left join alloc_rates k on k.account_id = g.account_id and k.release_id = g.release_id;

  if not found then
    drop table alloc_keys, alloc_rates, alloc_versioned, alloc_sums;
    return 0;
  end if;

  -- Each advance or expense below reads its account's sums and sets what it took by number:
  -- without these indexes every recoupable read all the import's sums, twice.
  if recouping then
    create index on alloc_sums (account_id, currency);
    create index on alloc_sums (n);
  end if;
  analyze alloc_sums;

  create temporary table alloc_recoup (n bigint, recoupable_id uuid, amount numeric) on commit drop;
  if recouping then
    for r in
      select c.id, c.account_id, c.release_id, c.cross_recoup, c.currency,
        -coalesce((select sum(e.amount) from internal.ledger_entries e where e.recoupable_id = c.id), 0) as due
      from internal.recoupables c
      where c.tenant_id = tenant
        and (c.account_id, c.currency) in (select distinct account_id, currency from alloc_sums)
      order by (c.kind = 'expense') desc, c.created_at, c.id
    loop
      continue when r.due <= 0;
      with open_sums as (
        select s.n, s.net - s.fee - s.recouped as remaining,
          sum(s.net - s.fee - s.recouped) over (order by s.n) as running
        from alloc_sums s
        where s.account_id = r.account_id and s.currency = r.currency and s.net - s.fee - s.recouped > 0
          and (r.release_id is null or r.cross_recoup or s.release_id = r.release_id)
      ), taken as (
        select n, least(remaining, greatest(0, r.due - (running - remaining))) as amount from open_sums
      ), recorded as (
        insert into alloc_recoup select n, r.id, amount from taken where amount > 0 returning n, amount
      )
      update alloc_sums s set recouped = s.recouped + x.amount from recorded x where x.n = s.n;
    end loop;
  end if;

  -- The account's own payee, looked up (or made) once per account with a sum no split version takes.
  create temporary table alloc_payees on commit drop as
  select a.account_id, internal.account_payee(a.account_id) as payee_id
  from (select distinct account_id from alloc_sums where version_id is null) a;

  insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, recoupable_id,
    import_id, release_id, track_id, usage_period, store, territory, split_version_id, currency, amount, fee_amount,
    recouped_amount, period)
  -- What came from the stores, and the distributor's fees, per account and currency.
  select tenant, txn, 'allocation', h.holder, t.account_id, null::uuid, null::uuid, import, null::uuid, null::uuid,
    null::date, null::text, null::text, null::bigint, t.currency, h.amount, null::numeric, null::numeric, posting
  from (select s.account_id, s.currency, sum(s.net) as net, sum(s.fee) as fee from alloc_sums s
        group by s.account_id, s.currency) t
  cross join lateral (values ('store', -t.net), ('fees', t.fee)) h (holder, amount)
  where h.holder = 'store' or h.amount <> 0
  union all
  select tenant, txn, 'allocation', 'recoupable', s.account_id, null, x.recoupable_id, import, null, null, null, null,
    null, null, s.currency, sum(x.amount), null, null, posting
  from alloc_recoup x join alloc_sums s on s.n = x.n group by s.account_id, x.recoupable_id, s.currency
  union all
  -- The payees of a split version, by their shares.
  select tenant, txn, 'allocation', 'payee', s.account_id, sh.payee_id, null, import, s.release_id, s.track_id,
    s.usage_period, s.store, s.territory, s.version_id, s.currency,
    (s.net - s.fee - s.recouped) * sh.share * 0.01, s.fee * sh.share * 0.01, s.recouped * sh.share * 0.01, posting
  from alloc_sums s join internal.split_shares sh on sh.version_id = s.version_id
  union all
  -- The account's own payee takes the whole of a sum with no split version (share 100, as 0036 wrote it).
  select tenant, txn, 'allocation', 'payee', s.account_id, p.payee_id, null, import, s.release_id, s.track_id,
    s.usage_period, s.store, s.territory, null, s.currency,
    (s.net - s.fee - s.recouped) * 100::numeric * 0.01, s.fee * 100::numeric * 0.01,
    s.recouped * 100::numeric * 0.01, posting
  from alloc_sums s join alloc_payees p on p.account_id = s.account_id
  where s.version_id is null;
  get diagnostics posted = row_count;
  drop table alloc_keys, alloc_rates, alloc_versioned, alloc_sums, alloc_recoup, alloc_payees;
  return posted;
end
$$;
