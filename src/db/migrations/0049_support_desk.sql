-- The support desk (issue 43; docs/operator.md, "Support desk"; docs/public-api.md, "Support"):
-- seed 000's internal tickets and ticket_replies given their behaviour. A member files a ticket
-- for their account through the public API (never /rest/v1: the tables stay in `internal`, which
-- the table interface does not expose); the tenant's staff answer it through /admin/v1.
--
--   status   open     the desk has to act (new, or the member wrote last)
--            waiting  the desk answered and waits for the member
--            solved   closed by the desk; the member's next reply opens it again
--
-- Who reads what is decided here, not in TypeScript: a member (or an account's API key) reads
-- their account's tickets and their public replies only; an internal note (is_internal) is a row
-- no member's query returns. Staff of the tenant (reviewer and up) read every ticket and note of
-- their tenant. Writes by members are column-limited inserts; the desk writes as the operator.

-- 1. Statuses: open / waiting / solved (the old four were never used by any code path).
alter table internal.tickets drop constraint tickets_status_check;
update internal.tickets set status = case status when 'pending' then 'waiting' when 'open' then 'open' else 'solved' end;
alter table internal.tickets add constraint tickets_status_check check (status in ('open', 'waiting', 'solved'));

-- 2. What a ticket is about (a release, a delivery or a payout of the same account, or nothing),
-- its assignee (a staff user), and the times the queue and the figures need.
alter table internal.tickets
  add column about_type text check (about_type in ('release', 'delivery', 'payout')),
  add column about_id uuid,
  add column assignee_user_id uuid references internal.users (id) on delete set null,
  -- When the member's oldest unanswered message came in; null once the desk answered or solved it.
  add column awaiting_since timestamptz,
  -- The desk's first public reply: the response-time figures.
  add column first_reply_at timestamptz,
  add column solved_at timestamptz,
  add constraint tickets_about_pair check ((about_type is null) = (about_id is null));

create index tickets_queue on internal.tickets (tenant_id, status, awaiting_since, created_at, id);
create index tickets_account on internal.tickets (account_id, created_at, id);
create index ticket_replies_ticket on internal.ticket_replies (ticket_id, created_at, id);

-- 3. Before a ticket is written: its tenant from its account, its opener from the caller, and the
-- object it is about checked to belong to the same account (any other id is refused as missing).
create function internal.ticket_before_write() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  found_about boolean;
begin
  if tg_op = 'INSERT' then
    select a.tenant_id into new.tenant_id from internal.accounts a where a.id = new.account_id;
    -- A client's insert (by the claims: this function runs as its owner, so is_privileged() would
    -- always be true here); the operator's code runs with service_role's claims.
    if auth.role() in ('authenticated', 'anon', 'tenant_service') then
      new.opened_by := auth.uid();
      new.status := 'open';
      new.assignee_user_id := null;
      new.first_reply_at := null;
      new.solved_at := null;
    end if;
    new.awaiting_since := coalesce(new.awaiting_since, now());
  end if;
  if new.about_type is not null and (tg_op = 'INSERT' or new.about_id is distinct from old.about_id
      or new.about_type is distinct from old.about_type) then
    -- (A variable: PL/pgSQL reads an IF's condition up to the first THEN, a CASE's included.)
    found_about := case new.about_type
      when 'release' then exists (select 1 from public.releases r where r.id = new.about_id and r.account_id = new.account_id)
      when 'delivery' then exists (select 1 from internal.release_deliveries d
        where d.id = new.about_id and d.account_id = new.account_id)
      when 'payout' then exists (select 1 from internal.payouts p where p.id = new.about_id and p.account_id = new.account_id)
      else false
    end;
    if not found_about then
      raise exception using errcode = '23503', column = 'about_id',
        message = format('no %s %s in this account', new.about_type, new.about_id);
    end if;
  end if;
  -- An assignee is staff of the ticket's tenant (or platform staff).
  if new.assignee_user_id is not null and (tg_op = 'INSERT' or new.assignee_user_id is distinct from old.assignee_user_id)
    and not exists (select 1 from internal.staff s
      where s.user_id = new.assignee_user_id and (s.tenant_id = new.tenant_id or s.tenant_id is null)) then
    raise exception using errcode = '23503', column = 'assignee_user_id',
      message = format('user %s is not staff of this tenant', new.assignee_user_id);
  end if;
  if tg_op = 'UPDATE' and new.status is distinct from old.status then
    new.solved_at := case when new.status = 'solved' then now() end;
    if new.status = 'solved' then
      new.awaiting_since := null;
    end if;
  end if;
  return new;
end
$$;
create trigger ticket_before_write before insert or update on internal.tickets
  for each row execute function internal.ticket_before_write();

-- 4. After a reply: a member's reply (re)opens the ticket and starts the wait; the desk's public
-- reply ends the wait, records the first reply and tells the member (a notification to whoever
-- opened the ticket, or to every member of the account when a key opened it). A note changes
-- nothing the member sees. The e-mail is queued by the desk's code, in the same transaction.
create function internal.ticket_reply_after_insert() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  t internal.tickets;
begin
  if new.is_internal then
    return null;
  end if;
  select * into t from internal.tickets where id = new.ticket_id;
  if new.author_staff is null then
    update internal.tickets set status = 'open',
      awaiting_since = case when status = 'open' then coalesce(awaiting_since, new.created_at) else new.created_at end
    where id = new.ticket_id;
    return null;
  end if;
  update internal.tickets set
    status = case when status = 'solved' then 'solved' else 'waiting' end,
    awaiting_since = null,
    first_reply_at = coalesce(first_reply_at, new.created_at)
  where id = new.ticket_id;
  insert into public.notifications (tenant_id, user_id, account_id, kind, title, body, data)
  select m.tenant_id, m.user_id, m.account_id, 'ticket.replied', left(format('Reply to “%s”', t.subject), 300),
    left(new.body, 500), jsonb_build_object('ticket_id', t.id, 'reply_id', new.id)
  from internal.memberships m
  where m.account_id = t.account_id and (t.opened_by is null or m.user_id = t.opened_by);
  return null;
end
$$;
create trigger ticket_reply_after_insert after insert on internal.ticket_replies
  for each row execute function internal.ticket_reply_after_insert();

-- A member's reply has no staff author and is never a note, whatever the insert names.
create function internal.ticket_reply_before_insert() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if auth.role() in ('authenticated', 'anon', 'tenant_service') then
    new.author_user_id := auth.uid();
    new.author_staff := null;
    new.is_internal := false;
  end if;
  return new;
end
$$;
create trigger ticket_reply_before_insert before insert on internal.ticket_replies
  for each row execute function internal.ticket_reply_before_insert();

revoke execute on function internal.ticket_before_write(), internal.ticket_reply_after_insert(),
  internal.ticket_reply_before_insert() from public;

-- 5. Privileges and policies (RLS has been on since 0002, with no policy: nothing was reachable).
grant select on internal.tickets to authenticated;
grant insert (account_id, subject, about_type, about_id) on internal.tickets to authenticated;
grant select on internal.ticket_replies to authenticated;
grant insert (ticket_id, body) on internal.ticket_replies to authenticated;

-- A member or key: the accounts it reads (a member acting for an account through the public API:
-- that account only). Staff (reviewer and up) of the token's tenant: every ticket of the tenant.
create policy tickets_select on internal.tickets for select to authenticated
  using (tenant_id = (select auth.tenant_id())
    and (account_id = any ((select auth.readable_account_ids())::uuid[])
      or (select auth.has_staff_role(auth.tenant_id(), 'reviewer'))));
create policy tickets_insert on internal.tickets for insert to authenticated
  with check (account_id = any ((select auth.writable_account_ids())::uuid[]));

-- Replies of a ticket the caller reads; an internal note only for staff.
create policy ticket_replies_select on internal.ticket_replies for select to authenticated
  using ((not is_internal or (select auth.has_staff_role(auth.tenant_id(), 'reviewer')))
    and exists (select 1 from internal.tickets t where t.id = ticket_id));
create policy ticket_replies_insert on internal.ticket_replies for insert to authenticated
  with check (not is_internal and author_staff is null
    and exists (select 1 from internal.tickets t where t.id = ticket_id
      and t.account_id = any ((select auth.writable_account_ids())::uuid[])));
