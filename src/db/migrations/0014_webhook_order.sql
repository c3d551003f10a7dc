-- Webhook order and crash recovery (docs/webhooks.md, "Order" and "When a dispatcher dies"), and a
-- wake-up for queued mail.
--
-- 1. Every release event gets a sequence number, 1, 2, 3… per release, given here when the row is
--    written: the counter's row is locked by the upsert, so two transactions (two processes) never
--    give the same number, and a later event of a release always has a higher one. Receivers order
--    by it (and the event's time); other events are 1.
-- 2. A delivery's position (the order deliveries were made), by which an endpoint with
--    ordering = 'strict' is sent one delivery at a time.
-- 3. internal.webhook_dispatchers: the dispatchers running, with a heartbeat, so a dead one's claims
--    are released as soon as it is known dead instead of after their lease.
-- 4. A notice on backline_mail when mail is queued, so the sender wakes at once.

alter table internal.events add column subject_id uuid, add column seq bigint;

create table internal.event_sequences (
  subject_id uuid primary key,
  last_seq bigint not null
);
alter table internal.event_sequences enable row level security;

-- Events written before this migration: numbered in the order they were made.
with numbered as (
  select id, (data -> 'object' ->> 'id')::uuid as subject_id,
         row_number() over (partition by data -> 'object' ->> 'id' order by created_at, id) as seq
  from internal.events
  where type like 'release.%' and (data -> 'object' ->> 'id') ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
)
update internal.events e set subject_id = n.subject_id, seq = n.seq from numbered n where e.id = n.id;
update internal.events set seq = 1 where seq is null;
insert into internal.event_sequences (subject_id, last_seq)
select subject_id, max(seq) from internal.events where subject_id is not null group by subject_id;
alter table internal.events alter column seq set not null;
create unique index events_subject_seq on internal.events (subject_id, seq) where subject_id is not null;

create function internal.event_sequence() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  subject text := new.data -> 'object' ->> 'id';
begin
  new.subject_id := null;
  new.seq := 1;
  if new.type like 'release.%'
     and subject ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then
    new.subject_id := subject::uuid;
    insert into internal.event_sequences as s (subject_id, last_seq) values (new.subject_id, 1)
    on conflict (subject_id) do update set last_seq = s.last_seq + 1
    returning s.last_seq into new.seq;
  end if;
  return new;
end
$$;
create trigger event_sequence before insert on internal.events
  for each row execute function internal.event_sequence();

-- Deliveries in the order they were made (the fan-out runs in the event's transaction, after the
-- release's row lock: a release's later event gets a later position).
create sequence internal.webhook_delivery_position;
alter table internal.webhook_deliveries
  add column position bigint not null default nextval('internal.webhook_delivery_position');
alter sequence internal.webhook_delivery_position owned by internal.webhook_deliveries.position;
create index webhook_deliveries_endpoint_pending on internal.webhook_deliveries (endpoint_id, position)
  where status = 'pending';
create index webhook_deliveries_locked on internal.webhook_deliveries (locked_by) where locked_by is not null;

-- best_effort (the default): deliveries go in parallel, retries do not hold later events.
-- strict: one at a time, in position order; a failing delivery holds the later ones until it
-- succeeds or fails for good.
alter table internal.webhook_endpoints
  add column ordering text not null default 'best_effort' check (ordering in ('best_effort', 'strict'));
grant select (ordering), insert (ordering), update (ordering) on internal.webhook_endpoints to authenticated;

-- The dispatchers running. A dispatcher writes its row when it starts, its heartbeat every few
-- seconds and deletes the row when it stops. host_key names the machine's kernel and PID
-- namespace (null where /proc cannot tell), proc_start the process's start time in clock ticks
-- since boot: a dispatcher on the same host_key whose pid is gone, or now another process's, is
-- dead at once; any other, once its heartbeat is older than its dead_after_ms.
create table internal.webhook_dispatchers (
  id text primary key check (length(id) <= 200),
  host text not null,
  host_key text,
  pid integer not null,
  proc_start text,
  started_at timestamptz not null default now(),
  heartbeat_at timestamptz not null default now(),
  dead_after_ms integer not null check (dead_after_ms > 0)
);
alter table internal.webhook_dispatchers enable row level security;

-- Queued mail wakes the senders (Mailer, Db.listen) when its transaction commits.
create function internal.mail_queued() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  perform pg_notify('backline_mail', '');
  return null;
end
$$;
create trigger mail_queued after insert or update of status on internal.mail_outbox
  for each row when (new.status = 'queued') execute function internal.mail_queued();
