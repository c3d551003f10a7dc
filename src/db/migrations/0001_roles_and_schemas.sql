-- Roles, schemas and the claim helpers every policy uses.
--
-- A request runs as one of four database roles (set per transaction by Db.withRequestContext):
--   anon            a tenant's anon key alone (a public client before login)
--   authenticated   a logged-in user's access token, or a public-API key
--   tenant_service  a tenant's service-role key: every row of that tenant, no other tenant's
--   service_role    the operator: workers, the CLI, the admin API (BYPASSRLS, every tenant)
-- On PostgreSQL in production a superuser creates these roles once (docs/database.md); this
-- migration creates them only when they are missing, so the schema owner need not be a superuser.

do $$
begin
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'tenant_service') then
    create role tenant_service nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  if (select rolbypassrls from pg_roles where rolname = 'tenant_service') then
    raise exception 'role tenant_service must not have BYPASSRLS'
      using hint = 'As a superuser: alter role tenant_service nobypassrls';
  end if;
  if not (select rolbypassrls from pg_roles where rolname = 'service_role') then
    raise exception 'role service_role exists without BYPASSRLS'
      using hint = 'As a superuser: alter role service_role bypassrls';
  end if;
end
$$;

-- internal: every table that is not part of the table interface (created by the migration runner).
-- auth: functions reading the request's claims, in the style of Supabase's auth.uid().
create schema if not exists auth;

grant usage on schema public, auth to anon, authenticated, tenant_service, service_role;
-- Trigger functions live in internal and run as the caller, so callers need to resolve names
-- there. They get no privilege on any internal table, and every internal table has RLS enabled
-- with no policy for them: USAGE alone reveals nothing.
grant usage on schema internal to anon, authenticated, tenant_service, service_role;

alter default privileges in schema internal grant all on tables to service_role;
alter default privileges in schema internal grant all on sequences to service_role;
alter default privileges in schema public grant all on tables to service_role;
alter default privileges in schema public grant all on sequences to service_role;
grant select on internal.schema_migrations to service_role;

-- The claims of the current request, as set by Db.withRequestContext ('{}' outside a request).
create function auth.jwt() returns jsonb
language sql stable
as $$ select coalesce(nullif(current_setting('request.jwt.claims', true), ''), '{}')::jsonb $$;

-- The user id (sub claim); null for the anon key, the service role and public-API keys without a user.
create function auth.uid() returns uuid
language sql stable
as $$ select nullif(auth.jwt() ->> 'sub', '')::uuid $$;

create function auth.role() returns text
language sql stable
as $$ select auth.jwt() ->> 'role' $$;

create function auth.tenant_id() returns uuid
language sql stable
as $$ select nullif(auth.jwt() ->> 'tenant_id', '')::uuid $$;

-- True for the operator: service_role and code running as the schema owner (SECURITY DEFINER
-- functions, migrations); false for clients, including a tenant's own service key, which obeys
-- the catalog's lifecycle rules like its users do. This reads current_user, not a claim, so
-- nothing a client sends can change it.
create function internal.is_privileged() returns boolean
language sql stable
as $$ select current_user not in ('anon', 'authenticated', 'tenant_service') $$;

-- Raises a Backline rule violation: SQLSTATE 'BLnnn' (the HTTP layers map each to a code and
-- status in src/db/errors.ts), a sentence for people, and details for programs.
create function internal.refuse(sqlstate text, message text, detail text default null, hint text default null)
returns void
language plpgsql
as $$
begin
  raise exception using errcode = sqlstate, message = message, detail = detail, hint = hint;
end
$$;

create function internal.touch_updated_at() returns trigger
language plpgsql
as $$
begin
  new.updated_at := now();
  return new;
end
$$;
