-- People's own data (docs/privacy.md, GDPR articles 15, 17 and 20): what Backline holds about a
-- person, as one JSON document, and their erasure. Both are decided here, in one place for every
-- interface (the public API's GET /me/export, /admin/v1/people, `backline people`); the table
-- registry in src/people/tables.ts says, table by table, what each of them does, and
-- test/people-data.test.ts fails when a table with a personal-looking column is in neither.

-- 1. The export: version 1 of the shape docs/privacy.md describes. Never a secret or its hash
-- (passwords, token and code hashes, a factor's secret, a key's hash, the sealed tax id), and the
-- audit rows as the log keeps them (its hidden-column rule already applied), but for the address
-- and details of another actor.
create function internal.person_export(p_tenant uuid, p_user uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  u internal.users;
  payee_ids uuid[];
begin
  select * into u from internal.users where id = p_user and tenant_id = p_tenant;
  if not found then
    raise exception 'no user % in this tenant', p_user using errcode = 'P0002';
  end if;
  payee_ids := array(select p.id from internal.payees p
    where p.tenant_id = p_tenant and (p.user_id = u.id or (u.email is not null and p.email = u.email)));
  return jsonb_build_object(
    'format', 'backline.person-export',
    'version', 1,
    'exported_at', to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'user', jsonb_build_object(
      'id', u.id, 'tenant_id', u.tenant_id, 'email', u.email, 'phone', u.phone,
      'email_confirmed_at', u.email_confirmed_at, 'phone_confirmed_at', u.phone_confirmed_at,
      'email_proven_at', u.email_proven_at, 'email_change', u.email_change,
      'last_sign_in_at', u.last_sign_in_at, 'invited_at', u.invited_at,
      'app_metadata', u.raw_app_meta_data, 'user_metadata', u.raw_user_meta_data,
      'default_account_id', u.default_account_id, 'is_anonymous', u.is_anonymous,
      'banned_until', u.banned_until, 'created_at', u.created_at, 'updated_at', u.updated_at,
      'deleted_at', u.deleted_at),
    'identities', coalesce((select jsonb_agg(jsonb_build_object('id', i.id, 'provider', i.provider,
        'provider_id', i.provider_id, 'identity_data', i.identity_data, 'last_sign_in_at', i.last_sign_in_at,
        'created_at', i.created_at) order by i.created_at)
      from internal.identities i where i.user_id = u.id), '[]'),
    'sessions', coalesce((select jsonb_agg(jsonb_build_object('id', s.id, 'aal', s.aal, 'amr', s.amr,
        'user_agent', s.user_agent, 'ip', s.ip, 'created_at', s.created_at, 'refreshed_at', s.refreshed_at)
        order by s.created_at)
      from internal.sessions s where s.user_id = u.id), '[]'),
    'mfa_factors', coalesce((select jsonb_agg(jsonb_build_object('id', f.id, 'friendly_name', f.friendly_name,
        'factor_type', f.factor_type, 'status', f.status, 'last_challenged_at', f.last_challenged_at,
        'created_at', f.created_at) order by f.created_at)
      from internal.mfa_factors f where f.user_id = u.id), '[]'),
    'memberships', coalesce((select jsonb_agg(jsonb_build_object('account_id', m.account_id,
        'account_name', a.name, 'role', m.role, 'created_at', m.created_at) order by m.created_at)
      from internal.memberships m join internal.accounts a on a.id = m.account_id
      where m.user_id = u.id), '[]'),
    'staff_roles', coalesce((select jsonb_agg(jsonb_build_object('tenant_id', st.tenant_id, 'role', st.role,
        'created_at', st.created_at) order by st.created_at)
      from internal.staff st where st.user_id = u.id), '[]'),
    'invitations_received', coalesce((select jsonb_agg(jsonb_build_object('id', v.id, 'account_id', v.account_id,
        'email', v.email, 'role', v.role, 'created_at', v.created_at, 'accepted_at', v.accepted_at)
        order by v.created_at)
      from internal.invitations v where v.tenant_id = p_tenant and v.email = u.email), '[]'),
    'invitations_sent', coalesce((select jsonb_agg(jsonb_build_object('id', v.id, 'account_id', v.account_id,
        'email', v.email, 'role', v.role, 'created_at', v.created_at, 'accepted_at', v.accepted_at)
        order by v.created_at)
      from internal.invitations v where v.invited_by = u.id), '[]'),
    'notifications', coalesce((select jsonb_agg(jsonb_build_object('id', n.id, 'account_id', n.account_id,
        'kind', n.kind, 'title', n.title, 'body', n.body, 'data', n.data, 'read', n.read, 'read_at', n.read_at,
        'created_at', n.created_at) order by n.created_at)
      from public.notifications n where n.user_id = u.id), '[]'),
    'tickets', coalesce((select jsonb_agg(jsonb_build_object('id', t.id, 'account_id', t.account_id,
        'subject', t.subject, 'status', t.status, 'priority', t.priority, 'created_at', t.created_at,
        'replies', coalesce((select jsonb_agg(jsonb_build_object('id', r.id, 'by_you', r.author_user_id = u.id,
            'body', r.body, 'created_at', r.created_at) order by r.created_at)
          from internal.ticket_replies r where r.ticket_id = t.id and not r.is_internal), '[]'))
        order by t.created_at)
      from internal.tickets t
      where t.opened_by = u.id
        or exists (select 1 from internal.ticket_replies r where r.ticket_id = t.id and r.author_user_id = u.id)),
      '[]'),
    'api_keys_created', coalesce((select jsonb_agg(jsonb_build_object('id', k.id, 'account_id', k.account_id,
        'name', k.name, 'mode', k.mode, 'prefix', k.prefix, 'scopes', to_jsonb(k.scopes), 'status', k.status,
        'expires_at', k.expires_at, 'last_used_at', k.last_used_at, 'revoked_at', k.revoked_at,
        'created_at', k.created_at) order by k.created_at)
      from internal.api_keys k where k.created_by = u.id), '[]'),
    'payees', coalesce((select jsonb_agg(jsonb_build_object('id', p.id, 'account_id', p.account_id,
        'kind', p.kind, 'name', p.name, 'email', p.email, 'claimed_at', p.claimed_at, 'currency', p.currency,
        'tax_form', p.tax_form, 'tax_status', p.tax_status, 'tax_country', p.tax_country,
        'tax_name', p.tax_name, 'tax_id_last4', p.tax_id_last4, 'withholding_rate', p.withholding_rate,
        'payout_method', p.payout_method, 'erased_at', p.erased_at, 'created_at', p.created_at)
        order by p.created_at)
      from internal.payees p where p.id = any (payee_ids)), '[]'),
    'statements', coalesce((select jsonb_agg(jsonb_build_object('id', s.id, 'account_id', s.account_id,
        'payee_id', s.payee_id, 'period', s.period, 'currency', s.currency,
        'opening_balance', s.opening_balance, 'closing_balance', s.closing_balance,
        'approved_at', s.approved_at, 'document', s.document) order by s.period, s.id)
      from internal.statements s where s.payee_id = any (payee_ids)), '[]'),
    'payouts', coalesce((select jsonb_agg(jsonb_build_object('id', o.id, 'account_id', o.account_id,
        'payee_id', o.payee_id, 'currency', o.currency, 'amount', o.amount, 'withholding', o.withholding,
        'net_amount', o.net_amount, 'status', o.status, 'method', o.method, 'requested_at', o.requested_at,
        'settled_at', o.settled_at) order by o.requested_at)
      from internal.payouts o where o.payee_id = any (payee_ids) or o.requested_by = u.id), '[]'),
    'mail', coalesce((select jsonb_agg(jsonb_build_object('id', x.id, 'to', x.to_address, 'subject', x.subject,
        'kind', x.kind, 'status', x.status, 'created_at', x.created_at, 'sent_at', x.sent_at)
        order by x.created_at)
      from internal.mail_outbox x where x.tenant_id = p_tenant and x.to_address = u.email), '[]'),
    'audit', coalesce((select jsonb_agg(jsonb_build_object('id', l.id, 'at', l.at, 'tenant_id', l.tenant_id,
        'actor_type', l.actor_type, 'actor', l.actor,
        -- Another's act about them names that actor by type and id only: not their e-mail or address.
        'actor_detail', case when l.actor_type = 'user' and l.actor = u.id::text then l.actor_detail else '{}' end,
        'ip', case when l.actor_type = 'user' and l.actor = u.id::text then l.ip end,
        'action', l.action, 'object_table', l.object_table, 'object_id', l.object_id,
        'before', l.before, 'after', l.after) order by l.id)
      from internal.person_audit_ids(p_tenant, p_user, u.email) a join internal.audit_log l on l.id = a.id), '[]')
  );
end
$$;

-- Whether `text` names the address `email` as a whole: not inside a longer address
-- ("h@label.co" is not in "bob.smith@label.com"), so one person's export or erasure never takes
-- another's rows. The address is escaped for the pattern (every character but letters, digits,
-- @, _ and - is matched literally).
create function internal.names_address(haystack text, email text) returns boolean
language sql immutable set search_path = ''
as $$
  select email is not null and email <> '' and haystack ~* (
    '(^|[^a-z0-9.!#$%&''*+/=?^_`{|}~@-])' || regexp_replace(email, '([^a-zA-Z0-9@_-])', '\\\1', 'g')
    || '($|[^a-z0-9.-])')
$$;
revoke execute on function internal.names_address(text, text) from public;

-- The audit rows about a person: those they did (as a user), those whose object is them (their
-- user id, a membership <account>:<user>, a factor or staff role of theirs), and — in the tenant's
-- own rows only — those naming their e-mail address `p_email` (given, not read: an erasure has
-- replaced it by then). The installation's own rows (no tenant) only by the person's id: an
-- address another tenant's user also holds is no reason to show or rewrite them.
create function internal.person_audit_ids(p_tenant uuid, p_user uuid, p_email text) returns table (id bigint)
language sql stable security definer set search_path = ''
as $$
  select l.id
  from internal.audit_log l
  where (l.tenant_id = p_tenant or l.tenant_id is null)
    and (
      (l.actor_type = 'user' and l.actor = p_user::text)
      or l.object_id = p_user::text
      or (l.object_table = 'internal.memberships' and l.object_id like '%:' || p_user::text)
      or (l.object_table in ('internal.mfa_factors', 'internal.staff')
          and (l.before ->> 'user_id' = p_user::text or l.after ->> 'user_id' = p_user::text))
      or (l.tenant_id = p_tenant and p_email is not null
          and internal.names_address(coalesce(l.before::text, '') || ' ' || coalesce(l.after::text, '')
            || ' ' || coalesce(l.actor_detail::text, '') || ' ' || coalesce(l.object_id, ''), p_email))
    )
$$;

-- 2. A member's own export: the caller's verified token names them (never an API key).
create function internal.my_export() returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
begin
  if auth.uid() is null or auth.tenant_id() is null or auth.jwt() ? 'api_key_id'
      or coalesce(auth.jwt() ->> 'role', '') <> 'authenticated' then
    raise exception 'only a signed-in person exports their own data' using errcode = '42501';
  end if;
  -- An erased person's access token lives until it expires; it reads nothing.
  if not exists (select 1 from internal.users u
      where u.id = auth.uid() and u.tenant_id = auth.tenant_id() and u.deleted_at is null) then
    raise exception 'this user no longer exists' using errcode = '42501';
  end if;
  return internal.person_export(auth.tenant_id(), auth.uid());
end
$$;

-- A payee's erasure (docs/payouts.md): name, e-mail, user, tax identity and payout method cleared,
-- erased_at set; the ledger keeps the pseudonymous payee id, so every balance and statement still
-- adds up. The act is audited (money.payee_erased), with nothing of what was erased. One place for
-- the admin API's POST /payees/{id}/erase (src/money/payees.ts) and a person's erasure below.
-- Returns whether a payee was erased (false: none such in the tenant, or erased already).
create function internal.payee_erase(p_tenant uuid, p_payee uuid) returns boolean
language plpgsql security definer set search_path = ''
as $$
begin
  update internal.payees set name = null, email = null, user_id = null, tax_name = null, tax_id_sealed = null,
    tax_id_last4 = null, payout_method = null, erased_at = now(), updated_at = now()
  where id = p_payee and tenant_id = p_tenant and erased_at is null;
  if not found then
    return false;
  end if;
  perform internal.audit('money.payee_erased', 'internal.payees', p_payee::text, p_tenant);
  return true;
end
$$;

-- 3. Erasure. In one transaction: the user row keeps its id (a pseudonym now: every table that
-- names the person by id keeps a meaningless id) and loses its e-mail, phone, password and
-- metadata; sign-in ends for good (sessions and their refresh tokens, identities, factors and
-- their challenges, one-time tokens deleted; banned forever); memberships, staff roles,
-- notifications, invitations to their address, mail to them, idempotency answers, rate counters
-- about their address are deleted; their payees lose name, e-mail, tax identity and payout method
-- (the ledger keeps the payee id: money.payee_erased, as src/money/payees.ts erasePayee does);
-- and the audit rows about them have their e-mail, client address and other personal keys
-- replaced by "erased" through internal.audit_rewrite, the log's one sanctioned change, which
-- records itself. Kept, and why: docs/privacy.md.
--
-- Refuses (BL044) a person who is the only owner of an account (naming it: another owner first,
-- or close the account) and a staff member (remove the staff role first, an act of its own that
-- needs aal2). Returns what it did, table by table.
create function internal.person_erase(p_tenant uuid, p_user uuid, p_reason text) returns jsonb
language plpgsql security definer set search_path = ''
as $$
declare
  u internal.users;
  pseudonym text;
  sole text;
  done jsonb := '{}';
  n integer;
  g record;
  own uuid[];
  empty uuid[];
  payee uuid;
  erased_payees integer := 0;
begin
  if p_reason is null or length(btrim(p_reason)) = 0 or length(p_reason) > 1000 then
    raise exception 'person_erase: give the reason (1 to 1000 characters)' using errcode = '22023';
  end if;
  select * into u from internal.users where id = p_user and tenant_id = p_tenant for update;
  if not found then
    raise exception 'no user % in this tenant', p_user using errcode = 'P0002';
  end if;
  pseudonym := 'erased-' || u.id::text || '@erased.invalid';
  if u.email = pseudonym then
    raise exception 'user % is already erased', p_user using errcode = 'BL044', hint = 'already_erased';
  end if;
  -- Their own accounts: those they own where no one else is a member. One that holds nothing (the personal
  -- account sign-up made, never used) goes with them; its name may be theirs.
  own := array(select m.account_id from internal.memberships m
    where m.user_id = u.id and m.role = 'owner'
      and not exists (select 1 from internal.memberships o where o.account_id = m.account_id and o.user_id <> u.id));
  empty := array(select a from unnest(own) a
    where not exists (select 1 from public.releases r where r.account_id = a)
      and not exists (select 1 from public.artist_profiles r where r.account_id = a)
      and not exists (select 1 from public.media_assets r where r.account_id = a)
      and not exists (select 1 from internal.ledger_entries r where r.account_id = a)
      and not exists (select 1 from internal.payees r where r.account_id = a)
      and not exists (select 1 from internal.transfers r where r.account_id = a)
      and not exists (select 1 from internal.tickets r where r.account_id = a));
  select string_agg(format('%s (%s)', a.name, a.id), ', ' order by a.name) into sole
  from internal.memberships m join internal.accounts a on a.id = m.account_id
  where m.user_id = u.id and m.role = 'owner' and not (m.account_id = any (empty))
    and not exists (select 1 from internal.memberships o
      where o.account_id = m.account_id and o.role = 'owner' and o.user_id <> u.id);
  if sole is not null then
    raise exception 'this person is the only owner of %: make someone else an owner first, or close the account', sole
      using errcode = 'BL044', hint = 'sole_owner';
  end if;
  if exists (select 1 from internal.staff s where s.user_id = u.id) then
    raise exception 'this person is staff: remove their staff roles first (backline staff remove)'
      using errcode = 'BL044', hint = 'staff';
  end if;

  -- Payees first (they are found by the address the user row is about to lose).
  for payee in
    select p.id from internal.payees p
    where p.tenant_id = p_tenant and p.erased_at is null
      and (p.user_id = u.id or (u.email is not null and p.email = u.email))
  loop
    if internal.payee_erase(p_tenant, payee) then
      erased_payees := erased_payees + 1;
    end if;
  end loop;
  done := done || jsonb_build_object('internal.payees', erased_payees);

  delete from internal.sessions where user_id = u.id;  -- refresh tokens go with them
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.sessions', n);
  delete from internal.identities where user_id = u.id;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.identities', n);
  delete from internal.mfa_factors where user_id = u.id;  -- challenges go with them
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.mfa_factors', n);
  delete from internal.one_time_tokens
  where user_id = u.id or (u.email is not null and tenant_id = p_tenant and email = u.email);
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.one_time_tokens', n);
  delete from internal.email_code_failures where tenant_id = p_tenant and email = u.email;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.email_code_failures', n);
  delete from internal.memberships where user_id = u.id;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.memberships', n);
  update internal.users set default_account_id = null where id = u.id;
  delete from internal.accounts where id = any (empty);
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.accounts', n);
  delete from public.notifications where user_id = u.id;
  get diagnostics n = row_count; done := done || jsonb_build_object('public.notifications', n);
  delete from internal.invitations where tenant_id = p_tenant and email = u.email;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.invitations', n);
  delete from internal.mail_outbox where tenant_id = p_tenant and to_address = u.email;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.mail_outbox', n);
  delete from internal.idempotency_keys where owner = 'user:' || u.id::text;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.idempotency_keys', n);
  -- Counters and jobs of this tenant only whose key or payload names the address as a whole.
  delete from internal.rate_counters
  where strpos(key, p_tenant::text) > 0 and internal.names_address(key, u.email);
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.rate_counters', n);
  delete from internal.rate_limits
  where strpos(key, p_tenant::text) > 0 and internal.names_address(key, u.email);
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.rate_limits', n);
  delete from internal.jobs
  where status <> 'running' and strpos(payload::text, p_tenant::text) > 0
    and internal.names_address(payload::text, u.email);
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.jobs', n);

  update internal.users set email = pseudonym, phone = null, encrypted_password = null,
    email_confirmed_at = null, phone_confirmed_at = null, email_proven_at = null, email_change = null,
    email_change_sent_at = null, confirmation_sent_at = null, recovery_sent_at = null,
    raw_user_meta_data = '{}', raw_app_meta_data = jsonb_build_object('erased', true),
    default_account_id = null, banned_until = 'infinity', deleted_at = coalesce(deleted_at, now()),
    updated_at = now()
  where id = u.id;
  done := done || jsonb_build_object('internal.users', 1);

  -- The audit log, last: the deletes above wrote rows of their own (an invitation's address). In
  -- each row about the person: the top-level keys whose value holds their address (an `email`, a
  -- `settings` naming it), the client address of what they did, a factor's name, a user row's
  -- contact fields. Rows with the same keys are rewritten together, each rewrite recording itself.
  n := 0;
  for g in
    select k.keys, array_agg(k.id order by k.id) as rows
    from (
      select l.id, array(
        select distinct key from (
          select e.key from jsonb_each(case when jsonb_typeof(l.before) = 'object' then l.before else '{}' end) e
            where u.email is not null and strpos(lower(e.value::text), u.email) > 0
          union all
          select e.key from jsonb_each(case when jsonb_typeof(l.after) = 'object' then l.after else '{}' end) e
            where u.email is not null and strpos(lower(e.value::text), u.email) > 0
          union all
          select e.key from jsonb_each(l.actor_detail) e
            where u.email is not null and strpos(lower(e.value::text), u.email) > 0
          union all
          select 'ip' where l.ip is not null and l.actor_type = 'user' and l.actor = u.id::text
          union all
          select 'friendly_name' where l.object_table = 'internal.mfa_factors'
          union all
          select unnest(array['email', 'phone', 'raw_user_meta_data', 'email_change'])
            where l.object_table = 'internal.users'
          union all
          select 'name' where l.object_table = 'internal.accounts' and l.object_id = any (empty::text[])
        ) found(key) order by 1) as keys
      from (select a.id from internal.person_audit_ids(p_tenant, p_user, u.email) a
            union
            select l2.id from internal.audit_log l2
              where l2.tenant_id = p_tenant and l2.object_table = 'internal.accounts'
                and l2.object_id = any (empty::text[])) a
        join internal.audit_log l on l.id = a.id
      where l.action <> 'audit.rewrite'
    ) k
    where cardinality(k.keys) > 0
    group by k.keys
  loop
    n := n + internal.audit_rewrite(g.rows, g.keys,
      'Erasure of a person''s data (GDPR art. 17): ' || p_reason, '"erased"');
  end loop;
  done := done || jsonb_build_object('internal.audit_log', n);

  perform internal.audit('person.erased', 'internal.users', u.id::text, p_tenant);
  return done;
end
$$;

revoke all on function internal.payee_erase(uuid, uuid), internal.person_export(uuid, uuid),
  internal.person_audit_ids(uuid, uuid, text),
  internal.my_export(), internal.person_erase(uuid, uuid, text) from public;
grant execute on function internal.person_export(uuid, uuid), internal.person_erase(uuid, uuid, text),
  internal.payee_erase(uuid, uuid) to service_role;
grant execute on function internal.my_export() to authenticated;
