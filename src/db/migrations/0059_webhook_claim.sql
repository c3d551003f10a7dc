-- Webhook claims in one statement (issue 45, item 5; bench/README.md, "bench/webhooks").
--
-- A dispatcher's claim (src/webhooks/dispatcher.ts) was six round trips to the database: BEGIN,
-- the role's set_config, the planner settings, the SKIP LOCKED select of due deliveries, the
-- update that takes them, COMMIT; and the claims, one after the other, were what limited
-- deliveries per second. This function is the select and the update in one statement, with the
-- planner settings its own (SET clauses: in force while it runs, and plpgsql keeps its plan per
-- connection), so that a claim is BEGIN, the role, this call, COMMIT.
--
-- What it does is what the two statements did:
-- - looks at up to 2 × p_limit due deliveries of enabled endpoints, in due order, walking the due
--   index (enable_sort and enable_bitmapscan off: a table whose statistics are stale, new or just
--   filled by a burst, would otherwise be planned as a bitmap scan and a sort of the whole
--   backlog), locking them FOR UPDATE SKIP LOCKED; a strict endpoint's delivery only when no
--   earlier one of it is pending; none of the endpoints in p_full (at their cap);
-- - takes, in due order, each endpoint's first deliveries up to its room (p_rooms, by
--   p_room_endpoints; p_cap for an endpoint not named) and at most p_limit in all; the others stay
--   (their locks end with the transaction);
-- - leases what it took to p_dispatcher until p_now + p_lease_ms (p_now null: the database's
--   clock) and returns it with what sending needs; `more` says all 2 × p_limit were looked at.
--
-- Its transaction commits without waiting for the WAL flush (synchronous_commit off, see below):
-- under load a claim spent much of its time in that flush.
--
-- jit is off in it: the sorts it still needs (a few rows, by endpoint for each one's room) cost
-- enable_sort's penalty, which put every claim far over jit_above_cost — 0.6 s of compiling, each.
--
-- It runs as its caller (security invoker): the dispatcher's service_role, with the privileges it
-- had. Only service_role may call it.
create function internal.claim_webhook_deliveries(
  p_dispatcher text,
  p_now timestamptz,
  p_full uuid[],
  p_room_endpoints uuid[],
  p_rooms integer[],
  p_cap integer,
  p_limit integer,
  p_lease_ms double precision
) returns table (
  more boolean,
  id uuid,
  endpoint_id uuid,
  attempts integer,
  event_id uuid,
  type text,
  account_id uuid,
  data jsonb,
  created_at timestamptz,
  seq bigint,
  ordering text,
  payload_version text,
  url text,
  secret_ciphertext text,
  previous_secret_ciphertext text
)
language plpgsql volatile security invoker
set search_path = '' set enable_sort = off set enable_bitmapscan = off set jit = off
as $$
#variable_conflict use_column
declare
  v_now timestamptz := coalesce(p_now, now());
  v_looked integer := greatest(p_limit, 0) * 2;
begin
  if v_looked = 0 then
    return;
  end if;
  -- The claim's commit does not wait for its WAL to reach the disk (to the end of the caller's
  -- transaction: no SET clause restores it). A server crash could forget a lease taken in the
  -- last moments; the delivery is then claimed again and may be sent twice, which at-least-once
  -- delivery allows (receivers drop duplicates by webhook-id). Nothing else is at risk.
  perform set_config('synchronous_commit', 'off', true);
  return query
  with candidates as materialized (
    select d.id, d.endpoint_id, d.next_attempt_at
    from internal.webhook_deliveries d
    join internal.webhook_endpoints e on e.id = d.endpoint_id
    where d.status = 'pending' and d.next_attempt_at <= v_now
      and (d.locked_until is null or d.locked_until <= v_now)
      and e.enabled
      and (e.ordering = 'best_effort' or not exists (
        select 1 from internal.webhook_deliveries p
        where p.endpoint_id = d.endpoint_id and p.status = 'pending' and p.position < d.position))
      and not (d.endpoint_id = any (coalesce(p_full, '{}')))
    order by d.next_attempt_at
    limit v_looked
    for update of d skip locked
  ), ranked as (
    select c.id, c.next_attempt_at,
           row_number() over (partition by c.endpoint_id order by c.next_attempt_at, c.id) as n,
           coalesce(p_rooms[array_position(p_room_endpoints, c.endpoint_id)], p_cap) as room
    from candidates c
  ), taken as (
    select r.id from ranked r
    where r.n <= r.room
    order by r.next_attempt_at, r.id
    limit p_limit
  ), claimed as (
    update internal.webhook_deliveries d
    set locked_by = p_dispatcher,
        locked_until = v_now + make_interval(secs => p_lease_ms / 1000)
    where d.id = any (array(select t.id from taken t))
    returning d.id, d.endpoint_id, d.event_id, d.attempts
  )
  select (select count(*) from candidates) = v_looked,
         c.id, c.endpoint_id, c.attempts, ev.id, ev.type, ev.account_id, ev.data, ev.created_at, ev.seq,
         e.ordering, e.payload_version, e.url, e.secret_ciphertext,
         case when e.previous_secret_expires_at > v_now then e.previous_secret_ciphertext end
  from claimed c
  join internal.events ev on ev.id = c.event_id
  join internal.webhook_endpoints e on e.id = c.endpoint_id;
end
$$;

revoke all on function internal.claim_webhook_deliveries(text, timestamptz, uuid[], uuid[], integer[], integer,
  integer, double precision) from public;
grant execute on function internal.claim_webhook_deliveries(text, timestamptz, uuid[], uuid[], integer[], integer,
  integer, double precision) to service_role;
