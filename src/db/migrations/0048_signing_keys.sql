-- Asymmetric signing keys of user sessions (docs/auth.md, "Signing keys"): per tenant an ES256
-- key pair; access tokens name theirs in the `kid` header and GET /auth/v1/.well-known/jwks.json
-- publishes the public halves, so a client verifies a session without asking the server. The
-- tenant's HS256 secret keeps signing the anon and service-role keys.
--
-- One current key per tenant signs; a rotation retires it: its private key is dropped at once,
-- its public key stays published and accepted until verify_until (the last token it signed has
-- expired). The private key is kept only sealed with the server's master key (src/secrets).
-- A tenant's first key marks its switch: from then on HS256 sessions are accepted only if they
-- were issued before it (src/auth/signing-keys.ts).
create table internal.signing_keys (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  algorithm text not null default 'ES256' check (algorithm in ('ES256')),
  public_jwk jsonb not null check (jsonb_typeof(public_jwk) = 'object' and not public_jwk ? 'd'),
  private_key_sealed text check (private_key_sealed ~ '^v[0-9]+\.'),
  created_at timestamptz not null default now(),
  retired_at timestamptz,
  verify_until timestamptz,
  check ((retired_at is null) = (private_key_sealed is not null)),
  check ((retired_at is null) = (verify_until is null))
);
create unique index signing_keys_current on internal.signing_keys (tenant_id) where retired_at is null;
create index signing_keys_tenant on internal.signing_keys (tenant_id, created_at);
-- The server's alone (the service path): no request role reads or changes a key.
alter table internal.signing_keys enable row level security;
revoke all on internal.signing_keys from authenticated, anon, tenant_service;
-- A sensitive act, like changing the tenant's secret: a person needs aal2 (migration 0020).
create trigger require_person_aal2 before insert or update or delete on internal.signing_keys
  for each row execute function internal.require_person_aal2();
