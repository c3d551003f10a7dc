import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFromStdin } from "pg-copy-streams";
import { Admission, DEFAULT_QUEUE_LIMITS, type PoolStats, type QueueLimits } from "./admission.ts";
import type { Engine, QueryResult, Tx } from "./types.ts";

// Return int8 and numeric as strings (never lossy floats), and dates as 'YYYY-MM-DD' text, as PGlite does.
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === pg.types.builtins.DATE) return (v: string) => v;
    return pg.types.getTypeParser(oid, format);
  },
};

export interface PostgresOptions {
  url: string;
  poolSize?: number;
  /** How long to wait for a connection before giving up. */
  connectTimeoutMs?: number;
  applicationName?: string;
  /** The bounded wait of requests for a pooled connection (docs/security.md). */
  queue?: QueueLimits;
}

/**
 * PostgreSQL through a node-postgres pool. One transaction = one pooled connection, taken through
 * an Admission queue: a request that finds no connection free within the queue's bound is refused
 * at once (503) instead of waiting behind the pool without limit.
 */
export class PostgresEngine implements Engine {
  readonly kind = "postgres";
  private readonly pool: pg.Pool;
  private readonly options: PostgresOptions;
  private readonly admission: Admission;

  constructor(options: PostgresOptions) {
    this.options = options;
    this.admission = new Admission(options.poolSize ?? 10, options.queue ?? DEFAULT_QUEUE_LIMITS);
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
      application_name: options.applicationName ?? "backline",
      types,
    });
    // An idle connection dropped by the server must not crash the process; the pool replaces it.
    this.pool.on("error", () => {});
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>, options: { readOnly: boolean }): Promise<T> {
    const release = await this.admission.acquire();
    try {
      return await this.onConnection(fn, options);
    } finally {
      release();
    }
  }

  private async onConnection<T>(fn: (tx: Tx) => Promise<T>, options: { readOnly: boolean }): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      await client.query(options.readOnly ? "begin read only" : "begin");
      const tx: Tx = {
        async query<Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<Row>> {
          const r = await client.query(text, params as unknown[] | undefined);
          return { rows: r.rows as Row[], rowCount: r.rowCount ?? 0 };
        },
        async exec(sql: string) {
          await client.query(sql);
        },
        async copyFrom(sql: string, source: AsyncIterable<string | Buffer>): Promise<number> {
          const stream = client.query(copyFromStdin(sql));
          await pipeline(source, stream);
          return stream.rowCount;
        },
      };
      const result = await fn(tx);
      await client.query("commit");
      return result;
    } catch (error) {
      try {
        await client.query("rollback");
      } catch {
        broken = true;
      }
      throw error;
    } finally {
      client.release(broken);
    }
  }

  stats(): PoolStats {
    return { ...this.admission.stats(), open: this.pool.totalCount, idle: this.pool.idleCount };
  }

  /** LISTEN on a connection of its own (outside the pool), reopened after a second if it drops. */
  async listen(channel: string, onNotice: () => void): Promise<() => Promise<void>> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`);
    let client: pg.Client | undefined;
    let stopped = false;
    let retry: NodeJS.Timeout | undefined;
    const connect = async (): Promise<void> => {
      const c = new pg.Client({
        connectionString: this.options.url,
        connectionTimeoutMillis: this.options.connectTimeoutMs ?? 5000,
        application_name: `${this.options.applicationName ?? "backline"}-listen`,
      });
      const reconnect = () => {
        if (stopped || client !== c) return;
        client = undefined;
        c.end().catch(() => {});
        retry = setTimeout(() => connect().catch(() => {}), 1000);
        retry.unref();
        // Whatever was notified while the connection was down is found by looking now.
        onNotice();
      };
      c.on("error", reconnect);
      c.on("end", reconnect);
      c.on("notification", (n) => {
        if (n.channel === channel) onNotice();
      });
      client = c;
      try {
        await c.connect();
        await c.query(`listen ${channel}`);
      } catch (error) {
        reconnect();
        throw error;
      }
    };
    await connect();
    return async () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    };
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
