-- Staff: the people who run a tenant (or the whole installation) from the console and /admin/v1
-- (docs/console.md, "Staff roles"). A staff member is a user of /auth/v1 like any other, with a
-- row here naming the tenant they work for and their role there; tenant_id null is platform
-- staff, who hold the role on every tenant. Roles are cumulative:
--   reviewer  the review queue and OAC decisions
--   operator  also deliveries, store reports, takedowns, jobs, royalty imports
--   admin     also the tenant's accounts, members, invitations, keys and settings
-- and only platform staff with role admin configure the installation's stores ("platform").
--
-- A user belongs to one tenant's /auth/v1; the staff row may name another tenant than the user's
-- own ("choose the tenant when staff of several").

create table internal.staff (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references internal.users (id) on delete cascade,
  -- null: platform staff, the role on every tenant.
  tenant_id uuid references internal.tenants (id) on delete cascade,
  role text not null check (role in ('reviewer', 'operator', 'admin')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- One row per user and tenant, and one platform row per user.
  unique nulls not distinct (user_id, tenant_id)
);
create index staff_tenant on internal.staff (tenant_id);
alter table internal.staff enable row level security;
create trigger touch_updated_at before update on internal.staff
  for each row execute function internal.touch_updated_at();

-- A user reads their own staff rows; a tenant's service-role key reads its tenant's staff (not
-- platform staff). Rows are written only on the operator's path (the CLI, service_role).
grant select on internal.staff to authenticated, tenant_service;
create policy staff_select_own on internal.staff for select to authenticated
  using (user_id = (select auth.uid()) and not (auth.jwt() ? 'account_id'));
create policy staff_tenant_service on internal.staff for select to tenant_service
  using (tenant_id = (select auth.tenant_id()));

create function internal.staff_rank(role text) returns integer
language sql immutable
as $$ select case role when 'reviewer' then 1 when 'operator' then 2 when 'admin' then 3 end $$;

-- The caller whose staff rights count. Normally the request's own claims. Operator code that runs
-- for a staff caller (an /admin/v1 request: src/db/db.ts, operator scope) runs as service_role
-- with the caller's verified claims under `staff_caller`; that nested claim counts only there
-- (claims' role service_role is set by Db.asService alone: the gateway never lets a token
-- choose it), so a token carrying a `staff_caller` claim gains nothing.
create function auth.staff_caller() returns jsonb
language sql stable
as $$
  select case when auth.role() = 'service_role' and jsonb_typeof(auth.jwt() -> 'staff_caller') = 'object'
    then auth.jwt() -> 'staff_caller' else auth.jwt() end
$$;

-- The caller's staff role for `target` ('reviewer' | 'operator' | 'admin', or null): a tenant's
-- service-role key is its own tenant's admin; a signed-in user (a token with a sub, not a
-- public-API key) has the highest of their staff rows for that tenant and their platform row,
-- while their user row exists in the token's tenant, is not deleted nor banned, and its e-mail
-- address is proven (a link or code mailed to it was used: migration 0015). A row made for an
-- address before its owner proved it gives nothing until then: proof before power. Read from
-- the table on every call, so a removed row takes effect at once. STABLE: in a policy, wrapped
-- in (select ...), it runs once per statement.
create function auth.staff_role(target uuid) returns text
language sql stable security definer set search_path = ''
as $$
  with c as (select auth.staff_caller() as claims)
  select case
    when target is null then null
    when c.claims ->> 'role' = 'tenant_service' then
      case when c.claims ->> 'tenant_id' = target::text then 'admin' end
    when c.claims ->> 'role' = 'authenticated' and not (c.claims ? 'account_id') and (c.claims ->> 'sub') is not null then (
      select s.role from internal.staff s
        join internal.users u on u.id = s.user_id
      where s.user_id = nullif(c.claims ->> 'sub', '')::uuid
        and u.tenant_id = nullif(c.claims ->> 'tenant_id', '')::uuid
        and u.email_proven_at is not null and u.deleted_at is null
        and (u.banned_until is null or u.banned_until <= now())
        and (s.tenant_id = target or s.tenant_id is null)
      order by internal.staff_rank(s.role) desc limit 1)
  end
  from c
$$;

-- The caller's platform staff role (from a platform row only), or null.
create function auth.platform_staff_role() returns text
language sql stable security definer set search_path = ''
as $$
  with c as (select auth.staff_caller() as claims)
  select s.role from c, internal.staff s
    join internal.users u on u.id = s.user_id
  where c.claims ->> 'role' = 'authenticated' and not (c.claims ? 'account_id')
    and s.user_id = nullif(c.claims ->> 'sub', '')::uuid
    and u.tenant_id = nullif(c.claims ->> 'tenant_id', '')::uuid
    and u.email_proven_at is not null and u.deleted_at is null
        and (u.banned_until is null or u.banned_until <= now())
    and s.tenant_id is null
$$;

-- Whether the caller holds `need` on `target`: 'reviewer' | 'operator' | 'admin' on that tenant,
-- or 'platform' (platform staff with role admin: the installation's stores).
create function auth.has_staff_role(target uuid, need text) returns boolean
language sql stable security definer set search_path = ''
as $$
  select case
    when need = 'platform' then coalesce(auth.platform_staff_role() = 'admin', false)
    else coalesce(internal.staff_rank(auth.staff_role(target)) >= internal.staff_rank(need), false)
  end
$$;

-- The database's check for an operator act: raises 42501 (HTTP 403) unless the caller holds
-- `need` on `target`. The hint is the machine code: not_staff (no role on the tenant at all) or
-- insufficient_role (a lower one). Operator code runs it first in the act's own transaction.
create function internal.require_staff(target uuid, need text) returns void
language plpgsql stable security definer set search_path = ''
as $$
declare
  held text := auth.staff_role(target);
begin
  if need not in ('reviewer', 'operator', 'admin', 'platform') then
    raise exception 'unknown staff role %', need using errcode = '22023';
  end if;
  if auth.has_staff_role(target, need) then
    return;
  end if;
  if held is null and (need <> 'platform' or auth.platform_staff_role() is null) then
    raise exception using errcode = '42501', hint = 'not_staff',
      message = format('the caller is not staff of tenant %s', target);
  end if;
  raise exception using errcode = '42501', hint = 'insufficient_role',
    message = format('this needs the staff role %s; the caller has %s', need,
      coalesce(case when need = 'platform' then auth.platform_staff_role() end, held));
end
$$;

-- Every tenant the caller may work on as staff, with its role there (GET /admin/v1/me, the
-- console's tenant chooser): its own tenant for a service-role key; for a user, the tenants of
-- their staff rows, or every tenant for platform staff.
create function auth.staff_tenants() returns table (tenant_id uuid, tenant_slug text, tenant_name text, role text)
language sql stable security definer set search_path = ''
as $$
  with c as (select auth.staff_caller() as claims),
  candidates as (
    select t.id, t.slug, t.name from internal.tenants t, c
    where (c.claims ->> 'role' = 'tenant_service' and t.id::text = c.claims ->> 'tenant_id')
      or exists (select 1 from internal.staff s
        where s.user_id = nullif(c.claims ->> 'sub', '')::uuid and (s.tenant_id = t.id or s.tenant_id is null))
  )
  select x.id, x.slug, x.name, x.r
  from (select cd.id, cd.slug, cd.name, auth.staff_role(cd.id) as r from candidates cd) x
  where x.r is not null
  order by x.name, x.id
$$;

revoke all on function auth.staff_role(uuid), auth.platform_staff_role(), auth.has_staff_role(uuid, text),
  auth.staff_tenants(), internal.require_staff(uuid, text) from public;
grant execute on function auth.staff_role(uuid), auth.platform_staff_role(), auth.has_staff_role(uuid, text),
  auth.staff_tenants() to authenticated, tenant_service, service_role;
grant execute on function internal.require_staff(uuid, text) to authenticated, tenant_service, service_role;

-- What staff read through /rest/v1 (and any query made as them): every row of their tenant that
-- their role covers, in the tenant of their token (the interface a tenant's apikey opens is that
-- tenant's; staff of another tenant work there through /admin/v1 with Backline-Tenant). These
-- policies add to the account policies (PostgreSQL ORs permissive policies); both helpers run
-- once per statement.
--   reviewer: releases, tracks, artist profiles, media, OAC requests
--   operator: also takedown requests, deliveries, release and track analytics
do $$
declare
  t text;
  tenant_rows constant text := 'account_id = any ((select auth.tenant_account_ids())::uuid[])';
begin
  foreach t in array array['public.releases', 'public.tracks', 'public.artist_profiles', 'public.media_assets',
    'internal.oac_requests'] loop
    execute format('create policy staff_reviewer_select on %s for select to authenticated using ((select auth.has_staff_role(auth.tenant_id(), %L)) and %s)',
      t, 'reviewer', tenant_rows);
  end loop;
  foreach t in array array['public.takedown_requests', 'internal.release_deliveries', 'public.release_analytics',
    'public.track_analytics'] loop
    execute format('create policy staff_operator_select on %s for select to authenticated using ((select auth.has_staff_role(auth.tenant_id(), %L)) and %s)',
      t, 'operator', tenant_rows);
  end loop;
end
$$;
