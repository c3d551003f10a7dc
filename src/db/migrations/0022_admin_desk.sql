-- The operator's desk (issue 16; /admin/v1, docs/operator.md "Admin API"): what its lists need to
-- stay fast at 100,000 releases (keyset pagination walks these indexes), the tenant of each job,
-- what each delivery sent (the correction diff), and the progress of a royalty import while it runs.

-- 1. Keyset pagination. Each list orders by the columns of one index, ending in the id.
-- The review queue, oldest first.
create index releases_review_queue on public.releases (submitted_at, id)
  where status in ('submitted', 'in_review');
-- Deliveries across the tenant: those in error first, then newest first. A delivery names its
-- tenant (set from its account when it is written), so the list walks one index of the tenant's
-- deliveries instead of sorting every delivery of the tenant's accounts.
alter table internal.release_deliveries add column tenant_id uuid;
create function internal.delivery_set_tenant() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  select a.tenant_id into new.tenant_id from internal.accounts a where a.id = new.account_id;
  return new;
end
$$;
create trigger delivery_set_tenant before insert on internal.release_deliveries
  for each row execute function internal.delivery_set_tenant();
update internal.release_deliveries d set tenant_id = a.tenant_id from internal.accounts a where a.id = d.account_id;
create index release_deliveries_desk on internal.release_deliveries (tenant_id, (status = 'error'), created_at, id);
-- Takedown and OAC requests, newest first (or oldest first for the OAC queue).
create index takedown_requests_created on public.takedown_requests (created_at, id);
create index oac_requests_created on internal.oac_requests (created_at, id);
-- A tenant's accounts, newest first.
create index accounts_tenant_created on internal.accounts (tenant_id, created_at, id);
-- An account's API keys, newest first.
create index api_keys_account_created_id on internal.api_keys (account_id, created_at, id);

-- 2. The tenant a job works for, from the row its payload names (release, delivery, takedown
-- request, OAC request or media asset), set when the job is written: the desk lists a tenant's
-- jobs without reading every payload. Null for a job of no tenant (none today).
alter table internal.jobs add column tenant_id uuid;

create function internal.job_tenant(payload jsonb) returns uuid
language sql stable security definer set search_path = ''
as $$
  with ids as (
    select
      case when payload ->> 'release_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
        then (payload ->> 'release_id')::uuid end as release_id,
      case when payload ->> 'delivery_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
        then (payload ->> 'delivery_id')::uuid end as delivery_id,
      case when payload ->> 'takedown_request_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
        then (payload ->> 'takedown_request_id')::uuid end as takedown_id,
      case when payload ->> 'oac_request_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
        then (payload ->> 'oac_request_id')::uuid end as oac_id,
      case when payload ->> 'asset_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$'
        then (payload ->> 'asset_id')::uuid end as asset_id
  )
  select coalesce(
    (select a.tenant_id from ids, public.releases r join internal.accounts a on a.id = r.account_id
      where r.id = ids.release_id),
    (select a.tenant_id from ids, internal.release_deliveries d join internal.accounts a on a.id = d.account_id
      where d.id = ids.delivery_id),
    (select a.tenant_id from ids, public.takedown_requests t join internal.accounts a on a.id = t.account_id
      where t.id = ids.takedown_id),
    (select a.tenant_id from ids, internal.oac_requests o join internal.accounts a on a.id = o.account_id
      where o.id = ids.oac_id),
    (select a.tenant_id from ids, public.media_assets m join internal.accounts a on a.id = m.account_id
      where m.id = ids.asset_id))
$$;
revoke execute on function internal.job_tenant(jsonb) from public;

create function internal.job_set_tenant() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  if new.tenant_id is null then
    new.tenant_id := internal.job_tenant(new.payload);
  end if;
  return new;
end
$$;
create trigger job_set_tenant before insert on internal.jobs
  for each row execute function internal.job_set_tenant();

update internal.jobs set tenant_id = internal.job_tenant(payload) where tenant_id is null;

-- A tenant's jobs by state, newest first; the jobs of one delivery (their dedupe key is its id).
create index jobs_tenant_status on internal.jobs (tenant_id, status, id);
create index jobs_dedupe_key on internal.jobs (dedupe_key, id) where dedupe_key is not null;

-- 3. What each insert or update delivery sent: the release's correctable metadata as it was sent
-- (src/pipeline/delivery.ts), so the desk shows a correction's difference against what the store
-- has. Null for deliveries made before this migration.
alter table internal.release_deliveries add column sent_metadata jsonb
  check (sent_metadata is null or jsonb_typeof(sent_metadata) = 'object');

-- 4. A royalty import while it runs (src/royalties/admin.ts): the upload's bytes, then the lines
-- read so far, written every half second in their own short transactions, so a console polls
-- GET /admin/v1/royalty-imports/{id} while the import's own transaction is still open. The id is
-- the import's (chosen by the client, or by the server). Only the service role reads it.
create table internal.royalty_import_runs (
  id uuid primary key,
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  format text not null,
  file_name text check (length(file_name) <= 500),
  -- receiving (the upload), importing (reading and loading), done, failed.
  phase text not null default 'receiving' check (phase in ('receiving', 'importing', 'done', 'failed')),
  -- The request's Content-Length when it gave one.
  total_bytes bigint check (total_bytes >= 0),
  bytes_received bigint not null default 0 check (bytes_received >= 0),
  -- Of the received file: bytes read and lines parsed by the import so far.
  bytes_read bigint not null default 0 check (bytes_read >= 0),
  lines bigint not null default 0 check (lines >= 0),
  -- When done: completed, duplicate or rejected; import_id the import it made (or, for a
  -- duplicate, the import that already counted the report). When failed: error says why.
  outcome text check (outcome in ('completed', 'duplicate', 'rejected')),
  import_id uuid,
  error text check (length(error) <= 2000),
  started_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz
);
create index royalty_import_runs_tenant on internal.royalty_import_runs (tenant_id, started_at desc);
alter table internal.royalty_import_runs enable row level security;
revoke all on internal.royalty_import_runs from public;
