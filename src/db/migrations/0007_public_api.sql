-- The public API's ground (issue 5): validation catalogues, API-key lifecycle, sandbox accounts,
-- idempotency records, release completeness, post-delivery metadata corrections, ISRC identity,
-- Official Artist Channel requests and per-store delivery states.

-- Validation catalogues. Territories are ISO 3166-1 alpha-2 (plus XK, Kosovo, which the major
-- stores deliver to); genres and stores are the operator's lists, seeded with the common ones.
-- Everyone may read them (GET /api/public/v1/rules publishes them); only the operator writes.
create table internal.territories (
  code text primary key check (code ~ '^[A-Z]{2}$'),
  name text not null
);

create table internal.genres (
  code text primary key check (code ~ '^[a-z0-9]+(-[a-z0-9]+)*$'),
  name text not null,
  sort integer not null default 0
);

create table internal.stores (
  code text primary key check (code ~ '^[a-z0-9]+(_[a-z0-9]+)*$'),
  name text not null,
  -- What the store does with a release: streaming and downloads, or user-generated content matching.
  kind text not null default 'dsp' check (kind in ('dsp', 'download', 'ugc')),
  -- Disabled stores are not offered and refuse new deliveries.
  enabled boolean not null default true,
  -- Whether artists can ask this store for an Official Artist Channel.
  offers_oac boolean not null default false,
  sort integer not null default 0,
  settings jsonb not null default '{}' check (jsonb_typeof(settings) = 'object'),
  updated_at timestamptz not null default now()
);

insert into internal.territories (code, name) values
  ('AD', 'Andorra'), ('AE', 'United Arab Emirates'), ('AF', 'Afghanistan'), ('AG', 'Antigua & Barbuda'),
  ('AI', 'Anguilla'), ('AL', 'Albania'), ('AM', 'Armenia'), ('AO', 'Angola'), ('AQ', 'Antarctica'),
  ('AR', 'Argentina'), ('AS', 'American Samoa'), ('AT', 'Austria'), ('AU', 'Australia'), ('AW', 'Aruba'),
  ('AX', 'Åland Islands'), ('AZ', 'Azerbaijan'), ('BA', 'Bosnia & Herzegovina'), ('BB', 'Barbados'),
  ('BD', 'Bangladesh'), ('BE', 'Belgium'), ('BF', 'Burkina Faso'), ('BG', 'Bulgaria'), ('BH', 'Bahrain'),
  ('BI', 'Burundi'), ('BJ', 'Benin'), ('BL', 'St. Barthélemy'), ('BM', 'Bermuda'), ('BN', 'Brunei'),
  ('BO', 'Bolivia'), ('BQ', 'Caribbean Netherlands'), ('BR', 'Brazil'), ('BS', 'Bahamas'), ('BT', 'Bhutan'),
  ('BV', 'Bouvet Island'), ('BW', 'Botswana'), ('BY', 'Belarus'), ('BZ', 'Belize'), ('CA', 'Canada'),
  ('CC', 'Cocos (Keeling) Islands'), ('CD', 'Congo - Kinshasa'), ('CF', 'Central African Republic'),
  ('CG', 'Congo - Brazzaville'), ('CH', 'Switzerland'), ('CI', 'Côte d’Ivoire'), ('CK', 'Cook Islands'),
  ('CL', 'Chile'), ('CM', 'Cameroon'), ('CN', 'China'), ('CO', 'Colombia'), ('CR', 'Costa Rica'),
  ('CU', 'Cuba'), ('CV', 'Cape Verde'), ('CW', 'Curaçao'), ('CX', 'Christmas Island'), ('CY', 'Cyprus'),
  ('CZ', 'Czechia'), ('DE', 'Germany'), ('DJ', 'Djibouti'), ('DK', 'Denmark'), ('DM', 'Dominica'),
  ('DO', 'Dominican Republic'), ('DZ', 'Algeria'), ('EC', 'Ecuador'), ('EE', 'Estonia'), ('EG', 'Egypt'),
  ('EH', 'Western Sahara'), ('ER', 'Eritrea'), ('ES', 'Spain'), ('ET', 'Ethiopia'), ('FI', 'Finland'),
  ('FJ', 'Fiji'), ('FK', 'Falkland Islands'), ('FM', 'Micronesia'), ('FO', 'Faroe Islands'), ('FR', 'France'),
  ('GA', 'Gabon'), ('GB', 'United Kingdom'), ('GD', 'Grenada'), ('GE', 'Georgia'), ('GF', 'French Guiana'),
  ('GG', 'Guernsey'), ('GH', 'Ghana'), ('GI', 'Gibraltar'), ('GL', 'Greenland'), ('GM', 'Gambia'),
  ('GN', 'Guinea'), ('GP', 'Guadeloupe'), ('GQ', 'Equatorial Guinea'), ('GR', 'Greece'),
  ('GS', 'South Georgia & South Sandwich Islands'), ('GT', 'Guatemala'), ('GU', 'Guam'),
  ('GW', 'Guinea-Bissau'), ('GY', 'Guyana'), ('HK', 'Hong Kong SAR China'), ('HM', 'Heard & McDonald Islands'),
  ('HN', 'Honduras'), ('HR', 'Croatia'), ('HT', 'Haiti'), ('HU', 'Hungary'), ('ID', 'Indonesia'),
  ('IE', 'Ireland'), ('IL', 'Israel'), ('IM', 'Isle of Man'), ('IN', 'India'),
  ('IO', 'British Indian Ocean Territory'), ('IQ', 'Iraq'), ('IR', 'Iran'), ('IS', 'Iceland'), ('IT', 'Italy'),
  ('JE', 'Jersey'), ('JM', 'Jamaica'), ('JO', 'Jordan'), ('JP', 'Japan'), ('KE', 'Kenya'),
  ('KG', 'Kyrgyzstan'), ('KH', 'Cambodia'), ('KI', 'Kiribati'), ('KM', 'Comoros'), ('KN', 'St. Kitts & Nevis'),
  ('KP', 'North Korea'), ('KR', 'South Korea'), ('KW', 'Kuwait'), ('KY', 'Cayman Islands'),
  ('KZ', 'Kazakhstan'), ('LA', 'Laos'), ('LB', 'Lebanon'), ('LC', 'St. Lucia'), ('LI', 'Liechtenstein'),
  ('LK', 'Sri Lanka'), ('LR', 'Liberia'), ('LS', 'Lesotho'), ('LT', 'Lithuania'), ('LU', 'Luxembourg'),
  ('LV', 'Latvia'), ('LY', 'Libya'), ('MA', 'Morocco'), ('MC', 'Monaco'), ('MD', 'Moldova'),
  ('ME', 'Montenegro'), ('MF', 'St. Martin'), ('MG', 'Madagascar'), ('MH', 'Marshall Islands'),
  ('MK', 'North Macedonia'), ('ML', 'Mali'), ('MM', 'Myanmar (Burma)'), ('MN', 'Mongolia'),
  ('MO', 'Macao SAR China'), ('MP', 'Northern Mariana Islands'), ('MQ', 'Martinique'), ('MR', 'Mauritania'),
  ('MS', 'Montserrat'), ('MT', 'Malta'), ('MU', 'Mauritius'), ('MV', 'Maldives'), ('MW', 'Malawi'),
  ('MX', 'Mexico'), ('MY', 'Malaysia'), ('MZ', 'Mozambique'), ('NA', 'Namibia'), ('NC', 'New Caledonia'),
  ('NE', 'Niger'), ('NF', 'Norfolk Island'), ('NG', 'Nigeria'), ('NI', 'Nicaragua'), ('NL', 'Netherlands'),
  ('NO', 'Norway'), ('NP', 'Nepal'), ('NR', 'Nauru'), ('NU', 'Niue'), ('NZ', 'New Zealand'), ('OM', 'Oman'),
  ('PA', 'Panama'), ('PE', 'Peru'), ('PF', 'French Polynesia'), ('PG', 'Papua New Guinea'),
  ('PH', 'Philippines'), ('PK', 'Pakistan'), ('PL', 'Poland'), ('PM', 'St. Pierre & Miquelon'),
  ('PN', 'Pitcairn Islands'), ('PR', 'Puerto Rico'), ('PS', 'Palestinian Territories'), ('PT', 'Portugal'),
  ('PW', 'Palau'), ('PY', 'Paraguay'), ('QA', 'Qatar'), ('RE', 'Réunion'), ('RO', 'Romania'), ('RS', 'Serbia'),
  ('RU', 'Russia'), ('RW', 'Rwanda'), ('SA', 'Saudi Arabia'), ('SB', 'Solomon Islands'), ('SC', 'Seychelles'),
  ('SD', 'Sudan'), ('SE', 'Sweden'), ('SG', 'Singapore'), ('SH', 'St. Helena'), ('SI', 'Slovenia'),
  ('SJ', 'Svalbard & Jan Mayen'), ('SK', 'Slovakia'), ('SL', 'Sierra Leone'), ('SM', 'San Marino'),
  ('SN', 'Senegal'), ('SO', 'Somalia'), ('SR', 'Suriname'), ('SS', 'South Sudan'),
  ('ST', 'São Tomé & Príncipe'), ('SV', 'El Salvador'), ('SX', 'Sint Maarten'), ('SY', 'Syria'),
  ('SZ', 'Eswatini'), ('TC', 'Turks & Caicos Islands'), ('TD', 'Chad'), ('TF', 'French Southern Territories'),
  ('TG', 'Togo'), ('TH', 'Thailand'), ('TJ', 'Tajikistan'), ('TK', 'Tokelau'), ('TL', 'Timor-Leste'),
  ('TM', 'Turkmenistan'), ('TN', 'Tunisia'), ('TO', 'Tonga'), ('TR', 'Türkiye'), ('TT', 'Trinidad & Tobago'),
  ('TV', 'Tuvalu'), ('TW', 'Taiwan'), ('TZ', 'Tanzania'), ('UA', 'Ukraine'), ('UG', 'Uganda'),
  ('UM', 'U.S. Outlying Islands'), ('US', 'United States'), ('UY', 'Uruguay'), ('UZ', 'Uzbekistan'),
  ('VA', 'Vatican City'), ('VC', 'St. Vincent & Grenadines'), ('VE', 'Venezuela'),
  ('VG', 'British Virgin Islands'), ('VI', 'U.S. Virgin Islands'), ('VN', 'Vietnam'), ('VU', 'Vanuatu'),
  ('WF', 'Wallis & Futuna'), ('WS', 'Samoa'), ('XK', 'Kosovo'), ('YE', 'Yemen'), ('YT', 'Mayotte'),
  ('ZA', 'South Africa'), ('ZM', 'Zambia'), ('ZW', 'Zimbabwe');

insert into internal.genres (code, name, sort) values
  ('alternative', 'Alternative', 10), ('ambient', 'Ambient', 20), ('afrobeats', 'Afrobeats', 30),
  ('blues', 'Blues', 40), ('childrens-music', 'Children''s Music', 50), ('christian-gospel', 'Christian & Gospel', 60),
  ('classical', 'Classical', 70), ('comedy', 'Comedy', 80), ('country', 'Country', 90), ('dance', 'Dance', 100),
  ('easy-listening', 'Easy Listening', 110), ('electronic', 'Electronic', 120), ('experimental', 'Experimental', 130),
  ('fitness-workout', 'Fitness & Workout', 140), ('folk', 'Folk', 150), ('hip-hop-rap', 'Hip-Hop/Rap', 160),
  ('holiday', 'Holiday', 170), ('house', 'House', 180), ('indie', 'Indie', 190), ('instrumental', 'Instrumental', 200),
  ('j-pop', 'J-Pop', 210), ('jazz', 'Jazz', 220), ('k-pop', 'K-Pop', 230), ('latin', 'Latin', 240),
  ('lo-fi', 'Lo-Fi', 250), ('metal', 'Metal', 260), ('new-age', 'New Age', 270), ('pop', 'Pop', 280),
  ('punk', 'Punk', 290), ('reggae', 'Reggae', 300), ('reggaeton', 'Reggaeton', 310), ('rnb-soul', 'R&B/Soul', 320),
  ('rock', 'Rock', 330), ('singer-songwriter', 'Singer/Songwriter', 340), ('soundtrack', 'Soundtrack', 350),
  ('spoken-word', 'Spoken Word', 360), ('techno', 'Techno', 370), ('world', 'World', 380);

insert into internal.stores (code, name, kind, offers_oac, sort) values
  ('spotify', 'Spotify', 'dsp', false, 10),
  ('apple_music', 'Apple Music', 'dsp', false, 20),
  ('itunes', 'iTunes Store', 'download', false, 30),
  ('amazon_music', 'Amazon Music', 'dsp', false, 40),
  ('youtube_music', 'YouTube Music', 'dsp', true, 50),
  ('youtube_content_id', 'YouTube Content ID', 'ugc', false, 60),
  ('deezer', 'Deezer', 'dsp', false, 70),
  ('tidal', 'TIDAL', 'dsp', false, 80),
  ('tiktok', 'TikTok', 'ugc', false, 90),
  ('meta', 'Facebook & Instagram', 'ugc', false, 100),
  ('soundcloud', 'SoundCloud', 'dsp', false, 110),
  ('pandora', 'Pandora', 'dsp', false, 120),
  ('iheartradio', 'iHeartRadio', 'dsp', false, 130),
  ('anghami', 'Anghami', 'dsp', false, 140),
  ('boomplay', 'Boomplay', 'dsp', false, 150),
  ('audiomack', 'Audiomack', 'dsp', false, 160),
  ('netease', 'NetEase Cloud Music', 'dsp', false, 170),
  ('jiosaavn', 'JioSaavn', 'dsp', false, 180),
  ('beatport', 'Beatport', 'download', false, 190);

do $$
declare
  t text;
begin
  foreach t in array array['territories', 'genres', 'stores'] loop
    execute format('alter table internal.%I enable row level security', t);
    execute format('create policy %I on internal.%I for select to anon, authenticated, tenant_service using (true)', t || '_read', t);
    execute format('grant select on internal.%I to anon, authenticated, tenant_service', t);
  end loop;
end
$$;
create trigger touch_updated_at before update on internal.stores for each row execute function internal.touch_updated_at();

-- Sandbox accounts: test-mode API keys act on the sandbox twin of a live account, whose releases
-- go through the pipeline against simulated stores only.
alter table internal.accounts add column sandbox_of uuid unique;
alter table internal.accounts add constraint accounts_sandbox_of
  foreign key (tenant_id, sandbox_of) references internal.accounts (tenant_id, id) on delete cascade;
alter table internal.accounts add constraint accounts_sandbox_twin check (sandbox_of is null or is_sandbox);

-- API-key lifecycle (docs/public-api.md, "API keys"): a key is created pending_reveal with no
-- secret at all; the secret is generated when the account owner's e-mailed code is entered, shown
-- once, and only its hash kept. Frozen keys can be unfrozen; revoked is final.
alter table internal.api_keys alter column key_hash drop not null;
alter table internal.api_keys add column reveal_code_hash text;
alter table internal.api_keys add column reveal_code_expires_at timestamptz;
alter table internal.api_keys add column reveal_attempts integer not null default 0;
alter table internal.api_keys add constraint api_keys_secret check (key_hash is not null or status in ('pending_reveal', 'revoked'));
alter table internal.api_keys add constraint api_keys_scopes check (
  scopes <@ array['catalog:read', 'catalog:write', 'royalties:read', 'webhooks:manage', 'keys:manage']::text[]);

-- Who may manage an account's keys: its owners and admins (the account's sandbox twin too), or a
-- key with keys:manage (its own account).
create function auth.manageable_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'account_id' then coalesce(
      (select array_agg(a.id) from internal.accounts a
        where a.id = nullif(auth.jwt() ->> 'account_id', '')::uuid and a.tenant_id = auth.tenant_id()
          and auth.jwt() ->> 'account_role' in ('owner', 'admin')),
      '{}')
    else coalesce(
      (select array_agg(a.id) from internal.memberships m
        join internal.accounts a on a.id = m.account_id or a.sandbox_of = m.account_id
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin')),
      '{}')
  end
$$;

-- The accounts the caller manages that are live (not sandbox twins): where a new key goes by default.
create function auth.manageable_live_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select coalesce((select array_agg(a.id order by a.created_at, a.id) from internal.accounts a
    where a.id = any (auth.manageable_account_ids()) and not a.is_sandbox), '{}')
$$;

grant select (id, tenant_id, account_id, name, mode, prefix, scopes, account_role, status, expires_at, last_used_at,
  revealed_at, frozen_at, revoked_at, created_by, created_at, updated_at) on internal.api_keys to authenticated;
grant insert (id, account_id, name, scopes, expires_at) on internal.api_keys to authenticated;
grant update (name, status) on internal.api_keys to authenticated;
create policy api_keys_manage on internal.api_keys for all to authenticated
  using (account_id = any ((select auth.manageable_account_ids())::uuid[]))
  with check (account_id = any ((select auth.manageable_account_ids())::uuid[]));

-- Runs as the owner to read the account; a client is told apart by its request's role.
-- A client's key takes its tenant, mode and role from its account and scopes; status moves only
-- active <-> frozen and anything -> revoked (pending_reveal -> active is the reveal's, below).
create function internal.api_key_rules() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if tg_op = 'INSERT' then
    select a.tenant_id, case when a.is_sandbox then 'test' else 'live' end
      into new.tenant_id, new.mode
      from internal.accounts a where a.id = new.account_id;
    new.prefix := coalesce(new.prefix, 'bk_' || new.mode || '_');
    new.account_role := case
      when 'keys:manage' = any (new.scopes) then 'admin'
      when 'catalog:write' = any (new.scopes) then 'member'
      else 'viewer' end;
    if auth.role() in ('anon', 'authenticated', 'tenant_service') then
      new.status := 'pending_reveal';
      new.key_hash := null;
      new.created_by := auth.uid();
    end if;
    return new;
  end if;
  if new.status is distinct from old.status then
    if auth.role() in ('anon', 'authenticated', 'tenant_service') and not (
      (old.status = 'active' and new.status = 'frozen') or (old.status = 'frozen' and new.status = 'active')
      or (old.status <> 'revoked' and new.status = 'revoked')) then
      perform internal.refuse('BL002', format('an API key cannot move from %s to %s', old.status, new.status),
        jsonb_build_object('from', old.status, 'to', new.status)::text,
        'Freeze and unfreeze an active key, or revoke it; a key is activated by revealing it.');
    end if;
    new.frozen_at := case when new.status = 'frozen' then now() end;
    if new.status = 'revoked' then
      new.revoked_at := now();
      new.reveal_code_hash := null;
    end if;
  end if;
  return new;
end
$$;
create trigger api_key_rules before insert or update on internal.api_keys
  for each row execute function internal.api_key_rules();
-- Revealed keys are found by hash on every request.
create index api_keys_account_created on internal.api_keys (account_id, created_at desc);

-- Idempotency-Key records for POST requests of the public API, per account (or user), method and path
-- (docs/public-api.md, "Idempotent requests"); kept 24 hours. Only the server's own path touches them.
create table internal.idempotency_keys (
  -- Whose key: 'account:<uuid>' for an API key's account, 'user:<uuid>' for a signed-in user.
  owner text not null,
  method text not null,
  path text not null,
  key text not null check (length(key) between 1 and 255),
  request_hash text not null,
  status text not null default 'running' check (status in ('running', 'done')),
  -- A running request that has not finished by then is taken to have died and may be retried.
  locked_until timestamptz not null,
  response_status integer,
  response_body jsonb,
  response_headers jsonb,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null default now() + interval '24 hours',
  primary key (owner, method, path, key)
);
create index idempotency_keys_expires on internal.idempotency_keys (expires_at);
alter table internal.idempotency_keys enable row level security;

-- Delivery records: one per release, store and action, written by the delivery pipeline (the
-- operator's backend) and read by GET /releases/{id}/status, whose per-store state is the latest
-- record of each store. action: insert (first delivery), update (a metadata correction),
-- takedown; status: pending -> in_progress -> delivered -> live, or error (retried).
create table internal.release_deliveries (
  id uuid primary key default gen_random_uuid(),
  release_id uuid not null,
  account_id uuid not null,
  store text not null references internal.stores (code),
  action text not null default 'insert' check (action in ('insert', 'update', 'takedown')),
  status text not null default 'pending' check (status in ('pending', 'in_progress', 'delivered', 'live', 'error')),
  message text check (length(message) <= 2000),
  -- The store's own id for the delivery or the product, once it answers.
  store_reference text,
  attempts integer not null default 0 check (attempts >= 0),
  -- For an update: the release's correction it carries (internal.release_corrections.version).
  correction_version integer,
  delivered_at timestamptz,
  live_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (release_id, account_id) references public.releases (id, account_id) on delete cascade
);
create index release_deliveries_release on internal.release_deliveries (release_id, store, created_at desc);
-- At most one unfinished delivery per release, store and action.
create unique index release_deliveries_open on internal.release_deliveries (release_id, store, action)
  where status in ('pending', 'in_progress', 'error');
create index release_deliveries_account on internal.release_deliveries (account_id);
alter table internal.release_deliveries enable row level security;
grant select on internal.release_deliveries to authenticated, tenant_service;
create policy release_deliveries_select on internal.release_deliveries for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or exists (select 1 from public.releases r where r.id = release_id)));
create policy release_deliveries_tenant_service on internal.release_deliveries for select to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]));
create trigger touch_updated_at before update on internal.release_deliveries
  for each row execute function internal.touch_updated_at();

-- Whether the caller (a client, or the operator's service_role) may see release `r`.
create function internal.release_visible(r public.releases) returns boolean
language sql stable security definer set search_path = ''
as $$
  select auth.role() = 'service_role'
    or (auth.role() = 'tenant_service' and r.account_id = any (auth.tenant_account_ids()))
    or (r.account_id = any (auth.readable_account_ids()) and (auth.sees_whole_account() or r.created_by = auth.uid()))
$$;

-- Whether the caller may change release `r` as its account does (the releases_update policy's test).
create function internal.release_writable(r public.releases) returns boolean
language sql stable security definer set search_path = ''
as $$
  select auth.role() = 'service_role'
    or (auth.role() = 'tenant_service' and r.account_id = any (auth.tenant_account_ids()))
    or (r.account_id = any (auth.writable_account_ids()) and (auth.sees_whole_account() or r.created_by = auth.uid()))
$$;

-- Everything that keeps a release from being submitted, all at once, as
-- [{"param": ..., "code": ..., "message": ...}]. The public API's submit refuses a release with
-- problems (422); the review job (issue 6) rejects a release submitted through /rest/v1 with them.
-- Null when the caller cannot see the release.
create function internal.release_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  r public.releases;
  problems jsonb := '[]';
  lead_days integer;
  earliest date;
  item text;
  effective integer;
  n_tracks integer := 0;
  t record;
  share_total numeric;
begin
  select * into r from public.releases where id = release;
  if not found or not internal.release_visible(r) then
    return null;
  end if;

  -- Dates: a release date at least the tenant's lead time away.
  select coalesce(o.release_lead_days, 7) into lead_days
    from internal.accounts a left join internal.organization_settings o on o.tenant_id = a.tenant_id
    where a.id = r.account_id;
  earliest := current_date + coalesce(lead_days, 7);
  if r.release_date is null then
    problems := problems || jsonb_build_object('param', 'release_date', 'code', 'required',
      'message', 'release_date is required to submit');
  elsif r.release_date < earliest then
    problems := problems || jsonb_build_object('param', 'release_date', 'code', 'too_soon',
      'message', format('release_date %s is earlier than %s, the earliest date allowed (%s days'' lead time)',
        r.release_date, earliest, lead_days));
  end if;

  -- Genres from the catalogue.
  if r.primary_genre is null then
    problems := problems || jsonb_build_object('param', 'primary_genre', 'code', 'required',
      'message', 'primary_genre is required to submit');
  elsif not exists (select 1 from internal.genres g where g.code = r.primary_genre) then
    problems := problems || jsonb_build_object('param', 'primary_genre', 'code', 'invalid_genre',
      'message', format('primary_genre %s is not a known genre', r.primary_genre));
  end if;
  if r.secondary_genre is not null and not exists (select 1 from internal.genres g where g.code = r.secondary_genre) then
    problems := problems || jsonb_build_object('param', 'secondary_genre', 'code', 'invalid_genre',
      'message', format('secondary_genre %s is not a known genre', r.secondary_genre));
  end if;
  foreach item in array r.genres loop
    if not exists (select 1 from internal.genres g where g.code = item) then
      problems := problems || jsonb_build_object('param', 'genres', 'code', 'invalid_genre',
        'message', format('genre %s is not a known genre', item));
    end if;
  end loop;

  -- Territories: every code known, and somewhere left to sell.
  foreach item in array coalesce(string_to_array(nullif(r.licensed_territories_include, 'WW'), ','), '{}')
    || r.territories || r.territories_exclude loop
    if not exists (select 1 from internal.territories x where x.code = item) then
      problems := problems || jsonb_build_object('param', 'territories', 'code', 'invalid_territory',
        'message', format('territory %s is not an ISO 3166-1 alpha-2 code', item));
    end if;
  end loop;
  select count(*) into effective from internal.territories x
    where (r.licensed_territories_include = 'WW'
        or x.code = any (string_to_array(r.licensed_territories_include, ','))
        or x.code = any (r.territories))
      and x.code <> all (r.territories_exclude);
  if effective = 0 then
    problems := problems || jsonb_build_object('param', 'licensed_territories_include', 'code', 'no_territories',
      'message', 'the release is licensed for no territory: set licensed_territories_include (WW for the world) or territories');
  end if;

  -- Stores: every one known and enabled (none named: every enabled store).
  foreach item in array r.services loop
    if not exists (select 1 from internal.stores s where s.code = item and s.enabled) then
      problems := problems || jsonb_build_object('param', 'services', 'code', 'invalid_service',
        'message', format('service %s is not a store this platform delivers to', item));
    end if;
  end loop;

  -- Tracks: at least one; each with its ISRC, its position, and splits that add up.
  for t in
    select tr.*, row_number() over (order by tr.disc_number, tr.track_number nulls last, tr.created_at, tr.id) - 1 as idx
    from public.tracks tr where tr.release_id = r.id
    order by idx
  loop
    n_tracks := n_tracks + 1;
    if t.isrc is null then
      problems := problems || jsonb_build_object('param', format('tracks[%s].isrc', t.idx), 'code', 'required',
        'message', format('track %s (%s) has no ISRC', t.idx + 1, t.title));
    end if;
    if t.track_number is null then
      problems := problems || jsonb_build_object('param', format('tracks[%s].track_number', t.idx), 'code', 'required',
        'message', format('track %s (%s) has no track_number', t.idx + 1, t.title));
    end if;
    if jsonb_array_length(t.splits) > 0 then
      select coalesce(sum(case when jsonb_typeof(s -> 'share') in ('number', 'string')
                                and (s ->> 'share') ~ '^[0-9]+(\.[0-9]+)?$' then (s ->> 'share')::numeric end), 0)
        into share_total from jsonb_array_elements(t.splits) s;
      if share_total <> 100 then
        problems := problems || jsonb_build_object('param', format('tracks[%s].splits', t.idx), 'code', 'splits_total',
          'message', format('the splits of track %s (%s) total %s%%, not 100%%', t.idx + 1, t.title, share_total));
      end if;
    end if;
  end loop;
  if n_tracks = 0 then
    problems := problems || jsonb_build_object('param', 'tracks', 'code', 'no_tracks',
      'message', 'a release needs at least one track');
  elsif r.release_type = 'single' and n_tracks > 3 then
    problems := problems || jsonb_build_object('param', 'release_type', 'code', 'too_many_tracks',
      'message', format('a single has at most 3 tracks, this one has %s: make it an ep or album', n_tracks));
  end if;
  return problems;
end
$$;
revoke execute on function internal.release_problems(uuid) from public;
grant execute on function internal.release_problems(uuid) to authenticated, tenant_service, service_role;

-- How many times each delivered release was corrected: update deliveries carry the version they
-- send, so a correction made while one is on its way is sent again (src/pipeline/delivery.ts).
create table internal.release_corrections (
  release_id uuid primary key references public.releases (id) on delete cascade,
  version integer not null default 1,
  corrected_at timestamptz not null default now()
);
alter table internal.release_corrections enable row level security;

-- Post-delivery metadata corrections (PATCH /api/public/v1/releases/{id}/metadata): a delivered
-- or live release takes new display metadata, and an update delivery is queued for its stores.
-- Runs as the owner because the release is closed to its account's ordinary edits; it checks
-- the caller's write access itself. Null when the caller cannot write to the release.
create function internal.correct_release_metadata(release uuid, changes jsonb) returns public.releases
language plpgsql security definer set search_path = ''
as $$
declare
  allowed constant text[] := array['title', 'version', 'artist_name', 'primary_genre', 'secondary_genre', 'genres',
    'label_name', 'copyright', 'copyright_year', 'phonographic_copyright', 'phonographic_year', 'explicit',
    'language', 'original_release_date'];
  r public.releases;
  n public.releases;
  bad text;
begin
  -- Access first, the row lock only for a caller who may change it.
  select * into r from public.releases where id = release;
  if not found or not internal.release_writable(r) then
    return null;
  end if;
  select * into r from public.releases where id = release for update;
  select k into bad from jsonb_object_keys(changes) k where k <> all (allowed) limit 1;
  if bad is not null then
    raise exception using errcode = '42501', column = bad,
      message = format('%s is not a metadata field that can be corrected after delivery', bad);
  end if;
  if r.status not in ('delivered', 'live') then
    perform internal.refuse('BL005',
      format('release %s is %s; metadata corrections are for delivered and live releases', r.id, r.status),
      jsonb_build_object('release_id', r.id, 'status', r.status)::text,
      'Edit a draft, pending or rejected release directly.');
  end if;
  n := jsonb_populate_record(r, changes);
  update public.releases set title = n.title, version = n.version, artist_name = n.artist_name,
      primary_genre = n.primary_genre, secondary_genre = n.secondary_genre, genres = n.genres,
      label_name = n.label_name, copyright = n.copyright, copyright_year = n.copyright_year,
      phonographic_copyright = n.phonographic_copyright, phonographic_year = n.phonographic_year,
      explicit = n.explicit, language = n.language, original_release_date = n.original_release_date
    where id = r.id returning * into r;
  insert into internal.release_corrections as c (release_id) values (r.id)
  on conflict (release_id) do update set version = c.version + 1, corrected_at = now();
  insert into internal.jobs (kind, payload, dedupe_key)
  values ('release.update_delivery', jsonb_build_object('release_id', r.id), r.id::text)
  on conflict (kind, dedupe_key) where dedupe_key is not null and status in ('queued', 'running') do nothing;
  return r;
end
$$;
revoke execute on function internal.correct_release_metadata(uuid, jsonb) from public;
grant execute on function internal.correct_release_metadata(uuid, jsonb) to authenticated, tenant_service, service_role;

-- An ISRC names one recording: within an account it may appear on several releases (the single
-- and the album), but only for the same recording (same title and version). Runs after
-- track_rules (triggers fire by name), so the code is normalised before the table's check.
create function internal.track_isrc_rules() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  other record;
begin
  if new.isrc is null then
    return new;
  end if;
  -- Spaces are forgiven as hyphens are (migration 0005 strips only hyphens).
  new.isrc := upper(regexp_replace(new.isrc, '[\s-]', '', 'g'));
  perform pg_advisory_xact_lock(hashtextextended(new.account_id::text || ':' || new.isrc, 0));
  select t.id, t.title, t.version, t.release_id into other from public.tracks t
    where t.account_id = new.account_id and t.isrc = new.isrc and t.id <> new.id
      and (lower(btrim(t.title)) <> lower(btrim(new.title))
        or coalesce(lower(btrim(t.version)), '') <> coalesce(lower(btrim(new.version)), ''))
    limit 1;
  if found then
    perform internal.refuse('BL006',
      format('ISRC %s already identifies another recording in this account (%s)', new.isrc, other.title),
      jsonb_build_object('isrc', new.isrc, 'track_id', other.id, 'release_id', other.release_id)::text,
      'An ISRC is one recording: reuse it only for the same title and version, or use a new ISRC.');
  end if;
  return new;
end
$$;
create trigger track_rules_isrc before insert or update of isrc, title, version on public.tracks
  for each row execute function internal.track_isrc_rules();

-- Official Artist Channel requests (seed 001): per artist, once it has a delivered release.
create table internal.oac_requests (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null,
  artist_id uuid not null,
  store text not null default 'youtube_music' references internal.stores (code),
  -- The artist's existing channel(s) to merge into the official one.
  channel_url text check (channel_url ~ '^https://[^\s]+$' and length(channel_url) <= 500),
  note text check (length(note) <= 2000),
  -- requested -> processing -> approved | rejected, set by the operator; cancelled when withdrawn.
  status text not null default 'requested' check (status in ('requested', 'processing', 'approved', 'rejected', 'cancelled')),
  status_reason text check (length(status_reason) <= 2000),
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  completed_at timestamptz,
  foreign key (artist_id, account_id) references public.artist_profiles (id, account_id) on delete cascade
);
create index oac_requests_artist on internal.oac_requests (artist_id, created_at desc);
create unique index oac_requests_open on internal.oac_requests (artist_id, store) where status in ('requested', 'processing');
alter table internal.oac_requests enable row level security;
grant select on internal.oac_requests to authenticated, tenant_service;
grant insert (id, account_id, artist_id, store, channel_url, note) on internal.oac_requests to authenticated, tenant_service;
create policy oac_requests_select on internal.oac_requests for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or created_by = (select auth.uid())));
create policy oac_requests_insert on internal.oac_requests for insert to authenticated
  with check (account_id = any ((select auth.writable_account_ids())::uuid[])
    and ((select auth.sees_whole_account()) or created_by = (select auth.uid())));
create policy oac_requests_tenant_service on internal.oac_requests for all to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]))
  with check (account_id = any ((select auth.tenant_account_ids())::uuid[]));
create trigger touch_updated_at before update on internal.oac_requests
  for each row execute function internal.touch_updated_at();
create trigger assign_owner before insert on internal.oac_requests
  for each row execute function internal.assign_owner('artist_profiles', 'artist_id');

create function internal.oac_rules() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if tg_op = 'INSERT' then
    if auth.role() in ('anon', 'authenticated', 'tenant_service') then
      new.status := 'requested';
      if not exists (select 1 from internal.stores s where s.code = new.store and s.offers_oac and s.enabled) then
        perform internal.refuse('BL007', format('%s does not offer Official Artist Channels', new.store),
          jsonb_build_object('store', new.store)::text, 'Ask for youtube_music.');
      end if;
      if not exists (select 1 from public.releases r where r.artist_id = new.artist_id
          and r.status in ('delivered', 'live', 'takedown_requested')) then
        perform internal.refuse('BL007',
          format('artist %s has no delivered release yet; an Official Artist Channel needs one', new.artist_id),
          jsonb_build_object('artist_id', new.artist_id)::text,
          'Request the channel once a release of this artist is delivered.');
      end if;
    end if;
    return new;
  end if;
  if new.status is distinct from old.status and new.status in ('approved', 'rejected', 'cancelled') then
    new.completed_at := now();
  end if;
  return new;
end
$$;
create trigger oac_rules before insert or update on internal.oac_requests
  for each row execute function internal.oac_rules();

create function internal.oac_requested() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  insert into internal.jobs (kind, payload, dedupe_key)
  values ('oac.request', jsonb_build_object('oac_request_id', new.id), new.id::text)
  on conflict (kind, dedupe_key) where dedupe_key is not null and status in ('queued', 'running') do nothing;
  return null;
end
$$;
create trigger oac_requested after insert on internal.oac_requests
  for each row execute function internal.oac_requested();

-- A release that never went to a store may be deleted, also while in review (seed 001: "deletes
-- a release not yet delivered"): withdrawing a submission is deleting it. From delivering on, a
-- release is taken down instead. The rest of the lifecycle is as in migration 0005.
create or replace function internal.release_rules() returns trigger
language plpgsql
as $$
declare
  editable constant text[] := array['draft', 'pending', 'rejected'];
  user_targets constant text[] := array['draft', 'pending', 'submitted'];
  never_delivered constant text[] := array['draft', 'pending', 'submitted', 'in_review', 'approved', 'rejected'];
begin
  if tg_op = 'DELETE' then
    if not internal.is_privileged() and old.status <> all (never_delivered) then
      perform internal.refuse('BL001',
        format('release %s is %s and can no longer be deleted', old.id, old.status),
        jsonb_build_object('release_id', old.id, 'status', old.status)::text,
        'Only a release that has not gone to any store can be deleted; a delivered release is taken down instead.');
    end if;
    return old;
  end if;

  if tg_op = 'INSERT' then
    if new.artist_name is null then
      select a.name into new.artist_name from public.artist_profiles a where a.id = new.artist_id;
    end if;
    if not internal.is_privileged() and new.status not in ('draft', 'pending') then
      perform internal.refuse('BL002',
        format('a new release starts as draft or pending, not %s', new.status),
        jsonb_build_object('from', null, 'to', new.status, 'allowed', array['draft', 'pending'])::text,
        'Create the release, then set status to submitted.');
    end if;
    if new.status = 'submitted' then
      new.submitted_at := now();
    end if;
    return new;
  end if;

  -- UPDATE
  if not internal.is_privileged() then
    if old.status <> all (editable) then
      perform internal.refuse('BL001',
        format('release %s is %s and can no longer be changed', old.id, old.status),
        jsonb_build_object('release_id', old.id, 'status', old.status)::text,
        'Only draft, pending and rejected releases can be edited.');
    end if;
    if new.status is distinct from old.status and new.status <> all (user_targets) then
      perform internal.refuse('BL002',
        format('a release cannot be moved from %s to %s by its account', old.status, new.status),
        jsonb_build_object('from', old.status, 'to', new.status, 'allowed', user_targets)::text,
        'Set status to submitted; review, delivery and live are set by the operator.');
    end if;
  end if;
  if new.status is distinct from old.status then
    if new.status = 'submitted' then
      new.submitted_at := now();
    end if;
    if not internal.is_privileged() then
      new.status_reason := null; -- a resubmission clears the rejection reason
    end if;
  end if;
  return new;
end
$$;


-- The caller's tenant's lead time between submission and release date (GET /api/public/v1/rules).
create function internal.release_lead_days() returns integer
language sql stable security definer set search_path = ''
as $$
  select coalesce((select o.release_lead_days from internal.organization_settings o where o.tenant_id = auth.tenant_id()), 7)
$$;
revoke execute on function internal.release_lead_days() from public;
grant execute on function internal.release_lead_days() to authenticated, tenant_service, service_role;
