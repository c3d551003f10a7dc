-- Invitations need proof of the address (docs/security.md, "Sign-in, invitations and lockout").
--
-- An invitation used to be accepted when a user with the invited address signed up, before anyone
-- had shown they read that address's mail. Now it is accepted only when the user's address is
-- proven: a link or code mailed to it was used (sign-up confirmation, the invite link, password
-- recovery, e-mail change). The database does it, in one place: the trigger below accepts the
-- open invitations of an address when it becomes proven, whatever code path proved it.

alter table internal.users
  -- When the user last used a link or code mailed to `email`. Null while the address is unproven,
  -- which includes an address confirmed automatically on a tenant without e-mail confirmation.
  add column email_proven_at timestamptz,
  -- When the address was invited (POST /auth/v1/invite, `backline accounts add-member`), as GoTrue reports it.
  add column invited_at timestamptz,
  -- The address was claimed by someone else too: a second sign-up for the unconfirmed address came
  -- with another password, or the address was invited when it signed up. No sign-up password is
  -- kept when the address is proven; whoever proves it chooses one.
  add column signup_contested_at timestamptz;

-- Addresses proven so far: confirmed on a tenant that requires confirmation (a malformed setting
-- counts as the default, which requires it).
update internal.users u set email_proven_at = u.email_confirmed_at
from internal.tenants t
where t.id = u.tenant_id and u.email_confirmed_at is not null
  and coalesce(t.settings -> 'auth' -> 'email_confirmation', 'true'::jsonb) <> 'false'::jsonb;

-- The invite link is a one-time token like the others.
alter table internal.one_time_tokens drop constraint one_time_tokens_kind_check;
alter table internal.one_time_tokens
  add constraint one_time_tokens_kind_check check (kind in ('signup', 'recovery', 'email_change', 'invite'));

-- A new address is unproven until a link or code mailed to it is used: changing `email` forgets
-- the proof, unless the same update records a new one (a confirmed e-mail change).
create function internal.forget_email_proof() returns trigger
language plpgsql set search_path = '' as $$
begin
  if new.email_proven_at is not distinct from old.email_proven_at then
    new.email_proven_at := null;
  end if;
  return new;
end
$$;
create trigger forget_email_proof before update of email on internal.users
  for each row when (old.email is distinct from new.email) execute function internal.forget_email_proof();

-- When an address becomes proven, its open invitations in the tenant are accepted: the user joins
-- each inviting account with the invited role, and a user without a default account gets the
-- first one they may write to.
create function internal.accept_invitations() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if new.email is null or new.email_proven_at is null or new.deleted_at is not null then
    return null;
  end if;
  if tg_op = 'UPDATE' and old.email_proven_at is not distinct from new.email_proven_at then
    return null;
  end if;
  with accepted as (
    update internal.invitations set accepted_at = now()
    where tenant_id = new.tenant_id and email = new.email and accepted_at is null
    returning account_id, role
  )
  insert into internal.memberships (tenant_id, account_id, user_id, role)
  select new.tenant_id, account_id, new.id, role from accepted
  on conflict (account_id, user_id) do nothing;
  if new.default_account_id is null then
    update internal.users u set default_account_id = (
      select m.account_id from internal.memberships m
      where m.user_id = new.id and m.tenant_id = new.tenant_id and m.role <> 'viewer'
      order by m.created_at, m.account_id limit 1)
    where u.id = new.id and u.default_account_id is null;
  end if;
  return null;
end
$$;
create trigger accept_invitations after insert or update of email_proven_at on internal.users
  for each row execute function internal.accept_invitations();
