-- Money (docs/payouts.md): payees, versioned splits, the distributor's fees, an append-only
-- double-entry ledger that every imported royalty line is allocated into, advances and expenses
-- recouped before payees are paid, monthly statements the operator approves (and that never change
-- after), tax forms, and payouts paid in batches through a provider.
--
-- Every balance is a sum of ledger entries; nothing is a counter code adds to. Every ledger
-- transaction sums to zero per currency, which a statement-level trigger checks for each insert
-- (a transaction is always posted by one statement). Ledger amounts keep the report's precision
-- (numeric without scale); money is rounded only where it is stated (statements) or paid (payouts).

-- The ISO 4217 minor units of a currency: how many decimals it is stated and paid in (as
-- src/money/decimal.ts minorUnits says; the two lists are checked against each other by a test).
create function internal.minor_units(currency char(3)) returns integer
language sql immutable set search_path = ''
as $$
  select case
    when currency in ('JPY', 'KRW', 'ISK', 'CLP', 'VND', 'UGX', 'XAF', 'XOF', 'PYG') then 0
    when currency in ('BHD', 'KWD', 'OMR', 'JOD', 'TND', 'IQD', 'LYD') then 3
    else 2
  end
$$;

-- The tenant's money settings: the currency statements are in unless a payee says otherwise, the
-- least a payee can ask to be paid, and whether asking needs a second factor.
create table internal.money_settings (
  tenant_id uuid primary key references internal.tenants (id) on delete cascade,
  default_currency char(3) not null default 'USD' check (default_currency ~ '^[A-Z]{3}$'),
  payout_threshold numeric(20, 2) not null default 10 check (payout_threshold >= 0),
  payout_requires_aal2 boolean not null default true,
  updated_at timestamptz not null default now()
);

-- The distributor's fee, in percent of the store's net: for the whole tenant (account_id and
-- release_id null), one account, or one release; the most specific applies. A change applies to
-- imports allocated after it.
create table internal.distribution_fees (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid,
  release_id uuid,
  rate numeric(7, 4) not null check (rate >= 0 and rate <= 100),
  updated_at timestamptz not null default now(),
  check (release_id is null or account_id is not null),
  unique nulls not distinct (tenant_id, account_id, release_id)
);

-- Who is paid. A payee belongs to the account that pays them: the account itself (kind account,
-- one per account), or a person named by e-mail in a split. A person is the user of the tenant
-- with that (confirmed) e-mail address once they have one: a member of the account or anybody
-- who signs up with the address to claim it; until then the money is held. One person may be a
-- payee of several accounts; the user id links them. Financial records outlive the catalog: no
-- foreign key to accounts, and erasure blanks the personal fields, keeping the pseudonymous id.
create table internal.payees (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid not null,
  kind text not null check (kind in ('account', 'person')),
  email text check (email = lower(email) and email like '%_@_%'),
  name text check (length(name) <= 300),
  user_id uuid,
  claimed_at timestamptz,
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  -- Tax: the form on file and its review; the withholding rate applied to payouts.
  tax_form text check (tax_form in ('W-9', 'W-8BEN', 'W-8BEN-E')),
  tax_status text not null default 'missing' check (tax_status in ('missing', 'pending', 'verified', 'rejected')),
  tax_country char(2) check (tax_country ~ '^[A-Z]{2}$'),
  tax_name text check (length(tax_name) <= 300),
  -- The taxpayer id, sealed with the server's key (src/secrets), and its last four characters.
  tax_id_sealed text,
  tax_id_last4 text check (length(tax_id_last4) <= 4),
  withholding_rate numeric(5, 2) not null default 0 check (withholding_rate between 0 and 100),
  tax_reviewed_at timestamptz,
  -- Where payouts go (src/money/providers.ts PAYOUT_METHOD_SCHEMA).
  payout_method jsonb check (payout_method is null or jsonb_typeof(payout_method) = 'object'),
  erased_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((kind = 'account') = (email is null) or erased_at is not null)
);
create unique index payees_account_self on internal.payees (account_id) where kind = 'account';
create unique index payees_account_email on internal.payees (account_id, email) where email is not null;
create index payees_email on internal.payees (tenant_id, email) where email is not null;
create index payees_user on internal.payees (user_id) where user_id is not null;

-- A track's splits from a date (the first day of a usage month), optionally for one store or
-- territory. The version that applies to a line is chosen by the line's usage period: the most
-- specific scope among the versions in effect then, and of those the latest; a period before the
-- track's first version takes its first unscoped version. Versions are never changed or deleted:
-- money already allocated keeps the version it was allocated by.
create table internal.split_versions (
  id bigint generated always as identity primary key,
  tenant_id uuid not null,
  account_id uuid not null,
  track_id uuid not null,
  effective_from date not null check (extract(day from effective_from) = 1),
  store text check (store ~ '^[a-z0-9]+(_[a-z0-9]+)*$'),
  territory text check (territory ~ '^[A-Z]{2}$'),
  -- track: written from tracks.splits; api: a dated or scoped version set through the API.
  source text not null default 'track' check (source in ('track', 'api')),
  created_at timestamptz not null default now()
);
create index split_versions_track on internal.split_versions (track_id, effective_from desc, id desc);

create table internal.split_shares (
  version_id bigint not null references internal.split_versions (id),
  payee_id uuid not null references internal.payees (id),
  -- Percent, up to four decimals; a version's shares total exactly 100.
  share numeric(7, 4) not null check (share > 0 and share <= 100),
  primary key (version_id, payee_id)
);

-- Accounting periods (a month each) per tenant: open until the operator approves its statements.
-- An entry is posted into the first open period from the current month on, so an approved
-- period never receives another entry: corrections arrive in the next one.
create table internal.money_periods (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  period date not null check (extract(day from period) = 1),
  status text not null default 'open' check (status in ('open', 'approved')),
  approved_at timestamptz,
  approved_by text,
  primary key (tenant_id, period)
);

-- Rates the operator sets to convert earnings into a payee's currency: for a period, or for one
-- import (which wins over the period's).
create table internal.exchange_rates (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  period date not null check (extract(day from period) = 1),
  import_id uuid,
  from_currency char(3) not null check (from_currency ~ '^[A-Z]{3}$'),
  to_currency char(3) not null check (to_currency ~ '^[A-Z]{3}$' and to_currency <> from_currency),
  rate numeric(24, 12) not null check (rate > 0),
  set_at timestamptz not null default now(),
  unique nulls not distinct (tenant_id, period, import_id, from_currency, to_currency)
);

-- Advances and expenses the operator recorded against an account or one of its releases. What is
-- still unrecouped is minus the sum of the entries on the recoupable.
create table internal.recoupables (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid not null,
  release_id uuid,
  kind text not null check (kind in ('advance', 'expense')),
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  amount numeric not null check (amount > 0 and scale(amount) <= internal.minor_units(currency)),
  description text not null check (length(btrim(description)) between 1 and 500),
  -- A release's advance recouped from the account's other releases too.
  cross_recoup boolean not null default false,
  created_at timestamptz not null default now(),
  created_by text
);
create index recoupables_account on internal.recoupables (account_id, currency);

-- Payout batches and payouts.
create table internal.payout_batches (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  status text not null default 'approved' check (status in ('approved', 'paid', 'partially_paid', 'failed')),
  provider text not null check (provider in ('paypal', 'wise')),
  approved_at timestamptz not null default now(),
  approved_by text,
  exported_at timestamptz,
  settled_at timestamptz
);

create table internal.payouts (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid not null,
  payee_id uuid not null references internal.payees (id),
  currency char(3) not null,
  -- What leaves the payee's balance, what is withheld for tax, and what the provider sends.
  -- In the currency's minor units (0, 2 or 3 decimals: internal.minor_units), as paid.
  amount numeric not null check (amount > 0 and scale(amount) <= internal.minor_units(currency)),
  withholding numeric not null default 0
    check (withholding >= 0 and withholding <= amount and scale(withholding) <= internal.minor_units(currency)),
  net_amount numeric generated always as (amount - withholding) stored,
  status text not null default 'requested' check (status in ('requested', 'approved', 'paid', 'failed')),
  batch_id uuid references internal.payout_batches (id),
  method jsonb not null check (jsonb_typeof(method) = 'object'),
  requested_by uuid,
  requested_at timestamptz not null default now(),
  settled_at timestamptz,
  failure_reason text check (length(failure_reason) <= 1000),
  provider_reference text check (length(provider_reference) <= 200)
);
create index payouts_payee on internal.payouts (payee_id, requested_at desc);
create index payouts_tenant_status on internal.payouts (tenant_id, status);
-- One open request per payee at a time.
create unique index payouts_one_open on internal.payouts (payee_id) where status in ('requested', 'approved');

-- The ledger. holder names whose balance an entry moves:
--   payee            what the platform owes the payee (payee_id)
--   store            money received from the stores (one entry per import, account and currency)
--   fees             the distributor's fees
--   recoupable       an advance or expense (recoupable_id): minus what is still to be recouped
--   cash             money the operator paid out (advances, payouts)
--   payouts_pending  requested payouts not yet paid
--   tax_withheld     withholding kept from payouts
--   fx               the other side of currency conversions
-- A payee entry of an allocation also carries what the payee's share was before the fee and the
-- recoupment (earned = amount + fee_amount + recouped_amount), for statements.
create table internal.ledger_entries (
  id bigint generated always as identity primary key,
  tenant_id uuid not null,
  txn_id uuid not null,
  txn_kind text not null check (txn_kind in ('allocation', 'void', 'recoupable', 'payout_request', 'payout_paid',
    'payout_failed', 'conversion')),
  holder text not null check (holder in ('payee', 'store', 'fees', 'recoupable', 'cash', 'payouts_pending',
    'tax_withheld', 'fx')),
  account_id uuid,
  payee_id uuid,
  recoupable_id uuid,
  payout_id uuid,
  import_id uuid,
  release_id uuid,
  track_id uuid,
  usage_period date,
  store text,
  territory text,
  split_version_id bigint,
  currency char(3) not null,
  amount numeric not null,
  fee_amount numeric,
  recouped_amount numeric,
  -- The accounting period (first day of the month) the entry is stated in.
  period date not null,
  posted_at timestamptz not null default now(),
  check ((holder = 'payee') = (payee_id is not null)),
  check ((holder = 'recoupable') = (recoupable_id is not null))
);
create index ledger_payee on internal.ledger_entries (payee_id, period, currency) where payee_id is not null;
create index ledger_import on internal.ledger_entries (import_id) where import_id is not null;
create index ledger_recoupable on internal.ledger_entries (recoupable_id) where recoupable_id is not null;
create index ledger_txn on internal.ledger_entries (txn_id);
create index ledger_tenant_period on internal.ledger_entries (tenant_id, period);

create function internal.ledger_append_only() returns trigger
language plpgsql
as $$
begin
  raise exception 'the ledger is append-only: post a reversing entry instead'
    using errcode = '55000', hint = 'docs/payouts.md, "The ledger"';
end
$$;
create trigger ledger_append_only before update or delete on internal.ledger_entries
  for each row execute function internal.ledger_append_only();
create trigger ledger_no_truncate before truncate on internal.ledger_entries
  for each statement execute function internal.ledger_append_only();

-- Each insert posts whole transactions: every transaction it touches sums to zero per currency.
create function internal.ledger_balanced() returns trigger
language plpgsql
as $$
declare
  bad record;
begin
  select txn_id, currency, sum(amount) as off into bad from new_entries
  group by txn_id, currency having sum(amount) <> 0 limit 1;
  if found then
    raise exception 'ledger transaction % does not balance in %: off by %', bad.txn_id, bad.currency, bad.off
      using errcode = '23514';
  end if;
  return null;
end
$$;
create trigger ledger_balanced after insert on internal.ledger_entries
  referencing new table as new_entries for each statement execute function internal.ledger_balanced();

-- Approved statements: the document as approved, never changed (only emailed_at is set once).
create table internal.statements (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid not null,
  payee_id uuid not null references internal.payees (id),
  period date not null,
  currency char(3) not null,
  -- As stated: rounded to the currency's minor units.
  opening_balance numeric not null check (scale(opening_balance) <= internal.minor_units(currency)),
  closing_balance numeric not null check (scale(closing_balance) <= internal.minor_units(currency)),
  document jsonb not null check (jsonb_typeof(document) = 'object'),
  approved_at timestamptz not null default now(),
  emailed_at timestamptz,
  unique (payee_id, period)
);
create index statements_account on internal.statements (account_id, period desc);

create function internal.statements_frozen() returns trigger
language plpgsql
as $$
begin
  if tg_op = 'UPDATE' and (to_jsonb(new) - 'emailed_at') = (to_jsonb(old) - 'emailed_at') and old.emailed_at is null then
    return new;
  end if;
  raise exception 'an approved statement never changes: corrections arrive in the next period' using errcode = '55000';
end
$$;
create trigger statements_frozen before update or delete on internal.statements
  for each row execute function internal.statements_frozen();

-- Who reads what ----------------------------------------------------------------------------------

-- The payees the caller is: their user id, or their confirmed e-mail address in the tenant.
create function auth.my_payee_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select coalesce((select array_agg(p.id) from internal.payees p
    join internal.users u on u.id = auth.uid() and u.tenant_id = p.tenant_id
    where p.tenant_id = auth.tenant_id() and p.erased_at is null
      -- Proven, not merely confirmed: an address confirmed automatically (a tenant without e-mail
      -- confirmation) proves nothing, and whoever proves an address claims the money held for it.
      and (p.user_id = u.id or (p.user_id is null and p.email = u.email and u.email_proven_at is not null))), '{}')
$$;

-- The accounts whose money the caller reads: an owner or admin of the account, or a key of it with
-- the payouts:read scope.
create function auth.payout_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'api_key_id' then coalesce(
      (select array_agg(k.account_id) from internal.api_keys k
        where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid and k.tenant_id = auth.tenant_id()
          and k.status = 'active' and 'payouts:read' = any (k.scopes)
          and k.account_id = any (auth.readable_account_ids())),
      '{}')
    else auth.manageable_account_ids()
  end
$$;

alter table internal.money_settings enable row level security;
alter table internal.distribution_fees enable row level security;
alter table internal.payees enable row level security;
alter table internal.split_versions enable row level security;
alter table internal.split_shares enable row level security;
alter table internal.money_periods enable row level security;
alter table internal.exchange_rates enable row level security;
alter table internal.recoupables enable row level security;
alter table internal.payout_batches enable row level security;
alter table internal.payouts enable row level security;
alter table internal.ledger_entries enable row level security;
alter table internal.statements enable row level security;

-- Clients read their rows; every write goes through the functions below (security definer) or
-- the operator (service role). The tax id's sealed value is never granted.
grant select (id, tenant_id, account_id, kind, email, name, user_id, claimed_at, currency, tax_form, tax_status,
  tax_country, tax_id_last4, withholding_rate, tax_reviewed_at, payout_method, erased_at, created_at, updated_at)
  on internal.payees to authenticated, tenant_service;
grant select on internal.ledger_entries, internal.statements, internal.payouts, internal.recoupables,
  internal.split_versions, internal.split_shares to authenticated, tenant_service;
grant select on internal.money_settings, internal.distribution_fees, internal.money_periods, internal.exchange_rates,
  internal.payout_batches to tenant_service;

create policy payees_select on internal.payees for select to authenticated
  using (tenant_id = (select auth.tenant_id())
    and (id = any ((select auth.my_payee_ids())::uuid[]) or account_id = any ((select auth.payout_account_ids())::uuid[])));
create policy ledger_select on internal.ledger_entries for select to authenticated
  using (holder = 'payee' and tenant_id = (select auth.tenant_id())
    and (payee_id = any ((select auth.my_payee_ids())::uuid[]) or account_id = any ((select auth.payout_account_ids())::uuid[])));
create policy statements_select on internal.statements for select to authenticated
  using (tenant_id = (select auth.tenant_id())
    and (payee_id = any ((select auth.my_payee_ids())::uuid[]) or account_id = any ((select auth.payout_account_ids())::uuid[])));
create policy payouts_select on internal.payouts for select to authenticated
  using (tenant_id = (select auth.tenant_id())
    and (payee_id = any ((select auth.my_payee_ids())::uuid[]) or account_id = any ((select auth.payout_account_ids())::uuid[])));
create policy recoupables_select on internal.recoupables for select to authenticated
  using (tenant_id = (select auth.tenant_id()) and account_id = any ((select auth.payout_account_ids())::uuid[]));
create policy split_versions_select on internal.split_versions for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[]));
create policy split_shares_select on internal.split_shares for select to authenticated
  using (exists (select 1 from internal.split_versions v where v.id = version_id));

do $$
declare
  t text;
begin
  foreach t in array array['money_settings', 'distribution_fees', 'payees', 'money_periods', 'exchange_rates',
    'recoupables', 'payout_batches', 'payouts', 'ledger_entries', 'statements', 'split_versions'] loop
    execute format('create policy %I on internal.%I for select to tenant_service using (tenant_id = (select auth.tenant_id()))',
      t || '_tenant_service', t);
  end loop;
end
$$;
create policy split_shares_tenant_service on internal.split_shares for select to tenant_service
  using (exists (select 1 from internal.split_versions v where v.id = version_id));

-- Payees and split versions --------------------------------------------------------------------

create function internal.tenant_currency(tenant uuid) returns char(3)
language sql stable security definer set search_path = ''
as $$ select coalesce((select default_currency from internal.money_settings where tenant_id = tenant), 'USD') $$;

-- The account's own payee, made on first use.
create function internal.account_payee(account uuid) returns uuid
language plpgsql security definer set search_path = ''
as $$
declare
  found_id uuid;
begin
  select id into found_id from internal.payees where account_id = account and kind = 'account';
  if found_id is null then
    insert into internal.payees (tenant_id, account_id, kind, name, currency)
    select a.tenant_id, a.id, 'account', a.name, internal.tenant_currency(a.tenant_id)
    from internal.accounts a where a.id = account
    on conflict (account_id) where kind = 'account' do nothing
    returning id into found_id;
    if found_id is null then
      select id into found_id from internal.payees where account_id = account and kind = 'account';
    end if;
  end if;
  return found_id;
end
$$;

-- Whether splits can be paid by: every share a number or decimal string in (0, 100] with at most
-- four decimals, totalling exactly 100 (or no splits at all: the account takes the whole). Splits
-- that are not (a draft being edited) make no version: the version before stays in effect.
create function internal.splits_payable(splits jsonb) returns boolean
language plpgsql immutable set search_path = ''
as $$
declare
  s jsonb;
  total numeric := 0;
begin
  if jsonb_typeof(splits) <> 'array' then
    return false;
  end if;
  if jsonb_array_length(splits) = 0 then
    return true;
  end if;
  for s in select * from jsonb_array_elements(splits) loop
    if jsonb_typeof(s) <> 'object' or jsonb_typeof(s -> 'share') not in ('number', 'string')
       or (s ->> 'share') !~ '^[0-9]{1,3}(\.[0-9]{1,4})?$' or (s ->> 'share')::numeric <= 0 then
      return false;
    end if;
    total := total + (s ->> 'share')::numeric;
  end loop;
  return total = 100;
end
$$;

-- Every track whose splits were written in this statement gets a version from this month: set-based,
-- once per statement, so a bulk insert of tracks stays one pass. A split without an e-mail is the
-- account's own share; two splits with one e-mail are one payee's shares added.
-- Without JIT: the temporary table has no statistics, so its statements are estimated at millions of
-- rows and PostgreSQL spent about a second compiling them for every write of one track's splits.
create function internal.track_split_versions() returns trigger
language plpgsql security definer set search_path = '' set jit = off
as $$
begin
  create temporary table if not exists pg_temp.changed_splits (track_id uuid, account_id uuid, splits jsonb) on commit drop;
  truncate pg_temp.changed_splits;
  if tg_op = 'INSERT' then
    insert into pg_temp.changed_splits select n.id, n.account_id, n.splits from new_tracks n
    where jsonb_array_length(n.splits) > 0 and internal.splits_payable(n.splits);
  else
    insert into pg_temp.changed_splits select n.id, n.account_id, n.splits
    from new_tracks n join old_tracks o on o.id = n.id
    where n.splits is distinct from o.splits and internal.splits_payable(n.splits);
  end if;
  if not exists (select 1 from pg_temp.changed_splits) then
    return null;
  end if;
  -- The payees named by e-mail, made on first use; the accounts' own payees.
  insert into internal.payees (tenant_id, account_id, kind, email, name, currency)
  select distinct on (c.account_id, lower(s ->> 'email')) a.tenant_id, c.account_id, 'person', lower(s ->> 'email'),
    left(s ->> 'name', 300), internal.tenant_currency(a.tenant_id)
  from pg_temp.changed_splits c join internal.accounts a on a.id = c.account_id
  cross join jsonb_array_elements(c.splits) s
  where coalesce(s ->> 'email', '') <> ''
  on conflict (account_id, email) where email is not null do nothing;
  perform internal.account_payee(x.account_id) from (select distinct account_id from pg_temp.changed_splits) x;

  with versions as (
    insert into internal.split_versions (tenant_id, account_id, track_id, effective_from)
    select a.tenant_id, c.account_id, c.track_id, date_trunc('month', now())::date
    from pg_temp.changed_splits c join internal.accounts a on a.id = c.account_id
    returning id, track_id, account_id
  )
  insert into internal.split_shares (version_id, payee_id, share)
  select v.id, p.id, sum((s ->> 'share')::numeric)
  from versions v join pg_temp.changed_splits c on c.track_id = v.track_id
  cross join jsonb_array_elements(c.splits) s
  -- Each share's payee by index (its address, or the account's own): a join on the account's payees
  -- with this choice in its condition scanned every payee of the account for every share.
  cross join lateral (
    select y.id from internal.payees y
    where coalesce(s ->> 'email', '') <> '' and y.account_id = v.account_id and y.kind = 'person'
      and y.email = lower(s ->> 'email')
    union all
    select y.id from internal.payees y
    where coalesce(s ->> 'email', '') = '' and y.account_id = v.account_id and y.kind = 'account'
  ) p
  group by v.id, p.id;
  -- Splits cleared: the account's own payee takes the whole.
  insert into internal.split_shares (version_id, payee_id, share)
  select v.id, internal.account_payee(v.account_id), 100
  from internal.split_versions v
  join pg_temp.changed_splits c on c.track_id = v.track_id and jsonb_array_length(c.splits) = 0
  where v.id = (select max(id) from internal.split_versions w where w.track_id = v.track_id);
  return null;
end
$$;
create trigger tracks_split_versions_insert after insert on public.tracks
  referencing new table as new_tracks for each statement execute function internal.track_split_versions();
create trigger tracks_split_versions_update after update on public.tracks
  referencing old table as old_tracks new table as new_tracks for each statement
  execute function internal.track_split_versions();

-- The tracks that have splits today get their first version, from the start of time (0001-01).
insert into internal.payees (tenant_id, account_id, kind, email, name, currency)
select distinct on (t.account_id, lower(s ->> 'email')) a.tenant_id, t.account_id, 'person', lower(s ->> 'email'),
  left(s ->> 'name', 300), internal.tenant_currency(a.tenant_id)
from public.tracks t join internal.accounts a on a.id = t.account_id
cross join jsonb_array_elements(t.splits) s
where coalesce(s ->> 'email', '') <> '' and internal.splits_payable(t.splits)
on conflict (account_id, email) where email is not null do nothing;
select internal.account_payee(x.account_id)
from (select distinct account_id from public.tracks where jsonb_array_length(splits) > 0) x;
with versions as (
  insert into internal.split_versions (tenant_id, account_id, track_id, effective_from)
  select a.tenant_id, t.account_id, t.id, date '0001-01-01'
  from public.tracks t join internal.accounts a on a.id = t.account_id
  where jsonb_array_length(t.splits) > 0 and internal.splits_payable(t.splits)
  returning id, track_id, account_id
)
insert into internal.split_shares (version_id, payee_id, share)
select v.id, p.id, sum((s ->> 'share')::numeric)
from versions v join public.tracks t on t.id = v.track_id
cross join jsonb_array_elements(t.splits) s
cross join lateral (
  select y.id from internal.payees y
  where coalesce(s ->> 'email', '') <> '' and y.account_id = v.account_id and y.kind = 'person'
    and y.email = lower(s ->> 'email')
  union all
  select y.id from internal.payees y
  where coalesce(s ->> 'email', '') = '' and y.account_id = v.account_id and y.kind = 'account'
) p
group by v.id, p.id;

-- The ledger's posting period: the first open month from the current one on.
create function internal.posting_period(tenant uuid) returns date
language plpgsql security definer set search_path = ''
as $$
declare
  p date := date_trunc('month', now())::date;
  s text;
begin
  loop
    insert into internal.money_periods (tenant_id, period) values (tenant, p) on conflict do nothing;
    -- Shared: an approval (which locks the period for update) waits for postings, and the other way round.
    select status into s from internal.money_periods where tenant_id = tenant and period = p for share;
    if s = 'open' then
      return p;
    end if;
    p := (p + interval '1 month')::date;
  end loop;
end
$$;

-- Allocation ---------------------------------------------------------------------------------------

-- The fee that applies to a release: the release's, else its account's, else the tenant's, else 0.
create function internal.fee_rate(tenant uuid, account uuid, release uuid) returns numeric
language sql stable security definer set search_path = ''
as $$
  select coalesce((select f.rate from internal.distribution_fees f
    where f.tenant_id = tenant and (f.account_id is null or f.account_id = account)
      and (f.release_id is null or f.release_id = release)
    order by (f.release_id is not null) desc, (f.account_id is not null) desc limit 1), 0)
$$;

-- Posts an import's matched lines into the ledger, in one transaction of the ledger:
--   1. the lines summed per account, release, track, usage month, store, territory and currency;
--   2. the distributor's fee on each sum (exact: net × rate / 100);
--   3. what remains recoups the account's advances and expenses, expenses first, oldest first, from
--      the sums in a fixed order (usage month, release, ISRC, store, territory) — each recoupable
--      reaches only its release's sums unless it is the account's or cross-recouped;
--   4. the rest goes to the payees by the split version of the sum's usage month (exact: the shares
--      total 100 and have four decimals, so the payee amounts add up to the sum to the last digit).
-- Idempotent: an import already allocated posts nothing.
create function internal.allocate_import(import uuid) returns bigint
language plpgsql security definer set search_path = ''
as $$
declare
  tenant uuid;
  txn uuid := gen_random_uuid();
  posting date;
  r record;
  posted bigint;
begin
  select tenant_id into tenant from internal.royalty_imports where id = import;
  if tenant is null then
    raise exception 'no royalty import %', import using errcode = 'P0002';
  end if;
  if exists (select 1 from internal.ledger_entries where import_id = import and txn_kind = 'allocation') then
    return 0;
  end if;
  posting := internal.posting_period(tenant);

  create temporary table alloc_sums on commit drop as
  select row_number() over (order by l.account_id, l.currency, l.period_start, l.release_id, min(l.isrc) nulls first,
      l.track_id, l.store, l.territory nulls first) as n,
    l.account_id, l.release_id, l.track_id, l.period_start as usage_period, l.store, l.territory, l.currency,
    sum(l.net) as net, 0::numeric as fee, 0::numeric as recouped
  from internal.royalty_lines l
  where l.import_id = import and l.account_id is not null and l.reverses_line_id is null
  group by l.account_id, l.release_id, l.track_id, l.period_start, l.store, l.territory, l.currency;

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
    s.usage_period, s.store, s.territory, v.id, s.currency,
    (s.net - s.fee - s.recouped) * sh.share * 0.01, s.fee * sh.share * 0.01, s.recouped * sh.share * 0.01, posting
  from alloc_sums s
  left join lateral (
    select w.id from internal.split_versions w
    where s.track_id is not null and w.track_id = s.track_id
      and (w.store is null or w.store = s.store) and (w.territory is null or w.territory = s.territory)
      and (w.effective_from <= s.usage_period or (w.store is null and w.territory is null))
    order by (w.effective_from <= s.usage_period) desc, (w.store is not null) desc, (w.territory is not null) desc,
      case when w.effective_from <= s.usage_period then s.usage_period - w.effective_from
        else w.effective_from - s.usage_period end, w.id desc
    limit 1
  ) v on true
  cross join lateral (
    select ss.payee_id, ss.share from internal.split_shares ss where ss.version_id = v.id
    union all
    select internal.account_payee(s.account_id), 100::numeric where v.id is null
  ) sh;
  get diagnostics posted = row_count;
  drop table alloc_sums;
  drop table alloc_recoup;
  return posted;
end
$$;

-- A void posts the reversal of every entry the import's allocation posted, in the current
-- posting period (an approved statement never changes: the correction shows in the next one).
create function internal.reverse_allocation(import uuid) returns bigint
language plpgsql security definer set search_path = ''
as $$
declare
  tenant uuid;
  txn uuid := gen_random_uuid();
  posting date;
  posted bigint;
begin
  select tenant_id into tenant from internal.royalty_imports where id = import;
  if exists (select 1 from internal.ledger_entries where import_id = import and txn_kind = 'void') then
    return 0;
  end if;
  posting := internal.posting_period(tenant);
  insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, recoupable_id,
    import_id, release_id, track_id, usage_period, store, territory, split_version_id, currency, amount, fee_amount,
    recouped_amount, period)
  select tenant_id, txn, 'void', holder, account_id, payee_id, recoupable_id, import_id, release_id, track_id,
    usage_period, store, territory, split_version_id, currency, -amount, -fee_amount, -recouped_amount, posting
  from internal.ledger_entries where import_id = import and txn_kind = 'allocation' order by id;
  get diagnostics posted = row_count;
  return posted;
end
$$;

-- An advance or expense: the operator paid it (cash), the account owes it (recoupable).
create function internal.record_recoupable(recoupable uuid) returns void
language plpgsql security definer set search_path = ''
as $$
declare
  c internal.recoupables;
  txn uuid := gen_random_uuid();
begin
  select * into c from internal.recoupables where id = recoupable;
  insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, recoupable_id, release_id,
    currency, amount, period)
  select c.tenant_id, txn, 'recoupable', h.holder, c.account_id, h.rid, c.release_id, c.currency, h.amount,
    internal.posting_period(c.tenant_id)
  from (values ('recoupable', c.id, -c.amount), ('cash', null::uuid, c.amount)) h (holder, rid, amount);
end
$$;

-- Payouts ------------------------------------------------------------------------------------------

-- A payee's available balance in a currency: the sum of their entries (requests already left it).
create function internal.payee_balance(payee uuid, cur char(3)) returns numeric
language sql stable security definer set search_path = ''
as $$ select coalesce(sum(amount), 0) from internal.ledger_entries where payee_id = payee and currency = cur $$;

-- A payee asks to be paid their available balance (rounded down to the currency's minor unit; the
-- rest stays in the balance). Only the payee themself, signed in (at aal2 where the tenant says),
-- with a verified tax form, a payout method, and at least the tenant's threshold.
create function public.request_payout(payee uuid) returns uuid
language plpgsql security definer set search_path = ''
as $$
declare
  p internal.payees;
  s internal.money_settings;
  minor_units integer;
  available numeric;
  amount numeric;
  withheld numeric;
  payout uuid;
  txn uuid := gen_random_uuid();
begin
  if auth.uid() is null then
    raise exception 'a payout is requested by the payee, signed in: not by a key' using errcode = '42501',
      detail = 'payout_needs_person';
  end if;
  select * into p from internal.payees where id = payee and id = any (auth.my_payee_ids()) for update;
  if not found then
    raise exception 'no payee %', payee using errcode = 'P0002', detail = 'not_found';
  end if;
  select * into s from internal.money_settings where tenant_id = p.tenant_id;
  if coalesce(s.payout_requires_aal2, true) and auth.aal() is distinct from 'aal2' then
    raise exception 'requesting a payout needs a second factor: verify with your authenticator first'
      using errcode = '42501', detail = 'aal2_required';
  end if;
  if p.tax_status <> 'verified' then
    raise exception 'a payout needs a verified tax form (W-9, W-8BEN or W-8BEN-E) first' using errcode = '22023',
      detail = 'tax_form_required';
  end if;
  if p.payout_method is null then
    raise exception 'say where to send the money first (a payout method)' using errcode = '22023',
      detail = 'payout_method_required';
  end if;
  if exists (select 1 from internal.payouts o where o.payee_id = p.id and o.status in ('requested', 'approved')) then
    raise exception 'a payout request of this payee is already open' using errcode = '23505', detail = 'payout_open';
  end if;
  available := internal.payee_balance(p.id, p.currency);
  minor_units := internal.minor_units(p.currency);
  -- numeric throughout: 10::numeric ^ n, never the double precision 10 ^ n would be.
  amount := round(floor(available * 10::numeric ^ minor_units) / 10::numeric ^ minor_units, minor_units);
  if amount <= 0 or amount < coalesce(s.payout_threshold, 10) then
    raise exception 'the available balance (% %) is below the payout threshold (% %)', trim_scale(available),
      p.currency, coalesce(s.payout_threshold, 10), p.currency using errcode = '22023', detail = 'below_threshold';
  end if;
  withheld := round(amount * p.withholding_rate / 100, minor_units);
  insert into internal.payouts (tenant_id, account_id, payee_id, currency, amount, withholding, method, requested_by)
  values (p.tenant_id, p.account_id, p.id, p.currency, amount, withheld, p.payout_method, auth.uid())
  returning id into payout;
  insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, payout_id, currency,
    amount, period)
  select p.tenant_id, txn, 'payout_request', h.holder, p.account_id, h.pid, payout, p.currency, h.amount,
    internal.posting_period(p.tenant_id)
  from (values ('payee', p.id, -amount), ('payouts_pending', null::uuid, amount)) h (holder, pid, amount);
  if p.user_id is null then
    update internal.payees set user_id = auth.uid(), claimed_at = now() where id = p.id;
  end if;
  insert into internal.events (tenant_id, account_id, type, data)
  select p.tenant_id, p.account_id, 'payout.requested', jsonb_build_object('object', internal.payout_object(payout));
  return payout;
end
$$;
revoke execute on function public.request_payout(uuid) from public;
grant execute on function public.request_payout(uuid) to authenticated;

-- Settles a payout of a batch: paid (the provider sent it) or failed (the money returns to the
-- payee's balance).
create function internal.settle_payout(payout uuid, outcome text, reason text default null, reference text default null)
returns void
language plpgsql security definer set search_path = ''
as $$
declare
  o internal.payouts;
  txn uuid := gen_random_uuid();
  posting date;
begin
  select * into o from internal.payouts where id = payout for update;
  if o.status <> 'approved' then
    raise exception 'payout % is %, not approved in a batch', payout, o.status using errcode = '55000',
      detail = 'not_settleable';
  end if;
  posting := internal.posting_period(o.tenant_id);
  if outcome = 'paid' then
    update internal.payouts set status = 'paid', settled_at = now(), provider_reference = reference where id = payout;
    insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, payout_id,
      currency, amount, period)
    select o.tenant_id, txn, 'payout_paid', h.holder, o.account_id, null, payout, o.currency, h.amount, posting
    from (values ('payouts_pending', -o.amount), ('cash', o.amount - o.withholding), ('tax_withheld', o.withholding))
      h (holder, amount)
    where h.amount <> 0;
  elsif outcome = 'failed' then
    update internal.payouts set status = 'failed', settled_at = now(), failure_reason = reason where id = payout;
    insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, payout_id,
      currency, amount, period)
    select o.tenant_id, txn, 'payout_failed', h.holder, o.account_id, h.pid, payout, o.currency, h.amount, posting
    from (values ('payouts_pending', null::uuid, -o.amount), ('payee', o.payee_id, o.amount)) h (holder, pid, amount);
  else
    raise exception 'a payout is settled paid or failed, not %', outcome using errcode = '22023';
  end if;
  insert into internal.events (tenant_id, account_id, type, data)
  values (o.tenant_id, o.account_id, 'payout.' || outcome, jsonb_build_object('object', internal.payout_object(payout)));
end
$$;

-- The payout as the public API and the events show it. With the caller's rights (security invoker):
-- a client reads only a payout row security shows them (null otherwise).
create function internal.payout_object(payout uuid) returns jsonb
language sql stable set search_path = ''
as $$
  select jsonb_build_object('id', o.id, 'object', 'payout', 'payee_id', o.payee_id, 'account_id', o.account_id,
    'status', o.status, 'currency', o.currency,
    'amount', round(o.amount, internal.minor_units(o.currency))::text,
    'withholding', round(o.withholding, internal.minor_units(o.currency))::text,
    'net_amount', round(o.net_amount, internal.minor_units(o.currency))::text, 'batch_id', o.batch_id,
    'requested_at', o.requested_at, 'settled_at', o.settled_at, 'failure_reason', o.failure_reason)
  from internal.payouts o where o.id = payout
$$;

-- Currency conversion at a statement's approval: a payee's entries of the period in other
-- currencies move into the payee's currency at the import's rate, else the period's. Exact: the
-- converted amount is amount × rate, unrounded.
create function internal.convert_payee_period(payee uuid, p date) returns void
language plpgsql security definer set search_path = ''
as $$
declare
  y internal.payees;
  txn uuid := gen_random_uuid();
  missing text;
begin
  select * into y from internal.payees where id = payee;
  select string_agg(distinct e.currency, ', ') into missing
  from internal.ledger_entries e
  where e.payee_id = payee and e.period = p and e.currency <> y.currency
    and not exists (select 1 from internal.exchange_rates x where x.tenant_id = y.tenant_id and x.period = p
      and x.from_currency = e.currency and x.to_currency = y.currency and (x.import_id is null or x.import_id = e.import_id));
  if missing is not null then
    raise exception 'no exchange rate from % to % for %', missing, y.currency, to_char(p, 'YYYY-MM')
      using errcode = '22023', detail = 'rate_missing';
  end if;
  insert into internal.ledger_entries (tenant_id, txn_id, txn_kind, holder, account_id, payee_id, import_id, currency,
    amount, period)
  select y.tenant_id, txn, 'conversion', h.holder, y.account_id, h.pid, c.import_id, h.currency, h.amount, p
  from (
    select e.import_id, e.currency, sum(e.amount) as amount,
      (select x.rate from internal.exchange_rates x where x.tenant_id = y.tenant_id and x.period = p
        and x.from_currency = e.currency and x.to_currency = y.currency and (x.import_id is null or x.import_id = e.import_id)
        order by (x.import_id is not null) desc limit 1) as rate
    from internal.ledger_entries e
    where e.payee_id = payee and e.period = p and e.currency <> y.currency and e.txn_kind <> 'conversion'
    group by e.import_id, e.currency
  ) c
  cross join lateral (values
    ('payee', payee, c.currency, -c.amount), ('fx', null::uuid, c.currency, c.amount),
    ('fx', null::uuid, y.currency::bpchar, -(c.amount * c.rate)), ('payee', payee, y.currency::bpchar, c.amount * c.rate)
  ) h (holder, pid, currency, amount)
  where c.amount <> 0;
end
$$;

-- The helpers that bypass row security (security definer) are the database's own and the
-- operator's: account_payee and posting_period write (a payee, a period) for any id they are given,
-- payee_balance and fee_rate read any payee's balance or any tenant's fees. No client role calls
-- them (PostgreSQL grants a new function to PUBLIC: revoked). payout_object runs with the caller's
-- rights, so it shows a client only a payout row security lets them read.
revoke execute on function internal.account_payee(uuid), internal.track_split_versions(),
  internal.allocate_import(uuid), internal.reverse_allocation(uuid), internal.record_recoupable(uuid),
  internal.settle_payout(uuid, text, text, text), internal.convert_payee_period(uuid, date),
  internal.tenant_currency(uuid), internal.posting_period(uuid), internal.fee_rate(uuid, uuid, uuid),
  internal.payee_balance(uuid, char), internal.payout_object(uuid) from public;
grant execute on function internal.allocate_import(uuid), internal.reverse_allocation(uuid),
  internal.record_recoupable(uuid), internal.settle_payout(uuid, text, text, text),
  internal.convert_payee_period(uuid, date), internal.account_payee(uuid), internal.tenant_currency(uuid),
  internal.posting_period(uuid), internal.fee_rate(uuid, uuid, uuid), internal.payee_balance(uuid, char)
  to service_role;
grant execute on function internal.payout_object(uuid) to authenticated, tenant_service, service_role;

-- The new events, for webhook endpoints.
alter table internal.webhook_endpoints drop constraint webhook_endpoints_events_check;
alter table internal.webhook_endpoints add constraint webhook_endpoints_events_check
  check (cardinality(events) between 1 and 20 and events <@ array[
    'release.submitted', 'release.approved', 'release.rejected', 'release.live', 'release.takedown_completed',
    'royalties.imported', 'royalties.voided', 'statement.ready', 'payout.requested', 'payout.paid',
    'payout.failed']::text[]);

-- Keys may carry payouts:read.
alter table internal.api_keys drop constraint api_keys_scopes;
alter table internal.api_keys add constraint api_keys_scopes check (
  scopes <@ array['catalog:read', 'catalog:write', 'royalties:read', 'payouts:read', 'webhooks:manage',
    'keys:manage']::text[]);

-- Statement and payout events carry a payee's money: payouts:read reads them.
create or replace function internal.event_read_scope(event_type text) returns text
language sql immutable set search_path = ''
as $$
  select case
    when event_type like 'royalties.%' then 'royalties:read'
    when event_type like 'statement.%' or event_type like 'payout.%' then 'payouts:read'
    when event_type like 'webhook.%' then 'webhooks:manage'
    else 'catalog:read'
  end
$$;

-- /rest/v1: a payee's own figures, and an account's for its owners and admins, by row security
-- (security_invoker: the caller's rights on the tables below apply).
create view public.payee_balances with (security_invoker = true) as
select e.payee_id, e.account_id, e.currency, trim_scale(sum(e.amount)) as balance, count(*) as entries
from internal.ledger_entries e where e.holder = 'payee'
group by e.payee_id, e.account_id, e.currency;
comment on view public.payee_balances is
  'Each payee''s balance per currency: the sum of their ledger entries, at full precision (docs/payouts.md).';

create view public.statements with (security_invoker = true) as
select s.id, s.account_id, s.payee_id, to_char(s.period, 'YYYY-MM') as period, s.currency, s.opening_balance,
  s.closing_balance, s.document, s.approved_at
from internal.statements s;
comment on view public.statements is 'Approved statements, as approved (docs/payouts.md, "Statements").';

create view public.payouts with (security_invoker = true) as
select o.id, o.account_id, o.payee_id, o.status, o.currency, o.amount, o.withholding, o.net_amount, o.batch_id,
  o.requested_at, o.settled_at, o.failure_reason
from internal.payouts o;
comment on view public.payouts is 'Payout requests and payments (docs/payouts.md, "Payouts").';

create view public.payees with (security_invoker = true) as
select p.id, p.account_id, p.kind, p.name, p.email, p.currency, p.tax_form, p.tax_status, p.created_at
from internal.payees p where p.erased_at is null;
comment on view public.payees is 'Who is paid: the payee themself, and the paying account''s owners and admins, see a payee.';

grant select on public.payee_balances, public.statements, public.payouts, public.payees to authenticated, tenant_service;

-- A split version set by the operator: dated from an earlier (or later) month and optionally for
-- one store or territory. The splits are checked as tracks.splits are (payable, totalling 100).
create function internal.add_split_version(track uuid, effective date, for_store text, for_territory text, splits jsonb)
returns bigint
language plpgsql security definer set search_path = ''
as $$
declare
  t record;
  v bigint;
begin
  select tr.id, tr.account_id, a.tenant_id into t
  from public.tracks tr join internal.accounts a on a.id = tr.account_id where tr.id = track;
  if t.id is null then
    raise exception 'no track %', track using errcode = 'P0002', detail = 'not_found';
  end if;
  if jsonb_array_length(splits) = 0 or not internal.splits_payable(splits) then
    raise exception 'the shares must be more than 0 with at most four decimals, and total exactly 100'
      using errcode = '22023', detail = 'splits_total';
  end if;
  insert into internal.payees (tenant_id, account_id, kind, email, name, currency)
  select distinct on (lower(s ->> 'email')) t.tenant_id, t.account_id, 'person', lower(s ->> 'email'),
    left(s ->> 'name', 300), internal.tenant_currency(t.tenant_id)
  from jsonb_array_elements(splits) s where coalesce(s ->> 'email', '') <> ''
  on conflict (account_id, email) where email is not null do nothing;
  insert into internal.split_versions (tenant_id, account_id, track_id, effective_from, store, territory, source)
  values (t.tenant_id, t.account_id, track, date_trunc('month', effective)::date, for_store, for_territory, 'api')
  returning id into v;
  insert into internal.split_shares (version_id, payee_id, share)
  select v, case when coalesce(s ->> 'email', '') <> '' then p.id else internal.account_payee(t.account_id) end,
    sum((s ->> 'share')::numeric)
  from jsonb_array_elements(splits) s
  left join internal.payees p on p.account_id = t.account_id and p.kind = 'person' and p.email = lower(s ->> 'email')
  group by 2;
  return v;
end
$$;
revoke execute on function internal.add_split_version(uuid, date, text, text, jsonb) from public;
grant execute on function internal.add_split_version(uuid, date, text, text, jsonb) to service_role;
