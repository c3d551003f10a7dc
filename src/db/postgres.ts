import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFromStdin } from "pg-copy-streams";
import { Admission, DEFAULT_QUEUE_LIMITS, type PoolStats, type QueueLimits } from "./admission.ts";
import { NoticeConnection } from "./notices.ts";
import type { Prepared } from "./prepared.ts";
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
  /**
   * How many generated statements (`generated()`, src/db/prepared.ts) each connection keeps
   * prepared; the least recently used is deallocated past it. Default 200.
   */
  generatedStatements?: number;
}

/** The part of node-postgres' connection that remembers which named statements it has parsed. */
interface ParsedStatements {
  connection: { parsedStatements: Record<string, string> };
}

/**
 * A connection's generated statements, least recently used first (a Map keeps insertion order),
 * and those evicted but not yet deallocated (that waits for the end of the transaction, so that a
 * failing DEALLOCATE can never abort a request's transaction).
 */
interface GeneratedCache {
  used: Map<string, string>;
  evicted: Set<string>;
  /** The engine's generation it was filled in: an older one is emptied (forgetGenerated). */
  generation: number;
}

/**
 * PostgreSQL through a node-postgres pool. One transaction = one pooled connection, taken through
 * an Admission queue: a request that finds no connection free within the queue's bound is refused
 * at once (503) instead of waiting behind the pool without limit.
 */
export class PostgresEngine implements Engine {
  readonly kind = "postgres";
  private readonly pool: pg.Pool;
  private readonly admission: Admission;
  private readonly notices: NoticeConnection;
  private readonly generatedLimit: number;
  private readonly generatedCaches = new WeakMap<pg.PoolClient, GeneratedCache>();
  private generation = 0;

  constructor(options: PostgresOptions) {
    this.notices = new NoticeConnection({
      url: options.url,
      connectTimeoutMs: options.connectTimeoutMs,
      applicationName: options.applicationName,
    });
    this.generatedLimit = Math.max(1, options.generatedStatements ?? 200);
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
    let cache = this.generatedCaches.get(client);
    if (!cache) {
      cache = { used: new Map(), evicted: new Set(), generation: this.generation };
      this.generatedCaches.set(client, cache);
    }
    if (cache.generation !== this.generation) {
      // Deallocated at the end of this transaction, unless it uses them again.
      for (const name of cache.used.keys()) cache.evicted.add(name);
      cache.used.clear();
      cache.generation = this.generation;
    }
    const generated = cache;
    const parsed = (client as unknown as ParsedStatements).connection.parsedStatements;
    const limit = this.generatedLimit;
    /** Forgotten names that node-postgres must parse again if they come back. */
    const forget = (name: string) => {
      generated.used.delete(name);
      generated.evicted.add(name);
    };
    let failedGenerated: string | undefined;
    const generatedQuery = async (statement: Prepared, values: unknown[] | undefined) => {
      const { name } = statement;
      generated.used.delete(name);
      generated.used.set(name, statement.text);
      generated.evicted.delete(name);
      while (generated.used.size > limit) forget(generated.used.keys().next().value as string);
      try {
        return await client.query({ name, text: statement.text, values });
      } catch (error) {
        if (isCachedPlanChange(error)) failedGenerated = name;
        // Planned again for a schema that no longer fits it (a column or table gone): no use
        // keeping it until it is the least recently used.
        if (isCachedPlanChange(error) || isStale(error)) forget(name);
        throw error;
      } finally {
        // A statement that failed to parse was never prepared.
        if (parsed[name] === undefined) generated.used.delete(name);
      }
    };
    try {
      await client.query(options.readOnly ? "begin read only" : "begin");
      const tx: Tx = {
        async query<Row>(text: string | Prepared, params?: readonly unknown[]): Promise<QueryResult<Row>> {
          const values = params as unknown[] | undefined;
          const r =
            typeof text === "string"
              ? await client.query(text, values)
              : text.generated
                ? await generatedQuery(text, values)
                : await client.query({ name: text.name, text: text.text, values });
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
      // A prepared statement whose result type a migration changed fails on this connection for
      // as long as it lives: a generated one is deallocated (the caller may try again, and it is
      // prepared afresh); for any other, drop the connection rather than answer the same error again.
      if (isCachedPlanChange(error) && failedGenerated === undefined) broken = true;
      try {
        await client.query("rollback");
      } catch {
        broken = true;
      }
      throw error;
    } finally {
      if (!broken && generated.evicted.size > 0)
        broken = !(await deallocate(client, generated.evicted, parsed));
      client.release(broken);
    }
  }

  forgetGenerated(): void {
    this.generation++;
  }

  stats(): PoolStats {
    return { ...this.admission.stats(), open: this.pool.totalCount, idle: this.pool.idleCount };
  }

  /** LISTEN on the process's one notice connection (outside the pool; src/db/notices.ts). */
  listen(channel: string, onNotice: () => void): Promise<() => Promise<void>> {
    return this.notices.listen(channel, onNotice);
  }

  async close(): Promise<void> {
    await this.notices.close();
    await this.pool.end();
  }
}

/** A statement the schema no longer accepts (class 42: a missing column, table, function...). */
const isStale = (error: unknown): boolean => {
  const code = (error as { code?: string }).code;
  return typeof code === "string" && code.startsWith("42") && code !== "42501";
};

const isCachedPlanChange = (error: unknown): boolean =>
  (error as { code?: string }).code === "0A000" && /cached plan/.test(String((error as Error).message));

/**
 * Deallocates a connection's evicted generated statements, between transactions; false if that
 * failed (the connection is then dropped, which frees them all).
 */
async function deallocate(
  client: pg.PoolClient,
  evicted: Set<string>,
  parsed: Record<string, string>,
): Promise<boolean> {
  const names = [...evicted].filter((name) => parsed[name] !== undefined);
  evicted.clear();
  if (names.length === 0) return true;
  for (const name of names) delete parsed[name];
  try {
    await client.query(names.map((name) => `deallocate "${name}"`).join("; "));
    return true;
  } catch {
    return false;
  }
}
