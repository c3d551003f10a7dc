-- Code guesses bounded per address and per code, whatever the client address (docs/security.md,
-- "Guessing codes"), and internal.events closed to the request roles.

-- 1. Wrong e-mail codes per address of a tenant (POST /auth/v1/verify with an address and a code).
-- A verify for an address takes a transaction-level lock on the address, reads this row, and
-- counts a wrong code here before it commits, so concurrent guesses are counted one after the
-- other. At the tenant's max_code_attempts the address's outstanding codes (sign-up, sign-in,
-- recovery, invitation, e-mail change) are void; a code mailed to the address starts the count
-- again. Rows exist for addresses with no user too, so the answers do not tell which addresses are
-- registered. Only the service path reads or writes it (no grant to a request role).
create table internal.email_code_failures (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  email text not null check (email = lower(email) and length(email) <= 320),
  failures integer not null default 0 check (failures >= 0),
  last_failed_at timestamptz not null default now(),
  primary key (tenant_id, email)
);
create index email_code_failures_age on internal.email_code_failures (last_failed_at);
alter table internal.email_code_failures enable row level security;

-- 2. Wrong codes per MFA challenge: at max_code_attempts the challenge is void and the user
-- creates a new one (POST /auth/v1/factors/{id}/challenge).
alter table internal.mfa_challenges
  add column failed_attempts integer not null default 0 check (failed_attempts >= 0);

-- 3. internal.events was readable by `authenticated` (a key with webhooks:manage, a member) for
-- the account's rows, though no interface shows an event's data to them: the delivery log needs
-- only an event's type. The type now comes from a definer function that answers for a delivery
-- the caller may see (its row security decides), and the table is the server's alone.
drop policy events_read on internal.events;
revoke all on internal.events from authenticated, anon, tenant_service;

create function internal.delivery_event_type(p_delivery_id uuid) returns text
language sql stable security definer set search_path = ''
as $$
  select ev.type from internal.webhook_deliveries d
  join internal.events ev on ev.id = d.event_id
  where d.id = p_delivery_id
    and d.account_id = any ((select auth.webhook_account_ids())::uuid[])
$$;
revoke execute on function internal.delivery_event_type(uuid) from public;
grant execute on function internal.delivery_event_type(uuid) to authenticated;
