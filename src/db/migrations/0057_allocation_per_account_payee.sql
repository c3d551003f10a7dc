-- Royalty import allocation (issue 45, item 3): the same entries as 0036's allocate_import, cheaper.
-- Each sum's split version is found once, as the sums are made, and the account's own payee (for
-- sums with no split version) once per account instead of once per sum: at a million lines the
-- per-sum internal.account_payee() calls were most of the allocation's time.
create or replace function internal.allocate_import(import uuid) returns bigint
language plpgsql security definer set search_path = ''
as $$
declare
  tenant uuid;
  txn uuid := gen_random_uuid();
  posting date;
  r record;
  posted bigint;
  -- Each account's own payee, by account id (text).
  payees jsonb;
begin
  select tenant_id into tenant from internal.royalty_imports where id = import;
  if tenant is null then
    raise exception 'no royalty import %', import using errcode = 'P0002';
  end if;
  if exists (select 1 from internal.ledger_entries where import_id = import and txn_kind = 'allocation') then
    return 0;
  end if;
  posting := internal.posting_period(tenant);

  -- Each sum with the split version in force for it (none: the account's own payee takes it all).
  create temporary table alloc_sums on commit drop as
  select g.*, (
      select w.id from internal.split_versions w
      where g.track_id is not null and w.track_id = g.track_id
        and (w.store is null or w.store = g.store) and (w.territory is null or w.territory = g.territory)
        and (w.effective_from <= g.usage_period or (w.store is null and w.territory is null))
      order by (w.effective_from <= g.usage_period) desc, (w.store is not null) desc, (w.territory is not null) desc,
        case when w.effective_from <= g.usage_period then g.usage_period - w.effective_from
          else w.effective_from - g.usage_period end, w.id desc
      limit 1
    ) as version_id
  from (
    select row_number() over (order by l.account_id, l.currency, l.period_start, l.release_id, min(l.isrc) nulls first,
        l.track_id, l.store, l.territory nulls first) as n,
      l.account_id, l.release_id, l.track_id, l.period_start as usage_period, l.store, l.territory, l.currency,
      sum(l.net) as net, 0::numeric as fee, 0::numeric as recouped
    from internal.royalty_lines l
    where l.import_id = import and l.account_id is not null and l.reverses_line_id is null
    group by l.account_id, l.release_id, l.track_id, l.period_start, l.store, l.territory, l.currency
  ) g;

  if not exists (select 1 from alloc_sums) then
    return 0;
  end if;

  -- × 0.01, not / 100: numeric multiplication is exact, while division rounds to about 16 significant
  -- digits (a 12-decimal net at a 4-decimal rate has 16 decimals; a hundredth of it needs 18).
  -- The rate once per release (materialized: a condition on the rate pushed down to the sums called
  -- fee_rate for every sum, 980,000 calls taking 20 s of a million lines' allocation).
  with k as materialized (
    select d.account_id, d.release_id, internal.fee_rate(tenant, d.account_id, d.release_id) as rate
    from (select distinct account_id, release_id from alloc_sums) d
  )
  update alloc_sums s set fee = s.net * k.rate * 0.01
  from k
  where s.account_id = k.account_id and s.release_id = k.release_id and k.rate > 0;

  create temporary table alloc_recoup (n bigint, recoupable_id uuid, amount numeric) on commit drop;
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

  -- The account's own payee, looked up (or made) once per account rather than once per sum: a
  -- million lines' sums called it a million times, the largest part of the allocation.
  select coalesce(jsonb_object_agg(a.account_id, internal.account_payee(a.account_id)), '{}') into payees
  from (select distinct account_id from alloc_sums where version_id is null) a;

  insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, recoupable_id,
    import_id, release_id, track_id, usage_period, store, territory, split_version_id, currency, amount, fee_amount,
    recouped_amount, period)
  -- What came from the stores, per account and currency.
  select tenant, txn, 'allocation', 'store', s.account_id, null::uuid, null::uuid, import, null::uuid, null::uuid,
    null::date, null::text, null::text, null::bigint, s.currency, -sum(s.net), null::numeric, null::numeric, posting
  from alloc_sums s group by s.account_id, s.currency
  union all
  select tenant, txn, 'allocation', 'fees', s.account_id, null, null, import, null, null, null, null, null, null,
    s.currency, sum(s.fee), null, null, posting
  from alloc_sums s group by s.account_id, s.currency having sum(s.fee) <> 0
  union all
  select tenant, txn, 'allocation', 'recoupable', s.account_id, null, x.recoupable_id, import, null, null, null, null,
    null, null, s.currency, sum(x.amount), null, null, posting
  from alloc_recoup x join alloc_sums s on s.n = x.n group by s.account_id, x.recoupable_id, s.currency
  union all
  select tenant, txn, 'allocation', 'payee', s.account_id, sh.payee_id, null, import, s.release_id, s.track_id,
    s.usage_period, s.store, s.territory, s.version_id, s.currency,
    (s.net - s.fee - s.recouped) * sh.share * 0.01, s.fee * sh.share * 0.01, s.recouped * sh.share * 0.01, posting
  from alloc_sums s
  cross join lateral (
    select ss.payee_id, ss.share from internal.split_shares ss where ss.version_id = s.version_id
    union all
    select (payees ->> s.account_id::text)::uuid, 100::numeric where s.version_id is null
  ) sh;
  get diagnostics posted = row_count;
  drop table alloc_sums;
  drop table alloc_recoup;
  return posted;
end
$$;
