-- DDEX's SFTP choreography (ERN-C SFTP 1.8; docs/ddex.md, "What a batch holds" and
-- "Acknowledgements and reports").
--
-- A batch is named by the time it was made, YYYYMMDDhhmmssnnn (UTC), as the choreography says.
-- The name is given once, at a delivery's first attempt, and kept: a retry writes the same
-- folder (an SFTP retry resumes the media already there), and two deliveries to one store never
-- share a name.
alter table internal.release_deliveries add column batch_id text check (batch_id ~ '^[0-9]{17}$');
create unique index release_deliveries_batch on internal.release_deliveries (store, batch_id)
  where batch_id is not null;

-- Acknowledgement files: `invalid` (not valid against the choreography's schema, or not XML at
-- all: kept in the folder, its error in detail), `waiting` (valid, but naming a delivery not yet
-- recorded as sent: read again at each poll until it matches), `expired` (still unmatched when
-- the bound ran out: moved to `unmatched/`). delivery_ids: the deliveries a file names, so that
-- a delivery's record shows the files about it, the set-aside ones included.
alter table internal.store_inbox_files drop constraint store_inbox_files_outcome_check;
alter table internal.store_inbox_files add constraint store_inbox_files_outcome_check
  check (outcome in ('applied', 'imported', 'duplicate', 'rejected', 'unreadable', 'invalid', 'waiting', 'expired'));
alter table internal.store_inbox_files
  add column delivery_ids uuid[] not null default '{}',
  add column tries integer not null default 1 check (tries >= 1),
  add column last_tried_at timestamptz not null default now();
create index store_inbox_files_deliveries on internal.store_inbox_files using gin (delivery_ids);
