-- Rules at statement speed (issue 40, item 1): what a statement needs to know about its caller is
-- worked out once, not once per row (docs/database.md, "Asking who the caller is once").
--
-- Before: the account-access helpers were SQL functions with SECURITY DEFINER and SET search_path,
-- which PostgreSQL neither inlines nor keeps a plan for, so each call planned its body again. The
-- policies wrap them in (select ...), evaluated once per execution of a query; but the row triggers
-- of a bulk insert (assign_owner's parent lookup, release_rules' artist name, track_rules' release
-- status) run one query per row as the caller, so every row asked again who the caller is, which
-- accounts they may read and whether they are staff: ~0.6 ms a row as `authenticated`.
--
-- Now each helper is an inlinable SQL expression that answers from a memo when it holds the answer
-- for exactly this question, and otherwise calls the helper's body (the same query as before, in a
-- PL/pgSQL function with SECURITY DEFINER, whose plan the connection keeps), which remembers it.
-- The memo is a set of transaction-local settings (set_config(..., true)): gone at commit or
-- rollback, reverted with a rolled-back savepoint, never seen by another transaction, so never by
-- another caller of the connection or the pool. An answer is reused only under the same key:
--   * the same claims (request.jwt.claims, the only input of the helpers' answers besides the tables:
--     a change of claims mid-transaction, as the service path and the public API's key check make,
--     is a new key);
--   * the same statement (statement_timestamp(), to the microsecond: each statement a client sends
--     starts at its own; the queries that triggers and functions run inside it share it): so an
--     answer lives as long as one statement, like the policies' own (select ...), and the next
--     statement asks again, seeing what other transactions committed meanwhile, as before;
--   * and no change in this transaction to a table the answers are read from: a change to one of
--     them (memberships, accounts, tenants, users, staff, platform_settings) switches the memo off
--     for the rest of the transaction (backline.caller_memo = 'off', set before the statement
--     changes anything), and with session_replication_role = replica (triggers do not fire) it is
--     off too.
-- The answers depend on nothing else: not on current_user (which SECURITY DEFINER contexts and
-- `set local role` change), only on the claims and those tables; now() is fixed per transaction.
-- A memo is a setting a session could write, like request.jwt.claims itself: whoever could forge it
-- could forge the claims, so it trusts nothing the claims did not already trust.

create function internal.caller_memo_key() returns text
language sql stable
as $$
  select case
    when pg_catalog.current_setting('backline.caller_memo', true) is distinct from 'off'
      and pg_catalog.current_setting('session_replication_role') <> 'replica'
    then extract(epoch from pg_catalog.statement_timestamp())::text || ' '
      || coalesce(pg_catalog.current_setting('request.jwt.claims', true), '')
  end
$$;

-- The memo's on/off switch: before any change to a table the helpers read.
create function internal.caller_memo_off() returns trigger
language plpgsql
as $$
begin
  perform pg_catalog.set_config('backline.caller_memo', 'off', true);
  return null;
end
$$;

do $$
declare
  t text;
begin
  foreach t in array array['memberships', 'accounts', 'tenants', 'users', 'staff', 'platform_settings'] loop
    execute format('create trigger caller_memo_off before insert or update or delete or truncate on internal.%I '
      'for each statement execute function internal.caller_memo_off()', t);
  end loop;
end
$$;

-- auth.readable_account_ids(): as in migration 0020.
create function internal.readable_account_ids_fresh() returns uuid[]
language plpgsql stable security definer set search_path = ''
as $$
declare
  key text := internal.caller_memo_key();
  ids uuid[];
begin
  ids := case
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
  end;
  if key is not null then
    perform set_config('backline.memo_readable', ids::text, true), set_config('backline.memo_readable_key', key, true);
  end if;
  return ids;
end
$$;

create or replace function auth.readable_account_ids() returns uuid[]
language sql stable security invoker
as $$
  select case when pg_catalog.current_setting('backline.memo_readable_key', true) = internal.caller_memo_key()
    then pg_catalog.current_setting('backline.memo_readable', true)::uuid[]
    else internal.readable_account_ids_fresh() end
$$;

-- auth.writable_account_ids(): as in migration 0020.
create function internal.writable_account_ids_fresh() returns uuid[]
language plpgsql stable security definer set search_path = ''
as $$
declare
  key text := internal.caller_memo_key();
  ids uuid[];
begin
  ids := case
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
  end;
  if key is not null then
    perform set_config('backline.memo_writable', ids::text, true), set_config('backline.memo_writable_key', key, true);
  end if;
  return ids;
end
$$;

create or replace function auth.writable_account_ids() returns uuid[]
language sql stable security invoker
as $$
  select case when pg_catalog.current_setting('backline.memo_writable_key', true) = internal.caller_memo_key()
    then pg_catalog.current_setting('backline.memo_writable', true)::uuid[]
    else internal.writable_account_ids_fresh() end
$$;

-- auth.tenant_account_ids(): as in migration 0002.
create function internal.tenant_account_ids_fresh() returns uuid[]
language plpgsql stable security definer set search_path = ''
as $$
declare
  key text := internal.caller_memo_key();
  ids uuid[];
begin
  ids := coalesce((select array_agg(a.id) from internal.accounts a where a.tenant_id = auth.tenant_id()), '{}');
  if key is not null then
    perform set_config('backline.memo_tenant', ids::text, true), set_config('backline.memo_tenant_key', key, true);
  end if;
  return ids;
end
$$;

create or replace function auth.tenant_account_ids() returns uuid[]
language sql stable security invoker
as $$
  select case when pg_catalog.current_setting('backline.memo_tenant_key', true) = internal.caller_memo_key()
    then pg_catalog.current_setting('backline.memo_tenant', true)::uuid[]
    else internal.tenant_account_ids_fresh() end
$$;

-- auth.sees_whole_account(): as in migration 0002.
create function internal.sees_whole_account_fresh() returns boolean
language plpgsql stable security definer set search_path = ''
as $$
declare
  key text := internal.caller_memo_key();
  whole boolean;
begin
  whole := auth.jwt() ? 'account_id'
    or coalesce((select t.policy_preset <> 'owner-only' from internal.tenants t where t.id = auth.tenant_id()), false);
  if key is not null then
    perform set_config('backline.memo_whole', whole::text, true), set_config('backline.memo_whole_key', key, true);
  end if;
  return whole;
end
$$;

create or replace function auth.sees_whole_account() returns boolean
language sql stable security invoker
as $$
  select case when pg_catalog.current_setting('backline.memo_whole_key', true) = internal.caller_memo_key()
    then pg_catalog.current_setting('backline.memo_whole', true)::boolean
    else internal.sees_whole_account_fresh() end
$$;

-- auth.has_staff_role(target, need): as in migration 0020 (the staff_reviewer_select policies of the
-- catalog ask it on every read of a catalog table). One memo slot, for the last (target, need) asked;
-- both are part of its key, the need quoted so that no two questions share a key.
create function internal.has_staff_role_fresh(target uuid, need text) returns boolean
language plpgsql stable security definer set search_path = ''
as $$
declare
  key text := coalesce(target::text, '') || ' ' || quote_nullable(need) || ' ' || internal.caller_memo_key();
  holds boolean;
begin
  select case
    when need = 'platform' then coalesce(c.platform_role = 'admin', false) and auth.staff_aal_ok(null, true)
    else coalesce(internal.staff_rank(c.tenant_role) >= internal.staff_rank(need), false)
  end into holds
  from internal.caller_staff(target) c;
  if key is not null then
    perform set_config('backline.memo_staff', holds::text, true), set_config('backline.memo_staff_key', key, true);
  end if;
  return holds;
end
$$;

-- The same callers as auth.has_staff_role (migration 0019), not anon.
revoke all on function internal.has_staff_role_fresh(uuid, text) from public;
grant execute on function internal.has_staff_role_fresh(uuid, text) to authenticated, tenant_service, service_role;

create or replace function auth.has_staff_role(target uuid, need text) returns boolean
language sql stable security invoker
as $$
  select case when pg_catalog.current_setting('backline.memo_staff_key', true)
      = coalesce(target::text, '') || ' ' || pg_catalog.quote_nullable(need) || ' ' || internal.caller_memo_key()
    then pg_catalog.current_setting('backline.memo_staff', true)::boolean
    else internal.has_staff_role_fresh(target, need) end
$$;

-- assign_owner as in migration 0005, with the parent looked up by a static query for the parents it
-- is used with (a query PL/pgSQL plans once per connection; EXECUTE planned it again for every
-- row), still as the caller. Another parent table keeps the EXECUTE.
create or replace function internal.assign_owner() returns trigger
language plpgsql
as $$
declare
  parent_id uuid;
  parent_account uuid;
  parent_detail text;
begin
  if current_user = 'tenant_service' then
    if new.created_by is not null and not internal.user_in_tenant(new.created_by, auth.tenant_id()) then
      raise exception using errcode = '23503', column = 'created_by',
        message = format('created_by %s is not a user of this tenant', new.created_by);
    end if;
  elsif not internal.is_privileged() then
    new.created_by := auth.uid();
  end if;
  if tg_nargs = 2 then
    -- (Separate statements: a row of a table without artist_id never evaluates new.artist_id.)
    if tg_argv[1] = 'artist_id' then
      parent_id := new.artist_id;
    elsif tg_argv[1] = 'release_id' then
      parent_id := new.release_id;
    else
      parent_id := (to_jsonb(new) ->> tg_argv[1])::uuid;
    end if;
    if parent_id is null then
      raise exception using errcode = '23502', column = tg_argv[1], table = tg_table_name,
        message = format('null value in column "%s" of relation "%s" violates not-null constraint', tg_argv[1], tg_table_name);
    end if;
    if tg_argv[0] = 'artist_profiles' then
      select p.account_id, p.name into parent_account, parent_detail from public.artist_profiles p where p.id = parent_id;
    elsif tg_argv[0] = 'releases' then
      select p.account_id, p.status into parent_account, parent_detail from public.releases p where p.id = parent_id;
    else
      execute format('select account_id from public.%I where id = $1', tg_argv[0]) into parent_account using parent_id;
    end if;
    if parent_account is null then
      raise exception using errcode = '23503',
        message = format('%s %s does not refer to a row you can see in %s', tg_argv[1], parent_id, tg_argv[0]),
        detail = format('Key (%s)=(%s) is not present in table "%s".', tg_argv[1], parent_id, tg_argv[0]);
    end if;
    if new.account_id is null then
      new.account_id := parent_account;
    end if;
    -- What the next rule of this row asks about the same parent (release_rules: the artist's name;
    -- track_rules: the release's status), as read here by the caller: backline.row_parent is
    -- "<table> <parent id> <value>", written for every row of those two tables (so never one
    -- row's for another) and cleared by the rule that reads it.
    if tg_table_schema = 'public' and tg_table_name in ('releases', 'tracks') then
      perform set_config('backline.row_parent',
        case when parent_detail is not null then tg_table_name || ' ' || parent_id || ' ' || parent_detail else '' end, true);
    end if;
  elsif new.account_id is null then
    new.account_id := auth.default_account_id();
    if new.account_id is null then
      raise exception using errcode = '23502', column = 'account_id', table = tg_table_name,
        message = format('null value in column "account_id" of relation "%s" violates not-null constraint', tg_table_name),
        hint = 'Name the account: the caller has no account it may write to by default.';
    end if;
  end if;
  return new;
end
$$;

-- The parent row as assign_owner read it for this row, as the caller (see there), or null.
create function internal.row_parent(tbl text, parent uuid) returns text
language plpgsql
as $$
declare
  stash text := current_setting('backline.row_parent', true);
  prefix text := tbl || ' ' || parent || ' ';
begin
  if stash is null or stash = '' then
    return null;
  end if;
  perform set_config('backline.row_parent', '', true);
  if left(stash, length(prefix)) = prefix then
    return substr(stash, length(prefix) + 1);
  end if;
  return null;
end
$$;

-- release_rules as in migration 0007; on insert, the artist's name comes from assign_owner's lookup
-- of the same artist for the same row (as the caller), else from the same query as before.
create or replace function internal.release_rules() returns trigger
language plpgsql
as $$
declare
  editable constant text[] := array['draft', 'pending', 'rejected'];
  user_targets constant text[] := array['draft', 'pending', 'submitted'];
  never_delivered constant text[] := array['draft', 'pending', 'submitted', 'in_review', 'approved', 'rejected'];
begin
  if tg_op = 'DELETE' then
    if not internal.is_privileged() and old.status <> all (never_delivered) then
      perform internal.refuse('BL001',
        format('release %s is %s and can no longer be deleted', old.id, old.status),
        jsonb_build_object('release_id', old.id, 'status', old.status)::text,
        'Only a release that has not gone to any store can be deleted; a delivered release is taken down instead.');
    end if;
    return old;
  end if;

  if tg_op = 'INSERT' then
    if new.artist_name is null then
      new.artist_name := internal.row_parent('releases', new.artist_id);
      if new.artist_name is null then
        select a.name into new.artist_name from public.artist_profiles a where a.id = new.artist_id;
      end if;
    end if;
    if not internal.is_privileged() and new.status not in ('draft', 'pending') then
      perform internal.refuse('BL002',
        format('a new release starts as draft or pending, not %s', new.status),
        jsonb_build_object('from', null, 'to', new.status, 'allowed', array['draft', 'pending'])::text,
        'Create the release, then set status to submitted.');
    end if;
    if new.status = 'submitted' then
      new.submitted_at := now();
    end if;
    return new;
  end if;

  -- UPDATE
  if not internal.is_privileged() then
    if old.status <> all (editable) then
      perform internal.refuse('BL001',
        format('release %s is %s and can no longer be changed', old.id, old.status),
        jsonb_build_object('release_id', old.id, 'status', old.status)::text,
        'Only draft, pending and rejected releases can be edited.');
    end if;
    if new.status is distinct from old.status and new.status <> all (user_targets) then
      perform internal.refuse('BL002',
        format('a release cannot be moved from %s to %s by its account', old.status, new.status),
        jsonb_build_object('from', old.status, 'to', new.status, 'allowed', user_targets)::text,
        'Set status to submitted; review, delivery and live are set by the operator.');
    end if;
  end if;
  if new.status is distinct from old.status then
    if new.status = 'submitted' then
      new.submitted_at := now();
    end if;
    if not internal.is_privileged() then
      new.status_reason := null; -- a resubmission clears the rejection reason
    end if;
  end if;
  return new;
end
$$;

-- track_rules as in migration 0005; on insert, the release's status comes from assign_owner's lookup
-- of the same release for the same row (as the caller), else from the same query as before.
create or replace function internal.track_rules() returns trigger
language plpgsql
as $$
declare
  release_status text;
  release_ids uuid[];
  rid uuid;
begin
  if tg_op = 'DELETE' then
    release_ids := array[old.release_id];
  elsif tg_op = 'INSERT' then
    release_ids := array[new.release_id];
  else
    release_ids := array[old.release_id, new.release_id];
  end if;
  if tg_op <> 'DELETE' and new.isrc is not null then
    new.isrc := upper(replace(btrim(new.isrc), '-', ''));
  end if;
  if not internal.is_privileged() then
    foreach rid in array release_ids loop
      release_status := case when tg_op = 'INSERT' then internal.row_parent('tracks', rid) end;
      if release_status is null then
        select r.status into release_status from public.releases r where r.id = rid;
      end if;
      if release_status is not null and release_status not in ('draft', 'pending', 'rejected') then
        perform internal.refuse('BL001',
          format('release %s is %s; its tracks can no longer be changed', rid, release_status),
          jsonb_build_object('release_id', rid, 'status', release_status)::text,
          'Only tracks of draft, pending and rejected releases can be edited.');
      end if;
    end loop;
  end if;
  if tg_op = 'DELETE' then
    return old;
  end if;
  return new;
end
$$;
