-- Sign-in state for /auth/v1 (GoTrue-compatible, docs/auth.md), the mailbox, invitations and
-- rate limits. All internal: reached only through the service path by the auth service.

-- A signed-in device. Access tokens name it (session_id); logging out deletes it.
create table internal.sessions (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  user_id uuid not null,
  aal text not null default 'aal1' check (aal in ('aal1', 'aal2')),
  -- How the user proved who they are, as the amr claim lists it, e.g. [{"method":"password","timestamp":...}].
  amr jsonb not null default '[]' check (jsonb_typeof(amr) = 'array'),
  user_agent text check (length(user_agent) <= 1000),
  ip text check (length(ip) <= 100),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  refreshed_at timestamptz,
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index sessions_user on internal.sessions (user_id);

-- Refresh tokens, stored only as SHA-256 hashes. Each refresh rotates: the presented token is
-- marked used and a child is issued. Presenting a used token again means it leaked: the whole
-- session (its token family) is revoked.
create table internal.refresh_tokens (
  id bigint generated always as identity primary key,
  session_id uuid not null references internal.sessions (id) on delete cascade,
  token_hash text not null unique check (token_hash ~ '^[0-9a-f]{64}$'),
  parent_id bigint references internal.refresh_tokens (id) on delete cascade,
  used_at timestamptz,
  created_at timestamptz not null default now()
);
create index refresh_tokens_session on internal.refresh_tokens (session_id);

-- Links and codes sent by e-mail (sign-up confirmation, password recovery, e-mail change),
-- stored as hashes. Each works once, until it expires.
create table internal.one_time_tokens (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  user_id uuid not null,
  kind text not null check (kind in ('signup', 'recovery', 'email_change')),
  -- The address it was sent to (for email_change: the new address).
  email text not null check (email = lower(email)),
  token_hash text not null unique check (token_hash ~ '^[0-9a-f]{64}$'),
  otp_hash text not null check (otp_hash ~ '^[0-9a-f]{64}$'),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index one_time_tokens_user on internal.one_time_tokens (user_id, kind);

-- Every e-mail Backline writes. With SMTP configured it is sent and marked sent (or failed);
-- without, it stays here as the local mailbox the operator reads with `backline mail list`.
create table internal.mail_outbox (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid references internal.tenants (id) on delete cascade,
  to_address text not null check (to_address like '%_@_%'),
  subject text not null,
  text_body text not null,
  html_body text,
  -- What it is about, e.g. 'auth.signup', 'auth.recovery', 'api_key.reveal'.
  kind text not null check (kind ~ '^[a-z_]+(\.[a-z_]+)*$'),
  -- stored: the local mailbox (no SMTP); queued -> sending -> sent | failed with SMTP.
  status text not null default 'stored' check (status in ('stored', 'queued', 'sending', 'sent', 'failed')),
  error text,
  created_at timestamptz not null default now(),
  -- When a sender took it; a message stuck in 'sending' (its sender died) is taken again later.
  claimed_at timestamptz,
  sent_at timestamptz
);
create index mail_outbox_tenant on internal.mail_outbox (tenant_id, created_at desc);
create index mail_outbox_queued on internal.mail_outbox (created_at) where status in ('queued', 'sending');

-- An invitation of an e-mail address into an account: accepted when that address signs up (or
-- at once, when the user already exists).
create table internal.invitations (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  email text not null check (email = lower(email) and email like '%_@_%'),
  role text not null default 'member' check (role in ('owner', 'admin', 'member', 'viewer')),
  invited_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  accepted_at timestamptz,
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);
create unique index invitations_open on internal.invitations (account_id, email) where accepted_at is null;
create index invitations_email on internal.invitations (tenant_id, email) where accepted_at is null;

-- Fixed-window counters for rate limits shared by every process (sign-up, sign-in, recovery).
create table internal.rate_limits (
  key text not null,
  window_start timestamptz not null,
  hits integer not null default 0,
  primary key (key, window_start)
);
create index rate_limits_window on internal.rate_limits (window_start);

-- The user's identities, as GoTrue lists them (one 'email' identity per user for now).
create table internal.identities (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  user_id uuid not null,
  provider text not null check (provider ~ '^[a-z0-9_-]{1,40}$'),
  provider_id text not null,
  identity_data jsonb not null default '{}' check (jsonb_typeof(identity_data) = 'object'),
  last_sign_in_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, provider, provider_id),
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index identities_user on internal.identities (user_id);

do $$
declare
  t text;
begin
  foreach t in array array['sessions', 'refresh_tokens', 'one_time_tokens', 'mail_outbox', 'invitations',
    'rate_limits', 'identities']
  loop
    execute format('alter table internal.%I enable row level security', t);
  end loop;
end
$$;
create trigger touch_updated_at before update on internal.sessions
  for each row execute function internal.touch_updated_at();
create trigger touch_updated_at before update on internal.identities
  for each row execute function internal.touch_updated_at();

-- What GoTrue reports about e-mail flows on the user object.
alter table internal.users
  add column confirmation_sent_at timestamptz,
  add column recovery_sent_at timestamptz,
  -- A requested new address, until its confirmation link or code is used.
  add column email_change text check (email_change = lower(email_change)),
  add column email_change_sent_at timestamptz;
