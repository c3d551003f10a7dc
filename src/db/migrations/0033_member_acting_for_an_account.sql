-- A member acting for one account through the public API (docs/public-api.md, "A member's access
-- token"): the server names the account and the member's role in the request's claims
-- (`account_id`, `account_role`, beside the member's `sub`), as it does for an API key, so the
-- account-access helpers reach that one account with that role's rights.
--
-- One helper read `account_id` in the claims as "an API key", which acts for its whole account:
-- auth.sees_whole_account(). Under a tenant's owner-only preset a person reaches only the rows they
-- created, and a member acting for an account is a person: the question is now whether the caller
-- is a key (`api_key_id`), so the preset holds for members on every interface. For a key nothing
-- changes (its claims carry both), nor for anyone without `account_id`.
-- The body of migration 0032's memo-writing function, with that one test changed.
create or replace function internal.sees_whole_account_fresh() returns boolean
language plpgsql stable security definer set search_path = ''
as $$
declare
  key text := internal.caller_memo_key();
  whole boolean;
begin
  whole := auth.jwt() ? 'api_key_id'
    or coalesce((select t.policy_preset <> 'owner-only' from internal.tenants t where t.id = auth.tenant_id()), false);
  if key is not null then
    perform set_config('backline.memo_whole', whole::text, true), set_config('backline.memo_whole_key', key, true);
  end if;
  return whole;
end
$$;
