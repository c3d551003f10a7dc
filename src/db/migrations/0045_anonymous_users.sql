-- Anonymous users (supabase-js signInAnonymously, docs/auth.md "Anonymous sign-ins") belong to no
-- account: they reach no catalogue, money or key row until they become permanent users (an e-mail
-- address proven through updateUser). Every policy that opens an account's rows asks for a
-- membership, so the database refuses the membership itself, whatever path tries to add it (an
-- invitation accepted, `backline accounts add-member`, a personal account at sign-up), and
-- refuses to make a member anonymous. Policies of an operator's own can tell the two apart by the
-- access token's `is_anonymous` claim: `(auth.jwt() ->> 'is_anonymous')::boolean`.

create function internal.refuse_anonymous_member() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if exists (select 1 from internal.users u
             where u.id = new.user_id and u.tenant_id = new.tenant_id and u.is_anonymous) then
    raise exception 'an anonymous user cannot belong to an account'
      using errcode = '23514', hint = 'The user becomes permanent by proving an e-mail address first.';
  end if;
  return new;
end
$$;
create trigger refuse_anonymous_member before insert or update of user_id on internal.memberships
  for each row execute function internal.refuse_anonymous_member();

create function internal.refuse_anonymous_with_memberships() returns trigger
language plpgsql security definer set search_path = '' as $$
begin
  if exists (select 1 from internal.memberships m where m.user_id = new.id and m.tenant_id = new.tenant_id) then
    raise exception 'a member of an account cannot become anonymous' using errcode = '23514';
  end if;
  return new;
end
$$;
create trigger refuse_anonymous_with_memberships before update of is_anonymous on internal.users
  for each row when (new.is_anonymous and not old.is_anonymous)
  execute function internal.refuse_anonymous_with_memberships();
