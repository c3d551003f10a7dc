import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { Db } from "../db/db.ts";
import { DatabaseFigures, registerDatabaseGauges } from "./database-gauges.ts";

/**
 * What `GET /metrics` serves (docs/operations.md, "Metrics and alerts"), in Prometheus's text
 * format, from one prom-client registry per app:
 *
 * - HTTP requests counted by interface, method, route template and status, with a latency
 *   histogram; recorded in `onResponse` (src/observability/http.ts), a few map look-ups a request.
 * - The database pool as it is at the scrape (no polling).
 * - Job queue, webhooks, deliveries and royalty imports, read from the database at the scrape
 *   (src/observability/database-gauges.ts): a few cheap statements, bounded in time.
 * - prom-client's default process metrics (RSS, heap, event loop lag, …) with the `backline_`
 *   prefix.
 */

/** The interfaces, by path prefix; anything else is `other`. The first match wins. */
const INTERFACES: [prefix: string, name: string][] = [
  ["/rest/v1", "rest"],
  ["/api/public/v1", "public-api"],
  ["/admin/v1", "admin"],
  ["/auth/v1", "auth"],
  ["/storage/v1", "storage"],
  ["/console", "console"],
  ["/health", "health"],
  ["/ready", "health"],
  ["/metrics", "metrics"],
];

/** The interface a path belongs to: one of a fixed list, whatever the path. */
export function interfaceOf(path: string): string {
  for (const [prefix, name] of INTERFACES) {
    if (path === prefix || path.startsWith(`${prefix}/`) || path.startsWith(`${prefix}?`)) return name;
  }
  return "other";
}

/** The route label of a request no route matched: one value, never the raw path. */
export const UNMATCHED_ROUTE = "(unmatched)";

/** Latency buckets in seconds: 5 ms to 10 s, where an API's p50 and p99 fall. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface RequestSeries {
  count: { inc(): void };
}
interface LatencySeries {
  observe(seconds: number): void;
}

export interface MetricsOptions {
  db: Db;
  /** prom-client's process metrics (RSS, event loop lag, …); off in tests that build many apps. */
  processMetrics?: boolean;
  /** How long the scrape waits for the database's figures before it answers without them (ms). */
  databaseTimeoutMs?: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"interface" | "method" | "route" | "status">;
  private readonly latency: Histogram<"interface" | "method" | "route">;
  /** Label children by key, so a request costs a map look-up, not a label hash. */
  private readonly requestSeries = new Map<string, RequestSeries>();
  private readonly latencySeries = new Map<string, LatencySeries>();
  readonly database: DatabaseFigures;

  constructor(options: MetricsOptions) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: "backline_http_requests_total",
      help: "HTTP requests answered, by interface, method, route template and status.",
      labelNames: ["interface", "method", "route", "status"],
      registers,
    });
    this.latency = new Histogram({
      name: "backline_http_request_duration_seconds",
      help: "Time from receiving a request to sending its response, by interface, method and route template.",
      labelNames: ["interface", "method", "route"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    registerPoolGauges(this.registry, options.db);
    this.database = new DatabaseFigures(options.db, { timeoutMs: options.databaseTimeoutMs ?? 2000 });
    registerDatabaseGauges(this.registry, this.database);
    if (options.processMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry, prefix: "backline_" });
    }
  }

  /** Records one answered request. `route` is the route's template (never a raw path). */
  observe(iface: string, method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route}`;
    let latency = this.latencySeries.get(key);
    if (!latency) {
      latency = this.latency.labels({ interface: iface, method, route });
      this.latencySeries.set(key, latency);
    }
    latency.observe(seconds);
    const statusKey = `${key} ${status}`;
    let series = this.requestSeries.get(statusKey);
    if (!series) {
      const child = this.requests.labels({ interface: iface, method, route, status: String(status) });
      series = { count: child };
      this.requestSeries.set(statusKey, series);
    }
    series.count.inc();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text a scrape answers; the database's figures are read now, within their time bound. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }
}

/** The engine's connections as they are at the scrape (src/db/admission.ts). */
function registerPoolGauges(registry: Registry, db: Db): void {
  const registers = [registry];
  const labelNames = ["engine"] as const;
  const gauge = (
    name: string,
    help: string,
    read: (s: NonNullable<ReturnType<Db["poolStats"]>>) => number | undefined,
  ) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        const stats = db.poolStats();
        const value = stats && read(stats);
        if (value !== undefined) this.set({ engine: db.kind }, value);
      },
    });
  gauge(
    "backline_db_pool_size",
    "Database connections this process may use at once (the embedded database: 1).",
    (s) => s.size,
  );
  gauge("backline_db_pool_in_use", "Database connections running a transaction now.", (s) => s.inUse);
  gauge(
    "backline_db_pool_idle",
    "Database connections free now (PostgreSQL: open and idle in the pool).",
    (s) => s.idle ?? s.size - s.inUse,
  );
  gauge(
    "backline_db_pool_waiting",
    "Transactions waiting for a database connection now (requests past DATABASE_QUEUE_MAX or DATABASE_QUEUE_TIMEOUT_MS are refused with 503).",
    (s) => s.waiting,
  );
  gauge("backline_db_pool_open", "PostgreSQL: connections open in the pool.", (s) => s.open);
  gauge(
    "backline_db_thread_pending",
    "The embedded database: calls sent to its worker thread and not yet answered (its queue).",
    (s) => s.threadPending,
  );
}
