-- Row-level security's helper functions in PL/pgSQL, so that their plans are cached.
--
-- The policies call these helpers once per table a statement reads (`(select auth.f())`, an
-- InitPlan), never once per row. They were SQL functions with SECURITY DEFINER and a SET clause,
-- which PostgreSQL can neither inline nor keep a plan for: every call parsed and planned its body
-- again, 0.3 ms for auth.readable_account_ids() on every table of every request (EXPLAIN ANALYZE
-- as a public-API key: a release with its tracks, artists and media spent 1.3 of its 2.0 ms there).
-- A PL/pgSQL function plans its statements once per connection and reuses the plans: the same
-- call costs 0.03 ms. Bodies are unchanged (each is the expression the SQL function returned, so
-- "no row" is still null); only the language changes. test/rls-helpers.test.ts keeps every
-- policy's SECURITY DEFINER helper in PL/pgSQL.

create or replace function auth.readable_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
    when auth.jwt() ? 'account_id' then coalesce(
      (select array_agg(a.id) from internal.accounts a
        where a.id = nullif(auth.jwt() ->> 'account_id', '')::uuid and a.tenant_id = auth.tenant_id()),
      '{}')
    else coalesce(
      (select array_agg(m.account_id) from internal.memberships m
        join internal.accounts a on a.id = m.account_id
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id()
          and (not a.require_aal2 or auth.aal() = 'aal2')),
      '{}')
  end);
end $$;

create or replace function auth.writable_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
    when auth.jwt() ? 'account_id' then coalesce(
      (select array_agg(a.id) from internal.accounts a
        where a.id = nullif(auth.jwt() ->> 'account_id', '')::uuid and a.tenant_id = auth.tenant_id()
          and coalesce(auth.jwt() ->> 'account_role', 'member') in ('owner', 'admin', 'member')),
      '{}')
    else coalesce(
      (select array_agg(m.account_id) from internal.memberships m
        join internal.accounts a on a.id = m.account_id
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')
          and (not a.require_aal2 or auth.aal() = 'aal2')),
      '{}')
  end);
end $$;

create or replace function auth.manageable_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
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
  end);
end $$;

create or replace function auth.manageable_live_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select coalesce((select array_agg(a.id order by a.created_at, a.id) from internal.accounts a
    where a.id = any (auth.manageable_account_ids()) and not a.is_sandbox), '{}'));
end $$;

create or replace function auth.tenant_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select coalesce((select array_agg(a.id) from internal.accounts a where a.tenant_id = auth.tenant_id()), '{}'));
end $$;

create or replace function auth.sees_whole_account() returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select auth.jwt() ? 'account_id'
    or coalesce((select t.policy_preset <> 'owner-only' from internal.tenants t where t.id = auth.tenant_id()), false));
end $$;

create or replace function auth.royalty_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
    when auth.jwt() ? 'api_key_id' then coalesce(
      (select array_agg(k.account_id) from internal.api_keys k
        where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid and k.tenant_id = auth.tenant_id()
          and k.status = 'active' and 'royalties:read' = any (k.scopes)
          and k.account_id = any (auth.readable_account_ids())),
      '{}')
    else auth.readable_account_ids()
  end);
end $$;

create or replace function auth.webhook_account_ids() returns uuid[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
    when auth.jwt() ? 'api_key_id' then coalesce(
      (select array_agg(k.account_id) from internal.api_keys k
        where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid and k.tenant_id = auth.tenant_id()
          and k.status = 'active' and 'webhooks:manage' = any (k.scopes)),
      '{}')
    -- A user: the accounts they own or administer, as for API keys (migration 0007).
    else auth.manageable_account_ids()
  end);
end $$;

create or replace function auth.key_scopes() returns text[]
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case when auth.jwt() ? 'api_key_id' then coalesce(
    (select k.scopes from internal.api_keys k
      where k.id = nullif(auth.jwt() ->> 'api_key_id', '')::uuid
        and k.account_id = nullif(auth.jwt() ->> 'account_id', '')::uuid
        and k.tenant_id = auth.tenant_id() and k.status = 'active'),
    '{}')
  end);
end $$;

create or replace function auth.default_account_id() returns uuid
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
    when auth.jwt() ? 'account_id' then nullif(auth.jwt() ->> 'account_id', '')::uuid
    else coalesce(
      (select u.default_account_id from internal.users u
        join internal.memberships m on m.account_id = u.default_account_id and m.user_id = u.id
        where u.id = auth.uid() and u.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')),
      (select m.account_id from internal.memberships m
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')
        order by m.created_at, m.account_id limit 1))
  end);
end $$;

create or replace function auth.has_staff_role(target uuid, need text) returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case
    when need = 'platform' then coalesce(c.platform_role = 'admin', false) and auth.staff_aal_ok(null, true)
    else coalesce(internal.staff_rank(c.tenant_role) >= internal.staff_rank(need), false)
  end
  from internal.caller_staff(target) c);
end $$;

create or replace function auth.staff_aal_ok(target uuid, always boolean default false) returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return (with c as (select auth.staff_caller() as claims)
  select case
    when c.claims ->> 'role' <> 'authenticated' or (c.claims ? 'account_id') or nullif(c.claims ->> 'sub', '') is null
      then true
    when coalesce(nullif(c.claims ->> 'aal', ''), 'aal1') = 'aal2' then true
    when always then false
    when target is null then not coalesce((select p.require_staff_aal2 from internal.platform_settings p where p.id), false)
    else not internal.staff_aal2_required(target)
  end
  from c);
end $$;

create or replace function auth.staff_role(target uuid) returns text
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case when target is not null then (select c.tenant_role from internal.caller_staff(target) c) end);
end $$;

create or replace function auth.staff_role_any_aal(target uuid) returns text
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select case when target is not null then (select c.tenant_role from internal.caller_staff_any_aal(target) c) end);
end $$;

create or replace function auth.platform_staff_role() returns text
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select c.platform_role from internal.caller_staff(null) c);
end $$;

create or replace function auth.platform_staff_role_any_aal() returns text
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select c.platform_role from internal.caller_staff_any_aal(null) c);
end $$;

create or replace function internal.release_visible(r public.releases) returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select auth.role() = 'service_role'
    or (auth.role() = 'tenant_service' and r.account_id = any (auth.tenant_account_ids()))
    or (r.account_id = any (auth.readable_account_ids()) and (auth.sees_whole_account() or r.created_by = auth.uid())));
end $$;

create or replace function internal.release_writable(r public.releases) returns boolean
language plpgsql stable security definer set search_path = '' as $$
begin
  return (select auth.role() = 'service_role'
    or (auth.role() = 'tenant_service' and r.account_id = any (auth.tenant_account_ids()))
    or (r.account_id = any (auth.writable_account_ids()) and (auth.sees_whole_account() or r.created_by = auth.uid())));
end $$;
