-- The signed-in person's own memberships, for the portal's account switcher (GET
-- /portal/accounts.json, docs/portal.md "Accounts"): asked under the request's own role and
-- claims, so the database decides whose they are (the verified token's subject in its tenant), as
-- auth.readable_account_ids() does; memberships stay unreadable to request roles otherwise.
create function auth.my_memberships()
returns table (account_id uuid, name text, kind text, role text, require_aal2 boolean)
language sql stable security definer set search_path = ''
as $$
  select a.id, a.name, a.kind, m.role, a.require_aal2
  from internal.memberships m
  join internal.accounts a on a.id = m.account_id and a.tenant_id = m.tenant_id
  join internal.users u on u.id = m.user_id and u.tenant_id = m.tenant_id
  where auth.uid() is not null and not (auth.jwt() ? 'account_id')
    and m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and u.deleted_at is null
  order by m.created_at, a.id
  limit 200
$$;
revoke execute on function auth.my_memberships() from public;
grant execute on function auth.my_memberships() to authenticated;
