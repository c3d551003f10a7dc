-- The catalog's rules as triggers, so that the table interface, the public API and every future
-- client obey them alike. Violations raise SQLSTATE BL001..BL004, mapped to HTTP in src/db/errors.ts:
--   BL001 release_not_editable       409
--   BL002 invalid_status_transition  409
--   BL003 takedown_not_allowed       409
--   BL004 operator_only              403
-- The guards apply to clients (anon, authenticated, and a tenant's own service key as
-- tenant_service); service_role and the owner's path (internal.is_privileged()) are the operator
-- and may do what the lifecycle needs.

-- Whether `user_id` is a user of `tenant` (callers cannot read internal.users themselves).
create function internal.user_in_tenant(user_id uuid, tenant uuid) returns boolean
language sql stable security definer set search_path = ''
as $$ select exists (select 1 from internal.users u where u.id = user_id and u.tenant_id = tenant) $$;

-- Who owns a new row. A user's rows are always created_by the user (a client cannot claim
-- someone else's row); a tenant's service key may name a user of its tenant; a public-API key's
-- rows have none. account_id comes from the parent row named in the trigger's arguments, looked up
-- as the caller so that another account's parent is "not found", or else from
-- auth.default_account_id(). Missing values are reported as not-null violations here, before
-- row-level security would report them as a privilege problem.
create function internal.assign_owner() returns trigger
language plpgsql
as $$
declare
  parent_id uuid;
  parent_account uuid;
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
    parent_id := (to_jsonb(new) ->> tg_argv[1])::uuid;
    if parent_id is null then
      raise exception using errcode = '23502', column = tg_argv[1], table = tg_table_name,
        message = format('null value in column "%s" of relation "%s" violates not-null constraint', tg_argv[1], tg_table_name);
    end if;
    execute format('select account_id from public.%I where id = $1', tg_argv[0]) into parent_account using parent_id;
    if parent_account is null then
      raise exception using errcode = '23503',
        message = format('%s %s does not refer to a row you can see in %s', tg_argv[1], parent_id, tg_argv[0]),
        detail = format('Key (%s)=(%s) is not present in table "%s".', tg_argv[1], parent_id, tg_argv[0]);
    end if;
    if new.account_id is null then
      new.account_id := parent_account;
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

create trigger assign_owner before insert on public.artist_profiles
  for each row execute function internal.assign_owner();
create trigger assign_owner before insert on public.releases
  for each row execute function internal.assign_owner('artist_profiles', 'artist_id');
create trigger assign_owner before insert on public.tracks
  for each row execute function internal.assign_owner('releases', 'release_id');
create trigger assign_owner before insert on public.takedown_requests
  for each row execute function internal.assign_owner('releases', 'release_id');

-- Release lifecycle (docs/releases.md). Users create releases as draft or pending, edit them while
-- draft, pending or rejected, and move them between those and submitted. Everything after
-- submitted is the operator's.
create function internal.release_rules() returns trigger
language plpgsql
as $$
declare
  editable constant text[] := array['draft', 'pending', 'rejected'];
  user_targets constant text[] := array['draft', 'pending', 'submitted'];
begin
  if tg_op = 'DELETE' then
    if not internal.is_privileged() and old.status <> all (editable) then
      perform internal.refuse('BL001',
        format('release %s is %s and can no longer be deleted', old.id, old.status),
        jsonb_build_object('release_id', old.id, 'status', old.status)::text,
        'Only draft, pending and rejected releases can be deleted; a delivered release is taken down instead.');
    end if;
    return old;
  end if;

  if tg_op = 'INSERT' then
    if new.artist_name is null then
      select a.name into new.artist_name from public.artist_profiles a where a.id = new.artist_id;
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

create trigger release_rules before insert or update or delete on public.releases
  for each row execute function internal.release_rules();

-- Records every status change and writes its job and event, in the same transaction.
create function internal.release_status_changed() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  event_type text;
begin
  if tg_op = 'UPDATE' and new.status is not distinct from old.status then
    return null;
  end if;
  insert into internal.release_history (release_id, account_id, from_status, to_status, reason, actor_role,
    actor_user_id, actor_api_key_id)
  values (new.id, new.account_id, case when tg_op = 'UPDATE' then old.status end, new.status, new.status_reason,
    coalesce(auth.role(), 'system'), auth.uid(), nullif(auth.jwt() ->> 'api_key_id', '')::uuid);

  if new.status = 'submitted' then
    insert into internal.jobs (kind, payload, dedupe_key)
    values ('release.review', jsonb_build_object('release_id', new.id), new.id::text)
    on conflict (kind, dedupe_key) where dedupe_key is not null and status in ('queued', 'running') do nothing;
  end if;

  event_type := case new.status
    when 'submitted' then 'release.submitted'
    when 'approved' then 'release.approved'
    when 'rejected' then 'release.rejected'
    when 'live' then 'release.live'
    when 'taken_down' then 'release.takedown_completed'
  end;
  if event_type is not null then
    insert into internal.events (tenant_id, account_id, type, data)
    select a.tenant_id, new.account_id, event_type, jsonb_build_object('object', to_jsonb(new))
    from internal.accounts a where a.id = new.account_id;
  end if;
  return null;
end
$$;

create trigger release_status_changed after insert or update of status on public.releases
  for each row execute function internal.release_status_changed();

-- A deleted release leaves its last word in the history.
create function internal.release_deleted() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  insert into internal.release_history (release_id, account_id, from_status, to_status, actor_role, actor_user_id,
    actor_api_key_id)
  values (old.id, old.account_id, old.status, 'deleted', coalesce(auth.role(), 'system'), auth.uid(),
    nullif(auth.jwt() ->> 'api_key_id', '')::uuid);
  return null;
end
$$;

create trigger release_deleted after delete on public.releases
  for each row execute function internal.release_deleted();

-- Tracks change only while their release is editable (on an update, the release it leaves too).
-- ISRCs are stored normalised.
create function internal.track_rules() returns trigger
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
      select r.status into release_status from public.releases r where r.id = rid;
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

create trigger track_rules before insert or update or delete on public.tracks
  for each row execute function internal.track_rules();

-- Whether a release already has an open takedown request, whoever made it (the owner-only preset
-- hides a colleague's request from the caller).
create function internal.has_open_takedown(release uuid) returns boolean
language sql stable security definer set search_path = ''
as $$
  select exists (select 1 from public.takedown_requests t where t.release_id = release and t.status in ('pending', 'processing'))
$$;

-- Takedowns: a user asks, as pending, for a delivered or live release; the operator moves them on.
create function internal.takedown_rules() returns trigger
language plpgsql
as $$
declare
  release_status text;
begin
  if tg_op = 'INSERT' then
    if not internal.is_privileged() then
      if new.status <> 'pending' then
        perform internal.refuse('BL004',
          format('a takedown request is created as pending, not %s', new.status),
          jsonb_build_object('status', new.status)::text,
          'Leave status out or send pending; the operator''s backend moves it on.');
      end if;
      if internal.has_open_takedown(new.release_id) then
        raise exception using errcode = '23505', constraint = 'takedown_requests_open',
          message = format('release %s already has an open takedown request', new.release_id),
          detail = format('Key (release_id)=(%s) already exists.', new.release_id);
      end if;
      select r.status into release_status from public.releases r where r.id = new.release_id;
      if release_status not in ('delivered', 'live') then
        perform internal.refuse('BL003',
          format('release %s is %s; only a delivered or live release can be taken down', new.release_id, release_status),
          jsonb_build_object('release_id', new.release_id, 'status', release_status)::text,
          'A release that was never delivered can be deleted instead.');
      end if;
    end if;
    return new;
  end if;
  if new.status is distinct from old.status then
    if not internal.is_privileged() then
      perform internal.refuse('BL004',
        format('takedown request %s is %s; only the operator moves it on', old.id, old.status),
        jsonb_build_object('status', old.status, 'to', new.status)::text,
        'The operator''s backend sets processing, completed and rejected.');
    end if;
    if new.status = 'completed' then
      new.completed_at := now();
    end if;
  end if;
  return new;
end
$$;

create trigger takedown_rules before insert or update on public.takedown_requests
  for each row execute function internal.takedown_rules();

-- A new takedown request moves its release to takedown_requested and queues the processing job.
create function internal.takedown_requested() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.status = 'pending' then
    update public.releases set status = 'takedown_requested', status_reason = new.reason
      where id = new.release_id and status in ('delivered', 'live');
    insert into internal.jobs (kind, payload, dedupe_key)
    values ('takedown.process', jsonb_build_object('takedown_request_id', new.id), new.id::text)
    on conflict (kind, dedupe_key) where dedupe_key is not null and status in ('queued', 'running') do nothing;
  end if;
  return null;
end
$$;

create trigger takedown_requested after insert on public.takedown_requests
  for each row execute function internal.takedown_requested();

create function internal.notification_rules() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if tg_op = 'INSERT' then
    -- The recipient's tenant. Looked up as the owner: the caller need not read internal.users.
    if new.tenant_id is null then
      select u.tenant_id into new.tenant_id from internal.users u where u.id = new.user_id;
    end if;
    return new;
  end if;
  if new.read is distinct from old.read then
    new.read_at := case when new.read then now() end;
  end if;
  return new;
end
$$;

create trigger notification_rules before insert or update on public.notifications
  for each row execute function internal.notification_rules();
