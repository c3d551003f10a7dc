import type { Db } from "../db/db.ts";
import { OperatorError } from "./errors.ts";

/**
 * Official Artist Channel requests (docs/operator.md, "Official Artist Channels"): the
 * `oac.request` job hands a new request to the operator (processing); the operator approves or
 * rejects it (`backline oac review`). A sandbox account's request is decided by the simulated
 * store at once, approved. The account polls GET /api/public/v1/artists/{id}/oac-request; its
 * members are notified of the decision (migration 0008).
 */
export class OacError extends OperatorError {}

export async function processOacRequest(db: Db, requestId: string): Promise<void> {
  await db.asService(async (tx) => {
    const request = (
      await tx.query<{ status: string; is_sandbox: boolean }>(
        `select o.status, a.is_sandbox from internal.oac_requests o join internal.accounts a on a.id = o.account_id
         where o.id = $1 for update of o`,
        [requestId],
      )
    ).rows[0];
    if (request?.status !== "requested") return;
    if (request.is_sandbox) {
      await tx.query(
        "update internal.oac_requests set status = 'approved', status_reason = 'Approved by the sandbox store.' where id = $1",
        [requestId],
      );
    } else {
      await tx.query("update internal.oac_requests set status = 'processing' where id = $1", [requestId]);
    }
  });
}

export async function decideOac(
  db: Db,
  requestId: string,
  decision: { approve: true; note?: string } | { approve: false; reason: string },
  scope: { tenantId?: string } = {},
): Promise<{ id: string; status: string; status_reason: string | null }> {
  if (!decision.approve && decision.reason.trim() === "") {
    throw new OacError("reason_required", "a rejection needs a reason: the account sees it");
  }
  return db.asService(async (tx) => {
    const current = (
      await tx.query<{ status: string }>(
        `select o.status from internal.oac_requests o join internal.accounts a on a.id = o.account_id
         where o.id = $1 and ($2::uuid is null or a.tenant_id = $2::uuid) for update of o`,
        [requestId, scope.tenantId ?? null],
      )
    ).rows[0];
    if (!current) throw new OacError("not_found", `no OAC request ${requestId}`);
    if (current.status !== "requested" && current.status !== "processing") {
      throw new OacError("invalid_state", `OAC request ${requestId} is ${current.status} already`);
    }
    const row = (
      await tx.query<{ id: string; status: string; status_reason: string | null }>(
        `update internal.oac_requests set status = $2, status_reason = $3 where id = $1
         returning id, status, status_reason`,
        [
          requestId,
          decision.approve ? "approved" : "rejected",
          decision.approve ? (decision.note?.trim() ?? null) || null : decision.reason.trim(),
        ],
      )
    ).rows[0];
    return row as { id: string; status: string; status_reason: string | null };
  });
}

export interface OpenOacRequest {
  id: string;
  tenant: string;
  artist_id: string;
  artist_name: string;
  store: string;
  channel_url: string | null;
  status: string;
  created_at: Date;
}

/** Requests waiting for the operator, oldest first. */
export async function oacQueue(db: Db, tenantId?: string): Promise<OpenOacRequest[]> {
  return db.asService(
    async (tx) =>
      (
        await tx.query<OpenOacRequest>(
          `select o.id, t.slug as tenant, o.artist_id, ar.name as artist_name, o.store, o.channel_url, o.status, o.created_at
           from internal.oac_requests o
           join public.artist_profiles ar on ar.id = o.artist_id
           join internal.accounts a on a.id = o.account_id
           join internal.tenants t on t.id = a.tenant_id
           where o.status in ('requested', 'processing') and ($1::uuid is null or t.id = $1::uuid)
           order by o.created_at, o.id`,
          [tenantId ?? null],
        )
      ).rows,
    { readOnly: true },
  );
}
