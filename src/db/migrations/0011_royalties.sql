-- Royalties (docs/royalties.md): store sales and usage reports imported by the operator, one row
-- per report line, matched to the tenant's tracks (ISRC) and releases (UPC); per-account totals
-- kept up to date for the public API's GET /royalties; and the analytics tables of migration 0003
-- filled from the same imports.
--
-- An import is one transaction: its lines, the totals, the analytics, the royalties.imported
-- events and the notifications land together or not at all. A report with a malformed line is
-- refused whole (the refusal is recorded with the line numbers); a report already imported (same
-- bytes, or the same normalised lines) is refused as a duplicate and counts nothing.

create table internal.royalty_imports (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  -- backline, streaming-monthly or video-ugc (src/royalties/formats/).
  format text not null check (format ~ '^[a-z0-9]+(-[a-z0-9]+)*$'),
  file_name text check (length(file_name) <= 500),
  -- SHA-256 of the file's bytes, and of its normalised lines in order (the same report saved
  -- again with other line endings, quoting or a byte-order mark has the same content hash).
  file_sha256 text not null check (file_sha256 ~ '^[0-9a-f]{64}$'),
  content_sha256 text check (content_sha256 ~ '^[0-9a-f]{64}$'),
  -- The reporting period asked for (--period), the first day of its month; null when the file says.
  reporting_period date,
  -- The store the operator named for formats whose lines do not (streaming-monthly, video-ugc).
  store text,
  -- completed: its lines are counted; rejected: nothing was loaded (errors says why).
  status text not null check (status in ('completed', 'rejected')),
  lines_total bigint not null default 0,
  lines_matched bigint not null default 0,
  lines_unmatched bigint not null default 0,
  -- Malformed lines: [{"line": 12, "message": "..."}], the first 100 (lines_malformed counts all).
  lines_malformed bigint not null default 0,
  errors jsonb not null default '[]' check (jsonb_typeof(errors) = 'array'),
  -- Per currency: [{"currency": "EUR", "lines": 3, "units": "10", "gross": "1.2", "fees": "0.2", "net": "1"}].
  totals jsonb not null default '[]' check (jsonb_typeof(totals) = 'array'),
  period_from date,
  period_to date,
  account_ids uuid[] not null default '{}',
  -- The unmatched identifiers, most lines first (the first 100): [{"isrc": ..., "upc": ..., "lines": 3, "units": "12"}].
  unmatched jsonb not null default '[]' check (jsonb_typeof(unmatched) = 'array'),
  -- Who ran it: cli or admin_api.
  source text not null default 'cli' check (source in ('cli', 'admin_api')),
  started_at timestamptz not null default now(),
  completed_at timestamptz
);
create index royalty_imports_tenant on internal.royalty_imports (tenant_id, started_at desc);
-- A report counts once per tenant.
create unique index royalty_imports_file on internal.royalty_imports (tenant_id, file_sha256) where status = 'completed';
create unique index royalty_imports_content on internal.royalty_imports (tenant_id, content_sha256)
  where status = 'completed' and content_sha256 is not null;

-- One line of a report, normalised. Unmatched lines (no track or release of the tenant carries its
-- ISRC or UPC, or several accounts') keep account_id null: the operator and the tenant's service key
-- see them (the import report), an account's users and keys never.
-- Lines are financial records: they have no foreign key to the catalog (a delivered release cannot
-- be deleted, and the record outlives whatever happens to the catalog).
create table internal.royalty_lines (
  id bigint generated always as identity primary key,
  import_id uuid not null references internal.royalty_imports (id) on delete cascade,
  tenant_id uuid not null,
  account_id uuid,
  release_id uuid,
  track_id uuid,
  -- The line's number in the file (1 = the first line, header and preamble included).
  line_number bigint not null,
  -- When the store reported it, and the month of sale or use it is about (first and last day).
  reporting_period date not null,
  period_start date not null,
  period_end date not null check (period_end >= period_start),
  store text not null check (store ~ '^[a-z0-9]+(_[a-z0-9]+)*$'),
  -- ISO 3166-1 alpha-2; null when the store did not say.
  territory text check (territory ~ '^[A-Z]{2}$'),
  upc text check (upc ~ '^[0-9]{12,14}$'),
  isrc text check (isrc ~ '^[A-Z]{2}[A-Z0-9]{3}[0-9]{7}$'),
  usage_type text not null check (usage_type in ('stream', 'download', 'ugc', 'radio', 'other')),
  units bigint not null check (units >= 0),
  -- Money keeps the store's precision; negative amounts are corrections.
  gross numeric(24, 12) not null,
  fees numeric(24, 12) not null,
  net numeric(24, 12) not null,
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  check ((account_id is null) = (release_id is null)),
  check (track_id is null or release_id is not null)
);
create index royalty_lines_import on internal.royalty_lines (import_id);
create index royalty_lines_account on internal.royalty_lines (account_id, period_start desc, id desc)
  where account_id is not null;

-- The matched lines summed per account, release, month, store, territory and currency: what
-- GET /royalties answers totals and groupings from (its filters are exactly these columns).
create table internal.royalty_totals (
  tenant_id uuid not null,
  account_id uuid not null,
  release_id uuid not null,
  period_start date not null,
  period_end date not null,
  store text not null,
  territory text,
  currency char(3) not null,
  lines bigint not null default 0,
  units bigint not null default 0,
  streams bigint not null default 0,
  downloads bigint not null default 0,
  ugc_uses bigint not null default 0,
  gross numeric(28, 12) not null default 0,
  fees numeric(28, 12) not null default 0,
  net numeric(28, 12) not null default 0,
  updated_at timestamptz not null default now(),
  unique nulls not distinct (account_id, release_id, period_start, period_end, store, territory, currency)
);
create index royalty_totals_account on internal.royalty_totals (account_id, period_start);
create index royalty_totals_release on internal.royalty_totals (release_id, period_start);

-- The analytics tables of migration 0003 gain the money and units an import knows.
-- Money keeps the lines' precision (per-stream amounts have 9 and more decimals), so an analytics
-- row is the exact sum of its lines.
alter table public.release_analytics
  alter column revenue type numeric(28, 12),
  add column gross_revenue numeric(28, 12) not null default 0,
  add column fees numeric(28, 12) not null default 0,
  add column other_units bigint not null default 0 check (other_units >= 0),
  add column royalty_lines bigint not null default 0 check (royalty_lines >= 0);
alter table public.track_analytics
  alter column revenue type numeric(28, 12),
  add column gross_revenue numeric(28, 12) not null default 0,
  add column fees numeric(28, 12) not null default 0,
  add column other_units bigint not null default 0 check (other_units >= 0),
  add column royalty_lines bigint not null default 0 check (royalty_lines >= 0);
comment on column public.release_analytics.revenue is 'Net revenue (after store fees), in currency.';
comment on column public.release_analytics.gross_revenue is 'Gross revenue before store fees, in currency.';
comment on column public.release_analytics.other_units is 'Units of usage types other than streams, downloads and UGC (radio, other).';
comment on column public.release_analytics.royalty_lines is 'How many report lines were summed into the row.';

-- Who reads an account's royalties: a user of the account (as for its catalog), or a key of the
-- account with the royalties:read scope.
create function auth.royalty_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'api_key_id' then coalesce(
      (select array_agg(k.account_id) from internal.api_keys k
        where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid and k.tenant_id = auth.tenant_id()
          and k.status = 'active' and 'royalties:read' = any (k.scopes)
          and k.account_id = any (auth.readable_account_ids())),
      '{}')
    else auth.readable_account_ids()
  end
$$;

alter table internal.royalty_imports enable row level security;
alter table internal.royalty_lines enable row level security;
alter table internal.royalty_totals enable row level security;

-- Clients read; only the operator's import writes. Imports are the operator's records: a tenant's
-- own service key reads its tenant's, clients none (their events and notifications tell them).
grant select on internal.royalty_lines, internal.royalty_totals to authenticated, tenant_service;
grant select on internal.royalty_imports to tenant_service;

-- Under owner-only a user sees the royalties of the releases they can see.
create policy royalty_lines_select on internal.royalty_lines for select to authenticated
  using (account_id = any ((select auth.royalty_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or exists (select 1 from public.releases r where r.id = release_id)));
create policy royalty_totals_select on internal.royalty_totals for select to authenticated
  using (account_id = any ((select auth.royalty_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or exists (select 1 from public.releases r where r.id = release_id)));
create policy royalty_lines_tenant_service on internal.royalty_lines for select to tenant_service
  using (tenant_id = (select auth.tenant_id()));
create policy royalty_totals_tenant_service on internal.royalty_totals for select to tenant_service
  using (tenant_id = (select auth.tenant_id()));
create policy royalty_imports_tenant_service on internal.royalty_imports for select to tenant_service
  using (tenant_id = (select auth.tenant_id()));

-- Analytics now carry revenue: they are read as royalties are (a key needs royalties:read), and
-- under owner-only only for the releases the user can see, as before.
drop policy release_analytics_select on public.release_analytics;
drop policy track_analytics_select on public.track_analytics;
create policy release_analytics_select on public.release_analytics for select to authenticated
  using (account_id = any ((select auth.royalty_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or exists (select 1 from public.releases r where r.id = release_id)));
create policy track_analytics_select on public.track_analytics for select to authenticated
  using (account_id = any ((select auth.royalty_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or exists (select 1 from public.releases r where r.id = release_id)));

-- The import (service_role) tells each affected account's members.
grant execute on function internal.notify_members(uuid, text, text, text, jsonb) to service_role;
