-- OpenID Connect providers per tenant (docs/auth.md, "OpenID Connect providers"; issue 42, item 6):
-- supabase-js's signInWithOAuth({ provider }) sends the browser to the provider a tenant set up
-- under that name (a generic OpenID provider, or the google and apple presets). The client secret
-- is kept only sealed with the server's master key (src/secrets/at-rest.ts); nothing returns it.
create table internal.oidc_providers (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  -- The name signInWithOAuth gives; 'email' and 'anonymous' are the identities' own providers.
  name text not null check (name ~ '^[a-z0-9_-]{1,40}$' and name not in ('email', 'phone', 'anonymous', 'sso')),
  display_name text not null check (length(display_name) between 1 and 60),
  issuer text not null check (issuer ~ '^https?://' and length(issuer) <= 500),
  client_id text not null check (length(client_id) between 1 and 500),
  client_secret_sealed text check (client_secret_sealed ~ '^v[0-9]+\.'),
  scopes text not null default 'openid email profile' check (length(scopes) <= 500),
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (tenant_id, name)
);
create trigger touch_updated_at before update on internal.oidc_providers
  for each row execute function internal.touch_updated_at();

-- One sign-in with a provider, from /authorize to the code the client exchanges (GoTrue's flow
-- state): `state_hash` names it while the browser is at the provider (used once: cleared by the
-- callback), `auth_code_hash` after, until POST /token?grant_type=pkce spends it (deleted).
create table internal.oauth_flow_states (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  provider text not null,
  state_hash text unique,
  nonce text not null,
  -- PKCE towards the provider (the server is its client).
  provider_code_verifier text not null,
  redirect_to text not null,
  -- PKCE towards the client (supabase-js flowType 'pkce'); null: the implicit flow.
  code_challenge text,
  code_challenge_method text check (code_challenge_method in ('s256', 'plain')),
  -- linkIdentity: the signed-in user the new identity is for.
  link_user_id uuid,
  auth_code_hash text unique,
  user_id uuid,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  check ((code_challenge is null) = (code_challenge_method is null)),
  foreign key (tenant_id, link_user_id) references internal.users (tenant_id, id) on delete cascade,
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index oauth_flow_states_expiry on internal.oauth_flow_states (expires_at);

-- The server's alone (the service path): no request role reads or changes them.
alter table internal.oidc_providers enable row level security;
alter table internal.oauth_flow_states enable row level security;
revoke all on internal.oidc_providers, internal.oauth_flow_states from authenticated, anon, tenant_service;
