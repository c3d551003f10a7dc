-- Add-ons (issue 43, item 3; docs/operator.md, "Add-ons"): a tenant's catalogue of paid extras
-- (seed 000's internal.add_on_settings, unused until now) and the orders members place for their
-- releases. An order records the price at the time; a purchase with a price is an expense of the
-- account recouped from its earnings before payees are paid (a recoupable, posted to the ledger
-- against the distributor's fees), so it shows on the account's statements. What an add-on does:
--   unlock_store     its stores are delivered to only for releases that have it;
--   priority_review  the release comes first in the review queue;
--   informational    nothing automatic: the tenant's staff fulfil it (Content ID, lyrics, ...).

-- 1. The catalogue: add_on is the add-on's code; enabled says it is on sale.
alter table internal.add_on_settings
  add column id uuid not null default gen_random_uuid(),
  add column name text,
  add column description text not null default '' check (length(description) <= 2000),
  add column price numeric,
  add column currency char(3),
  add column billing text not null default 'per_release' check (billing in ('per_release', 'per_year')),
  add column effect text not null default 'informational'
    check (effect in ('unlock_store', 'priority_review', 'informational')),
  add column store_codes text[] not null default '{}',
  add column sort integer not null default 0,
  add column created_at timestamptz not null default now();
update internal.add_on_settings s
set name = s.add_on, price = 0, currency = coalesce((select m.default_currency from internal.money_settings m
  where m.tenant_id = s.tenant_id), 'USD');
alter table internal.add_on_settings
  alter column name set not null,
  alter column price set not null,
  alter column currency set not null,
  add constraint add_on_settings_id unique (id),
  add constraint add_on_settings_name check (length(btrim(name)) between 1 and 100),
  add constraint add_on_settings_currency check (currency ~ '^[A-Z]{3}$'),
  add constraint add_on_settings_price check (price >= 0 and price < 1000000000
    and scale(price) <= internal.minor_units(currency)),
  add constraint add_on_settings_stores check ((effect = 'unlock_store') = (cardinality(store_codes) > 0)
    and cardinality(store_codes) <= 50);

-- The operator's changes to the catalogue are in the audit log (as the money settings are).
create trigger audit after insert or update or delete on internal.add_on_settings
  for each row execute function internal.audit_row('people');

-- 2. Orders: one per purchase, with what was bought as it was then (name, effect, stores, price).
-- A per_release add-on is bought once for a release; a per_year one runs for a year from its
-- purchase (expires_at) and is bought again to renew. Financial records outlive the catalog: no
-- foreign key to the release; the catalogue entry cannot be deleted while it has orders.
create table internal.add_on_orders (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  release_id uuid not null,
  add_on text not null,
  name text not null,
  effect text not null,
  store_codes text[] not null default '{}',
  billing text not null check (billing in ('per_release', 'per_year')),
  currency char(3) not null,
  price numeric not null check (price >= 0),
  recoupable_id uuid references internal.recoupables (id),
  ordered_by uuid,
  created_at timestamptz not null default now(),
  expires_at timestamptz,
  check ((billing = 'per_year') = (expires_at is not null)),
  foreign key (tenant_id, add_on) references internal.add_on_settings (tenant_id, add_on) on delete restrict
);
create unique index add_on_orders_once on internal.add_on_orders (release_id, add_on) where billing = 'per_release';
create index add_on_orders_release on internal.add_on_orders (release_id, created_at);
create index add_on_orders_priority on internal.add_on_orders (tenant_id, release_id) where effect = 'priority_review';
create index add_on_orders_account on internal.add_on_orders (account_id, created_at desc);

-- The ledger knows the add-on charge: the account's recoupable owes it, the distributor earns it.
alter table internal.ledger_entries drop constraint ledger_entries_txn_kind_check;
alter table internal.ledger_entries add constraint ledger_entries_txn_kind_check
  check (txn_kind in ('allocation', 'void', 'recoupable', 'payout_request', 'payout_paid', 'payout_failed',
    'conversion', 'add_on'));

-- 3. Who reads what. Members and keys read their tenant's add-ons on sale (a caller of no account
-- of the tenant, such as a token whose tenant was changed, reads none), and the orders of the
-- releases they see (row security on public.releases decides, owner-only preset included); the
-- tenant's service key reads all of its tenant's. Every write is the operator's (service role) or
-- internal.buy_add_on's.
alter table internal.add_on_orders enable row level security;
grant select on internal.add_on_settings, internal.add_on_orders to authenticated, tenant_service;
create policy add_on_settings_select on internal.add_on_settings for select to authenticated
  using (enabled and tenant_id = (select auth.tenant_id())
    and (select cardinality(auth.readable_account_ids())) > 0);
create policy add_on_settings_tenant_service on internal.add_on_settings for select to tenant_service
  using (tenant_id = (select auth.tenant_id()));
create policy add_on_orders_select on internal.add_on_orders for select to authenticated
  using (tenant_id = (select auth.tenant_id()) and account_id = any ((select auth.readable_account_ids())::uuid[])
    and exists (select 1 from public.releases r where r.id = release_id));
create policy add_on_orders_tenant_service on internal.add_on_orders for select to tenant_service
  using (tenant_id = (select auth.tenant_id()));

-- 4. Buying. The caller must be able to change the release (internal.release_writable: an owner,
-- admin or member of its account, or a key with catalog:write — never a viewer) and the add-on
-- must be on sale in the release's tenant. Idempotent: while the release has the add-on (a
-- per_release one ever, a per_year one until it expires) the existing order is returned and
-- nothing is charged. Returns the order's id and whether this call made it.
create function internal.buy_add_on(release uuid, code text, out order_id uuid, out created boolean)
language plpgsql security definer set search_path = ''
as $$
declare
  r public.releases;
  a internal.accounts;
  s internal.add_on_settings;
  c uuid;
  txn uuid := gen_random_uuid();
begin
  select * into r from public.releases where id = release for update;
  if r.id is null or not internal.release_visible(r) then
    raise exception 'no release %', release using errcode = 'P0002', detail = 'not_found';
  end if;
  select * into a from internal.accounts where id = r.account_id;
  if auth.role() <> 'service_role' and (a.tenant_id is distinct from auth.tenant_id() or not internal.release_writable(r)) then
    raise exception 'buying an add-on for a release needs the right to change it (owner, admin or member)'
      using errcode = '42501', detail = 'forbidden';
  end if;
  select * into s from internal.add_on_settings where tenant_id = a.tenant_id and add_on = code and enabled;
  if s.add_on is null then
    raise exception 'no add-on % on sale', code using errcode = 'P0002', detail = 'add_on_not_found';
  end if;
  select o.id into order_id from internal.add_on_orders o
  where o.release_id = r.id and o.add_on = s.add_on and (o.expires_at is null or o.expires_at > now())
  order by o.created_at desc limit 1;
  if order_id is not null then
    created := false;
    return;
  end if;
  if s.price > 0 then
    insert into internal.recoupables (tenant_id, account_id, release_id, kind, currency, amount, description, created_by)
    values (a.tenant_id, a.id, r.id, 'expense', s.currency, s.price,
      left('Add-on: ' || s.name || ' — ' || r.title, 500), coalesce(auth.uid()::text, 'api key'))
    returning id into c;
    insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, recoupable_id, release_id,
      currency, amount, period)
    select a.tenant_id, txn, 'add_on', h.holder, a.id, h.rid, r.id, s.currency, h.amount,
      internal.posting_period(a.tenant_id)
    from (values ('recoupable', c, -s.price), ('fees', null::uuid, s.price)) h (holder, rid, amount);
  end if;
  insert into internal.add_on_orders (tenant_id, account_id, release_id, add_on, name, effect, store_codes, billing,
    currency, price, recoupable_id, ordered_by, expires_at)
  values (a.tenant_id, a.id, r.id, s.add_on, s.name, s.effect, s.store_codes, s.billing, s.currency, s.price, c,
    auth.uid(), case when s.billing = 'per_year' then now() + interval '1 year' end)
  returning id into order_id;
  created := true;
  insert into internal.events (tenant_id, account_id, type, data)
  values (a.tenant_id, a.id, 'add_on.purchased', jsonb_build_object('object', internal.add_on_order_object(order_id)));
end
$$;

-- The order as the public API and the add_on.purchased event show it.
create function internal.add_on_order_object(o_id uuid) returns jsonb
language sql stable security definer set search_path = ''
as $$
  select jsonb_build_object('id', o.id, 'object', 'add_on_order', 'account_id', o.account_id,
    'release_id', o.release_id, 'add_on', o.add_on, 'name', o.name, 'effect', o.effect,
    'store_codes', to_jsonb(o.store_codes), 'billing', o.billing, 'currency', o.currency,
    'price', round(o.price, internal.minor_units(o.currency))::text,
    'active', o.expires_at is null or o.expires_at > now(), 'created_at', o.created_at, 'expires_at', o.expires_at)
  from internal.add_on_orders o where o.id = o_id
$$;

revoke execute on function internal.buy_add_on(uuid, text), internal.add_on_order_object(uuid) from public;
grant execute on function internal.buy_add_on(uuid, text) to authenticated, service_role;
grant execute on function internal.add_on_order_object(uuid) to service_role;

-- 5. The new event, for webhook endpoints (as migration 0038 lists them, and add_on.purchased).
alter table internal.webhook_endpoints drop constraint webhook_endpoints_events_check;
alter table internal.webhook_endpoints add constraint webhook_endpoints_events_check
  check (cardinality(events) between 1 and 20 and events <@ array[
    'release.submitted', 'release.approved', 'release.rejected', 'release.live', 'release.takedown_completed',
    'royalties.imported', 'royalties.voided', 'statement.ready', 'payout.requested', 'payout.paid',
    'payout.failed', 'transfer.completed', 'add_on.purchased']::text[]);
