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
--   for the server's own work), so the audit log reads the same.

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

-- release_history's audit rows, per statement (audit_row('people') for inserts, set-based).
create function internal.audit_release_history() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  a jsonb := internal.audit_actor();
begin
  -- The server's own work (a worker moving a delivery along) is not an act to record.
  if a ->> 'type' = 'system' then
    return null;
  end if;
  insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id,
    before, after)
  select ac.tenant_id, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', 'insert', 'internal.release_history',
    h.id::text, null, internal.audit_image('internal.release_history', to_jsonb(h))
  from inserted h left join internal.accounts ac on ac.id = h.account_id
  order by h.id;
  return null;
end
$$;

drop trigger audit on internal.release_history;
create trigger audit after insert on internal.release_history
  referencing new table as inserted
  for each statement execute function internal.audit_release_history();

revoke all on function internal.release_created() from public;
revoke all on function internal.audit_release_history() from public;
