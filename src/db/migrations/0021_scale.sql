-- Issue 20 (running it for real): shared rate-limit counters, wake-ups for jobs, the royalty
-- lines' keyset order.

-- Rate limits across processes (src/http/rate-limit.ts): each process adds the hits it counted
-- to its windows here every few hundred milliseconds and reads back every process's totals.
-- Unlogged: counters are worth nothing after a crash, and a write costs no WAL.
create unlogged table internal.rate_counters (
  key text not null check (length(key) <= 400),
  window_start timestamptz not null,
  window_end timestamptz not null,
  hits integer not null default 0,
  primary key (key, window_start)
);
create index rate_counters_end on internal.rate_counters (window_end);
alter table internal.rate_counters enable row level security;

-- Job workers wake when work is committed (src/jobs/worker.ts, Db.listen): a notice per
-- statement that writes jobs, and per job queued again to run now (a dead job retried). The
-- notice is delivered at commit, so a worker never looks before the job is visible.
create function internal.jobs_notify() returns trigger
language plpgsql security definer set search_path = ''
as $$
begin
  perform pg_notify('backline_jobs', '');
  return null;
end
$$;
create trigger jobs_inserted after insert on internal.jobs
  for each statement execute function internal.jobs_notify();
create trigger jobs_requeued after update of status on internal.jobs
  for each row when (new.status = 'queued' and old.status <> 'queued' and new.run_at <= now())
  execute function internal.jobs_notify();
