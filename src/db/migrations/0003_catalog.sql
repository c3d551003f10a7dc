-- The seven tables of the table interface (seed 000), with the columns a real catalog needs.
-- Seed 001's release fields are columns of the same releases table: one catalog, two interfaces.
-- Every row belongs to an account; tracks, takedowns and analytics carry their release's account,
-- and composite foreign keys (x_id, account_id) make a row of one account unable to point at another's.

create function internal.gtin_is_valid(code text) returns boolean
language sql immutable strict
as $$
  select code ~ '^[0-9]{12,14}$'
    and (10 - (select sum(substr(reverse(code), i, 1)::int * (case when i % 2 = 0 then 3 else 1 end))
               from generate_series(2, length(code)) as i) % 10) % 10 = substr(reverse(code), 1, 1)::int
$$;

-- ISO 3166-1 alpha-2 shapes; 'WW' stands for the world. Which codes exist is checked by the API layer.
create function internal.territory_codes_valid(codes text[]) returns boolean
language sql immutable strict
as $$ select coalesce(bool_and(c ~ '^[A-Z]{2}$'), true) from unnest(codes) as c $$;

create table public.artist_profiles (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null references internal.accounts (id) on delete cascade,
  name text not null check (length(btrim(name)) between 1 and 300),
  bio text check (length(bio) <= 10000),
  "streamingA_id" text check (length("streamingA_id") <= 200),
  "streamingB_id" text check (length("streamingB_id") <= 200),
  -- Further store identifiers by store code, e.g. {"deezer": "27"}.
  store_ids jsonb not null default '{}' check (jsonb_typeof(store_ids) = 'object'),
  -- Links to the artist's pages, e.g. {"website": "https://..."}.
  platform_links jsonb not null default '{}' check (jsonb_typeof(platform_links) = 'object'),
  -- The name in other languages or scripts, by BCP 47 tag, e.g. {"ja": "..."}.
  localized_names jsonb not null default '{}' check (jsonb_typeof(localized_names) = 'object'),
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (id, account_id)
);
create index artist_profiles_account on public.artist_profiles (account_id);

create table public.releases (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null references internal.accounts (id) on delete cascade,
  artist_id uuid not null,
  title text not null check (length(btrim(title)) between 1 and 500),
  -- Version of the title, e.g. 'Deluxe Edition', 'Remastered 2024'.
  version text check (length(version) <= 200),
  release_type text not null default 'single'
    check (release_type in ('single', 'ep', 'album', 'compilation', 'mixtape', 'soundtrack')),
  -- The display artist; filled from the artist profile when not given.
  artist_name text check (length(artist_name) <= 500),
  primary_genre text check (length(primary_genre) <= 100),
  secondary_genre text check (length(secondary_genre) <= 100),
  genres text[] not null default '{}',
  release_date date,
  original_release_date date,
  upc text check (internal.gtin_is_valid(upc)),
  label_name text check (length(label_name) <= 300),
  catalog_number text check (length(catalog_number) <= 100),
  -- Seed 001's territory selector: 'WW' (the world) or a comma-separated list of ISO codes.
  licensed_territories_include text check (licensed_territories_include ~ '^(WW|[A-Z]{2}(,[A-Z]{2})*)$'),
  territories text[] not null default '{}' check (internal.territory_codes_valid(territories)),
  territories_exclude text[] not null default '{}' check (internal.territory_codes_valid(territories_exclude)),
  -- Store codes the release goes to (empty: every store the tenant delivers to).
  services text[] not null default '{}',
  -- The (C) line, e.g. '2026 Night Owl Records', and the (P) line for the sound recordings.
  copyright text check (length(copyright) <= 500),
  copyright_year integer check (copyright_year between 1900 and 2200),
  phonographic_copyright text check (length(phonographic_copyright) <= 500),
  phonographic_year integer check (phonographic_year between 1900 and 2200),
  explicit boolean not null default false,
  -- Language of the metadata, BCP 47 (e.g. 'en', 'pt-BR').
  language text check (language ~ '^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$'),
  -- The lifecycle; docs/releases.md draws it. Users move draft/pending/rejected -> submitted;
  -- every later status is the operator's (service_role).
  status text not null default 'draft' check (status in (
    'draft', 'pending', 'submitted', 'in_review', 'approved', 'rejected',
    'delivering', 'delivered', 'live', 'takedown_requested', 'taken_down')),
  -- Why the release is in its status: the rejection reason, a takedown reason.
  status_reason text check (length(status_reason) <= 2000),
  submitted_at timestamptz,
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (id, account_id),
  foreign key (artist_id, account_id) references public.artist_profiles (id, account_id) on delete restrict
);
create index releases_account on public.releases (account_id, created_at desc);
create index releases_artist on public.releases (artist_id);
create index releases_status on public.releases (status) where status not in ('draft', 'pending', 'live', 'taken_down');
create index releases_upc on public.releases (upc) where upc is not null;

create table public.tracks (
  id uuid primary key default gen_random_uuid(),
  release_id uuid not null,
  account_id uuid not null,
  title text not null check (length(btrim(title)) between 1 and 500),
  version text check (length(version) <= 200),
  -- Stored normalised: upper case, no hyphens (CC-XXX-YY-NNNNN is accepted on the way in).
  isrc text check (isrc ~ '^[A-Z]{2}[A-Z0-9]{3}[0-9]{7}$'),
  -- Seconds.
  duration integer check (duration between 1 and 86400),
  track_number integer check (track_number between 1 and 999),
  disc_number integer not null default 1 check (disc_number between 1 and 99),
  -- The display artist when it differs from the release's.
  artist_name text check (length(artist_name) <= 500),
  explicit boolean not null default false,
  language text check (language ~ '^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$'),
  -- [{"name": "...", "role": "composer"}, ...]
  contributors jsonb not null default '[]' check (jsonb_typeof(contributors) = 'array'),
  -- [{"name": "...", "share": "50.00"}, ...]; shares total 100.
  splits jsonb not null default '[]' check (jsonb_typeof(splits) = 'array'),
  -- What the upload validation measured (codec, sample rate, bit depth, channels).
  audio_metadata jsonb not null default '{}' check (jsonb_typeof(audio_metadata) = 'object'),
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (id, account_id),
  unique (id, release_id, account_id),
  -- Deferred to the end of the statement, so tracks can swap numbers in one update.
  constraint tracks_position unique (release_id, disc_number, track_number) deferrable initially immediate,
  foreign key (release_id, account_id) references public.releases (id, account_id) on delete cascade
);
create index tracks_release on public.tracks (release_id);
create index tracks_account on public.tracks (account_id);
create unique index tracks_release_isrc on public.tracks (release_id, isrc) where isrc is not null;
create index tracks_isrc on public.tracks (isrc) where isrc is not null;

create table public.takedown_requests (
  id uuid primary key default gen_random_uuid(),
  release_id uuid not null,
  account_id uuid not null,
  reason text check (length(reason) <= 2000),
  -- pending (by the account) -> processing -> completed, set by the operator's backend;
  -- rejected when the operator refuses it, cancelled when it is withdrawn.
  status text not null default 'pending'
    check (status in ('pending', 'processing', 'completed', 'rejected', 'cancelled')),
  status_reason text check (length(status_reason) <= 2000),
  -- The user who asked for it (null when a public-API key did).
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  completed_at timestamptz,
  foreign key (release_id, account_id) references public.releases (id, account_id) on delete cascade
);
create index takedown_requests_account on public.takedown_requests (account_id, created_at desc);
-- At most one open takedown per release.
create unique index takedown_requests_open on public.takedown_requests (release_id) where status in ('pending', 'processing');

-- Aggregated metrics per release (and per track below) per period and store, filled by royalty
-- imports. Money is numeric and travels as a decimal string; each row is in one currency.
create table public.release_analytics (
  id uuid primary key default gen_random_uuid(),
  release_id uuid not null,
  account_id uuid not null,
  period_start date not null,
  period_end date not null check (period_end >= period_start),
  store text not null,
  streams bigint not null default 0 check (streams >= 0),
  downloads bigint not null default 0 check (downloads >= 0),
  -- Plays of user-generated content that uses the recordings (video platforms).
  ugc_uses bigint not null default 0 check (ugc_uses >= 0),
  revenue numeric(20, 6) not null default 0,
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  updated_at timestamptz not null default now(),
  unique (release_id, period_start, period_end, store, currency),
  foreign key (release_id, account_id) references public.releases (id, account_id) on delete cascade
);
create index release_analytics_account on public.release_analytics (account_id, period_start);

create table public.track_analytics (
  id uuid primary key default gen_random_uuid(),
  track_id uuid not null,
  release_id uuid not null,
  account_id uuid not null,
  period_start date not null,
  period_end date not null check (period_end >= period_start),
  store text not null,
  streams bigint not null default 0 check (streams >= 0),
  downloads bigint not null default 0 check (downloads >= 0),
  ugc_uses bigint not null default 0 check (ugc_uses >= 0),
  revenue numeric(20, 6) not null default 0,
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  updated_at timestamptz not null default now(),
  unique (track_id, period_start, period_end, store, currency),
  -- The release is the track's own, and both are the account's.
  foreign key (track_id, release_id, account_id) references public.tracks (id, release_id, account_id) on delete cascade
);
create index track_analytics_account on public.track_analytics (account_id, period_start);

create table public.notifications (
  id uuid primary key default gen_random_uuid(),
  -- The recipient's tenant, filled from the user; the pair keeps a notification inside its tenant.
  tenant_id uuid not null,
  user_id uuid not null,
  -- The account it is about, if any: of the recipient's tenant.
  account_id uuid,
  -- What happened, e.g. 'release.approved', 'delivery.live', 'takedown.completed' (docs/notifications.md).
  kind text not null check (kind ~ '^[a-z_]+(\.[a-z_]+)*$'),
  title text not null check (length(title) <= 300),
  body text check (length(body) <= 5000),
  -- The objects the notification is about, e.g. {"release_id": "...", "store": "..."}.
  data jsonb not null default '{}' check (jsonb_typeof(data) = 'object'),
  read boolean not null default false,
  read_at timestamptz,
  created_at timestamptz not null default now(),
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade,
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);
create index notifications_user on public.notifications (user_id, created_at desc);
create index notifications_tenant on public.notifications (tenant_id, created_at desc);

-- Privileges. A role may touch only what is granted here; row-level security then decides rows.
-- anon: nothing (every table needs a logged-in user). service_role: everything (default privileges).
-- authenticated and tenant_service (a tenant's own service key) are clients: the same column lists,
-- except that tenant_service may name created_by (a user of its tenant, checked by a trigger) on
-- insert, may write analytics, and may send its users notifications.
-- Column lists for INSERT as well as UPDATE: what the operator sets (status_reason, submitted_at,
-- audio_metadata, completed_at, created_by, timestamps) a client can neither send on create nor
-- change later, and no client can move a row to another account or a track to another release.
grant select, delete on public.artist_profiles to authenticated, tenant_service;
grant insert (id, account_id, name, bio, "streamingA_id", "streamingB_id", store_ids, platform_links, localized_names)
  on public.artist_profiles to authenticated, tenant_service;
grant update (name, bio, "streamingA_id", "streamingB_id", store_ids, platform_links, localized_names)
  on public.artist_profiles to authenticated, tenant_service;

grant select, delete on public.releases to authenticated, tenant_service;
grant insert (id, account_id, artist_id, title, version, release_type, artist_name, primary_genre, secondary_genre,
  genres, release_date, original_release_date, upc, label_name, catalog_number, licensed_territories_include,
  territories, territories_exclude, services, copyright, copyright_year, phonographic_copyright,
  phonographic_year, explicit, language, status)
  on public.releases to authenticated, tenant_service;
grant update (artist_id, title, version, release_type, artist_name, primary_genre, secondary_genre, genres,
  release_date, original_release_date, upc, label_name, catalog_number, licensed_territories_include,
  territories, territories_exclude, services, copyright, copyright_year, phonographic_copyright,
  phonographic_year, explicit, language, status)
  on public.releases to authenticated, tenant_service;

grant select, delete on public.tracks to authenticated, tenant_service;
grant insert (id, release_id, account_id, title, version, isrc, duration, track_number, disc_number, artist_name,
  explicit, language, contributors, splits)
  on public.tracks to authenticated, tenant_service;
grant update (title, version, isrc, duration, track_number, disc_number, artist_name, explicit, language,
  contributors, splits)
  on public.tracks to authenticated, tenant_service;

-- Takedowns are requested by clients and moved on only by the operator's backend.
grant select on public.takedown_requests to authenticated, tenant_service;
grant insert (id, release_id, account_id, reason, status) on public.takedown_requests to authenticated, tenant_service;

-- A tenant's server acts for its users: it may name who a row is for.
grant insert (created_by) on public.artist_profiles, public.releases, public.tracks, public.takedown_requests
  to tenant_service;

grant select on public.release_analytics, public.track_analytics to authenticated;
grant select, insert, update, delete on public.release_analytics, public.track_analytics to tenant_service;

-- A user may mark their notifications read, and change nothing else about them.
grant select on public.notifications to authenticated;
grant update (read) on public.notifications to authenticated;
grant select, delete on public.notifications to tenant_service;
grant insert (id, user_id, account_id, kind, title, body, data) on public.notifications to tenant_service;
grant update (read) on public.notifications to tenant_service;

-- Row-level security: the catalog tables share one shape. A caller reaches the rows of the
-- accounts it may read; writes need an account it may write to; under the owner-only preset
-- only rows the user created. The (select ...) wrappers make PostgreSQL evaluate each helper
-- once per statement instead of once per row.
do $$
declare
  t text;
  visible constant text :=
    'account_id = any ((select auth.readable_account_ids())::uuid[]) and ((select auth.sees_whole_account()) or created_by = (select auth.uid()))';
  writable constant text :=
    'account_id = any ((select auth.writable_account_ids())::uuid[]) and ((select auth.sees_whole_account()) or created_by = (select auth.uid()))';
begin
  foreach t in array array['artist_profiles', 'releases', 'tracks', 'takedown_requests', 'release_analytics', 'track_analytics'] loop
    execute format('create policy %I on public.%I for all to tenant_service using (%s) with check (%s)', t || '_tenant_service', t,
      'account_id = any ((select auth.tenant_account_ids())::uuid[])', 'account_id = any ((select auth.tenant_account_ids())::uuid[])');
  end loop;
  foreach t in array array['artist_profiles', 'releases', 'tracks', 'takedown_requests'] loop
    execute format('alter table public.%I enable row level security', t);
    execute format('create policy %I on public.%I for select to authenticated using (%s)', t || '_select', t, visible);
    execute format('create policy %I on public.%I for insert to authenticated with check (%s)', t || '_insert', t, writable);
    execute format('create policy %I on public.%I for update to authenticated using (%s) with check (%s)', t || '_update', t, writable, writable);
    execute format('create policy %I on public.%I for delete to authenticated using (%s)', t || '_delete', t, writable);
    execute format('create trigger touch_updated_at before update on public.%I for each row execute function internal.touch_updated_at()', t);
  end loop;
  -- Analytics follow their release: under owner-only, only for releases the user can see.
  foreach t in array array['release_analytics', 'track_analytics'] loop
    execute format('alter table public.%I enable row level security', t);
    execute format('create policy %I on public.%I for select to authenticated using (account_id = any ((select auth.readable_account_ids())::uuid[]) and ((select auth.sees_whole_account()) or exists (select 1 from public.releases r where r.id = release_id)))', t || '_select', t);
    execute format('create trigger touch_updated_at before update on public.%I for each row execute function internal.touch_updated_at()', t);
  end loop;
end
$$;

alter table public.notifications enable row level security;
create policy notifications_select on public.notifications for select to authenticated
  using (user_id = (select auth.uid()) and tenant_id = (select auth.tenant_id()));
create policy notifications_update on public.notifications for update to authenticated
  using (user_id = (select auth.uid()) and tenant_id = (select auth.tenant_id()))
  with check (user_id = (select auth.uid()) and tenant_id = (select auth.tenant_id()));
create policy notifications_tenant_service on public.notifications for all to tenant_service
  using (tenant_id = (select auth.tenant_id())) with check (tenant_id = (select auth.tenant_id()));
