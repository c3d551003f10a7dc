-- Buckets and objects of /storage/v1 (issue 48; docs/uploads.md, "Buckets" and "Objects"), shaped
-- as Supabase Storage's storage.buckets and storage.objects. The schema `storage` is not one the
-- table interface serves (/rest/v1 answers only `public`): callers reach these rows through
-- /storage/v1, whose handlers query them as the caller, under the policies below.
--
-- One database serves many tenants, so the policies are the installation's and fixed: a bucket
-- and its objects belong to one tenant, and what the tenant's admin decides about a bucket
-- (public, which membership roles read and write, one folder per account) is data in its row that
-- the policies read. The built-in slots `artwork` and `audio` (media of releases, in
-- public.media_assets) are not rows here; their names are reserved.

create schema storage;
grant usage on schema storage to anon, authenticated, tenant_service, service_role;

create table storage.buckets (
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  -- Storage's rule for names (letters, digits and a few signs), at most 100 characters.
  id text not null check (
    id ~ '^[A-Za-z0-9_!.*''()&$@=;:+,? -]{1,100}$' and id not in ('.', '..') and id not in ('artwork', 'audio')
  ),
  public boolean not null default false,
  file_size_limit bigint check (file_size_limit is null or file_size_limit > 0),
  allowed_mime_types text[] check (allowed_mime_types is null or cardinality(allowed_mime_types) <= 100),
  -- The tenant admin's rules, read by the policies on storage.objects: with one folder per account,
  -- an object's first path segment is an account id, and only that account's members (with a role
  -- listed) reach it; without, any member of the tenant with a role listed does.
  folder_per_account boolean not null default false,
  read_roles text[] not null default '{owner,admin,member,viewer}'
    check (read_roles <@ '{owner,admin,member,viewer}'::text[]),
  write_roles text[] not null default '{owner,admin,member}'
    check (write_roles <@ '{owner,admin,member,viewer}'::text[]),
  owner uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (tenant_id, id)
);

create table storage.objects (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  bucket_id text not null,
  name text not null check (length(name) between 1 and 1024),
  owner uuid,
  -- Where the bytes are in the storage driver: made by the server of the tenant and a fresh id,
  -- never of the name (a move changes the name only).
  object_key text not null,
  metadata jsonb not null default '{}',
  -- What the uploader attached (storage-js `metadata`), at most 8 kB of JSON.
  user_metadata jsonb check (user_metadata is null or length(user_metadata::text) <= 8192),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  last_accessed_at timestamptz not null default now(),
  unique (tenant_id, bucket_id, name),
  check (object_key like 'objects/' || tenant_id::text || '/%'),
  -- A bucket is deleted only when empty (Storage's rule), whoever can see its objects.
  foreign key (tenant_id, bucket_id) references storage.buckets (tenant_id, id) on delete restrict
);
create index objects_prefix on storage.objects (tenant_id, bucket_id, name text_pattern_ops);

-- The accounts of the caller's tenant in which the caller holds one of `roles`: a key by its
-- account_role, a user by their memberships (as auth.readable_account_ids, migration 0020).
create function internal.storage_account_ids(roles text[]) returns uuid[]
language sql stable security definer set search_path = ''
as $$
  select case
    when auth.jwt() ? 'account_id' then coalesce(
      (select array_agg(a.id) from internal.accounts a
        where a.id = nullif(auth.jwt() ->> 'account_id', '')::uuid and a.tenant_id = auth.tenant_id()
          and coalesce(auth.jwt() ->> 'account_role', 'member') = any (roles)),
      '{}')
    else coalesce(
      (select array_agg(m.account_id) from internal.memberships m
        join internal.accounts a on a.id = m.account_id
        where m.user_id = auth.uid() and m.tenant_id = auth.tenant_id() and m.role = any (roles)
          and (not a.require_aal2 or auth.aal() = 'aal2')),
      '{}')
  end
$$;

-- Whether the caller (a user or key, not staff) may read or write an object of this name in this
-- bucket, by the bucket's rules.
create function internal.storage_object_allowed(p_tenant uuid, p_bucket text, p_name text, p_write boolean)
returns boolean
language plpgsql stable security definer set search_path = ''
as $$
declare
  b storage.buckets;
  accounts uuid[];
  folder text;
begin
  if p_tenant is distinct from auth.tenant_id() or auth.role() is distinct from 'authenticated' then
    return false;
  end if;
  select * into b from storage.buckets where tenant_id = p_tenant and id = p_bucket;
  if not found then
    return false;
  end if;
  accounts := internal.storage_account_ids(case when p_write then b.write_roles else b.read_roles end);
  if not b.folder_per_account then
    return cardinality(accounts) > 0;
  end if;
  folder := split_part(p_name, '/', 1);
  -- The folder as the policies read it: an account id as text, in lower case only (an upper-case
  -- spelling would be a folder its own members' policies do not match).
  return strpos(p_name, '/') > 0 and folder = any (accounts::text[]);
end
$$;

-- What the caller reaches in each bucket of its tenant, for the policies below: one row per bucket,
-- computed once per statement (a function scan without row arguments is not run again per row),
-- so a list of a thousand objects does not ask a thousand times.
create function internal.storage_reach(p_write boolean)
returns table (bucket_id text, per_account boolean, accounts text[])
language plpgsql stable security definer set search_path = ''
as $$
begin
  if auth.role() is distinct from 'authenticated' then
    return;
  end if;
  return query
    select b.id, b.folder_per_account,
      internal.storage_account_ids(case when p_write then b.write_roles else b.read_roles end)::text[]
    from storage.buckets b
    where b.tenant_id = auth.tenant_id();
end
$$;

revoke all on function internal.storage_account_ids(text[]),
  internal.storage_object_allowed(uuid, text, text, boolean), internal.storage_reach(boolean) from public;
grant execute on function internal.storage_account_ids(text[]),
  internal.storage_object_allowed(uuid, text, text, boolean), internal.storage_reach(boolean)
  to authenticated, tenant_service, service_role;

alter table storage.buckets enable row level security;
alter table storage.objects enable row level security;

grant select, insert, update, delete on storage.buckets, storage.objects to authenticated, tenant_service;
grant all on storage.buckets, storage.objects to service_role;

-- Buckets: the tenant's people see its buckets' settings; its service-role key and its admin
-- staff manage them. Nobody reaches another tenant's.
create policy buckets_select on storage.buckets for select to authenticated, tenant_service
  using (tenant_id = auth.tenant_id());
create policy buckets_insert on storage.buckets for insert to authenticated, tenant_service
  with check (tenant_id = auth.tenant_id() and auth.has_staff_role(tenant_id, 'admin'));
create policy buckets_update on storage.buckets for update to authenticated, tenant_service
  using (tenant_id = auth.tenant_id() and auth.has_staff_role(tenant_id, 'admin'))
  with check (tenant_id = auth.tenant_id() and auth.has_staff_role(tenant_id, 'admin'));
create policy buckets_delete on storage.buckets for delete to authenticated, tenant_service
  using (tenant_id = auth.tenant_id() and auth.has_staff_role(tenant_id, 'admin'));

-- Objects: the bucket's rules for users and keys (internal.storage_reach: with one folder per
-- account, the name's first segment is one of the accounts); every object of the tenant for its
-- service-role key and admin staff. internal.storage_object_allowed is the same rule for one name.
create policy objects_select on storage.objects for select to authenticated, tenant_service
  using (
    tenant_id = auth.tenant_id() and (
      (select auth.has_staff_role(auth.tenant_id(), 'admin'))
      or exists (
        select 1 from internal.storage_reach(false) r
        where r.bucket_id = objects.bucket_id and cardinality(r.accounts) > 0
          and (not r.per_account or (strpos(objects.name, '/') > 0 and split_part(objects.name, '/', 1) = any (r.accounts)))
      )
    )
  );
create policy objects_insert on storage.objects for insert to authenticated, tenant_service
  with check (
    tenant_id = auth.tenant_id() and (
      (select auth.has_staff_role(auth.tenant_id(), 'admin'))
      or exists (
        select 1 from internal.storage_reach(true) r
        where r.bucket_id = objects.bucket_id and cardinality(r.accounts) > 0
          and (not r.per_account or (strpos(objects.name, '/') > 0 and split_part(objects.name, '/', 1) = any (r.accounts)))
      )
    )
  );
create policy objects_update on storage.objects for update to authenticated, tenant_service
  using (
    tenant_id = auth.tenant_id() and (
      (select auth.has_staff_role(auth.tenant_id(), 'admin'))
      or exists (
        select 1 from internal.storage_reach(true) r
        where r.bucket_id = objects.bucket_id and cardinality(r.accounts) > 0
          and (not r.per_account or (strpos(objects.name, '/') > 0 and split_part(objects.name, '/', 1) = any (r.accounts)))
      )
    )
  )
  with check (
    tenant_id = auth.tenant_id() and (
      (select auth.has_staff_role(auth.tenant_id(), 'admin'))
      or exists (
        select 1 from internal.storage_reach(true) r
        where r.bucket_id = objects.bucket_id and cardinality(r.accounts) > 0
          and (not r.per_account or (strpos(objects.name, '/') > 0 and split_part(objects.name, '/', 1) = any (r.accounts)))
      )
    )
  );
create policy objects_delete on storage.objects for delete to authenticated, tenant_service
  using (
    tenant_id = auth.tenant_id() and (
      (select auth.has_staff_role(auth.tenant_id(), 'admin'))
      or exists (
        select 1 from internal.storage_reach(true) r
        where r.bucket_id = objects.bucket_id and cardinality(r.accounts) > 0
          and (not r.per_account or (strpos(objects.name, '/') > 0 and split_part(objects.name, '/', 1) = any (r.accounts)))
      )
    )
  );
