import { Gauge, type Registry } from "prom-client";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";

/**
 * The figures /metrics reads from the database at each scrape, never in between: the job queue,
 * webhooks, deliveries to stores and royalty imports, across tenants (as the service role).
 *
 * A scrape must never slow requests down, so the read is
 * - a handful of statements on partial indexes (the open rows only: queued, running and dead
 *   jobs, pending and failed webhook deliveries, open store deliveries, running imports; migration
 *   0029 adds the indexes the dead and failed ones lacked), in one read-only transaction;
 * - skipped when a transaction is already waiting for a database connection (the figures of the
 *   last read are shown, and `backline_metrics_database_age_seconds` says how old they are);
 * - bounded: a statement timeout on PostgreSQL, and on every engine the scrape stops waiting after
 *   `timeoutMs` and answers without them (`backline_metrics_database_up 0`);
 * - shared: the gauges of one scrape (and scrapes that arrive together) share one read, and a
 *   read still running when the next scrape comes is not started twice.
 *
 * Labels are bounded: job kinds and stores come from the code and the operator's store list (at
 * most 100 of each are reported); webhook endpoints, which any API key may create, are reported
 * one by one only for the 10 with the largest backlog and the 10 failing the longest, next to the
 * totals over all endpoints.
 */

/** Endpoints reported one by one (per gauge); the totals cover all of them. */
export const TOP_ENDPOINTS = 10;
const MAX_KINDS = 100;

export interface Figures {
  jobs: { kind: string; status: "queued" | "running" | "dead"; n: number; due: number; oldest: number }[];
  webhooks: {
    backlog: number;
    oldest: number;
    failed: number;
    failingEndpoints: number;
    endpoints: { endpoint_id: string; pending: number; retrying: number; oldest: number }[];
    failing: { endpoint_id: string; seconds: number }[];
  };
  deliveries: { store: string; status: string; n: number; oldest: number }[];
  imports: { running: number; lines: number; bytes_read: number; stalled: number; oldest: number };
}

async function readFigures(tx: Tx): Promise<Figures> {
  // One partial index per branch: jobs_ready, jobs_running, jobs_dead (0029).
  const jobs = await tx.query<Figures["jobs"][number]>(
    `(select kind, 'queued' as status, count(*)::int as n, (count(*) filter (where run_at <= now()))::int as due,
            coalesce(extract(epoch from now() - min(run_at) filter (where run_at <= now())), 0)::float8 as oldest
       from internal.jobs where status = 'queued' group by kind order by kind limit ${MAX_KINDS})
     union all
     (select kind, 'running', count(*)::int, 0, 0 from internal.jobs where status = 'running'
       group by kind order by kind limit ${MAX_KINDS})
     union all
     (select kind, 'dead', count(*)::int, 0, 0 from internal.jobs where status = 'dead'
       group by kind order by kind limit ${MAX_KINDS})`,
  );
  const backlog = await tx.query<{ backlog: number; oldest: number; failed: number }>(
    `select count(*)::int as backlog, coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as oldest,
            (select count(*)::int from internal.webhook_deliveries where status = 'failed') as failed
       from internal.webhook_deliveries where status = 'pending'`,
  );
  const endpoints = await tx.query<Figures["webhooks"]["endpoints"][number]>(
    `select endpoint_id::text, count(*)::int as pending, (count(*) filter (where attempts > 0))::int as retrying,
            extract(epoch from now() - min(created_at))::float8 as oldest
       from internal.webhook_deliveries where status = 'pending'
      group by endpoint_id order by pending desc, endpoint_id limit ${TOP_ENDPOINTS}`,
  );
  const failing = await tx.query<{ endpoint_id: string; seconds: number; total: number }>(
    `select id::text as endpoint_id, extract(epoch from now() - failing_since)::float8 as seconds,
            (count(*) over ())::int as total
       from internal.webhook_endpoints where enabled and failing_since is not null
      order by failing_since, id limit ${TOP_ENDPOINTS}`,
  );
  const deliveries = await tx.query<Figures["deliveries"][number]>(
    `select store, status, count(*)::int as n, extract(epoch from now() - min(created_at))::float8 as oldest
       from internal.release_deliveries where status in ('pending', 'in_progress', 'error')
      group by store, status order by store, status limit ${MAX_KINDS * 3}`,
  );
  const imports = await tx.query<Figures["imports"]>(
    `select count(*)::int as running, coalesce(sum(lines), 0)::float8 as lines,
            coalesce(sum(bytes_read), 0)::float8 as bytes_read,
            coalesce(extract(epoch from now() - min(updated_at)), 0)::float8 as stalled,
            coalesce(extract(epoch from now() - min(started_at)), 0)::float8 as oldest
       from internal.royalty_import_runs where phase in ('receiving', 'importing')`,
  );
  const b = backlog.rows[0] ?? { backlog: 0, oldest: 0, failed: 0 };
  return {
    jobs: jobs.rows,
    webhooks: {
      backlog: b.backlog,
      oldest: b.oldest,
      failed: b.failed,
      failingEndpoints: failing.rows[0]?.total ?? 0,
      endpoints: endpoints.rows,
      failing: failing.rows.map(({ endpoint_id, seconds }) => ({ endpoint_id, seconds })),
    },
    deliveries: deliveries.rows,
    imports: imports.rows[0] ?? { running: 0, lines: 0, bytes_read: 0, stalled: 0, oldest: 0 },
  };
}

/** The last figures read, and how the last read went. */
export class DatabaseFigures {
  private readonly db: Db;
  private readonly timeoutMs: number;
  current: Figures | undefined;
  /** When `current` was read (ms since the epoch). */
  readAt = 0;
  /** Whether the last read attempted answered in time. */
  up = false;
  /** How long the last read took (s). */
  readSeconds = 0;
  private running: Promise<void> | undefined;

  constructor(db: Db, options: { timeoutMs: number }) {
    this.db = db;
    this.timeoutMs = options.timeoutMs;
  }

  /** Reads the figures (or joins the read under way); resolves within the time bound, whatever happens. */
  refresh(): Promise<void> {
    if (!this.running) {
      // A transaction already waits for a connection: the scrape must not add to the queue.
      if ((this.db.poolStats()?.waiting ?? 0) > 0) return Promise.resolve();
      const started = performance.now();
      this.running = this.db
        .asService(readFigures, { readOnly: true, statementTimeoutMs: this.timeoutMs })
        .then(
          (figures) => {
            this.current = figures;
            this.readAt = Date.now();
            this.up = true;
          },
          () => {
            this.up = false;
          },
        )
        .finally(() => {
          this.readSeconds = (performance.now() - started) / 1000;
          this.running = undefined;
        });
    }
    // Past the bound the scrape answers without this read, which goes on (and is joined, not
    // started again, by the next scrape until it ends).
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.up = false;
        resolve();
      }, this.timeoutMs);
    });
    return Promise.race([this.running, late]).finally(() => clearTimeout(timer));
  }
}

/** The gauges read from the database; each scrape's collect() waits for one shared read. */
export function registerDatabaseGauges(registry: Registry, figures: DatabaseFigures): void {
  const registers = [registry];
  const gauge = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (set: (labels: Partial<Record<L, string>>, value: number) => void, f: Figures) => void,
  ) =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        await figures.refresh();
        this.reset();
        const f = figures.current;
        if (f) fill((labels, value) => this.set(labels, value), f);
      },
    });

  type Job = Figures["jobs"][number];
  const perKind = (name: string, help: string, status: Job["status"], value: (j: Job) => number) =>
    gauge(name, `${help}, by kind.`, ["kind"], (set, f) => {
      for (const j of f.jobs) if (j.status === status) set({ kind: j.kind }, value(j));
    });
  perKind(
    "backline_jobs_queued",
    "Jobs waiting to run (including those scheduled for later)",
    "queued",
    (j) => j.n,
  );
  perKind(
    "backline_jobs_ready",
    "Jobs whose time has come and that no worker has claimed yet",
    "queued",
    (j) => j.due,
  );
  perKind(
    "backline_jobs_oldest_ready_age_seconds",
    "How long the oldest job that could run has waited for a worker (0: none waits)",
    "queued",
    (j) => j.oldest,
  );
  perKind("backline_jobs_running", "Jobs claimed by a worker now", "running", (j) => j.n);
  perKind(
    "backline_jobs_dead",
    "Jobs that failed every attempt and wait for an operator (`backline jobs list --status dead`)",
    "dead",
    (j) => j.n,
  );

  const totals: [name: string, help: string, value: (f: Figures) => number][] = [
    [
      "backline_webhook_backlog",
      "Webhook deliveries not yet made (pending), over all endpoints.",
      (f) => f.webhooks.backlog,
    ],
    [
      "backline_webhook_backlog_oldest_age_seconds",
      "Age of the oldest pending webhook delivery, over all endpoints (0: none pends).",
      (f) => f.webhooks.oldest,
    ],
    [
      "backline_webhook_deliveries_failed",
      "Webhook deliveries that ran out of attempts (failed for good), over all endpoints; it only grows, so alert on its increase.",
      (f) => f.webhooks.failed,
    ],
    [
      "backline_webhook_endpoints_failing",
      "Enabled webhook endpoints whose every delivery has failed since some time (five days of it disable them).",
      (f) => f.webhooks.failingEndpoints,
    ],
    [
      "backline_royalty_imports_running",
      "Royalty imports receiving or importing now.",
      (f) => f.imports.running,
    ],
    [
      "backline_royalty_import_lines_read",
      "Lines read so far by the imports running now.",
      (f) => f.imports.lines,
    ],
    [
      "backline_royalty_import_bytes_read",
      "Bytes read so far by the imports running now.",
      (f) => f.imports.bytes_read,
    ],
    [
      "backline_royalty_import_stalled_seconds",
      "Longest time a running import has made no progress (a running import reports every half second; 0: none runs).",
      (f) => f.imports.stalled,
    ],
    [
      "backline_royalty_import_oldest_running_seconds",
      "Age of the oldest import still running (0: none runs).",
      (f) => f.imports.oldest,
    ],
  ];
  for (const [name, help, value] of totals) gauge(name, help, [], (set, f) => set({}, value(f)));

  type Backlog = Figures["webhooks"]["endpoints"][number];
  const perEndpoint = (name: string, help: string, value: (e: Backlog) => number) =>
    gauge(
      name,
      `${help}, for the ${TOP_ENDPOINTS} endpoints with the largest backlog, by endpoint id.`,
      ["endpoint"],
      (set, f) => {
        for (const e of f.webhooks.endpoints) set({ endpoint: e.endpoint_id }, value(e));
      },
    );
  perEndpoint("backline_webhook_endpoint_backlog", "Pending webhook deliveries", (e) => e.pending);
  perEndpoint(
    "backline_webhook_endpoint_retrying",
    "Pending deliveries that failed at least once and wait for their next attempt",
    (e) => e.retrying,
  );
  perEndpoint(
    "backline_webhook_endpoint_backlog_oldest_age_seconds",
    "Age of the oldest pending delivery",
    (e) => e.oldest,
  );
  gauge(
    "backline_webhook_endpoint_failing_seconds",
    `How long every delivery has failed, for the ${TOP_ENDPOINTS} endpoints failing the longest, by endpoint id.`,
    ["endpoint"],
    (set, f) => {
      for (const e of f.webhooks.failing) set({ endpoint: e.endpoint_id }, e.seconds);
    },
  );

  gauge(
    "backline_deliveries_open",
    "Deliveries to stores not finished, by store and status (pending, in_progress, error).",
    ["store", "status"],
    (set, f) => {
      for (const d of f.deliveries) set({ store: d.store, status: d.status }, d.n);
    },
  );
  gauge(
    "backline_deliveries_oldest_open_age_seconds",
    "Age of the oldest unfinished delivery, by store and status.",
    ["store", "status"],
    (set, f) => {
      for (const d of f.deliveries) set({ store: d.store, status: d.status }, d.oldest);
    },
  );

  // How the read went: these are collected after it, whatever it gave.
  new Gauge({
    name: "backline_metrics_database_up",
    help: "1 when this scrape's read of the database figures answered in time, 0 when it failed or timed out.",
    registers,
    async collect() {
      await figures.refresh();
      this.set(figures.up ? 1 : 0);
    },
  });
  new Gauge({
    name: "backline_metrics_database_age_seconds",
    help: "Age of the database figures shown (a read is skipped while transactions wait for a connection).",
    registers,
    async collect() {
      await figures.refresh();
      if (figures.current) this.set((Date.now() - figures.readAt) / 1000);
      else this.reset();
    },
  });
  new Gauge({
    name: "backline_metrics_database_read_seconds",
    help: "How long the last read of the database figures took.",
    registers,
    async collect() {
      await figures.refresh();
      this.set(figures.readSeconds);
    },
  });
}
