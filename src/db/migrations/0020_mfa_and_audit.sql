-- Multi-factor sign-in (TOTP factors, as Supabase Auth answers them), where it is required, and
-- the audit log (docs/auth.md "Multi-factor authentication", docs/operator.md "The audit log",
-- docs/security.md).

-- 1. TOTP factors. The secret is sealed with the server's master key (src/secrets/box.ts) and
-- covered by `backline secrets rotate-master-key`. A code is accepted once: last_used_step is the
-- time step (unix time / 30) of the last accepted code, and only a later step is accepted.
create table internal.mfa_factors (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  user_id uuid not null,
  friendly_name text check (length(friendly_name) <= 200),
  factor_type text not null default 'totp' check (factor_type = 'totp'),
  status text not null default 'unverified' check (status in ('unverified', 'verified')),
  secret_sealed text not null check (secret_sealed ~ '^v[0-9]+\.'),
  last_used_step bigint,
  last_challenged_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (tenant_id, user_id) references internal.users (tenant_id, id) on delete cascade
);
create index mfa_factors_user on internal.mfa_factors (user_id);
create unique index mfa_factors_name on internal.mfa_factors (user_id, friendly_name)
  where friendly_name is not null and friendly_name <> '';
create trigger touch_updated_at before update on internal.mfa_factors
  for each row execute function internal.touch_updated_at();

-- A challenge is answered once, from the address that asked for it, within five minutes.
create table internal.mfa_challenges (
  id uuid primary key default gen_random_uuid(),
  factor_id uuid not null references internal.mfa_factors (id) on delete cascade,
  ip text check (length(ip) <= 100),
  created_at timestamptz not null default now(),
  verified_at timestamptz
);
create index mfa_challenges_factor on internal.mfa_challenges (factor_id);

alter table internal.mfa_factors enable row level security;
alter table internal.mfa_challenges enable row level security;

-- 2. The assurance level of the request: the access token's aal claim ('aal1' when a user's token
-- has none). Null for callers that are not people: the anon key, a tenant's service-role key, a
-- public-API key, the operator's service path (machine credentials, docs/security.md).
create function auth.aal() returns text
language sql stable
as $$
  select case when auth.uid() is null then null else coalesce(nullif(auth.jwt() ->> 'aal', ''), 'aal1') end
$$;

-- Whether the caller passes an aal2 requirement: a person with an aal2 session, or a machine
-- credential (which has no session to upgrade; its holder is the operator or the tenant).
create function auth.passes_aal2() returns boolean
language sql stable
as $$ select auth.uid() is null or auth.aal() = 'aal2' $$;

-- Where aal2 is required for staff: the platform (every tenant's staff) or one tenant.
create table internal.platform_settings (
  id boolean primary key default true check (id),
  require_staff_aal2 boolean not null default false,
  updated_at timestamptz not null default now()
);
insert into internal.platform_settings (id) values (true);
alter table internal.platform_settings enable row level security;
alter table internal.tenants add column require_staff_aal2 boolean not null default false;

-- Whether staff of this tenant must be at aal2: the tenant's setting or the platform's.
create function internal.staff_aal2_required(p_tenant uuid) returns boolean
language sql stable security definer set search_path = ''
as $$
  select coalesce((select require_staff_aal2 from internal.platform_settings where id), false)
    or coalesce((select t.require_staff_aal2 from internal.tenants t where t.id = p_tenant), false)
$$;

-- An account's owner can require aal2 of the account's members: a member whose session is aal1
-- reaches none of the account's rows (the membership functions below leave the account out).
-- Public-API keys are machine credentials and are not affected.
alter table internal.accounts add column require_aal2 boolean not null default false;

create or replace function auth.readable_account_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
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
  end
$$;

create or replace function auth.writable_account_ids() returns uuid[]
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
        join internal.accounts a on a.id = m.account_id
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role in ('owner', 'admin', 'member')
          and (not a.require_aal2 or auth.aal() = 'aal2')),
      '{}')
  end
$$;

-- Only the account's owner changes the requirement, and only from an aal2 session; a tenant's
-- service-role key and the operator (machine credentials) may too, within their reach.
create function internal.set_account_require_aal2(p_account uuid, p_required boolean) returns boolean
language plpgsql security definer set search_path = ''
as $$
declare
  r text := current_setting('role', true);
  acct internal.accounts;
begin
  select * into acct from internal.accounts a where a.id = p_account
    and (r not in ('anon', 'authenticated', 'tenant_service') or a.tenant_id = auth.tenant_id());
  if not found or r = 'anon' then
    perform internal.refuse('BL023', 'Only the account''s owner can require multi-factor sign-in of its members',
      jsonb_build_object('field', 'account_id')::text, 'Ask the account''s owner.');
  end if;
  if r = 'authenticated' then
    if auth.uid() is null or not exists (select 1 from internal.memberships m
        where m.account_id = p_account and m.user_id = auth.uid() and m.role = 'owner') then
      perform internal.refuse('BL023', 'Only the account''s owner can require multi-factor sign-in of its members',
        jsonb_build_object('field', 'account_id')::text, 'Ask the account''s owner.');
    end if;
    if auth.aal() is distinct from 'aal2' then
      perform internal.refuse('BL024', 'This act needs a session verified with a second factor (aal2)',
        jsonb_build_object('required_aal', 'aal2')::text,
        'Verify a TOTP factor (auth.mfa.challengeAndVerify) and retry with the new access token.');
    end if;
  end if;
  update internal.accounts set require_aal2 = p_required where id = p_account;
  return p_required;
end
$$;
revoke execute on function internal.set_account_require_aal2(uuid, boolean) from public;
grant execute on function internal.set_account_require_aal2(uuid, boolean)
  to authenticated, tenant_service, service_role;

-- 3. The audit log: who did what, when, from where. Written only by the security-definer
-- functions below (triggers on the audited tables and internal.audit()), in the transaction of
-- the act, so no interface can act without leaving its row. Append-only for every role: no role
-- holds UPDATE, DELETE or TRUNCATE, and triggers refuse them even to the owner.
create table internal.audit_log (
  id bigint generated always as identity primary key,
  -- The tenant the act concerns; null for the installation's own (stores, platform settings).
  tenant_id uuid,
  at timestamptz not null default now(),
  -- user: a person's access token (or a staff member through /admin/v1); api_key: a public-API
  -- key; service_key: a tenant's service-role key; cli: an operator's command; system: the
  -- server's own work (workers), recorded only where the act itself matters.
  actor_type text not null check (actor_type in ('user', 'api_key', 'service_key', 'cli', 'system', 'anon')),
  -- The user id, the key id, the tenant id of a service-role key, or 'cli:<command>'.
  actor text not null check (length(actor) <= 300),
  -- More about the actor: e-mail, aal, the OS user of a command, the staff role.
  actor_detail jsonb not null default '{}' check (jsonb_typeof(actor_detail) = 'object'),
  ip text check (length(ip) <= 100),
  -- insert, update, delete, or a named act (mfa.reset, ...).
  action text not null check (action ~ '^[a-z_]+(\.[a-z_]+)*$'),
  object_table text not null check (length(object_table) <= 100),
  object_id text check (length(object_id) <= 300),
  -- For an update, only the columns that changed; secrets never appear.
  before jsonb,
  after jsonb
);
create index audit_log_tenant on internal.audit_log (tenant_id, id desc);
create index audit_log_actor on internal.audit_log (tenant_id, actor, id desc);
create index audit_log_object on internal.audit_log (tenant_id, object_table, object_id, id desc);
alter table internal.audit_log enable row level security;
revoke all on internal.audit_log from public, anon, authenticated, tenant_service, service_role;
grant select on internal.audit_log to tenant_service, service_role;
-- A tenant's service-role key reads its tenant's rows (staff access: src/admin/audit.ts).
create policy audit_log_tenant on internal.audit_log for select to tenant_service
  using (tenant_id = auth.tenant_id());

create function internal.audit_log_append_only() returns trigger
language plpgsql
as $$
begin
  raise exception 'the audit log is append-only: % refused', tg_op using errcode = '42501';
end
$$;
create trigger audit_log_no_update before update or delete on internal.audit_log
  for each row execute function internal.audit_log_append_only();
create trigger audit_log_no_truncate before truncate on internal.audit_log
  for each statement execute function internal.audit_log_append_only();

-- Who is acting. A request's role and claims decide for the request roles (nothing a client sends
-- but its verified token counts). On the service path (workers, the CLI, /admin/v1) the server
-- names the actor in the transaction setting backline.audit (src/db/db.ts), as it sets the claims;
-- the request's client address comes from there too.
create function internal.audit_actor() returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  ctx jsonb := coalesce(nullif(current_setting('backline.audit', true), ''), '{}')::jsonb;
  claims jsonb := auth.jwt();
  r text := current_setting('role', true);
begin
  if r = 'authenticated' and claims ? 'api_key_id' then
    return jsonb_build_object('type', 'api_key', 'id', claims ->> 'api_key_id',
      'detail', jsonb_build_object('account_id', claims ->> 'account_id'), 'ip', ctx ->> 'ip');
  elsif r = 'authenticated' then
    return jsonb_build_object('type', 'user', 'id', coalesce(claims ->> 'sub', ''),
      'detail', jsonb_strip_nulls(jsonb_build_object('email', nullif(claims ->> 'email', ''), 'aal', auth.aal())),
      'ip', ctx ->> 'ip');
  elsif r = 'tenant_service' then
    return jsonb_build_object('type', 'service_key', 'id', coalesce(claims ->> 'tenant_id', ''),
      'detail', '{}'::jsonb, 'ip', ctx ->> 'ip');
  elsif r = 'anon' then
    return jsonb_build_object('type', 'anon', 'id', coalesce(claims ->> 'tenant_id', ''),
      'detail', '{}'::jsonb, 'ip', ctx ->> 'ip');
  elsif ctx ? 'actor' and ctx -> 'actor' ->> 'type' in ('user', 'api_key', 'service_key', 'cli') then
    return jsonb_build_object('type', ctx -> 'actor' ->> 'type', 'id', coalesce(ctx -> 'actor' ->> 'id', ''),
      'detail', coalesce(ctx -> 'actor' -> 'detail', '{}'::jsonb), 'ip', ctx ->> 'ip');
  else
    return jsonb_build_object('type', 'system', 'id', 'system', 'detail', '{}'::jsonb, 'ip', ctx ->> 'ip');
  end if;
end
$$;

-- Writes one audit row for a named act (the CLI's operator acts, MFA resets). Callable by the
-- service path only; the actor and address are the transaction's, never a parameter.
create function internal.audit(p_action text, p_table text, p_object_id text, p_tenant uuid,
  p_before jsonb default null, p_after jsonb default null) returns void
language plpgsql security definer set search_path = ''
as $$
declare
  a jsonb := internal.audit_actor();
begin
  insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id,
    before, after)
  values (p_tenant, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', p_action, p_table, p_object_id,
    p_before, p_after);
end
$$;
revoke execute on function internal.audit(text, text, text, uuid, jsonb, jsonb) from public;
grant execute on function internal.audit(text, text, text, uuid, jsonb, jsonb) to service_role;

-- Columns never copied into the log (secrets, hashes), and columns whose change alone is not an
-- act (bookkeeping the server does on every use).
create function internal.audit_row() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  hidden text[] := array['secret_ciphertext', 'previous_secret_ciphertext', 'key_hash', 'jwt_secret',
    'jwt_secret_sealed', 'credentials_sealed', 'secret_sealed', 'encrypted_password'];
  noise text[] := array['updated_at', 'last_used_at', 'last_challenged_at', 'attempts', 'failing_since',
    'last_success_at', 'claimed_at'];
  mode text := coalesce(tg_argv[0], 'all');
  a jsonb := internal.audit_actor();
  o jsonb := case when tg_op = 'DELETE' then null else to_jsonb(new) end;
  b jsonb := case when tg_op = 'INSERT' then null else to_jsonb(old) end;
  rj jsonb := coalesce(o, b);
  k text;
  changed_before jsonb := '{}';
  changed_after jsonb := '{}';
  tenant uuid;
  object_id text;
begin
  -- 'people': the server's own work on this table (a worker delivering) is not an act to record.
  if mode = 'people' and a ->> 'type' = 'system' then
    return null;
  end if;
  o := o - hidden;
  b := b - hidden;
  if tg_op = 'UPDATE' then
    for k in select jsonb_object_keys(o) loop
      if not (k = any (noise)) and (o -> k) is distinct from (b -> k) then
        changed_before := changed_before || jsonb_build_object(k, b -> k);
        changed_after := changed_after || jsonb_build_object(k, o -> k);
      end if;
    end loop;
    -- A sealed secret replaced (a key or secret rotation) is an act; its value is not shown.
    foreach k in array hidden loop
      if (to_jsonb(new) -> k) is distinct from (to_jsonb(old) -> k) then
        changed_after := changed_after || jsonb_build_object(k, 'changed');
      end if;
    end loop;
    if changed_after = '{}'::jsonb then
      return null;
    end if;
    b := changed_before;
    o := changed_after;
  end if;
  tenant := case
    when rj ? 'tenant_id' then nullif(rj ->> 'tenant_id', '')::uuid
    when tg_table_name = 'tenants' then (rj ->> 'id')::uuid
    when rj ? 'account_id' then (select ac.tenant_id from internal.accounts ac where ac.id = (rj ->> 'account_id')::uuid)
  end;
  object_id := case
    when tg_table_name = 'memberships' then (rj ->> 'account_id') || ':' || (rj ->> 'user_id')
    when rj ? 'id' then rj ->> 'id'
    when rj ? 'code' then rj ->> 'code'
    when rj ? 'tenant_id' then rj ->> 'tenant_id'
  end;
  insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id,
    before, after)
  values (tenant, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', lower(tg_op),
    tg_table_schema || '.' || tg_table_name, object_id, b, o);
  return null;
end
$$;

-- What is audited. 'all': every change, whoever makes it; 'people': changes made by a person, a
-- key or a command, not by the server's workers.
create trigger audit after insert or update or delete on internal.api_keys
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.memberships
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.invitations
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update or delete on internal.webhook_endpoints
  for each row execute function internal.audit_row('all');
create trigger audit after update or delete on internal.tenants
  for each row execute function internal.audit_row('all');
create trigger audit after update of require_aal2, name, kind, is_sandbox or delete on internal.accounts
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.stores
  for each row execute function internal.audit_row('all');
create trigger audit after update on internal.platform_settings
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.organization_settings
  for each row execute function internal.audit_row('all');
create trigger audit after insert or update or delete on internal.mfa_factors
  for each row execute function internal.audit_row('all');
-- Review decisions and other status changes made by staff (release_history records each one).
create trigger audit after insert on internal.release_history
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update on internal.release_deliveries
  for each row execute function internal.audit_row('people');
create trigger audit after insert or update on internal.royalty_imports
  for each row execute function internal.audit_row('people');
create trigger audit after update on internal.oac_requests
  for each row execute function internal.audit_row('people');

-- 4. aal2 for staff (after migration 0019's staff roles). Where the tenant or the platform requires
-- it, a person's staff role counts only from an aal2 session; the platform role (the
-- installation's stores) always needs aal2 from a person. Machine credentials (a tenant's
-- service-role key, the CLI) are not sessions and are not affected (docs/security.md).

-- Whether the staff caller (the request's claims, or staff_caller on the operator path) passes
-- the aal2 requirement of `target` (null: the platform's requirement only). `always`: the act
-- needs aal2 from a person whatever the settings say.
create function auth.staff_aal_ok(target uuid, always boolean default false) returns boolean
language sql stable security definer set search_path = ''
as $$
  with c as (select auth.staff_caller() as claims)
  select case
    when c.claims ->> 'role' <> 'authenticated' or (c.claims ? 'account_id') or nullif(c.claims ->> 'sub', '') is null
      then true
    when coalesce(nullif(c.claims ->> 'aal', ''), 'aal1') = 'aal2' then true
    when always then false
    when target is null then not coalesce((select p.require_staff_aal2 from internal.platform_settings p where p.id), false)
    else not internal.staff_aal2_required(target)
  end
  from c
$$;

-- Migration 0019's lookup of the caller's roles, whatever the session's level (kept to tell
-- "not staff" from "staff, but verify a second factor first"); internal.caller_staff, which every
-- staff check reads (auth.staff_role, auth.platform_staff_role, auth.has_staff_role,
-- internal.require_staff), now leaves out a role that needs aal2 of an aal1 session.
alter function internal.caller_staff(uuid) rename to caller_staff_any_aal;

create function internal.caller_staff(target uuid, out tenant_role text, out platform_role text)
language plpgsql stable security definer set search_path = ''
as $$
begin
  select c.tenant_role, c.platform_role into tenant_role, platform_role
    from internal.caller_staff_any_aal(target) c;
  if tenant_role is not null and not auth.staff_aal_ok(target) then
    tenant_role := null;
  end if;
  if platform_role is not null and not auth.staff_aal_ok(null) then
    platform_role := null;
  end if;
end
$$;

create function auth.staff_role_any_aal(target uuid) returns text
language sql stable security definer set search_path = ''
as $$ select case when target is not null then (select c.tenant_role from internal.caller_staff_any_aal(target) c) end $$;

create function auth.platform_staff_role_any_aal() returns text
language sql stable security definer set search_path = ''
as $$ select c.platform_role from internal.caller_staff_any_aal(null) c $$;

-- 'platform' (the installation's stores and their credentials) always needs aal2 from a person.
create or replace function auth.has_staff_role(target uuid, need text) returns boolean
language sql stable security definer set search_path = ''
as $$
  select case
    when need = 'platform' then coalesce(c.platform_role = 'admin', false) and auth.staff_aal_ok(null, true)
    else coalesce(internal.staff_rank(c.tenant_role) >= internal.staff_rank(need), false)
  end
  from internal.caller_staff(target) c
$$;

-- The database's check for an operator act, now also refusing with hint aal2_required a staff
-- member whose role would count from an aal2 session.
create or replace function internal.require_staff(target uuid, need text) returns void
language plpgsql stable security definer set search_path = ''
as $$
declare
  held record;
  any_aal record;
begin
  if need is null or need not in ('reviewer', 'operator', 'admin', 'platform') then
    raise exception 'unknown staff role %', need using errcode = '22023';
  end if;
  select * into held from internal.caller_staff(target);
  if need = 'platform' then
    if held.platform_role = 'admin' and auth.staff_aal_ok(null, true) then
      return;
    end if;
  elsif internal.staff_rank(held.tenant_role) >= internal.staff_rank(need) then
    return;
  end if;
  select * into any_aal from internal.caller_staff_any_aal(target);
  if (need = 'platform' and any_aal.platform_role = 'admin')
      or (need <> 'platform' and internal.staff_rank(any_aal.tenant_role) >= internal.staff_rank(need)) then
    raise exception using errcode = '42501', hint = 'aal2_required',
      message = 'this act needs a session verified with a second factor (aal2)';
  end if;
  if held.tenant_role is null and held.platform_role is null then
    raise exception using errcode = '42501', hint = 'not_staff',
      message = format('the caller is not staff of tenant %s', target);
  end if;
  raise exception using errcode = '42501', hint = 'insufficient_role',
    message = format('this needs the staff role %s; the caller has %s', need,
      coalesce(case when need = 'platform' then held.platform_role end, held.tenant_role, 'none'));
end
$$;

revoke all on function auth.staff_aal_ok(uuid, boolean), internal.caller_staff_any_aal(uuid),
  internal.caller_staff(uuid), auth.staff_role_any_aal(uuid), auth.platform_staff_role_any_aal() from public;
grant execute on function auth.staff_aal_ok(uuid, boolean), internal.caller_staff_any_aal(uuid),
  internal.caller_staff(uuid), auth.staff_role_any_aal(uuid), auth.platform_staff_role_any_aal()
  to authenticated, tenant_service, service_role;

-- Sensitive acts always need aal2 from a person, whichever interface: staff roles, the
-- installation's stores and their credentials, tenants' signing keys. The CLI and service-role
-- keys are machine credentials and pass.
create function internal.require_person_aal2() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if not auth.staff_aal_ok(null, true) then
    perform internal.refuse('BL024', format('Changing %s needs a session verified with a second factor (aal2)', tg_table_name),
      jsonb_build_object('required_aal', 'aal2', 'table', tg_table_name)::text,
      'Verify a TOTP factor (auth.mfa.challengeAndVerify) and retry with the new access token.');
  end if;
  return coalesce(new, old);
end
$$;
create trigger require_person_aal2 before insert or update or delete on internal.staff
  for each row execute function internal.require_person_aal2();
create trigger require_person_aal2 before insert or update or delete on internal.stores
  for each row execute function internal.require_person_aal2();
create trigger require_person_aal2 before update of jwt_secret, jwt_secret_sealed on internal.tenants
  for each row execute function internal.require_person_aal2();
create trigger require_person_aal2 before update of require_staff_aal2 on internal.platform_settings
  for each row execute function internal.require_person_aal2();

-- Staff roles are audited like the other acts.
create trigger audit after insert or update or delete on internal.staff
  for each row execute function internal.audit_row('all');

-- A tenant's admins read its audit log: staff with role admin, through the same claims rule.
grant select on internal.audit_log to authenticated;
create policy audit_log_staff_admin on internal.audit_log for select to authenticated
  using (tenant_id is not null and (select auth.has_staff_role(auth.tenant_id(), 'admin')) and tenant_id = auth.tenant_id());
