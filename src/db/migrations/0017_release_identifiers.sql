-- Identifiers a store needs (docs/releases.md, "Identifiers"): a release carries a GTIN (its UPC
-- or EAN) and every track an ISRC before it can be submitted — or the platform assigns them at
-- submission, as distributors do, when the tenant's settings give it its own number ranges:
--
--   settings.gs1_company_prefix  the operator's GS1 Company Prefix, 6 to 12 digits in its GTIN-13
--                                form (a U.S. U.P.C. Company Prefix with a leading 0): releases
--                                without a UPC get prefix + item reference + check digit, written
--                                as a 12-digit UPC-A when the GTIN-13 starts with 0.
--   settings.isrc_registrant     the ISRC country code and registrant code, 'US-XYZ': tracks
--                                without an ISRC get USXYZ + the year's two digits + a 5-digit
--                                designation code (ISRC US-XYZ-26-00001).
--
-- Each number range has one counter row, locked while a number is drawn, so two submissions never
-- get the same number; a number is drawn only in the transaction that stores it, and a number a
-- release or track anywhere already has is skipped, so none is ever issued twice. The counters
-- belong to the number range (the prefix; the registrant and year), which is the tenant's own:
-- they outlive a tenant, and tenants wrongly sharing a range still never share a number.
--
-- The missing identifiers are submission checks (internal.release_problems) like the others:
-- param 'upc' / 'tracks[i].isrc', code 'required' (or 'gtin_unavailable' / 'isrc_unavailable'
-- when the tenant's range is used up). Both interfaces submit through the same transition (the
-- status becoming 'submitted'), where the numbers are assigned.

alter table internal.tenants add constraint tenants_identifier_settings check (
  (coalesce(jsonb_typeof(settings -> 'gs1_company_prefix'), 'null') = 'null'
    or (jsonb_typeof(settings -> 'gs1_company_prefix') = 'string'
      and (settings ->> 'gs1_company_prefix') ~ '^[0-9]{6,12}$'))
  and (coalesce(jsonb_typeof(settings -> 'isrc_registrant'), 'null') = 'null'
    or (jsonb_typeof(settings -> 'isrc_registrant') = 'string'
      and (settings ->> 'isrc_registrant') ~ '^[A-Z]{2}-[A-Z0-9]{3}$'))
);

create table internal.gtin_counters (
  company_prefix text primary key check (company_prefix ~ '^[0-9]{6,12}$'),
  -- The next item reference to try.
  next_item bigint not null default 0 check (next_item >= 0),
  -- The tenant that drew the last number (for the operator; the range is the key).
  tenant_id uuid,
  updated_at timestamptz not null default now()
);
alter table internal.gtin_counters enable row level security;

create table internal.isrc_counters (
  registrant text not null check (registrant ~ '^[A-Z]{2}[A-Z0-9]{3}$'),
  year smallint not null check (year between 0 and 99),
  -- The next designation code to try (00001 first).
  next_number integer not null default 1 check (next_number >= 1),
  tenant_id uuid,
  updated_at timestamptz not null default now(),
  primary key (registrant, year)
);
alter table internal.isrc_counters enable row level security;

-- GTIN check digit of the digits before it (any length): weights 3, 1, 3, ... from the right.
create function internal.gtin_check_digit(body text) returns integer
language sql immutable strict
as $$
  select (10 - coalesce(sum(substr(reverse(body), i, 1)::int * (case when i % 2 = 1 then 3 else 1 end)), 0)::int % 10) % 10
  from generate_series(1, length(body)) as i
$$;

-- The tenant's ranges, when its settings give them (the constraint above keeps their shape).
create function internal.tenant_gs1_prefix(tenant uuid) returns text
language sql stable security definer set search_path = ''
as $$ select t.settings ->> 'gs1_company_prefix' from internal.tenants t where t.id = tenant $$;

create function internal.tenant_isrc_registrant(tenant uuid) returns text
language sql stable security definer set search_path = ''
as $$ select replace(t.settings ->> 'isrc_registrant', '-', '') from internal.tenants t where t.id = tenant $$;

-- The two digits of the year an ISRC is assigned in (UTC).
create function internal.isrc_year() returns smallint
language sql stable
as $$ select (extract(year from (now() at time zone 'UTC'))::int % 100)::smallint $$;

-- Whether a GTIN / ISRC can still be drawn for the tenant (its range is set and not used up).
create function internal.gtin_assignable(tenant uuid) returns boolean
language sql stable security definer set search_path = ''
as $$
  select p is not null
    and coalesce((select c.next_item from internal.gtin_counters c where c.company_prefix = p), 0) < 10 ^ (12 - length(p))
  from internal.tenant_gs1_prefix(tenant) p
$$;

create function internal.isrc_assignable(tenant uuid) returns boolean
language sql stable security definer set search_path = ''
as $$
  select r is not null
    and coalesce((select c.next_number from internal.isrc_counters c
                  where c.registrant = r and c.year = internal.isrc_year()), 1) <= 99999
  from internal.tenant_isrc_registrant(tenant) r
$$;

-- Draws the tenant's next GTIN: null when it has no prefix or the range is used up.
create function internal.assign_gtin(tenant uuid) returns text
language plpgsql security definer set search_path = ''
as $$
declare
  prefix text := internal.tenant_gs1_prefix(tenant);
  capacity bigint;
  item bigint;
  body text;
  code text;
begin
  if prefix is null then
    return null;
  end if;
  capacity := (10 ^ (12 - length(prefix)))::bigint;
  loop
    -- The upsert locks the range's row until the transaction ends: one number at a time.
    insert into internal.gtin_counters as c (company_prefix, next_item, tenant_id) values (prefix, 1, tenant)
    on conflict (company_prefix) do update set next_item = c.next_item + 1, tenant_id = tenant, updated_at = now()
    returning c.next_item - 1 into item;
    if item >= capacity then
      return null;
    end if;
    body := prefix || case when length(prefix) < 12 then lpad(item::text, 12 - length(prefix), '0') else '' end;
    code := body || internal.gtin_check_digit(body);
    if code like '0%' then
      code := substr(code, 2); -- a GTIN-13 starting with 0 is the 12-digit UPC-A
    end if;
    if not exists (select 1 from public.releases r where r.upc in (code, '0' || code, ltrim(code, '0'))) then
      return code;
    end if;
  end loop;
end
$$;

-- Draws the tenant's next ISRC of this year: null when it has no registrant code or the year's
-- 99,999 codes are used up.
create function internal.assign_isrc(tenant uuid) returns text
language plpgsql security definer set search_path = ''
as $$
declare
  reg text := internal.tenant_isrc_registrant(tenant);
  yy smallint := internal.isrc_year();
  n integer;
  code text;
begin
  if reg is null then
    return null;
  end if;
  loop
    insert into internal.isrc_counters as c (registrant, year, next_number, tenant_id) values (reg, yy, 2, tenant)
    on conflict (registrant, year) do update set next_number = c.next_number + 1, tenant_id = tenant, updated_at = now()
    returning c.next_number - 1 into n;
    if n > 99999 then
      return null;
    end if;
    code := reg || lpad(yy::text, 2, '0') || lpad(n::text, 5, '0');
    if not exists (select 1 from public.tracks t where t.isrc = code) then
      return code;
    end if;
  end loop;
end
$$;

revoke execute on function internal.tenant_gs1_prefix(uuid), internal.tenant_isrc_registrant(uuid),
  internal.gtin_assignable(uuid), internal.isrc_assignable(uuid),
  internal.assign_gtin(uuid), internal.assign_isrc(uuid) from public;

-- The submission transition: when a release becomes submitted (through /rest/v1, the public API
-- or the operator), a release without a UPC and tracks without an ISRC get the tenant's next
-- numbers, when it has ranges. Fires after release_rules (triggers fire by name), which refuses a
-- transition its caller may not make first.
create function internal.release_assign_identifiers() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  tenant uuid;
  t record;
  code text;
begin
  if new.status <> 'submitted' or (tg_op = 'UPDATE' and old.status = 'submitted') then
    return new;
  end if;
  select a.tenant_id into tenant from internal.accounts a where a.id = new.account_id;
  if new.upc is null then
    new.upc := internal.assign_gtin(tenant);
  end if;
  if tg_op = 'UPDATE' then
    for t in
      select tr.id from public.tracks tr where tr.release_id = new.id and tr.isrc is null
      order by tr.disc_number, tr.track_number nulls last, tr.created_at, tr.id
      for update
    loop
      code := internal.assign_isrc(tenant);
      exit when code is null;
      update public.tracks set isrc = code where id = t.id;
    end loop;
  end if;
  return new;
end
$$;
create trigger release_rules_identifiers before insert or update of status on public.releases
  for each row execute function internal.release_assign_identifiers();

-- The identifier checks, added to what release_problems already says (whatever the migrations
-- before this one made it): the function so far keeps its grants under a new name.
alter function internal.release_problems(uuid) rename to release_problems_without_identifiers;

create function internal.identifier_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  r public.releases;
  tenant uuid;
  problems jsonb := '[]';
begin
  select * into r from public.releases where id = release;
  if not found then
    return problems;
  end if;
  select a.tenant_id into tenant from internal.accounts a where a.id = r.account_id;
  if r.upc is null then
    if internal.tenant_gs1_prefix(tenant) is null then
      problems := problems || jsonb_build_object('param', 'upc', 'code', 'required',
        'message', 'upc is required to submit: the release''s GTIN (a 12-digit UPC-A or 13-digit EAN-13)');
    elsif not internal.gtin_assignable(tenant) then
      problems := problems || jsonb_build_object('param', 'upc', 'code', 'gtin_unavailable',
        'message', 'upc is required to submit, and the platform''s GS1 company prefix has no GTIN left to assign: give the release its own UPC');
    end if;
  end if;
  return problems;
end
$$;
revoke execute on function internal.identifier_problems(uuid) from public;

create function internal.release_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  p jsonb := internal.release_problems_without_identifiers(release);
  tenant uuid;
begin
  if p is null then
    return null;
  end if;
  select a.tenant_id into tenant from public.releases r join internal.accounts a on a.id = r.account_id
    where r.id = release;
  -- A track without an ISRC is a problem only when none will be assigned at submission.
  if internal.isrc_assignable(tenant) then
    p := coalesce((select jsonb_agg(e order by n) from jsonb_array_elements(p) with ordinality as x(e, n)
                   where not (e ->> 'code' = 'required' and (e ->> 'param') ~ '^tracks\[[0-9]+\]\.isrc$')), '[]');
  elsif internal.tenant_isrc_registrant(tenant) is not null then
    p := coalesce((select jsonb_agg(case when e ->> 'code' = 'required' and (e ->> 'param') ~ '^tracks\[[0-9]+\]\.isrc$'
                                         then e || jsonb_build_object('code', 'isrc_unavailable',
                                           'message', (e ->> 'message') || ': the platform''s ISRC codes for this year are used up, give it its own')
                                         else e end order by n)
                   from jsonb_array_elements(p) with ordinality as x(e, n)), '[]');
  end if;
  return internal.identifier_problems(release) || p;
end
$$;
revoke execute on function internal.release_problems(uuid) from public;
grant execute on function internal.release_problems(uuid) to authenticated, tenant_service, service_role;
