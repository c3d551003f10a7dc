-- Catalogue transfer (issue 40, docs/catalogue.md): a label brings its back catalogue from another
-- distributor, identifiers kept. Each import is recorded (internal.transfers), and each release it
-- created is marked as transferred (internal.transferred_releases) with what the source said that
-- the release's own columns do not hold: the previous distributor's key for it, the stores'
-- product ids, the deals as the source stated them.
--
-- A transferred release is not new: it keeps its original release date, and the tenant's lead
-- time (a release date at least release_lead_days away, internal.release_problems) does not apply
-- to it. Only the operator marks a release as transferred (service_role writes these tables; a
-- client may read its accounts' rows), so no client can opt out of the lead time by itself.

create table internal.transfers (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  -- What was imported: the CSV file's or the folder's name, and which reader read it.
  source text not null check (length(source) <= 1000),
  format text not null check (format in ('csv', 'ern')),
  -- cli, admin
  via text not null default 'cli' check (via in ('cli', 'admin', 'api')),
  -- Counts: releases and tracks created, already there, with problems.
  counts jsonb not null default '{}' check (jsonb_typeof(counts) = 'object'),
  -- Every problem reported, up to a bound the importer keeps ([{where, code, message, severity}]).
  problems jsonb not null default '[]' check (jsonb_typeof(problems) = 'array'),
  created_at timestamptz not null default now(),
  completed_at timestamptz,
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);
create index transfers_account on internal.transfers (account_id, created_at desc);
create index transfers_tenant on internal.transfers (tenant_id, created_at desc);

create table internal.transferred_releases (
  release_id uuid primary key,
  account_id uuid not null,
  transfer_id uuid references internal.transfers (id) on delete set null,
  -- How the source knows the release ('upc:…', 'grid:…', 'proprietary:<namespace>:<id>', 'csv:…'):
  -- the same import twice finds it again by this key (or by its UPC).
  source_key text not null check (length(source_key) <= 1000),
  -- The release's product id in each store (or under the sending party's DPID), by store code.
  store_ids jsonb not null default '{}' check (jsonb_typeof(store_ids) = 'object'),
  -- The tracks' ids, by ISRC, then by store code: {"USS1Z9900001": {"spotify": "…"}}.
  track_store_ids jsonb not null default '{}' check (jsonb_typeof(track_store_ids) = 'object'),
  -- The deals as the source stated them (Backline's own deals are the stores' settings).
  deals jsonb not null default '[]' check (jsonb_typeof(deals) = 'array'),
  transferred_at timestamptz not null default now(),
  unique (account_id, source_key),
  foreign key (release_id, account_id) references public.releases (id, account_id) on delete cascade
);
create index transferred_releases_transfer on internal.transferred_releases (transfer_id);

-- The ISRC rules (migrations 0007 and 0016) look for the same ISRC in the same account on every
-- track written. With only an index on isrc and one on account_id to choose from, a generic plan
-- can take the account's index and read all of its tracks for each new one: a catalogue of 10,000
-- tracks imported into one account then costs 50 million row reads. An index on both makes the
-- lookup one probe whatever the plan.
create index tracks_account_isrc on public.tracks (account_id, isrc);

alter table internal.transfers enable row level security;
alter table internal.transferred_releases enable row level security;

-- A client reads its accounts' transfers and which of their releases came by transfer; nothing
-- else. tenant_service reads its tenant's. service_role (the operator) writes.
grant select on internal.transfers, internal.transferred_releases to authenticated, tenant_service;
grant select, insert, update, delete on internal.transfers, internal.transferred_releases to service_role;

create policy transfers_select on internal.transfers for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[]));
create policy transfers_tenant_service on internal.transfers for select to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]));
create policy transferred_releases_select on internal.transferred_releases for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[]));
create policy transferred_releases_tenant_service on internal.transferred_releases for select to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]));

-- Whether a release came by transfer (for every caller that may see the release).
create function internal.release_transferred(release uuid) returns boolean
language sql stable security definer set search_path = ''
as $$ select exists (select 1 from internal.transferred_releases t where t.release_id = release) $$;
revoke execute on function internal.release_transferred(uuid) from public;
grant execute on function internal.release_transferred(uuid) to authenticated, tenant_service, service_role;

-- The submission checks, less the lead time for a transferred release: whatever the migrations
-- before this one made release_problems, it keeps its grants under a new name.
alter function internal.release_problems(uuid) rename to release_problems_before_transfer;

create function internal.release_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  p jsonb := internal.release_problems_before_transfer(release);
begin
  if p is null or not internal.release_transferred(release) then
    return p;
  end if;
  return coalesce((select jsonb_agg(e order by n) from jsonb_array_elements(p) with ordinality as x(e, n)
                   where not (e ->> 'param' = 'release_date' and e ->> 'code' = 'too_soon')), '[]');
end
$$;
revoke execute on function internal.release_problems(uuid) from public;
grant execute on function internal.release_problems(uuid) to authenticated, tenant_service, service_role;
