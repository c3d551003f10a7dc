-- Two takedown requests for one release sent at the same moment: one is accepted, the other must be
-- told "already requested" (23505 on takedown_requests_open → 409 takedown_already_requested), not
-- "this release cannot be taken down" (BL003). The rule used to look for an open request first and
-- read the release's status second; when the other request committed between those two reads, the
-- status was already takedown_requested and the loser got BL003. Reading the status first closes the
-- gap: whichever moment the other request commits, the later open-request check (or, before it
-- commits, the unique index takedown_requests_open) sees it.
create or replace function internal.takedown_rules() returns trigger
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
      select r.status into release_status from public.releases r where r.id = new.release_id;
      if internal.has_open_takedown(new.release_id) then
        raise exception using errcode = '23505', constraint = 'takedown_requests_open',
          message = format('release %s already has an open takedown request', new.release_id),
          detail = format('Key (release_id)=(%s) already exists.', new.release_id);
      end if;
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
