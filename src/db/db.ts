import type { SecretBox } from "../secrets/box.ts";
import type { PoolStats } from "./admission.ts";
import { auditSetting } from "./audit-context.ts";
import { operatorScope } from "./operator-scope.ts";
import { prepared } from "./prepared.ts";
import { type Claims, DB_ROLES, type DbRole, type Engine, type EngineKind, type Tx } from "./types.ts";

export interface ContextOptions {
  /** Run the transaction READ ONLY: for requests that only read. */
  readOnly?: boolean;
  /**
   * The statement timeout of this transaction in milliseconds (0: none). Unset, a request's
   * transaction (`withRequestContext`) gets its role's timeout and `asService` none at all.
   */
  statementTimeoutMs?: number;
}

/**
 * How long one statement of a request may run, per request role, in milliseconds (0: no limit),
 * as Supabase sets it per role: `anon`, `authenticated` (users and public-API keys) and `service`
 * (a tenant's service-role key, `tenant_service`, and `service_role` on a request path).
 */
export interface StatementTimeouts {
  anon: number;
  authenticated: number;
  service: number;
}

export const DEFAULT_STATEMENT_TIMEOUTS: StatementTimeouts = {
  anon: 3000,
  authenticated: 8000,
  service: 60_000,
};

function timeoutOf(timeouts: StatementTimeouts, role: DbRole): number {
  return role === "anon"
    ? timeouts.anon
    : role === "authenticated"
      ? timeouts.authenticated
      : timeouts.service;
}

// The first statement of every request's transaction, planned once per connection.
const AS_CLAIMS = prepared(
  "select set_config('role', $1, true), set_config('request.jwt.claims', $2, true), set_config('backline.audit', $3, true)",
);
const AS_CLAIMS_WITH_TIMEOUT = prepared(
  "select set_config('role', $1, true), set_config('request.jwt.claims', $2, true), set_config('statement_timeout', $3, true), set_config('backline.audit', $4, true)",
);
const AS_RESOLVER = prepared(
  "select set_config('role', 'service_role', true), set_config('statement_timeout', $1, true), set_config('backline.audit', $2, true)",
);

/**
 * The only door to data. A request handler calls `withRequestContext` with the caller's claims:
 * one transaction in which `role` and `request.jwt.claims` are set locally, exactly as PostgREST
 * does, so row-level security, column grants and triggers decide what happens.
 *
 * Workers and operator code that must see every tenant use `asService`, which is the same
 * mechanism with the `service_role` database role (BYPASSRLS); its name makes the bypass visible
 * at every call site.
 *
 * Time: each statement of a request's transaction runs under its role's statement timeout
 * (`statementTimeouts`, set with `set_config('statement_timeout', ..., true)`, since a role's own
 * `ALTER ROLE ... SET` does not apply after `SET ROLE`); a statement past it is cancelled with
 * SQLSTATE 57014 (504). `asService` sets no timeout: a worker, the CLI or a royalty import may run
 * for minutes (the login role's default applies). PGlite accepts the setting but cannot interrupt
 * a running statement; /rest/v1's request limits (src/rest/limits.ts) are its protection.
 */
export class Db {
  readonly kind: EngineKind;
  readonly statementTimeouts: StatementTimeouts;
  private readonly engine: Engine;
  private readonly box: SecretBox | undefined;

  constructor(
    engine: Engine,
    options: { statementTimeouts?: StatementTimeouts; secrets?: SecretBox | undefined } = {},
  ) {
    this.engine = engine;
    this.kind = engine.kind;
    this.statementTimeouts = options.statementTimeouts ?? DEFAULT_STATEMENT_TIMEOUTS;
    this.box = options.secrets;
  }

  /** Seals and opens the secrets the database keeps (docs/security.md): the server's master key. */
  get secrets(): SecretBox {
    if (!this.box) throw new Error("this database was opened without the server's encryption key");
    return this.box;
  }

  /** The same database (same engine, same connections, same key) with other request timeouts: the app's, from its config. */
  withStatementTimeouts(statementTimeouts: StatementTimeouts): Db {
    return new Db(this.engine, { statementTimeouts, secrets: this.box });
  }

  /** A request's transaction: the caller's role and claims, and the role's statement timeout. */
  async withRequestContext<T>(
    claims: Claims,
    fn: (tx: Tx) => Promise<T>,
    options: ContextOptions = {},
  ): Promise<T> {
    if (!DB_ROLES.includes(claims.role)) {
      // Never let an unexpected role name reach set_config: it would switch to any role the login may use.
      throw new Error(`withRequestContext: role must be one of ${DB_ROLES.join(", ")}`);
    }
    const timeout = options.statementTimeoutMs ?? timeoutOf(this.statementTimeouts, claims.role);
    return this.run(claims, fn, options.readOnly ?? false, timeout);
  }

  /**
   * A request's transaction whose claims the database decides: `resolve` runs first, as
   * service_role, and must itself switch to the request's role and claims with
   * `set_config(..., true)` in the statement that reads them (a public-API key's row: one statement
   * instead of a transaction of its own), returning that role; or throw, which rolls back before
   * anything else runs. The role's statement timeout applies from the start.
   */
  async withResolvedContext<T>(
    role: DbRole,
    resolve: (tx: Tx) => Promise<DbRole>,
    fn: (tx: Tx) => Promise<T>,
    options: ContextOptions = {},
  ): Promise<T> {
    const timeout = options.statementTimeoutMs ?? timeoutOf(this.statementTimeouts, role);
    return this.engine.transaction(
      async (tx) => {
        // backline.audit as in run(): the client's address (and actor, once known) for the audit log.
        await tx.query(AS_RESOLVER, [String(timeout), auditSetting() ?? ""]);
        const resolved = await resolve(tx);
        if (resolved !== role) throw new Error(`withResolvedContext: resolved to ${resolved}, not ${role}`);
        return fn(tx);
      },
      { readOnly: options.readOnly ?? false },
    );
  }

  /**
   * The named service path: full access, for workers, the CLI and admin code. Never for a
   * client's request. No statement timeout unless `options.statementTimeoutMs` asks for one.
   */
  asService<T>(fn: (tx: Tx) => Promise<T>, options: ContextOptions = {}): Promise<T> {
    // Inside an /admin/v1 request (src/db/operator-scope.ts) the database checks the caller's
    // staff role first, in this same transaction, and records the caller as the actor.
    const caller = operatorScope.getStore();
    if (!caller) {
      return this.run({ role: "service_role" }, fn, options.readOnly ?? false, options.statementTimeoutMs);
    }
    const claims: Claims = {
      role: "service_role",
      ...(typeof caller.claims.sub === "string" ? { sub: caller.claims.sub } : {}),
      staff_caller: caller.claims,
    };
    return this.run(
      claims,
      async (tx) => {
        await tx.query("select internal.require_staff($1, $2)", [caller.tenantId, caller.need]);
        return fn(tx);
      },
      options.readOnly ?? false,
      options.statementTimeoutMs,
    );
  }

  private async run<T>(
    claims: Claims,
    fn: (tx: Tx) => Promise<T>,
    readOnly: boolean,
    timeoutMs: number | undefined,
  ): Promise<T> {
    if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs >= 0)) {
      throw new Error("statementTimeoutMs must be a whole number of milliseconds, 0 or more");
    }
    const audit = auditSetting() ?? "";
    return this.engine.transaction(
      async (tx) => {
        // backline.audit: who acts and from where, for the audit log (src/db/audit-context.ts).
        if (timeoutMs === undefined) {
          await tx.query(AS_CLAIMS, [claims.role, JSON.stringify(claims), audit]);
        } else {
          await tx.query(AS_CLAIMS_WITH_TIMEOUT, [
            claims.role,
            JSON.stringify(claims),
            String(timeoutMs),
            audit,
          ]);
        }
        return fn(tx);
      },
      { readOnly },
    );
  }

  /** /rest/v1's schema was read again: its prepared statements go (see Engine.forgetGenerated). */
  forgetGeneratedStatements(): void {
    this.engine.forgetGenerated?.();
  }

  /** Calls `onNotice` after each committed pg_notify on `channel` (see Engine.listen). */
  listen(channel: string, onNotice: () => void): Promise<() => Promise<void>> {
    return this.engine.listen(channel, onNotice);
  }

  /** How the engine's connections are used now (for /metrics); undefined for an engine that cannot tell. */
  poolStats(): PoolStats | undefined {
    return this.engine.stats?.();
  }

  /**
   * The embedded database's files as one consistent tar (src/backup), with `whileHeld` run before
   * any other transaction may start; undefined on PostgreSQL (pg_dump takes its backups).
   */
  snapshot(whileHeld?: () => Promise<void>): Promise<Uint8Array> | undefined {
    return this.engine.snapshot?.(whileHeld);
  }

  /** Round trip to the database; throws when it cannot be reached. */
  async ping(): Promise<void> {
    await this.engine.transaction((tx) => tx.query("select 1"), { readOnly: true });
  }

  close(): Promise<void> {
    return this.engine.close();
  }
}
