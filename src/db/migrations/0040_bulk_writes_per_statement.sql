-- A release's creation writes its history, its job, its event and their audit rows once per
-- statement, not once per row (issue 40, item 1: a label's bulk insert through /rest/v1 at the
-- owner's speed; bench/bulk-writes).
--
-- Before: the row trigger release_status_changed inserted one release_history row per new
-- release, and each of those fired the row trigger internal.audit_row('people') on
-- release_history, which computed the actor, the row's image and its tenant and inserted one
-- internal.audit_log row: about 0.18 ms a release, most of what a person's 8,000-release insert
-- cost beyond the owner's (2.25 s against 0.80 s in SQL; 0.83 s with that audit trigger off).
--
-- Now:
-- - an insert into public.releases writes its history rows, its release.review jobs and its
--   events in one INSERT each, from the statement's transition table (release_created);
--   release_status_changed stays the row trigger for status updates, unchanged;
-- - release_history's audit trigger is per statement too: the actor asked once, one INSERT …
--   SELECT of every new history row's audit row. What it writes is what audit_row('people')
--   wrote for each row (the same columns, the same image through internal.audit_image, nothing
--   for the server's own work), so the audit log reads the same;
-- - assign_owner looks a parent up once for the rows of a statement that share it (below).

create function internal.release_created() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  actor_role text := coalesce(auth.role(), 'system');
  actor_user uuid := auth.uid();
  actor_key uuid := nullif(auth.jwt() ->> 'api_key_id', '')::uuid;
begin
  insert into internal.release_history (release_id, account_id, from_status, to_status, reason, actor_role,
    actor_user_id, actor_api_key_id)
  select n.id, n.account_id, null, n.status, n.status_reason, actor_role, actor_user, actor_key
  from created n;

  insert into internal.jobs (kind, payload, dedupe_key)
  select 'release.review', jsonb_build_object('release_id', n.id), n.id::text
  from created n where n.status = 'submitted'
  on conflict (kind, dedupe_key) where dedupe_key is not null and status in ('queued', 'running') do nothing;

  insert into internal.events (tenant_id, account_id, type, data)
  select a.tenant_id, n.account_id, e.type, jsonb_build_object('object', to_jsonb(n))
  from created n
  cross join lateral (select case n.status
      when 'submitted' then 'release.submitted'
      when 'approved' then 'release.approved'
      when 'rejected' then 'release.rejected'
      when 'live' then 'release.live'
      when 'taken_down' then 'release.takedown_completed'
    end as type) e
  join internal.accounts a on a.id = n.account_id
  where e.type is not null;
  return null;
end
$$;

drop trigger release_status_changed on public.releases;
create trigger release_status_changed after update of status on public.releases
  for each row execute function internal.release_status_changed();
create trigger release_created after insert on public.releases
  referencing new table as created
  for each statement execute function internal.release_created();

-- release_history's audit rows, per statement: what audit_row('people') writes for an insert.
-- The row's image is the row without the columns the rule hides (internal.audit_hidden_column),
-- decided once per statement from the table's columns rather than once per key of every row;
-- keys inside a json value are scrubbed by internal.audit_image, as before, should the table
-- ever have such a column (it has none today).
create function internal.audit_release_history() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  a jsonb := internal.audit_actor();
  hidden text[];
  has_json boolean;
begin
  -- The server's own work (a worker moving a delivery along) is not an act to record.
  if a ->> 'type' = 'system' then
    return null;
  end if;
  select coalesce(array_agg(c.attname::text) filter (where internal.audit_hidden_column('internal.release_history', c.attname)), '{}'),
    coalesce(bool_or(c.atttypid in ('json'::regtype, 'jsonb'::regtype)), false)
  into hidden, has_json
  from pg_catalog.pg_attribute c
  where c.attrelid = 'internal.release_history'::regclass and c.attnum > 0 and not c.attisdropped;
  insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id,
    before, after)
  select ac.tenant_id, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', 'insert', 'internal.release_history',
    h.id::text, null,
    case when has_json then internal.audit_image('internal.release_history', to_jsonb(h)) else to_jsonb(h) - hidden end
  from inserted h left join internal.accounts ac on ac.id = h.account_id
  order by h.id;
  return null;
end
$$;

drop trigger audit on internal.release_history;
create trigger audit after insert on internal.release_history
  referencing new table as inserted
  for each statement execute function internal.audit_release_history();


-- assign_owner (migration 0032's) remembers the last parent it read for the statement: rows that
-- share a parent (a release's tracks, an artist's releases — most rows of a label's bulk insert)
-- look it up once, not once a row. The memo is migration 0032's kind, under its key
-- (internal.caller_memo_key(): the same statement, the same claims, and off once the transaction
-- changes a table the caller's access is read from), plus the parent's table and id; it holds the
-- parent's account and detail (an artist's name, a release's status) as the caller read them, and
-- only a parent the caller could see (an unseen one is looked up again, and refused). Within one
-- statement the answer is the one the statement first saw, as a statement's own snapshot would be.

create or replace function internal.assign_owner() returns trigger
language plpgsql
as $$
declare
  parent_id uuid;
  parent_account uuid;
  parent_detail text;
  memo text;
  stash text;
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
    memo := internal.caller_memo_key();
    if memo is not null and tg_argv[0] in ('artist_profiles', 'releases') then
      -- "<memo key> <table> <parent id>" newline "<account id>" newline "<detail>": one setting.
      memo := memo || ' ' || tg_argv[0] || ' ' || parent_id || E'\n';
      stash := pg_catalog.current_setting('backline.memo_parent', true);
    end if;
    if stash is not null and left(stash, length(memo)) = memo then
      -- The previous row's parent, read by this caller in this statement: its answer again.
      parent_account := substr(stash, length(memo) + 1, 36)::uuid;
      parent_detail := nullif(substr(stash, length(memo) + 38), '');
      memo := null; -- nothing new to remember
    elsif tg_argv[0] = 'artist_profiles' then
      select p.account_id, p.name into parent_account, parent_detail from public.artist_profiles p where p.id = parent_id;
    elsif tg_argv[0] = 'releases' then
      select p.account_id, p.status into parent_account, parent_detail from public.releases p where p.id = parent_id;
    else
      execute format('select account_id from public.%I where id = $1', tg_argv[0]) into parent_account using parent_id;
    end if;
    if memo is not null and parent_account is not null and tg_argv[0] in ('artist_profiles', 'releases') then
      perform pg_catalog.set_config('backline.memo_parent',
        memo || parent_account::text || E'\n' || coalesce(parent_detail, ''), true);
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

revoke all on function internal.release_created() from public;
revoke all on function internal.audit_release_history() from public;
