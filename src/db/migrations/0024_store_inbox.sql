-- Store connections (issue 18, docs/ddex.md "Acknowledgements and reports"): the files Backline
-- read from a store's answer and report folders, one row per distinct file content (SHA-256), so
-- the same file read twice changes nothing, and an unreadable one is reported once and kept.
create table internal.store_inbox_files (
  id uuid primary key default gen_random_uuid(),
  store text not null references internal.stores (code) on delete cascade,
  kind text not null check (kind in ('acknowledgement', 'report')),
  name text not null,
  sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  -- applied: an acknowledgement whose entries were applied (detail lists them); imported,
  -- duplicate or rejected: a report's import (detail.import_id); unreadable: kept in the folder.
  outcome text not null check (outcome in ('applied', 'imported', 'duplicate', 'rejected', 'unreadable')),
  detail jsonb not null default '{}' check (jsonb_typeof(detail) = 'object'),
  received_at timestamptz not null default now(),
  unique (store, kind, sha256)
);
create index store_inbox_files_recent on internal.store_inbox_files (store, received_at desc);
alter table internal.store_inbox_files enable row level security;
-- The installation's staff only (service role); no tenant role reads a store's files.
revoke all on internal.store_inbox_files from public, anon, authenticated, tenant_service;

-- A report fetched from a store's folder by its schedule is recorded as such.
alter table internal.royalty_imports drop constraint royalty_imports_source_check;
alter table internal.royalty_imports add constraint royalty_imports_source_check
  check (source in ('cli', 'admin_api', 'store'));
