-- A person's passkeys (migration 0054) and their sign-in flows in progress are theirs: an erasure
-- (docs/privacy.md) deletes them, as 0043's person_erase deletes identities and second factors,
-- and the export lists the passkeys (never the public key or credential id: what a person would
-- recognise is the name, the kind of device and when it was used). The users row only loses its
-- personal fields in an erasure, so the foreign keys' cascades never fire for it.
--
-- 0043's functions are kept, renamed, and called by the new ones of the same name and signature:
-- everything that calls internal.person_erase / internal.person_export (src/people/service.ts,
-- internal.my_export) gets the additions.

alter function internal.person_erase(uuid, uuid, text) rename to person_erase_0043;
alter function internal.person_export(uuid, uuid) rename to person_export_0043;
revoke all on function internal.person_erase_0043(uuid, uuid, text), internal.person_export_0043(uuid, uuid)
  from public, service_role;

-- Erasure: the passkeys, the passkey challenges naming them, and the OpenID Connect sign-in flows
-- (migration 0052: short-lived, but naming the person while they last) go first; then 0043's
-- erasure, whose refusals (sole_owner, staff, already_erased) roll these deletes back with it.
create function internal.person_erase(p_tenant uuid, p_user uuid, p_reason text) returns jsonb
language plpgsql security definer set search_path = ''
as $$
declare
  done jsonb := '{}';
  n integer;
begin
  if not exists (select 1 from internal.users where id = p_user and tenant_id = p_tenant) then
    raise exception 'no user % in this tenant', p_user using errcode = 'P0002';
  end if;
  delete from internal.passkeys where tenant_id = p_tenant and user_id = p_user;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.passkeys', n);
  delete from internal.passkey_challenges where tenant_id = p_tenant and user_id = p_user;
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.passkey_challenges', n);
  delete from internal.oauth_flow_states
  where tenant_id = p_tenant and (user_id = p_user or link_user_id = p_user);
  get diagnostics n = row_count; done := done || jsonb_build_object('internal.oauth_flow_states', n);
  return internal.person_erase_0043(p_tenant, p_user, p_reason) || done;
end
$$;

-- Export: 0043's document and the person's passkeys.
create function internal.person_export(p_tenant uuid, p_user uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
begin
  return internal.person_export_0043(p_tenant, p_user) || jsonb_build_object(
    'passkeys', coalesce((select jsonb_agg(jsonb_build_object('id', k.id, 'friendly_name', k.friendly_name,
        'device_type', k.device_type, 'backed_up', k.backed_up, 'rp_id', k.rp_id,
        'created_at', k.created_at, 'last_used_at', k.last_used_at) order by k.created_at, k.id)
      from internal.passkeys k where k.tenant_id = p_tenant and k.user_id = p_user), '[]'));
end
$$;

revoke all on function internal.person_erase(uuid, uuid, text), internal.person_export(uuid, uuid) from public;
grant execute on function internal.person_erase(uuid, uuid, text), internal.person_export(uuid, uuid)
  to service_role;
