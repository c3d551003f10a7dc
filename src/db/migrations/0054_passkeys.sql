-- Passkeys (supabase-js auth.passkey, docs/auth.md "Passkeys"): WebAuthn credentials and their challenges.
--
-- A passkey is a user's WebAuthn credential, registered from a signed-in session and then used to
-- sign in with no password. Its credential id is unique within the tenant (an authenticator
-- presenting it names the user); the public key verifies each assertion, and the signature
-- counter only moves forward (a counter that goes back means a cloned authenticator: refused).
create table internal.passkeys (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  user_id uuid not null,
  -- base64url, as the browser gives it (PublicKeyCredential.id)
  credential_id text not null check (credential_id ~ '^[A-Za-z0-9_-]+$' and length(credential_id) between 16 and 1400),
  public_key bytea not null check (length(public_key) between 16 and 2048),
  sign_count bigint not null default 0 check (sign_count >= 0),
  transports text[] not null default '{}' check (cardinality(transports) <= 10),
  aaguid text check (length(aaguid) <= 64),
  device_type text check (device_type in ('singleDevice', 'multiDevice')),
  backed_up boolean not null default false,
  friendly_name text check (length(friendly_name) <= 120),
  rp_id text not null check (length(rp_id) between 1 and 253),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  last_used_at timestamptz,
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create unique index passkeys_credential on internal.passkeys (tenant_id, credential_id);
create index passkeys_user on internal.passkeys (user_id);
create trigger touch_updated_at before update on internal.passkeys
  for each row execute function internal.touch_updated_at();

-- A challenge is answered once (the verify deletes it), before it expires, for the relying party
-- it was issued for. A registration challenge names its user; a sign-in challenge names nobody
-- (the passkey the browser picks names the user), so neither can stand in for the other.
create table internal.passkey_challenges (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  user_id uuid,
  kind text not null check (kind in ('registration', 'authentication')),
  challenge text not null check (challenge ~ '^[A-Za-z0-9_-]+$' and length(challenge) between 16 and 200),
  rp_id text not null check (length(rp_id) between 1 and 253),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  check ((kind = 'registration') = (user_id is not null)),
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index passkey_challenges_expiry on internal.passkey_challenges (expires_at);

alter table internal.passkeys enable row level security;
alter table internal.passkey_challenges enable row level security;

-- /auth/v1 works on the operator's path (src/auth/passkeys.ts). Beside it, a signed-in user reads
-- the names and dates of their own passkeys in their own tenant, nothing of anyone else's; a key
-- of the public API (a token carrying account_id) reads none. Nobody but the operator's path
-- writes a row, and challenges are the operator's path only.
grant select (id, tenant_id, user_id, friendly_name, transports, device_type, backed_up, created_at,
  last_used_at) on internal.passkeys to authenticated;
create policy passkeys_select_own on internal.passkeys for select to authenticated
  using (
    user_id = (select auth.uid())
    and tenant_id = (select auth.tenant_id())
    and not ((select auth.jwt()) ? 'account_id')
  );
