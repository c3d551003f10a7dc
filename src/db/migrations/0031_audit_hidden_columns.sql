-- The audit log never holds a secret, nor a hash or ciphertext of one (issue 37, item 3;
-- docs/security.md "The audit log's hidden columns").
--
-- Migration 0020's trigger hid a fixed list of columns and missed internal.api_keys.reveal_code_hash:
-- SHA-256 of "<key id>:<six-digit code>", inverted in about a second, so whoever read the log and
-- managed the account's keys could reveal a pending key without the owner's mail. Now:
--   1. internal.audit_hidden_column() decides by rule which columns (and which keys inside a
--      jsonb column) are hidden, and the trigger and internal.audit() use it;
--   2. internal.audit_rewrite() is the one sanctioned change to the append-only log, for the
--      schema owner only: it replaces named keys of named rows with a marker, and says so in the log;
--   3. the rows already written are blanked with it.

-- 1. The rule. A name (a column, or a key inside a jsonb column) is hidden when, written in
-- snake_case (camelCase is split first), it
--   - ends in a word that names a secret or its protected form: hash, secret, sealed,
--     ciphertext, encrypted, token, password, passphrase, otp, credential (and their plurals),
--     alone or after an underscore (key_hash, jwt_secret_sealed, access_token, password);
--   - names a key that is itself secret: private_key, secret_key, signing_key, secret_access_key;
--   - names a code that is a secret: reveal_code, verification_code, recovery_code,
--     confirmation_code, auth_code, authorization_code, otp_code, mfa_code, backup_code(s);
--   - or is on the explicit list: in internal.stores, any name that migration 0016's credential
--     rule matches (secret, password, passphrase, private_key or token anywhere in it), as
--     `backline stores configure` and the server's upgrade split them from settings.
-- Only the end of a name counts, so identifiers and times that merely contain such a word stay:
-- stores.code, status_code, reveal_code_expires_at, previous_secret_expires_at, password_min_length.
-- A column that holds a secret under another name is added to the explicit list by a new
-- migration (create or replace this function); test/audit-hidden-columns.test.ts walks every
-- audited column and fails on one that is neither hidden nor reviewed as safe to log.
create function internal.audit_hidden_column(p_table text, p_column text) returns boolean
language sql immutable parallel safe
as $$
  with n as (select lower(regexp_replace(p_column, '([a-z0-9])([A-Z])', '\1_\2', 'g')) as name)
  select n.name ~ '(^|_)(hash|hashes|secret|secrets|sealed|ciphertext|encrypted|token|tokens|password|passwords|passphrase|passphrases|otp|otps|credential|credentials)$'
    or n.name ~ '(^|_)(private|secret|signing|secret_access)_key$'
    or n.name ~ '(^|_)(reveal|verification|recovery|confirmation|auth|authorization|otp|mfa|backup)_codes?$'
    or (p_table = 'internal.stores' and n.name ~ '(secret|password|passphrase|private_key|token)')
  from n
$$;

-- A jsonb value with every key the rule hides, at any depth, replaced by the marker "hidden".
create function internal.audit_scrub(p_table text, p_value jsonb) returns jsonb
language plpgsql immutable parallel safe set search_path = ''
as $$
declare
  k text;
  x jsonb;
  result jsonb;
begin
  if jsonb_typeof(p_value) = 'object' then
    result := '{}';
    for k, x in select e.key, e.value from jsonb_each(p_value) e loop
      result := result || jsonb_build_object(k,
        case when internal.audit_hidden_column(p_table, k) then '"hidden"'::jsonb else internal.audit_scrub(p_table, x) end);
    end loop;
    return result;
  elsif jsonb_typeof(p_value) = 'array' then
    return (select coalesce(jsonb_agg(internal.audit_scrub(p_table, a.x) order by a.i), '[]'::jsonb)
      from jsonb_array_elements(p_value) with ordinality a(x, i));
  end if;
  return p_value;
end
$$;

-- Whether a jsonb value (an object or an array) may hold, at any depth, a key the rule hides: a
-- pattern wider than the rule, run over the value's text, so that most values skip the walk above.
create function internal.audit_may_hide(p_value jsonb) returns boolean
language sql immutable parallel safe
as $$
  select jsonb_typeof(p_value) in ('object', 'array')
    and p_value::text ~* '(hash|secret|sealed|cipher|encrypt|token|passw|passphrase|otp|credential|key|code)'
$$;

-- What of a row (as jsonb, one key per column) may be written to the log: hidden columns left
-- out, hidden keys inside the others' values replaced by "hidden". Anything but an object is
-- scrubbed as a value (internal.audit()'s free-form before and after).
create function internal.audit_image(p_table text, p_row jsonb) returns jsonb
language sql immutable parallel safe set search_path = ''
as $$
  select case
    when p_row is null then null
    when jsonb_typeof(p_row) <> 'object' then
      case when internal.audit_may_hide(p_row) then internal.audit_scrub(p_table, p_row) else p_row end
    else coalesce((select jsonb_object_agg(e.key, case
        when internal.audit_may_hide(e.value) then internal.audit_scrub(p_table, e.value) else e.value end)
      from jsonb_each(p_row) e where not internal.audit_hidden_column(p_table, e.key)), '{}'::jsonb)
  end
$$;

-- Migration 0020's trigger function, with the rule instead of its list. A hidden column that
-- changed leaves only the marker "changed" in `after` (never in `before`, never on insert or
-- delete); a column whose only change is inside a hidden key of its value leaves "changed" too.
create or replace function internal.audit_row() returns trigger
language plpgsql security definer set search_path = ''
as $$
declare
  noise text[] := array['updated_at', 'last_used_at', 'last_challenged_at', 'attempts', 'failing_since',
    'last_success_at', 'claimed_at'];
  mode text := coalesce(tg_argv[0], 'all');
  tbl text := tg_table_schema || '.' || tg_table_name;
  a jsonb := internal.audit_actor();
  new_row jsonb := case when tg_op = 'DELETE' then null else to_jsonb(new) end;
  old_row jsonb := case when tg_op = 'INSERT' then null else to_jsonb(old) end;
  rj jsonb := coalesce(new_row, old_row);
  o jsonb;
  b jsonb;
  k text;
  changed_before jsonb := '{}';
  changed_after jsonb := '{}';
  tenant uuid;
  object_id text;
begin
  -- 'people': the server's own work on this table (a worker delivering) is not an act to record.
  if mode = 'people' and a ->> 'type' = 'system' then
    return null;
  end if;
  o := internal.audit_image(tbl, new_row);
  b := internal.audit_image(tbl, old_row);
  if tg_op = 'UPDATE' then
    for k in select jsonb_object_keys(new_row) loop
      continue when k = any (noise) or (new_row -> k) is not distinct from (old_row -> k);
      if internal.audit_hidden_column(tbl, k) or (o -> k) is not distinct from (b -> k) then
        -- A sealed secret replaced (a key or secret rotation) is an act; its value is not shown.
        changed_after := changed_after || jsonb_build_object(k, 'changed');
      else
        changed_before := changed_before || jsonb_build_object(k, b -> k);
        changed_after := changed_after || jsonb_build_object(k, o -> k);
      end if;
    end loop;
    if changed_after = '{}'::jsonb then
      return null;
    end if;
    b := changed_before;
    o := changed_after;
  end if;
  tenant := case
    when rj ? 'tenant_id' then nullif(rj ->> 'tenant_id', '')::uuid
    when tg_table_name = 'tenants' then (rj ->> 'id')::uuid
    when rj ? 'account_id' then (select ac.tenant_id from internal.accounts ac where ac.id = (rj ->> 'account_id')::uuid)
  end;
  object_id := case
    when tg_table_name = 'memberships' then (rj ->> 'account_id') || ':' || (rj ->> 'user_id')
    when rj ? 'id' then rj ->> 'id'
    when rj ? 'code' then rj ->> 'code'
    when rj ? 'tenant_id' then rj ->> 'tenant_id'
  end;
  insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id,
    before, after)
  values (tenant, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', lower(tg_op), tbl, object_id, b, o);
  return null;
end
$$;

-- A named act's before and after follow the same rule (by the key names, for its table).
create or replace function internal.audit(p_action text, p_table text, p_object_id text, p_tenant uuid,
  p_before jsonb default null, p_after jsonb default null) returns void
language plpgsql security definer set search_path = ''
as $$
declare
  a jsonb := internal.audit_actor();
begin
  insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id,
    before, after)
  values (p_tenant, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', p_action, p_table, p_object_id,
    internal.audit_image(p_table, p_before), internal.audit_image(p_table, p_after));
end
$$;

-- 2. The sanctioned rewrite. `doc` with each of `keys` it holds (top level) set to `marker`.
create function internal.audit_redact(p_doc jsonb, p_keys text[], p_marker jsonb) returns jsonb
language sql immutable parallel safe set search_path = ''
as $$
  select case
    when p_doc is null or jsonb_typeof(p_doc) <> 'object' then p_doc
    else p_doc || coalesce((select jsonb_object_agg(k, p_marker) from unnest(p_keys) k where p_doc ? k), '{}'::jsonb)
  end
$$;

-- Replaces, in the audit rows `p_ids`, each of `p_keys` found in `before`, `after` and
-- `actor_detail` (and the `ip` column when 'ip' is named) with the marker `p_value`: a word such
-- as "redacted" or "erased", never data. First it writes, for each tenant of the rows (null: the
-- installation's own), one row `audit.rewrite` on internal.audit_log naming the rows, the keys,
-- the marker and the reason, never the old values; the actor is the transaction's (system for a
-- migration, cli:<command> for a command). Rows where nothing would change are left out (a second
-- run changes nothing and writes nothing). Returns how many rows it rewrote. Refuses unknown ids
-- and the rows of earlier rewrites (the record of a rewrite is never rewritten).
--
-- Who may run it: the schema owner only (and superusers). EXECUTE is revoked from public, so no
-- request role (anon, authenticated, tenant_service, service_role) and no login role holding them
-- may call it; it runs as its caller (SECURITY INVOKER), and no role but the owner holds UPDATE
-- on internal.audit_log, so a grant of EXECUTE alone would still change nothing.
create function internal.audit_rewrite(p_ids bigint[], p_keys text[], p_reason text,
  p_value jsonb default '"redacted"') returns integer
language plpgsql set search_path = ''
as $$
declare
  ids bigint[];
  keys text[];
  missing bigint[];
  records bigint[] := '{}';
  g record;
  rec bigint;
  n integer;
  a jsonb := internal.audit_actor();
begin
  if p_ids is null or cardinality(p_ids) = 0 or array_position(p_ids, null) is not null then
    raise exception 'audit_rewrite: name the rows (p_ids, no nulls)' using errcode = '22023';
  end if;
  if p_keys is null or cardinality(p_keys) = 0
      or exists (select 1 from unnest(p_keys) k where k is null or k !~ '^[a-z_][a-z0-9_]{0,62}$') then
    raise exception 'audit_rewrite: name the keys (p_keys: lower-case names such as email, ip)' using errcode = '22023';
  end if;
  if p_reason is null or length(btrim(p_reason)) = 0 or length(p_reason) > 1000 then
    raise exception 'audit_rewrite: give the reason (1 to 1000 characters)' using errcode = '22023';
  end if;
  if p_value is null or jsonb_typeof(p_value) <> 'string' or p_value #>> '{}' !~ '^[a-z][a-z_]{0,39}$' then
    raise exception 'audit_rewrite: the marker must be a word such as "redacted" (a JSON string of a-z and _)'
      using errcode = '22023';
  end if;
  ids := array(select distinct i from unnest(p_ids) i order by i);
  keys := array(select distinct k from unnest(p_keys) k order by k);
  missing := array(select i from unnest(ids) i
    where not exists (select 1 from internal.audit_log l where l.id = i) order by i limit 20);
  if cardinality(missing) > 0 then
    raise exception 'audit_rewrite: no audit row %', array_to_string(missing, ', ') using errcode = '22023';
  end if;
  if exists (select 1 from internal.audit_log l where l.id = any (ids) and l.action = 'audit.rewrite') then
    raise exception 'audit_rewrite: the record of a rewrite is never rewritten' using errcode = '22023';
  end if;

  for g in
    select l.tenant_id, array_agg(l.id order by l.id) as rows
    from internal.audit_log l
    where l.id = any (ids) and (
      l.before is distinct from internal.audit_redact(l.before, keys, p_value)
      or l.after is distinct from internal.audit_redact(l.after, keys, p_value)
      or l.actor_detail is distinct from internal.audit_redact(l.actor_detail, keys, p_value)
      or ('ip' = any (keys) and l.ip is not null and l.ip <> p_value #>> '{}'))
    group by l.tenant_id
  loop
    insert into internal.audit_log (tenant_id, actor_type, actor, actor_detail, ip, action, object_table, after)
    values (g.tenant_id, a ->> 'type', a ->> 'id', a -> 'detail', a ->> 'ip', 'audit.rewrite', 'internal.audit_log',
      jsonb_build_object('ids', to_jsonb(g.rows), 'keys', to_jsonb(keys), 'marker', p_value, 'reason', p_reason))
    returning id into rec;
    records := records || rec;
  end loop;
  if cardinality(records) = 0 then
    return 0;
  end if;

  -- The append-only trigger lets this one update through: it reads the records just written
  -- (named by this setting, local to the transaction) and accepts exactly the change they describe.
  perform set_config('backline.audit_rewrite', array_to_string(records, ','), true);
  update internal.audit_log l set
    before = internal.audit_redact(l.before, keys, p_value),
    after = internal.audit_redact(l.after, keys, p_value),
    actor_detail = internal.audit_redact(l.actor_detail, keys, p_value),
    ip = case when 'ip' = any (keys) and l.ip is not null then p_value #>> '{}' else l.ip end
  where l.id = any (ids) and (
    l.before is distinct from internal.audit_redact(l.before, keys, p_value)
    or l.after is distinct from internal.audit_redact(l.after, keys, p_value)
    or l.actor_detail is distinct from internal.audit_redact(l.actor_detail, keys, p_value)
    or ('ip' = any (keys) and l.ip is not null and l.ip <> p_value #>> '{}'));
  get diagnostics n = row_count;
  perform set_config('backline.audit_rewrite', '', true);
  return n;
end
$$;
revoke all on function internal.audit_rewrite(bigint[], text[], text, jsonb) from public;
revoke all on function internal.audit_rewrite(bigint[], text[], text, jsonb)
  from anon, authenticated, tenant_service, service_role;

-- The append-only trigger: UPDATE, DELETE and TRUNCATE stay refused to every role, the owner
-- included, except an UPDATE inside internal.audit_rewrite(): while it runs, the setting
-- backline.audit_rewrite names the `audit.rewrite` rows it wrote in this transaction, and an
-- update passes only if such a row (written now, for the row's tenant) names the row, and the
-- update changes nothing but the keys that record names in before, after and actor_detail (and
-- ip), each to its marker. Anyone can set a setting, but no request role holds UPDATE on the
-- table at all (migration 0020 revoked every privilege but SELECT), so the setting opens nothing
-- to them; and for the owner it opens only a change the log itself records.
create or replace function internal.audit_log_append_only() returns trigger
language plpgsql set search_path = ''
as $$
declare
  records text := nullif(current_setting('backline.audit_rewrite', true), '');
  spec jsonb;
  keys text[];
  marker jsonb;
begin
  if tg_op <> 'UPDATE' then
    raise exception 'the audit log is append-only: % refused', tg_op using errcode = '42501';
  end if;
  if records ~ '^[0-9]{1,18}(,[0-9]{1,18})*$' and old.action <> 'audit.rewrite' then
    select r.after into spec from internal.audit_log r
      where r.id = any (string_to_array(records, ',')::bigint[])
        and r.action = 'audit.rewrite' and r.object_table = 'internal.audit_log' and r.at = now()
        and r.tenant_id is not distinct from old.tenant_id
        and r.after -> 'ids' @> to_jsonb(old.id)
      order by r.id desc limit 1;
    if spec is not null then
      keys := array(select jsonb_array_elements_text(spec -> 'keys'));
      marker := spec -> 'marker';
      if (new.id, new.tenant_id, new.at, new.actor_type, new.actor, new.action, new.object_table, new.object_id)
          is not distinct from
          (old.id, old.tenant_id, old.at, old.actor_type, old.actor, old.action, old.object_table, old.object_id)
        and new.before is not distinct from internal.audit_redact(old.before, keys, marker)
        and new.after is not distinct from internal.audit_redact(old.after, keys, marker)
        and new.actor_detail is not distinct from internal.audit_redact(old.actor_detail, keys, marker)
        and new.ip is not distinct from
          (case when 'ip' = any (keys) and old.ip is not null then marker #>> '{}' else old.ip end)
      then
        return new;
      end if;
    end if;
  end if;
  raise exception 'the audit log is append-only: % refused', tg_op using errcode = '42501';
end
$$;

-- 3. The rows already written: every key of before/after that the rule hides and that holds a
-- value (not the marker "changed", not null), and every key whose value holds a hidden key
-- inside it (a store's settings with credentials, as the upgrade that sealed them logged them),
-- is replaced by "redacted", one rewrite per set of keys. The rewrite's own rows say so (actor system).
do $$
declare
  g record;
begin
  for g in
    select hidden.keys, array_agg(hidden.id order by hidden.id) as ids
    from (
      select l.id, array(
        select distinct e.key
        from (select * from jsonb_each(case when jsonb_typeof(l.before) = 'object' then l.before else '{}'::jsonb end)
              union all
              select * from jsonb_each(case when jsonb_typeof(l.after) = 'object' then l.after else '{}'::jsonb end)) e
        where (internal.audit_hidden_column(l.object_table, e.key) and e.value not in ('"changed"'::jsonb, 'null'::jsonb))
          or (internal.audit_may_hide(e.value)
              and internal.audit_scrub(l.object_table, e.value) is distinct from e.value)
        order by 1) as keys
      from internal.audit_log l
      where l.action <> 'audit.rewrite'
    ) hidden
    where cardinality(hidden.keys) > 0
    group by hidden.keys
  loop
    perform internal.audit_rewrite(g.ids, g.keys,
      'Issue 37: values the audit log''s hidden-column rule (internal.audit_hidden_column) hides, written before the rule existed',
      '"redacted"');
  end loop;
end
$$;
