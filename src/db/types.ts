import type { PoolStats } from "./admission.ts";
import type { Prepared } from "./prepared.ts";

/** What the rest of Backline sees of a database: queries inside transactions, nothing else. */

export interface QueryResult<Row> {
  rows: Row[];
  rowCount: number;
}

/**
 * A live transaction. Values are always bind parameters; `exec` is for trusted, multi-statement SQL.
 * A statement of fixed text may be given `prepared()` (src/db/prepared.ts): planned once per connection.
 */
export interface Tx {
  query<Row = Record<string, unknown>>(
    text: string | Prepared,
    params?: readonly unknown[],
  ): Promise<QueryResult<Row>>;
  exec(sql: string): Promise<void>;
  /**
   * Streams `source` (COPY's text format) into `COPY ... FROM STDIN` (`sql`) and resolves with the
   * number of rows copied. For bulk loads (royalty imports). PGlite has no COPY protocol: there the
   * rows go in pieces of whole lines through `COPY ... FROM '/dev/blob'`.
   */
  copyFrom(sql: string, source: AsyncIterable<string | Buffer>): Promise<number>;
}

export type EngineKind = "pglite" | "postgres";

/**
 * The adapter contract: one per engine. `transaction` runs `fn` in a transaction on the
 * engine's own identity (the database owner for PGlite, the login role for PostgreSQL).
 * Only `Db` and the migration runner hold an Engine; handlers go through `Db`.
 */
export interface Engine {
  readonly kind: EngineKind;
  transaction<T>(fn: (tx: Tx) => Promise<T>, options: { readOnly: boolean }): Promise<T>;
  /**
   * Calls `onNotice` after each committed `pg_notify(channel, ...)`, until the returned function
   * is called. Best effort: a lost connection is reopened, and listeners also poll.
   */
  listen(channel: string, onNotice: () => void): Promise<() => Promise<void>>;
  /**
   * Deallocates every connection's generated statements (`generated()`, src/db/prepared.ts), each
   * at the end of its next transaction: after a schema change, so that the shapes of the old schema
   * do not wait for their eviction. Engines that prepare nothing omit it.
   */
  forgetGenerated?(): void;
  /** How its connections are used now (for /metrics); engines without a pool of their own omit it. */
  stats?(): PoolStats;
  /** The embedded engine only: its files as one tar between transactions (a backup, src/backup). */
  snapshot?(whileHeld?: () => Promise<void>): Promise<Uint8Array>;
  close(): Promise<void>;
}

/**
 * The database roles a request can take (docs/database.md): anon and authenticated for clients,
 * tenant_service for a tenant's own service-role key (its whole tenant, nothing else), and
 * service_role for the operator (every tenant).
 */
export const DB_ROLES = ["anon", "authenticated", "tenant_service", "service_role"] as const;
export type DbRole = (typeof DB_ROLES)[number];

/**
 * The claims a request runs with, readable in SQL through `auth.jwt()`. The same shape serves a
 * user's access token (`sub` set, memberships decide the accounts) and a public-API key
 * (`account_id` set: exactly one account, with `account_role` deciding write access).
 */
export interface Claims {
  role: DbRole;
  sub?: string;
  tenant_id?: string;
  account_id?: string;
  account_role?: "owner" | "admin" | "member" | "viewer";
  [claim: string]: unknown;
}
