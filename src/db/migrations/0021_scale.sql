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
