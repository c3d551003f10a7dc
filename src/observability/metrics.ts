import { collectDefaultMetrics, Gauge, type Metric, Registry } from "prom-client";
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

export interface MetricsOptions {
  db: Db;
  /** prom-client's process metrics (RSS, event loop lag, …); on unless a benchmark turns them off. */
  processMetrics?: boolean;
  /** How long the scrape waits for the database's figures before it answers without them (ms). */
  databaseTimeoutMs?: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new RequestFigures();
  readonly database: DatabaseFigures;

  constructor(options: MetricsOptions) {
    this.requests.register(this.registry);
    registerPoolGauges(this.registry, options.db);
    this.database = new DatabaseFigures(options.db, { timeoutMs: options.databaseTimeoutMs ?? 2000 });
    registerDatabaseGauges(this.registry, this.database);
    if (options.processMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry, prefix: "backline_" });
    }
  }

  /** Records one answered request. `route` is the route's template (never a raw path). */
  observe(iface: string, method: string, route: string, status: number, seconds: number): void {
    this.requests.observe(iface, method, route, status, seconds);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text a scrape answers; the database's figures are read now, within their time bound. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }
}

/** One route's requests, in plain numbers. */
interface RouteFigures {
  labels: { interface: string; method: string; route: string };
  /** Requests per latency bucket (not cumulative); the last one is past the largest bound. */
  buckets: Float64Array;
  sum: number;
  count: number;
  statuses: Map<number, number>;
}

type Sample = { labels: Record<string, string | number>; value: number; metricName?: string };

/**
 * The request counter and latency histogram. A request costs a map look-up and a few additions,
 * 110 ns (bench/README.md, "What the metrics cost": prom-client's labelled metrics took 1,500 ns,
 * hashing their labels on every call); prom-client's registry renders them at the scrape.
 */
class RequestFigures {
  private readonly routes = new Map<string, RouteFigures>();

  observe(iface: string, method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route}`;
    let f = this.routes.get(key);
    if (!f) {
      f = {
        labels: { interface: iface, method, route },
        buckets: new Float64Array(LATENCY_BUCKETS.length + 1),
        sum: 0,
        count: 0,
        statuses: new Map(),
      };
      this.routes.set(key, f);
    }
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > (LATENCY_BUCKETS[i] as number)) i++;
    f.buckets[i] = (f.buckets[i] as number) + 1;
    f.sum += seconds;
    f.count++;
    f.statuses.set(status, (f.statuses.get(status) ?? 0) + 1);
  }

  register(registry: Registry): void {
    const metric = (name: string, help: string, type: "counter" | "histogram", values: () => Sample[]) => ({
      name,
      help,
      type,
      aggregator: "sum",
      get: async () => ({ name, help, type, aggregator: "sum", values: values() }),
    });
    const requests = metric(
      "backline_http_requests_total",
      "HTTP requests answered, by interface, method, route template and status.",
      "counter",
      () =>
        [...this.routes.values()].flatMap((f) =>
          [...f.statuses].map(([status, n]) => ({
            labels: { ...f.labels, status: String(status) },
            value: n,
          })),
        ),
    );
    const name = "backline_http_request_duration_seconds";
    const latency = metric(
      name,
      "Time from receiving a request to sending its response, by interface, method and route template.",
      "histogram",
      () =>
        [...this.routes.values()].flatMap((f) => {
          let total = 0;
          const samples: Sample[] = LATENCY_BUCKETS.map((le, i) => {
            total += f.buckets[i] as number;
            return { metricName: `${name}_bucket`, labels: { ...f.labels, le }, value: total };
          });
          samples.push(
            { metricName: `${name}_bucket`, labels: { ...f.labels, le: "+Inf" }, value: f.count },
            { metricName: `${name}_sum`, labels: f.labels, value: f.sum },
            { metricName: `${name}_count`, labels: f.labels, value: f.count },
          );
          return samples;
        }),
    );
    // The registry needs only name, help, type and get() of a metric.
    registry.registerMetric(requests as unknown as Metric);
    registry.registerMetric(latency as unknown as Metric);
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
