-- Media uploads (docs/uploads.md): a release's cover artwork and each track's master audio.
--
-- Each upload URL a client asks for makes one media_assets row ('pending'). The bytes go straight
-- to storage (Backline's own upload route on local disk, or a presigned S3 request); when they
-- have arrived the row is 'uploaded', the media.validate job inspects them ('validating') and
-- leaves it 'valid' or 'invalid' with its problems. The newest uploaded asset of a slot (the
-- release's artwork, or one track's audio) is its current one; older ones are superseded.
-- Submitting needs a valid current asset in every slot (internal.media_problems), unless the
-- tenant's settings.require_media is false.

create table public.media_assets (
  id uuid primary key default gen_random_uuid(),
  account_id uuid not null,
  release_id uuid not null,
  -- The track whose audio this is; null for artwork.
  track_id uuid,
  kind text not null check (kind in ('artwork', 'audio')),
  -- Where the bytes live in storage, made by the database of ids only:
  -- artwork/<account>/<release>/cover.<ext>, audio/<account>/<release>/<track>.<ext>.
  object_key text not null,
  -- What the client declared when it asked for the URL.
  filename text check (length(filename) between 1 and 255),
  content_type text not null check (content_type in (
    'image/jpeg', 'image/png', 'audio/wav', 'audio/x-wav', 'audio/wave', 'audio/flac', 'audio/x-flac')),
  declared_bytes bigint check (declared_bytes > 0),
  declared_sha256 text check (declared_sha256 ~ '^[0-9a-f]{64}$'),
  max_bytes bigint not null check (max_bytes > 0),
  status text not null default 'pending'
    check (status in ('pending', 'uploaded', 'validating', 'valid', 'invalid')),
  -- What the validation found wrong: [{"code": ..., "message": ...}]; empty unless invalid.
  problems jsonb not null default '[]' check (jsonb_typeof(problems) = 'array'),
  -- What it measured: width, height, format... or codec, sample_rate, bit_depth, channels, duration.
  metadata jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
  -- What arrived.
  bytes bigint check (bytes >= 0),
  sha256 text check (sha256 ~ '^[0-9a-f]{64}$'),
  -- Until when the upload URL takes the bytes.
  upload_expires_at timestamptz not null,
  uploaded_at timestamptz,
  validated_at timestamptz,
  -- Set when a newer upload of the same slot arrived.
  superseded_at timestamptz,
  created_by uuid references internal.users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((kind = 'artwork') = (track_id is null)),
  check ((kind = 'artwork') = (content_type like 'image/%')),
  foreign key (release_id, account_id) references public.releases (id, account_id) on delete cascade,
  foreign key (track_id, release_id, account_id) references public.tracks (id, release_id, account_id) on delete cascade
);
create index media_assets_release on public.media_assets (release_id, kind, created_at desc);
create index media_assets_account on public.media_assets (account_id, created_at desc);
-- At most one current asset per slot.
create unique index media_assets_current on public.media_assets
  (release_id, coalesce(track_id, '00000000-0000-0000-0000-000000000000'::uuid))
  where status <> 'pending' and superseded_at is null;

-- The object key's extension for each content type.
create function internal.media_extension(content_type text) returns text
language sql immutable
as $$
  select case content_type
    when 'image/jpeg' then 'jpg'
    when 'image/png' then 'png'
    when 'audio/flac' then 'flac'
    when 'audio/x-flac' then 'flac'
    else 'wav'
  end
$$;

-- A new asset: its owner and account from the release, its key from ids, and the release must be
-- one its account may still change (draft, pending or rejected).
create function internal.media_asset_rules() returns trigger
language plpgsql
as $$
declare
  r_status text;
begin
  select status into r_status from public.releases where id = new.release_id;
  if not internal.is_privileged() then
    new.status := 'pending';
    new.problems := '[]';
    new.metadata := '{}';
    new.bytes := null;
    new.sha256 := null;
    new.uploaded_at := null;
    new.validated_at := null;
    new.superseded_at := null;
    if r_status <> all (array['draft', 'pending', 'rejected']) then
      perform internal.refuse('BL001',
        format('release %s is %s and its media can no longer be changed', new.release_id, r_status),
        jsonb_build_object('release_id', new.release_id, 'status', r_status)::text,
        'Only draft, pending and rejected releases take new artwork or audio.');
    end if;
  end if;
  new.object_key := case new.kind
    when 'artwork' then format('artwork/%s/%s/cover.%s', new.account_id, new.release_id,
      internal.media_extension(new.content_type))
    else format('audio/%s/%s/%s.%s', new.account_id, new.release_id, new.track_id,
      internal.media_extension(new.content_type))
  end;
  return new;
end
$$;

-- assign_owner (0005) fills account_id and created_by first: triggers fire in name order.
create trigger assign_owner before insert on public.media_assets
  for each row execute function internal.assign_owner('releases', 'release_id');
create trigger media_asset_rules before insert on public.media_assets
  for each row execute function internal.media_asset_rules();
create trigger touch_updated_at before update on public.media_assets
  for each row execute function internal.touch_updated_at();

-- Clients read assets and ask for new ones; everything after is the server's (service_role).
grant select on public.media_assets to authenticated, tenant_service;
grant insert (id, release_id, track_id, kind, filename, content_type, declared_bytes, declared_sha256, max_bytes,
  upload_expires_at)
  on public.media_assets to authenticated, tenant_service;
grant insert (created_by) on public.media_assets to tenant_service;

alter table public.media_assets enable row level security;
create policy media_assets_tenant_service on public.media_assets for all to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]))
  with check (account_id = any ((select auth.tenant_account_ids())::uuid[]));
-- Media follow their release: whoever sees the release sees its media, whoever may change it may
-- upload to it.
create policy media_assets_select on public.media_assets for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[])
    and exists (select 1 from public.releases r where r.id = release_id));
create policy media_assets_insert on public.media_assets for insert to authenticated
  with check (account_id = any ((select auth.writable_account_ids())::uuid[])
    and exists (select 1 from public.releases r where r.id = release_id and internal.release_writable(r)));

-- Whether the tenant of the release's account asks for media before submission (default: yes).
create function internal.media_required(release uuid) returns boolean
language sql stable security definer set search_path = ''
as $$
  select coalesce((t.settings ->> 'require_media')::boolean, true)
  from public.releases r
  join internal.accounts a on a.id = r.account_id
  join internal.tenants t on t.id = a.tenant_id
  where r.id = release
$$;

-- What the release's media lack, in release_problems' shape.
create function internal.media_problems(release uuid) returns jsonb
language plpgsql stable security definer set search_path = ''
as $$
declare
  problems jsonb := '[]';
  art public.media_assets;
  t record;
  aud public.media_assets;
begin
  if not coalesce(internal.media_required(release), true) then
    return problems;
  end if;
  select * into art from public.media_assets m
    where m.release_id = release and m.kind = 'artwork' and m.status <> 'pending' and m.superseded_at is null;
  if not found then
    problems := problems || jsonb_build_object('param', 'artwork', 'code', 'artwork_missing',
      'message', 'the release has no cover artwork: upload it (POST /releases/{id}/artwork-upload-url)');
  elsif art.status in ('uploaded', 'validating') then
    problems := problems || jsonb_build_object('param', 'artwork', 'code', 'artwork_validating',
      'message', 'the cover artwork is still being checked: submit again in a moment');
  elsif art.status = 'invalid' then
    problems := problems || jsonb_build_object('param', 'artwork', 'code', 'artwork_invalid',
      'message', 'the cover artwork is not usable: ' ||
        coalesce((select string_agg(p ->> 'message', '; ') from jsonb_array_elements(art.problems) p), 'invalid'));
  end if;

  for t in
    select tr.id, tr.title,
      row_number() over (order by tr.disc_number, tr.track_number nulls last, tr.created_at, tr.id) - 1 as idx
    from public.tracks tr where tr.release_id = release
    order by idx
  loop
    select * into aud from public.media_assets m
      where m.track_id = t.id and m.status <> 'pending' and m.superseded_at is null;
    if not found then
      problems := problems || jsonb_build_object('param', format('tracks[%s].audio', t.idx), 'code', 'audio_missing',
        'message', format('track %s (%s) has no audio: upload it (POST /releases/{id}/tracks/{trackId}/audio-upload-url)',
          t.idx + 1, t.title));
    elsif aud.status in ('uploaded', 'validating') then
      problems := problems || jsonb_build_object('param', format('tracks[%s].audio', t.idx), 'code', 'audio_validating',
        'message', format('the audio of track %s (%s) is still being checked: submit again in a moment', t.idx + 1, t.title));
    elsif aud.status = 'invalid' then
      problems := problems || jsonb_build_object('param', format('tracks[%s].audio', t.idx), 'code', 'audio_invalid',
        'message', format('the audio of track %s (%s) is not usable: %s', t.idx + 1, t.title,
          coalesce((select string_agg(p ->> 'message', '; ') from jsonb_array_elements(aud.problems) p), 'invalid')));
    end if;
  end loop;
  return problems;
end
$$;
revoke execute on function internal.media_problems(uuid) from public;
revoke execute on function internal.media_required(uuid) from public;

-- release_problems (0007) now covers the media too: the catalog checks keep their function under
-- a new name, and release_problems puts both lists together.
alter function internal.release_problems(uuid) rename to catalog_problems;
create function internal.release_problems(release uuid) returns jsonb
language sql stable security definer set search_path = ''
as $$
  select case when p is null then null else p || internal.media_problems(release) end
  from internal.catalog_problems(release) p
$$;
revoke execute on function internal.release_problems(uuid) from public;
grant execute on function internal.release_problems(uuid) to authenticated, tenant_service, service_role;
