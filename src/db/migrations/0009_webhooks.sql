-- Webhooks (docs/webhooks.md): an account's endpoints, one delivery per (endpoint, event) made in
-- the transaction that writes the event, and every attempt kept for the delivery log.
--
-- The signing secret is stored encrypted by the server (AES-256-GCM under ENCRYPTION_KEY): the
-- database never holds it in plain text. During a rotation the previous secret keeps signing
-- beside the new one until previous_secret_expires_at.

create table internal.webhook_endpoints (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid not null references internal.accounts (id) on delete cascade,
  url text not null check (length(url) between 8 and 2048 and url ~ '^https?://'),
  description text check (length(description) <= 500),
  events text[] not null check (cardinality(events) between 1 and 20 and events <@ array[
    'release.submitted', 'release.approved', 'release.rejected', 'release.live', 'release.takedown_completed',
    'royalties.imported']::text[]),
  enabled boolean not null default true,
  -- Why the endpoint was disabled (by its owner, by a 410, or after failing for five days).
  disabled_reason text check (length(disabled_reason) <= 500),
  secret_ciphertext text not null,
  previous_secret_ciphertext text,
  previous_secret_expires_at timestamptz,
  -- Since when every delivery has failed (null while the endpoint succeeds); five days of it disable it.
  failing_since timestamptz,
  last_success_at timestamptz,
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index webhook_endpoints_account on internal.webhook_endpoints (account_id, created_at);
create trigger touch_updated_at before update on internal.webhook_endpoints
  for each row execute function internal.touch_updated_at();

-- One delivery of one event to one endpoint, retried until it succeeds or runs out of attempts.
create table internal.webhook_deliveries (
  id uuid primary key default gen_random_uuid(),
  endpoint_id uuid not null references internal.webhook_endpoints (id) on delete cascade,
  event_id uuid not null references internal.events (id) on delete cascade,
  account_id uuid not null references internal.accounts (id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempts integer not null default 0 check (attempts >= 0),
  next_attempt_at timestamptz not null default now(),
  -- The dispatcher holding it and until when (a dead dispatcher's delivery is taken again after).
  locked_by text,
  locked_until timestamptz,
  last_status_code integer,
  last_error text check (length(last_error) <= 2000),
  completed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (endpoint_id, event_id)
);
create index webhook_deliveries_due on internal.webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_endpoint on internal.webhook_deliveries (endpoint_id, created_at desc);
create trigger touch_updated_at before update on internal.webhook_deliveries
  for each row execute function internal.touch_updated_at();

-- Every attempt, for the delivery log: what was sent when, and what came back.
create table internal.webhook_attempts (
  id bigint generated always as identity primary key,
  delivery_id uuid not null references internal.webhook_deliveries (id) on delete cascade,
  endpoint_id uuid not null references internal.webhook_endpoints (id) on delete cascade,
  attempt integer not null,
  started_at timestamptz not null,
  duration_ms integer not null,
  -- null when no response came (timeout, refused connection, blocked address).
  status_code integer,
  -- ok, http_status, timeout, connection, dns, blocked_address, redirect, tls
  outcome text not null,
  error text check (length(error) <= 2000),
  -- The first 2 KiB of the response body.
  response_body text check (length(response_body) <= 4096)
);
create index webhook_attempts_delivery on internal.webhook_attempts (delivery_id, attempt);

-- The fan-out: an event becomes a delivery for every enabled endpoint of its account that
-- subscribed to its type, in the event's own transaction; dispatchers are woken by a notice.
create function internal.webhook_fan_out() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.account_id is null then
    return null;
  end if;
  insert into internal.webhook_deliveries (endpoint_id, event_id, account_id)
  select e.id, new.id, new.account_id
  from internal.webhook_endpoints e
  where e.account_id = new.account_id and e.enabled and new.type = any (e.events);
  if found then
    perform pg_notify('backline_webhooks', '');
  end if;
  return null;
end
$$;
create trigger webhook_fan_out after insert on internal.events
  for each row execute function internal.webhook_fan_out();

-- Who manages an account's webhooks: its owners and admins, or a key of the account with the
-- webhooks:manage scope.
create function auth.webhook_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'api_key_id' then coalesce(
      (select array_agg(k.account_id) from internal.api_keys k
        where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid and k.tenant_id = auth.tenant_id()
          and k.status = 'active' and 'webhooks:manage' = any (k.scopes)),
      '{}')
    -- A user: the accounts they own or administer, as for API keys (migration 0007).
    else auth.manageable_account_ids()
  end
$$;

alter table internal.webhook_endpoints enable row level security;
alter table internal.webhook_deliveries enable row level security;
alter table internal.webhook_attempts enable row level security;

grant select (id, tenant_id, account_id, url, description, events, enabled, disabled_reason, failing_since,
  last_success_at, previous_secret_expires_at, created_by, created_at, updated_at)
  on internal.webhook_endpoints to authenticated;
grant insert (id, account_id, url, description, events, secret_ciphertext) on internal.webhook_endpoints to authenticated;
grant update (url, description, events, enabled, disabled_reason, secret_ciphertext, previous_secret_ciphertext,
  previous_secret_expires_at, failing_since) on internal.webhook_endpoints to authenticated;
grant delete on internal.webhook_endpoints to authenticated;
create policy webhook_endpoints_manage on internal.webhook_endpoints for all to authenticated
  using (account_id = any ((select auth.webhook_account_ids())::uuid[]))
  with check (account_id = any ((select auth.webhook_account_ids())::uuid[]));

grant select (id, endpoint_id, event_id, account_id, status, attempts, next_attempt_at, last_status_code, last_error,
  completed_at, created_at, updated_at) on internal.webhook_deliveries to authenticated;
-- Read only: deliveries are made by the fan-out and moved by the dispatcher (and a retry asked
-- through the API, which the service carries out).
create policy webhook_deliveries_read on internal.webhook_deliveries for select to authenticated
  using (account_id = any ((select auth.webhook_account_ids())::uuid[]));

grant select on internal.webhook_attempts to authenticated;
create policy webhook_attempts_read on internal.webhook_attempts for select to authenticated
  using (exists (select 1 from internal.webhook_endpoints e where e.id = endpoint_id
    and e.account_id = any ((select auth.webhook_account_ids())::uuid[])));

-- The account's events, as its webhook endpoints receive them (the test event and retries read them).
grant select on internal.events to authenticated;
create policy events_read on internal.events for select to authenticated
  using (account_id = any ((select auth.webhook_account_ids())::uuid[]));

-- A client's endpoint takes its tenant from its account; the ciphertext columns are the server's.
create function internal.webhook_endpoint_rules() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if tg_op = 'INSERT' then
    select a.tenant_id into new.tenant_id from internal.accounts a where a.id = new.account_id;
    new.created_by := auth.uid();
  end if;
  if tg_op = 'UPDATE' and new.enabled and not old.enabled then
    -- Enabled again: it starts with a clean record.
    new.disabled_reason := null;
    new.failing_since := null;
  end if;
  return new;
end
$$;
create trigger webhook_endpoint_rules before insert or update on internal.webhook_endpoints
  for each row execute function internal.webhook_endpoint_rules();

-- The dispatcher (service_role) tells an account's members when its endpoint is disabled.
grant execute on function internal.notify_members(uuid, text, text, text, jsonb) to service_role;
