-- An Idempotency-Key whose request took effect must never run again, even when the process died
-- between committing the work and recording the answer (the chaos test of issue 20 saw it: the
-- key stayed busy for two minutes, then a retry ran the create a second time).
--
-- `applied_at` is set by the request's own write transaction, in the same commit as its work
-- (internal.idempotency_applied, called by the public API as the caller). A retry that finds the
-- key still running past its lock AND applied is told the first request took effect but its
-- answer was lost (409 idempotency_response_lost), instead of running it again.
alter table internal.idempotency_keys add column applied_at timestamptz;

-- Marks the caller's own running key as applied. Security definer (the caller has no right on the
-- table); only a key whose owner is the caller (its API key's account, or the signed-in user) is
-- touched, so nobody marks another account's key.
create function internal.idempotency_applied(p_owner text, p_method text, p_path text, p_key text)
returns void
language sql security definer set search_path = ''
as $$
  update internal.idempotency_keys
  set applied_at = coalesce(applied_at, now())
  where owner = p_owner and method = p_method and path = p_path and key = p_key and status = 'running'
    and p_owner in ('account:' || (auth.jwt() ->> 'account_id'), 'user:' || (auth.jwt() ->> 'sub'))
$$;
revoke execute on function internal.idempotency_applied(text, text, text, text) from public;
grant execute on function internal.idempotency_applied(text, text, text, text) to authenticated, tenant_service;
