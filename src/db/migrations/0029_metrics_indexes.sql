-- GET /metrics reads the open rows at each scrape (src/observability/database-gauges.ts): queued and
-- running jobs, pending webhook deliveries, open store deliveries have partial indexes already;
-- dead jobs, failed webhook deliveries and running royalty imports get theirs here, so a scrape
-- never scans the tables of finished work.
create index jobs_dead on internal.jobs (kind) where status = 'dead';
create index webhook_deliveries_failed on internal.webhook_deliveries (endpoint_id) where status = 'failed';
create index royalty_import_runs_running on internal.royalty_import_runs (started_at)
  where phase in ('receiving', 'importing');
