-- Notifications for the account's members (seed 000's notifications table; docs/operator.md,
-- "Notifications"): written by triggers in the same transaction as the change they tell of, so
-- every path — the operator's CLI, the workers, either interface — notifies alike.
--
--   release.approved, release.rejected, release.live, release.taken_down   the release's status
--   delivery.live, delivery.error, delivery.removed                        a store's delivery ("DSP updates")
--   takedown.rejected                                                      the operator refused a takedown
--   oac.approved, oac.rejected                                             an Official Artist Channel decision
--
-- data always holds the ids a client needs to follow up (release_id, store, oac_request_id, ...).

create function internal.notify_members(account uuid, kind text, title text, body text, data jsonb)
returns void
language sql security definer set search_path = ''
as $$
  insert into public.notifications (tenant_id, user_id, account_id, kind, title, body, data)
  select m.tenant_id, m.user_id, m.account_id, kind, left(title, 300), left(body, 5000), data
  from internal.memberships m
  where m.account_id = account
$$;
revoke execute on function internal.notify_members(uuid, text, text, text, jsonb) from public;

create function internal.release_notifications() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  name text := format('“%s”', new.title);
begin
  if new.status is not distinct from old.status then
    return null;
  end if;
  case new.status
    when 'approved' then
      perform internal.notify_members(new.account_id, 'release.approved', format('%s was approved', name),
        'It goes to the stores next.', jsonb_build_object('release_id', new.id));
    when 'rejected' then
      perform internal.notify_members(new.account_id, 'release.rejected', format('%s was rejected', name),
        coalesce(new.status_reason, 'No reason was given.'), jsonb_build_object('release_id', new.id, 'reason', new.status_reason));
    when 'live' then
      perform internal.notify_members(new.account_id, 'release.live', format('%s is live', name),
        'Every store it was delivered to has it live.', jsonb_build_object('release_id', new.id));
    when 'taken_down' then
      perform internal.notify_members(new.account_id, 'release.taken_down', format('%s was taken down', name),
        'Every store has removed it.', jsonb_build_object('release_id', new.id));
    else
      null;
  end case;
  return null;
end
$$;
create trigger release_notifications after update of status on public.releases
  for each row execute function internal.release_notifications();

create function internal.delivery_notifications() returns trigger
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
    when new.action = 'takedown' and new.status = 'delivered' then 'delivery.removed'
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
create trigger delivery_notifications after update of status on internal.release_deliveries
  for each row execute function internal.delivery_notifications();

create function internal.takedown_notifications() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.status = 'rejected' and old.status is distinct from 'rejected' then
    perform internal.notify_members(new.account_id, 'takedown.rejected',
      (select format('The takedown of “%s” was refused', r.title) from public.releases r where r.id = new.release_id),
      coalesce(new.status_reason, 'No reason was given.'),
      jsonb_build_object('release_id', new.release_id, 'takedown_request_id', new.id));
  end if;
  return null;
end
$$;
create trigger takedown_notifications after update of status on public.takedown_requests
  for each row execute function internal.takedown_notifications();

create function internal.oac_notifications() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.status in ('approved', 'rejected') and new.status is distinct from old.status then
    perform internal.notify_members(new.account_id, 'oac.' || new.status,
      (select format('Official Artist Channel for %s: %s', a.name, new.status) from public.artist_profiles a
        where a.id = new.artist_id),
      coalesce(new.status_reason, ''),
      jsonb_build_object('artist_id', new.artist_id, 'oac_request_id', new.id, 'store', new.store));
  end if;
  return null;
end
$$;
create trigger oac_notifications after update of status on internal.oac_requests
  for each row execute function internal.oac_notifications();
