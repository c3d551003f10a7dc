-- Issue 28, items 3 and 4 (docs/ddex.md "Takedowns", docs/royalties.md "Voiding an import").
--
-- 1. A store's takedown is done when the store confirms it, not when the message reaches its
--    drop: a takedown delivery goes pending -> in_progress -> takedown_sent (the message is at the
--    store) -> taken_down (the store confirmed: by itself for the sandbox store, by the store's
--    report, or recorded by hand by the operator, saying who and how). The release is taken down
--    (and release.takedown_completed sent) when every store confirmed. The takedown request keeps
--    its stores' states and times (public.takedown_requests.stores, readable at /rest/v1), and the
--    event carries the request.
-- 2. A royalty import can be voided: its lines stay, each answered by a reversing line (the same
--    line negated, reverses_line_id naming it), and the reversing lines leave every total and
--    analytics figure as if the import had never been. Lines are never updated (a trigger
--    refuses it); a voided import no longer blocks the same file from being imported again.

-- 1. Takedowns confirmed per store.

alter table internal.release_deliveries drop constraint release_deliveries_status_check;
alter table internal.release_deliveries
  -- When the store confirmed the removal, who confirmed it, how it was recorded and what was said.
  add column taken_down_at timestamptz,
  add column confirmed_by text check (confirmed_by in ('store', 'sandbox', 'operator', 'assumed')),
  add column confirmed_via text check (confirmed_via in ('sandbox', 'store', 'cli', 'admin_api', 'migration')),
  add column confirmation_note text check (length(confirmation_note) <= 2000);

-- Takedowns recorded before this migration were counted done when their message was sent.
update internal.release_deliveries
  set status = 'taken_down', taken_down_at = coalesce(delivered_at, updated_at), confirmed_by = 'assumed',
      confirmed_via = 'migration',
      confirmation_note = 'Counted as removed when the takedown was sent, before Backline waited for stores to confirm.'
  where action = 'takedown' and status = 'delivered';

alter table internal.release_deliveries
  add constraint release_deliveries_status_check
    check (status in ('pending', 'in_progress', 'delivered', 'live', 'takedown_sent', 'taken_down', 'error')),
  -- delivered and live are an insert's or update's; takedown_sent and taken_down a takedown's.
  add constraint release_deliveries_status_action check (
    case action when 'takedown' then status not in ('delivered', 'live')
      else status not in ('takedown_sent', 'taken_down') end),
  add constraint release_deliveries_confirmed check (
    status <> 'taken_down' or (taken_down_at is not null and confirmed_by is not null and confirmed_via is not null));

-- A store's removal is told to the account when the store confirms it (it was: when it was sent).
create or replace function internal.delivery_notifications() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  release_title text;
  store_name text;
  kind text;
begin
  if new.status is not distinct from old.status then
    return null;
  end if;
  kind := case
    when new.action <> 'takedown' and new.status = 'live' then 'delivery.live'
    when new.action = 'takedown' and new.status = 'taken_down' then 'delivery.removed'
    when new.status = 'error' then 'delivery.error'
  end;
  if kind is null then
    return null;
  end if;
  select r.title into release_title from public.releases r where r.id = new.release_id;
  select s.name into store_name from internal.stores s where s.code = new.store;
  perform internal.notify_members(new.account_id, kind,
    case kind
      when 'delivery.live' then format('“%s” is live on %s', release_title, store_name)
      when 'delivery.removed' then format('“%s” was removed from %s', release_title, store_name)
      else format('Delivery of “%s” to %s failed', release_title, store_name)
    end,
    coalesce(new.message, ''),
    jsonb_build_object('release_id', new.release_id, 'store', new.store, 'action', new.action, 'delivery_id', new.id));
  return null;
end
$$;

-- Per store, where the takedown stands: [{"store", "status", "sent_at", "taken_down_at",
-- "confirmed_by"}], the latest takedown delivery of each store since the request was made.
alter table public.takedown_requests add column stores jsonb not null default '[]'
  check (jsonb_typeof(stores) = 'array');
comment on column public.takedown_requests.stores is
  'Per store: status (pending, in_progress, takedown_sent, taken_down, error), sent_at (the takedown reached the store), taken_down_at (the store confirmed) and confirmed_by (store, sandbox, operator).';

create function internal.takedown_stores(release uuid, since timestamptz) returns jsonb
language sql stable security definer set search_path = ''
as $$
  select coalesce(jsonb_agg(jsonb_build_object('store', d.store, 'status', d.status, 'sent_at', d.delivered_at,
    'taken_down_at', d.taken_down_at, 'confirmed_by', d.confirmed_by) order by d.store), '[]')
  from (select distinct on (store) store, status, delivered_at, taken_down_at, confirmed_by
        from internal.release_deliveries
        where release_id = release and action = 'takedown' and created_at >= since
        order by store, created_at desc, id) d
$$;
revoke execute on function internal.takedown_stores(uuid, timestamptz) from public;

create function internal.takedown_delivery_changed() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  update public.takedown_requests t set stores = internal.takedown_stores(t.release_id, t.created_at)
    where t.release_id = new.release_id and t.status in ('pending', 'processing');
  return null;
end
$$;
create trigger takedown_delivery_changed after insert or update of status on internal.release_deliveries
  for each row when (new.action = 'takedown') execute function internal.takedown_delivery_changed();

update public.takedown_requests set stores = internal.takedown_stores(release_id, created_at)
  where status in ('processing', 'completed');

-- release.takedown_completed carries the completed takedown request with its stores' times.
create function internal.takedown_event_detail() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.type = 'release.takedown_completed' then
    new.data := new.data || jsonb_build_object('takedown', (
      select jsonb_build_object('id', t.id, 'object', 'takedown_request', 'release_id', t.release_id,
        'status', t.status, 'reason', t.reason, 'created_at', t.created_at, 'completed_at', t.completed_at,
        'stores', t.stores)
      from public.takedown_requests t
      where t.release_id = (new.data -> 'object' ->> 'id')::uuid and t.status = 'completed'
      order by t.completed_at desc, t.id limit 1));
  end if;
  return new;
end
$$;
create trigger takedown_event_detail before insert on internal.events
  for each row execute function internal.takedown_event_detail();

-- 2. Voided royalty imports.

alter table internal.royalty_imports drop constraint royalty_imports_status_check;
alter table internal.royalty_imports
  add constraint royalty_imports_status_check check (status in ('completed', 'rejected', 'voided')),
  add column voided_at timestamptz,
  add column void_reason text check (length(void_reason) between 1 and 2000),
  add column voided_via text check (voided_via in ('cli', 'admin_api')),
  add constraint royalty_imports_voided check (
    (status = 'voided') = (voided_at is not null and void_reason is not null and voided_via is not null));

-- A reversing line answers the line it names, negated; a line is reversed at most once.
alter table internal.royalty_lines add column reverses_line_id bigint;
alter table internal.royalty_lines drop constraint royalty_lines_units_check;
alter table internal.royalty_lines add constraint royalty_lines_units_check
  check (case when reverses_line_id is null then units >= 0 else units <= 0 end);
create unique index royalty_lines_reversed on internal.royalty_lines (reverses_line_id)
  where reverses_line_id is not null;

-- Money is appended, never changed: a correction is a reversing line.
create function internal.royalty_lines_append_only() returns trigger
language plpgsql
as $$
begin
  raise exception using errcode = '42501',
    message = 'royalty lines are never changed: void the import instead (a reversing line answers each)';
end
$$;
create trigger royalty_lines_append_only before update on internal.royalty_lines
  for each row execute function internal.royalty_lines_append_only();

-- The voided imports of the caller's tenant (every tenant's for the operator): their lines and
-- their reversing lines are left out of the royalty line listings (GET /royalties), which clients
-- read without access to the imports themselves.
create function internal.voided_royalty_import_ids() returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select coalesce(array_agg(i.id), '{}') from internal.royalty_imports i
  where i.status = 'voided' and (auth.tenant_id() is null or i.tenant_id = auth.tenant_id())
$$;
revoke execute on function internal.voided_royalty_import_ids() from public;
grant execute on function internal.voided_royalty_import_ids() to authenticated, tenant_service, service_role;

-- Webhook endpoints may subscribe to royalties.voided (it needs royalties:read, as
-- royalties.imported does: internal.event_read_scope, migration 0013).
alter table internal.webhook_endpoints drop constraint webhook_endpoints_events_check;
alter table internal.webhook_endpoints add constraint webhook_endpoints_events_check
  check (cardinality(events) between 1 and 20 and events <@ array[
    'release.submitted', 'release.approved', 'release.rejected', 'release.live', 'release.takedown_completed',
    'royalties.imported', 'royalties.voided']::text[]);
