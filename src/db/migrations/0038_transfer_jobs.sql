-- Catalogue transfer through the public API (issue 40, docs/public-api.md "Transfers"): a label
-- uploads its CSV or one ERN message to a signed upload slot of its own kind, then asks for a
-- transfer of it, which runs as a job (transfer.run) in the worker and ends with a
-- transfer.completed event.
--
-- A transfer file is not a release's media: it belongs to the account, not to a release, and it is
-- small (a 10,000-track CSV is about 3 MB), so its bytes are kept here, beside its slot, where the
-- worker of any process reads them; they are dropped once a real run has used them.

create table internal.transfer_uploads (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  filename text check (length(filename) <= 255),
  content_type text not null check (content_type in ('text/csv', 'application/xml')),
  -- The slot's URL carries a secret token; only its SHA-256 is kept.
  token_hash text not null,
  declared_bytes bigint check (declared_bytes > 0),
  declared_sha256 text check (declared_sha256 ~ '^[0-9a-f]{64}$'),
  max_bytes bigint not null check (max_bytes > 0),
  status text not null default 'pending' check (status in ('pending', 'uploaded')),
  bytes bigint,
  sha256 text,
  content bytea,
  upload_expires_at timestamptz not null,
  uploaded_at timestamptz,
  created_at timestamptz not null default now(),
  check (status = 'pending' or (bytes is not null and sha256 is not null)),
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);
create index transfer_uploads_account on internal.transfer_uploads (account_id, created_at desc);

create table internal.transfer_jobs (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null,
  account_id uuid not null,
  upload_id uuid references internal.transfer_uploads (id) on delete set null,
  dry_run boolean not null,
  source_format text not null check (source_format in ('csv', 'ern')),
  filename text,
  status text not null default 'queued' check (status in ('queued', 'running', 'completed', 'failed')),
  -- {releases_created, releases_existing, releases_with_problems, tracks_created, …, errors, warnings}
  counts jsonb not null default '{}' check (jsonb_typeof(counts) = 'object'),
  -- The first problems ([{where, code, message, severity}], errors first) and how many there were.
  problems jsonb not null default '[]' check (jsonb_typeof(problems) = 'array'),
  problem_count integer not null default 0,
  -- The transfer a real run recorded (internal.transfers).
  transfer_id uuid references internal.transfers (id) on delete set null,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  completed_at timestamptz,
  foreign key (tenant_id, account_id) references internal.accounts (tenant_id, id) on delete cascade
);
create index transfer_jobs_account on internal.transfer_jobs (account_id, created_at desc, id desc);

alter table internal.transfer_uploads enable row level security;
alter table internal.transfer_jobs enable row level security;

-- A client reads its accounts' slots and transfer jobs (not the bytes' token); the server writes
-- them (service_role), after the public API has checked the caller may write the account.
grant select (id, tenant_id, account_id, filename, content_type, declared_bytes, declared_sha256, max_bytes,
  status, bytes, sha256, upload_expires_at, uploaded_at, created_at)
  on internal.transfer_uploads to authenticated, tenant_service;
grant select on internal.transfer_jobs to authenticated, tenant_service;
grant select, insert, update, delete on internal.transfer_uploads, internal.transfer_jobs to service_role;

create policy transfer_uploads_select on internal.transfer_uploads for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[]));
create policy transfer_uploads_tenant_service on internal.transfer_uploads for select to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]));
create policy transfer_jobs_select on internal.transfer_jobs for select to authenticated
  using (account_id = any ((select auth.readable_account_ids())::uuid[]));
create policy transfer_jobs_tenant_service on internal.transfer_jobs for select to tenant_service
  using (account_id = any ((select auth.tenant_account_ids())::uuid[]));

-- The new event, for webhook endpoints: transfer.completed. Its read scope is catalog:read
-- (internal.event_read_scope's default, migration 0036), as for the release events.
alter table internal.webhook_endpoints drop constraint webhook_endpoints_events_check;
alter table internal.webhook_endpoints add constraint webhook_endpoints_events_check
  check (cardinality(events) between 1 and 20 and events <@ array[
    'release.submitted', 'release.approved', 'release.rejected', 'release.live', 'release.takedown_completed',
    'royalties.imported', 'royalties.voided', 'statement.ready', 'payout.requested', 'payout.paid',
    'payout.failed', 'transfer.completed']::text[]);
