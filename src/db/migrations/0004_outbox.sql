-- Where side effects leave the database: every state change writes its history, its jobs and its
-- events in the same transaction, and workers take them from here (ARCHITECTURE.md, principle 3).

-- Every status a release has passed through, who moved it and why. An audit log: it has no
-- foreign keys, so it outlives a deleted release (and records the deletion itself).
create table internal.release_history (
  id bigint generated always as identity primary key,
  release_id uuid not null,
  account_id uuid not null,
  from_status text,
  -- A release status, or 'deleted'.
  to_status text not null,
  reason text,
  -- The database role of the request: authenticated, service_role, or 'system' for the owner's own path.
  actor_role text not null,
  actor_user_id uuid,
  actor_api_key_id uuid,
  created_at timestamptz not null default now()
);
create index release_history_release on internal.release_history (release_id, id);

-- The durable job queue. Workers claim with FOR UPDATE SKIP LOCKED (docs/jobs.md).
create table internal.jobs (
  id bigint generated always as identity primary key,
  kind text not null check (kind ~ '^[a-z_]+(\.[a-z_]+)*$'),
  payload jsonb not null default '{}' check (jsonb_typeof(payload) = 'object'),
  status text not null default 'queued' check (status in ('queued', 'running', 'succeeded', 'dead')),
  run_at timestamptz not null default now(),
  attempts integer not null default 0 check (attempts >= 0),
  max_attempts integer not null default 10 check (max_attempts >= 1),
  -- The worker holding it and until when; a job whose lease ran out is claimable again.
  locked_by text,
  locked_until timestamptz,
  last_error text,
  -- At most one queued or running job per (kind, dedupe_key).
  dedupe_key text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz
);
create index jobs_ready on internal.jobs (run_at) where status = 'queued';
create index jobs_running on internal.jobs (locked_until) where status = 'running';
create unique index jobs_dedupe on internal.jobs (kind, dedupe_key)
  where dedupe_key is not null and status in ('queued', 'running');

-- The event outbox: what webhooks deliver (docs/events.md). data is {"object": <the row as it was>}.
create table internal.events (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references internal.tenants (id) on delete cascade,
  account_id uuid references internal.accounts (id) on delete cascade,
  type text not null check (type ~ '^[a-z_]+(\.[a-z_]+)*$'),
  data jsonb not null check (jsonb_typeof(data) = 'object'),
  created_at timestamptz not null default now()
);
create index events_account on internal.events (account_id, created_at);
create index events_created on internal.events (created_at);

alter table internal.release_history enable row level security;
alter table internal.jobs enable row level security;
alter table internal.events enable row level security;
create trigger touch_updated_at before update on internal.jobs
  for each row execute function internal.touch_updated_at();
