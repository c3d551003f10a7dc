import { AsyncLocalStorage } from "node:async_hooks";
import os from "node:os";

/**
 * Who acts and from which address, for the audit log (migration 0020, docs/operator.md "The audit
 * log"). A request's transaction names its actor by its role and claims; the service path
 * (workers, the CLI, /admin/v1 acting for a staff member or a service-role key) has no claims
 * that say who, so the server names the actor here and `Db` passes it into every transaction as
 * the setting `backline.audit`, beside the claims. Nothing a client sends sets it.
 */
export interface AuditActor {
  type: "user" | "api_key" | "service_key" | "cli";
  /** The user id, key id, the tenant id of a service-role key, or "cli:<command>". */
  id: string;
  detail?: Record<string, unknown>;
}

export interface AuditScope {
  /** The client address of the request. */
  ip?: string | undefined;
  /** Set once the caller is known (mutable: the scope starts before authentication). */
  actor?: AuditActor | undefined;
}

const storage = new AsyncLocalStorage<AuditScope>();
const scopes = new WeakMap<object, AuditScope>();

/** The audit scope of an HTTP request (made on first use, with the request's client address). */
export function openAuditScope(request: { ip?: string }): AuditScope {
  let scope = scopes.get(request);
  if (!scope) {
    scope = { ip: request.ip };
    scopes.set(request, scope);
  }
  return scope;
}

/** Names the actor of a request once its credentials are verified. */
export function setRequestActor(request: { ip?: string }, actor: AuditActor): void {
  openAuditScope(request).actor = actor;
}

/** Runs `fn` with `scope` as the audit scope of every transaction it opens. */
export function runWithAuditScope<T>(scope: AuditScope, fn: () => T): T {
  return storage.run(scope, fn);
}

/** The scope of the current call: a request's, or a CLI command's (src/cli/run.ts). */
export function currentAuditScope(): AuditScope | undefined {
  return storage.getStore();
}

/**
 * A CLI command's actor: "cli:<command>" with the OS user. Not for the server's own commands
 * (serve, worker): their workers act as "system". A command runs inside a scope holding it
 * (src/cli/run.ts), so a command a running server runs for the CLI names itself without touching
 * the server's other work.
 */
export function cliActor(command: string): AuditActor {
  let osUser = "unknown";
  try {
    osUser = os.userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): keep "unknown".
  }
  return {
    type: "cli",
    id: `cli:${command}`.slice(0, 300),
    detail: { os_user: osUser, host: os.hostname() },
  };
}

/** The setting's value, or undefined when there is nothing to say. */
export function auditSetting(): string | undefined {
  const scope = currentAuditScope();
  if (!scope || (scope.ip === undefined && scope.actor === undefined)) return undefined;
  return JSON.stringify({ ip: scope.ip, actor: scope.actor });
}
