import { AsyncLocalStorage } from "node:async_hooks";
import type { Claims } from "./types.ts";

/** A staff role an operator act needs (docs/console.md, "Staff roles"): cumulative, then platform. */
export type StaffNeed = "reviewer" | "operator" | "admin" | "platform";
export const STAFF_NEEDS: readonly StaffNeed[] = ["reviewer", "operator", "admin", "platform"];

/**
 * Who an operator act runs for, while an /admin/v1 request is handled (src/admin/auth.ts enters
 * it around the route's handler). `claims` are the caller's verified claims (a staff user's token
 * or a tenant's service-role key), `tenantId` the tenant acted on and `need` the route's role.
 */
export interface OperatorCaller {
  readonly claims: Claims;
  readonly tenantId: string;
  readonly need: StaffNeed;
}

/**
 * Entered for the handler of each /admin/v1 request. While it is set, every `Db.asService`
 * transaction (the pipeline's operator functions run on it) carries the caller's claims under
 * `staff_caller`, its `sub` as the actor the history records, and runs
 * `internal.require_staff(tenant, need)` as its first statement: the database refuses (42501)
 * unless the caller still holds the role, in the same transaction as the act. Nothing between
 * the route and the engine passes it along, so a new admin route cannot forget it.
 */
export const operatorScope = new AsyncLocalStorage<OperatorCaller>();
