import type { SecretBox } from "../secrets/box.ts";
import { type Claims, DB_ROLES, type Engine, type EngineKind, type Tx } from "./types.ts";

export interface ContextOptions {
  /** Run the transaction READ ONLY: for requests that only read. */
  readOnly?: boolean;
}

/**
 * The only door to data. A request handler calls `withRequestContext` with the caller's claims:
 * one transaction in which `role` and `request.jwt.claims` are set locally, exactly as PostgREST
 * does, so row-level security, column grants and triggers decide what happens.
 *
 * Workers and operator code that must see every tenant use `asService`, which is the same
 * mechanism with the `service_role` database role (BYPASSRLS); its name makes the bypass visible
 * at every call site.
 */
export class Db {
  readonly kind: EngineKind;
  private readonly engine: Engine;
  private readonly box: SecretBox | undefined;

  constructor(engine: Engine, options: { secrets?: SecretBox } = {}) {
    this.engine = engine;
    this.kind = engine.kind;
    this.box = options.secrets;
  }

  /** Seals and opens the secrets the database keeps (docs/security.md): the server's master key. */
  get secrets(): SecretBox {
    if (!this.box) throw new Error("this database was opened without the server's encryption key");
    return this.box;
  }

  async withRequestContext<T>(
    claims: Claims,
    fn: (tx: Tx) => Promise<T>,
    options: ContextOptions = {},
  ): Promise<T> {
    if (!DB_ROLES.includes(claims.role)) {
      // Never let an unexpected role name reach set_config: it would switch to any role the login may use.
      throw new Error(`withRequestContext: role must be one of ${DB_ROLES.join(", ")}`);
    }
    return this.engine.transaction(
      async (tx) => {
        await tx.query("select set_config('role', $1, true), set_config('request.jwt.claims', $2, true)", [
          claims.role,
          JSON.stringify(claims),
        ]);
        return fn(tx);
      },
      { readOnly: options.readOnly ?? false },
    );
  }

  /** The named service path: full access, for workers, the CLI and admin code. Never for a client's request. */
  asService<T>(fn: (tx: Tx) => Promise<T>, options: ContextOptions = {}): Promise<T> {
    return this.withRequestContext({ role: "service_role" }, fn, options);
  }

  /** Calls `onNotice` after each committed pg_notify on `channel` (see Engine.listen). */
  listen(channel: string, onNotice: () => void): Promise<() => Promise<void>> {
    return this.engine.listen(channel, onNotice);
  }

  /** Round trip to the database; throws when it cannot be reached. */
  async ping(): Promise<void> {
    await this.engine.transaction((tx) => tx.query("select 1"), { readOnly: true });
  }

  close(): Promise<void> {
    return this.engine.close();
  }
}
