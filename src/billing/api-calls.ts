import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";

/**
 * API calls per tenant, counted durably but cheaply (docs/operator.md, "Plans and invoices",
 * "What is metered"): a request whose credentials were verified for a tenant (the gateway of
 * /rest/v1, /storage/v1, /auth/v1 and /admin/v1 — src/http/gateway.ts — and the public API's
 * caller, src/public-api/plugin.ts, call `noteTenant`) and that is answered with a status below
 * 400 adds one to an in-memory count per tenant and UTC day; every few seconds, and when the
 * server closes, the counts are added to internal.tenant_api_calls in one statement. A failed
 * flush keeps its counts for the next one, so a crash loses at most the last few seconds.
 *
 * Why not a table row per request: one insert per call doubles the database's writes for cheap
 * reads. Why not the metrics counters (src/observability): they are off by default, per process
 * and lost on restart; an invoice needs a durable figure.
 */
const tenants = new WeakMap<object, string>();

/** Says which tenant a request's verified credentials belong to (counted once it is answered). */
export function noteTenant(request: object, tenantId: string): void {
  tenants.set(request, tenantId);
}

export class ApiCallMeter {
  private counts = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private readonly db: Db;
  private readonly intervalMs: number;

  constructor(db: Db, intervalMs = 5000) {
    this.db = db;
    this.intervalMs = intervalMs;
  }

  /** The UTC day counted into, kept until it ends (no date formatting per call). */
  private day = "";
  private dayStart = 0;
  private dayEnd = 0;

  count(tenantId: string, at?: Date): void {
    const now = at ? at.getTime() : Date.now();
    if (now < this.dayStart || now >= this.dayEnd) {
      this.dayStart = now - (now % 86_400_000);
      this.dayEnd = this.dayStart + 86_400_000;
      this.day = new Date(this.dayStart).toISOString().slice(0, 10);
    }
    const key = `${tenantId}|${this.day}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush().catch(() => undefined), this.intervalMs);
    this.timer.unref();
  }

  /** Adds what was counted since the last flush to the table (one statement). */
  async flush(): Promise<void> {
    if (this.flushing) await this.flushing.catch(() => undefined);
    if (this.counts.size === 0) return;
    const batch = this.counts;
    this.counts = new Map();
    const ids: string[] = [];
    const days: string[] = [];
    const calls: number[] = [];
    for (const [key, n] of batch) {
      const [id = "", day = ""] = key.split("|");
      ids.push(id);
      days.push(day);
      calls.push(n);
    }
    this.flushing = this.db
      .asService(async (tx) => {
        await tx.query(
          `insert into internal.tenant_api_calls (tenant_id, day, calls)
           select c.tenant_id, c.day, c.calls
             from unnest($1::uuid[], $2::date[], $3::int8[]) as c (tenant_id, day, calls)
             join internal.tenants t on t.id = c.tenant_id
           on conflict (tenant_id, day) do update set calls = internal.tenant_api_calls.calls + excluded.calls`,
          [ids, days, calls],
        );
      })
      .catch((error: unknown) => {
        // Kept for the next flush.
        for (const [key, n] of batch) this.counts.set(key, (this.counts.get(key) ?? 0) + n);
        throw error;
      })
      .finally(() => {
        this.flushing = undefined;
      });
    await this.flushing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush().catch(() => undefined);
  }
}

/** Counts the app's answered, verified requests (see the module comment). */
export function meterApiCalls(app: FastifyInstance, db: Db, intervalMs?: number): ApiCallMeter {
  const meter = new ApiCallMeter(db, intervalMs);
  app.addHook("onResponse", (request: FastifyRequest, reply, done) => {
    const tenantId = tenants.get(request);
    if (tenantId && reply.statusCode < 400) meter.count(tenantId);
    done();
  });
  app.addHook("onReady", (done) => {
    meter.start();
    done();
  });
  app.addHook("onClose", async () => meter.stop());
  return meter;
}
