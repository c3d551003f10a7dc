-- Tenants (white-label customers), their accounts (labels and artists), users and memberships,
-- and the internal tables seed 000 names. None of these is exposed by the table interface.

create table internal.tenants (
  id uuid primary key default gen_random_uuid(),
  slug text not null unique check (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  name text not null check (length(btrim(name)) between 1 and 200),
  -- Which shape row-level security takes for this tenant (docs/database.md, "Policy presets").
  policy_preset text not null default 'account-members'
    check (policy_preset in ('account-members', 'owner-only')),
  -- HS256 secret that signs this tenant's anon key, service-role key and user access tokens.
  jwt_secret text not null check (length(jwt_secret) >= 32),
  plan text not null default 'standard' check (plan ~ '^[a-z0-9_-]{1,40}$'),
  settings jsonb not null default '{}' check (jsonb_typeof(settings) = 'object'),
  is_development boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table internal.accounts (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  name text not null check (length(btrim(name)) between 1 and 200),
  kind text not null default 'label' check (kind in ('label', 'artist')),
  -- Sandbox accounts belong to test-mode API keys; their releases go to simulated stores only.
  is_sandbox boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, id)
);
create index accounts_tenant on internal.accounts (tenant_id);

create table internal.users (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  email text check (email = lower(email) and email like '%_@_%'),
  phone text,
  encrypted_password text,
  email_confirmed_at timestamptz,
  phone_confirmed_at timestamptz,
  last_sign_in_at timestamptz,
  raw_app_meta_data jsonb not null default '{}' check (jsonb_typeof(raw_app_meta_data) = 'object'),
  raw_user_meta_data jsonb not null default '{}' check (jsonb_typeof(raw_user_meta_data) = 'object'),
  -- Where rows go when a request does not say which account (a user with several accounts).
  default_account_id uuid,
  is_anonymous boolean not null default false,
  banned_until timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz,
  unique (tenant_id, id),
  foreign key (tenant_id, default_account_id) references internal.accounts (tenant_id, id)
    on delete set null (default_account_id)
);
-- An e-mail address is unique within a tenant, not across tenants: each white-label platform has its own users.
create unique index users_tenant_email on internal.users (tenant_id, email) where email is not null and deleted_at is null;

create table internal.memberships (
  tenant_id uuid not null,
  account_id uuid not null,
  user_id uuid not null,
  -- owner and admin manage the account (members, keys); member edits the catalog; viewer reads.
  role text not null default 'member' check (role in ('owner', 'admin', 'member', 'viewer')),
  created_at timestamptz not null default now(),
  primary key (account_id, user_id),
  -- Both sides carry the tenant, so a membership can never cross tenants.
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade,
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index memberships_user on internal.memberships (user_id, tenant_id);

-- Public-API keys (seed 001 Authentication). Only a hash of the secret is kept.
create table internal.api_keys (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  name text not null default '' check (length(name) <= 200),
  mode text not null check (mode in ('live', 'test')),
  -- The visible start of the key, shown in listings (for example bk_live_4fT9).
  prefix text not null,
  key_hash text not null unique,
  scopes text[] not null default '{}',
  -- The account role the key acts with, as a membership would.
  account_role text not null default 'member' check (account_role in ('admin', 'member', 'viewer')),
  status text not null default 'pending_reveal' check (status in ('pending_reveal', 'active', 'frozen', 'revoked')),
  expires_at timestamptz,
  last_used_at timestamptz,
  revealed_at timestamptz,
  frozen_at timestamptz,
  revoked_at timestamptz,
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);
create index api_keys_account on internal.api_keys (account_id);

-- The remaining internal tables of seed 000: the operator's view of each white-label customer.
create table internal.organization_settings (
  tenant_id uuid primary key references internal.tenants (id) on delete cascade,
  display_name text,
  support_email text check (support_email like '%_@_%'),
  logo_url text,
  primary_color text check (primary_color ~ '^#[0-9a-fA-F]{6}$'),
  custom_domain text unique,
  -- Days between submission and the earliest release date the tenant accepts.
  release_lead_days integer not null default 7 check (release_lead_days between 0 and 365),
  updated_at timestamptz not null default now()
);

create table internal.add_on_settings (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  add_on text not null check (add_on ~ '^[a-z0-9_-]{1,60}$'),
  enabled boolean not null default false,
  config jsonb not null default '{}' check (jsonb_typeof(config) = 'object'),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, add_on)
);

create table internal.tickets (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  opened_by uuid references internal.users (id) on delete set null,
  subject text not null check (length(btrim(subject)) between 1 and 300),
  status text not null default 'open' check (status in ('open', 'pending', 'resolved', 'closed')),
  priority text not null default 'normal' check (priority in ('low', 'normal', 'high', 'urgent')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);

create table internal.ticket_replies (
  id uuid primary key default gen_random_uuid(),
  ticket_id uuid not null references internal.tickets (id) on delete cascade,
  author_user_id uuid references internal.users (id) on delete set null,
  -- Set when the operator's staff wrote the reply.
  author_staff text,
  body text not null check (length(body) between 1 and 100000),
  -- Internal notes are for the operator's staff only.
  is_internal boolean not null default false,
  created_at timestamptz not null default now()
);

-- Snippets a white-label customer injects into its front end (analytics, chat widgets).
create table internal.custom_scripts (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  name text not null check (length(btrim(name)) between 1 and 100),
  placement text not null default 'head' check (placement in ('head', 'body_end')),
  source text not null check (length(source) <= 100000),
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);

-- What each white-label customer pays the operator.
create table internal.whitelabel_payments (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  period_start date not null,
  period_end date not null check (period_end >= period_start),
  amount numeric(14, 2) not null check (amount >= 0),
  currency char(3) not null check (currency ~ '^[A-Z]{3}$'),
  status text not null default 'due' check (status in ('due', 'paid', 'failed', 'refunded')),
  external_ref text,
  paid_at timestamptz,
  created_at timestamptz not null default now()
);

-- Stores, aggregators, publishers and resellers the operator works with (tenant_id null: all tenants).
create table internal.partners (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid references internal.tenants (id) on delete cascade,
  name text not null check (length(btrim(name)) between 1 and 200),
  kind text not null check (kind in ('store', 'aggregator', 'publisher', 'reseller', 'other')),
  contact_email text check (contact_email like '%_@_%'),
  revenue_share numeric(5, 2) check (revenue_share between 0 and 100),
  settings jsonb not null default '{}' check (jsonb_typeof(settings) = 'object'),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

do $$
declare
  t text;
begin
  foreach t in array array['tenants', 'accounts', 'users', 'memberships', 'api_keys', 'organization_settings',
    'add_on_settings', 'tickets', 'ticket_replies', 'custom_scripts', 'whitelabel_payments', 'partners']
  loop
    -- RLS on with no policy for anon or authenticated: unreachable for them even if a grant slipped in.
    execute format('alter table internal.%I enable row level security', t);
    if t not in ('memberships', 'ticket_replies') then
      execute format(
        'create trigger touch_updated_at before update on internal.%I for each row execute function internal.touch_updated_at()', t);
    end if;
  end loop;
end
$$;

-- Account access, read by every catalog policy. SECURITY DEFINER because memberships are not
-- readable by callers; each function answers only about the caller, from the request's claims.
--
-- One set of policies serves both kinds of caller:
--   a user's token (sub, tenant_id): the accounts the user is a member of, in that tenant;
--   a public-API key (account_id, tenant_id, account_role): that one account, if it is in the tenant.

create function auth.readable_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'account_id' then coalesce(
      (select array_agg(a.id) from internal.accounts a
        where a.id = nullif(auth.jwt() ->> 'account_id', '')::uuid and a.tenant_id = auth.tenant_id()),
      '{}')
    else coalesce(
      (select array_agg(m.account_id) from internal.memberships m
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id()),
      '{}')
  end
$$;

create function auth.writable_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'account_id' then coalesce(
      (select array_agg(a.id) from internal.accounts a
        where a.id = nullif(auth.jwt() ->> 'account_id', '')::uuid and a.tenant_id = auth.tenant_id()
          and coalesce(auth.jwt() ->> 'account_role', 'member') in ('owner', 'admin', 'member')),
      '{}')
    else coalesce(
      (select array_agg(m.account_id) from internal.memberships m
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')),
      '{}')
  end
$$;

-- Every account of the caller's tenant: what a tenant's service-role key (tenant_service) reaches.
create function auth.tenant_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select coalesce((select array_agg(a.id) from internal.accounts a where a.tenant_id = auth.tenant_id()), '{}')
$$;

-- Under the owner-only preset a user reaches only the rows they created; under account-members
-- (the default) every row of their accounts. A public-API key always acts for its whole account.
create function auth.sees_whole_account() returns boolean
language sql stable security definer set search_path = ''
as $$
  select auth.jwt() ? 'account_id'
    or coalesce((select t.policy_preset <> 'owner-only' from internal.tenants t where t.id = auth.tenant_id()), false)
$$;

-- The account a new row belongs to when the request does not name one: the key's account, or the
-- user's default account while they may still write to it, or else the first account they may write to.
create function auth.default_account_id() returns uuid
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'account_id' then nullif(auth.jwt() ->> 'account_id', '')::uuid
    else coalesce(
      (select u.default_account_id from internal.users u
        join internal.memberships m on m.account_id = u.default_account_id and m.user_id = u.id
        where u.id = auth.uid() and u.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')),
      (select m.account_id from internal.memberships m
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')
        order by m.created_at, m.account_id limit 1))
  end
$$;
