-- Scopes the database enforces (issue 26, items 4, 5, 6 and 13; docs/security.md, "API keys,
-- reveal codes and webhook endpoints"):
--   * a new API key gets at most the scopes of the key that makes it;
--   * a key changes a webhook endpoint only if it may read every event the endpoint carries;
--   * wrong reveal codes are counted per key and per account over time, not per code;
--   * an Idempotency-Key answer that holds a secret is kept encrypted.

-- The scopes of the API key making the request: null for any other caller (a signed-in user's
-- rights come from memberships; the operator's from its role). A key that no longer exists, or
-- is not active, or does not belong to the account and tenant its claims name, holds none.
create function auth.key_scopes() returns text[]
language sql stable security definer set search_path = ''
as $$
  select case when auth.jwt() ? 'api_key_id' then coalesce(
    (select k.scopes from internal.api_keys k
      where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid
        and k.account_id = nullif(auth.jwt() ->> 'account_id', '')::uuid
        and k.tenant_id = auth.tenant_id() and k.status = 'active'),
    '{}')
  end
$$;
revoke execute on function auth.key_scopes() from public;
grant execute on function auth.key_scopes() to anon, authenticated, tenant_service, service_role;

-- 4. A key gives a new key at most its own scopes (keys:manage lets it make keys at all: the
-- policy api_keys_manage, migration 0007). Owners and admins, signed in, give any scope.
create function internal.api_key_scope_limit() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  maker text[] := auth.key_scopes();
  missing text;
begin
  if maker is null or coalesce(auth.role(), '') not in ('anon', 'authenticated', 'tenant_service') then
    return new;
  end if;
  -- Where the caller manages no keys, row security refuses the row after this trigger (42501).
  if not (new.account_id = any (auth.manageable_account_ids())) then
    return new;
  end if;
  select string_agg(distinct s, ' ' order by s) into missing from unnest(new.scopes) s where s <> all (maker);
  if missing is not null then
    perform internal.refuse('BL014',
      format('a key can give a new key only scopes it has itself, and this key lacks %s',
        replace(missing, ' ', ' and ')),
      jsonb_build_object('scope', missing, 'param', 'scopes')::text,
      'Ask for fewer scopes, or have an owner or admin of the account create the key.');
  end if;
  return new;
end
$$;
create trigger api_key_scope_limit before insert on internal.api_keys
  for each row execute function internal.api_key_scope_limit();

-- 5. The scope that reads what an event carries: royalty events the account's revenue
-- (royalties:read), test events nothing (webhooks:manage), every other event the catalog
-- (catalog:read), including event types added later.
create function internal.event_read_scope(event_type text) returns text
language sql immutable set search_path = ''
as $$
  select case
    when event_type like 'royalties.%' then 'royalties:read'
    when event_type like 'webhook.%' then 'webhooks:manage'
    else 'catalog:read'
  end
$$;

-- Any change to an endpoint by a key (registering it, its URL, events, description, enabling it,
-- deleting it, rotating its secret) needs the read scopes of every event it carries, before and
-- after: a key that may not read royalties cannot point an endpoint that receives them elsewhere.
create function internal.webhook_endpoint_scope_check() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  held text[] := auth.key_scopes();
  carried text[];
  scopes text;
  events text;
  asked boolean;
begin
  if held is null or coalesce(auth.role(), '') not in ('anon', 'authenticated', 'tenant_service') then
    return case when tg_op = 'DELETE' then old else new end;
  end if;
  -- An insert where the caller manages no endpoints is refused by row security after this
  -- trigger (42501); updates and deletes reach only the rows it manages.
  if tg_op = 'INSERT' and not (new.account_id = any (auth.webhook_account_ids())) then
    return new;
  end if;
  carried := case tg_op when 'INSERT' then new.events when 'DELETE' then old.events
    else old.events || new.events end;
  select string_agg(distinct internal.event_read_scope(e), ' ' order by internal.event_read_scope(e)), string_agg(distinct e, ', ' order by e),
         coalesce(bool_or(tg_op = 'INSERT' or (tg_op = 'UPDATE' and e <> all (old.events))), false)
    into scopes, events, asked
    from unnest(carried) e where internal.event_read_scope(e) <> all (held);
  if scopes is not null then
    perform internal.refuse('BL014',
      format('the endpoint carries %s, whose data needs %s, which this API key lacks; '
        'a key changes an endpoint only if it may read every event the endpoint carries',
        events, replace(scopes, ' ', ' and ')),
      -- param: the events asked for, when they are what the key may not read.
      jsonb_build_object('scope', scopes, 'param', case when asked then 'events' end)::text,
      'Use a key with that scope, or an owner or admin of the account.');
  end if;
  return case when tg_op = 'DELETE' then old else new end;
end
$$;
create trigger webhook_endpoint_scope_check before insert or update or delete on internal.webhook_endpoints
  for each row execute function internal.webhook_endpoint_scope_check();

-- A rotation as the caller (so the check above applies): the current secret becomes the previous
-- one for `previous_hours` (none at 0), and `ciphertext` the current one. Clients cannot read the
-- ciphertexts, hence a function; it reaches only the endpoints the caller manages (the policy
-- webhook_endpoints_manage, migration 0009). False when there is no such endpoint.
create function internal.rotate_webhook_secret(endpoint uuid, ciphertext text, previous_hours integer)
returns boolean
language plpgsql security definer set search_path = ''
as $$
begin
  if previous_hours is null or previous_hours not between 0 and 168 then
    raise exception using errcode = '22023', message = 'previous_hours must be between 0 and 168';
  end if;
  update internal.webhook_endpoints
    set previous_secret_ciphertext = case when previous_hours > 0 then secret_ciphertext end,
        previous_secret_expires_at = case when previous_hours > 0 then now() + make_interval(hours => previous_hours) end,
        secret_ciphertext = ciphertext
    where id = endpoint
      and (auth.role() = 'service_role' or account_id = any (auth.webhook_account_ids()));
  return found;
end
$$;
revoke execute on function internal.rotate_webhook_secret(uuid, text, integer) from public;
grant execute on function internal.rotate_webhook_secret(uuid, text, integer) to authenticated, service_role;

-- 6. Reveal codes: five wrong codes use a code up (migration 0007), and besides, every wrong code
-- counts against its key for good and against its account for 24 hours, whichever code was
-- asked for (src/public-api/keys/service.ts has the limits). A key past its limit is locked:
-- it can no longer be revealed, only revoked.
alter table internal.api_keys add column reveal_failures integer not null default 0 check (reveal_failures >= 0);
alter table internal.api_keys add column reveal_locked_at timestamptz;
-- Shown with the key (GET /api-keys/{id}): why it cannot be revealed.
grant select (reveal_locked_at) on internal.api_keys to authenticated;

-- Each wrong code, for the per-account window; older rows are deleted as new ones come.
create table internal.api_key_reveal_failures (
  id bigint generated always as identity primary key,
  account_id uuid not null references internal.accounts (id) on delete cascade,
  key_id uuid references internal.api_keys (id) on delete set null,
  failed_at timestamptz not null default now(),
  -- The failure that reached the account's limit, when the owners were told (once per window).
  alerted boolean not null default false
);
create index api_key_reveal_failures_account on internal.api_key_reveal_failures (account_id, failed_at);
-- The server's own (the reveal runs on the service path): no client role has any grant.
alter table internal.api_key_reveal_failures enable row level security;

-- 13. An Idempotency-Key answer holding a secret shown once (a webhook endpoint's signing secret)
-- is kept only encrypted by the server (as the secret itself is), never in response_body.
alter table internal.idempotency_keys add column response_ciphertext text;
alter table internal.idempotency_keys add constraint idempotency_keys_one_body
  check (response_ciphertext is null or response_body is null);
