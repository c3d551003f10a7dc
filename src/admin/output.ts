import { timestamp as iso } from "../http/formats.ts";
import type { DeliveryRecord } from "../pipeline/delivery.ts";
import type { OpenOacRequest } from "../pipeline/oac.ts";
import type { QueuedRelease } from "../pipeline/review.ts";

/**
 * What the admin API answers, field by field: the pipeline's rows without what the caller knows
 * already (its tenant), times as RFC 3339 UTC with milliseconds whichever driver read them (src/http/formats.ts).
 */

export function queuedRelease(r: QueuedRelease) {
  return {
    id: r.id,
    account_id: r.account_id,
    title: r.title,
    artist_name: r.artist_name,
    status: r.status,
    submitted_at: iso(r.submitted_at),
    priority: r.priority,
    problems: r.problems.map((p) => ({ param: p.param, code: p.code, message: p.message })),
  };
}

export function delivery(d: DeliveryRecord) {
  return {
    id: d.id,
    store: d.store,
    action: d.action,
    status: d.status,
    attempts: d.attempts,
    message: d.message,
    store_reference: d.store_reference,
    correction_version: d.correction_version,
    created_at: iso(d.created_at),
    delivered_at: iso(d.delivered_at),
    live_at: iso(d.live_at),
    taken_down_at: iso(d.taken_down_at),
    confirmed_by: d.confirmed_by,
    confirmed_via: d.confirmed_via,
    confirmation_note: d.confirmation_note,
    updated_at: iso(d.updated_at),
  };
}

export function oacRequest(o: OpenOacRequest) {
  return {
    id: o.id,
    artist_id: o.artist_id,
    artist_name: o.artist_name,
    store: o.store,
    channel_url: o.channel_url,
    status: o.status,
    created_at: iso(o.created_at),
  };
}

/** A decision's outcome (a release review, an OAC request). */
export function decision(d: { id: string; status: string; status_reason: string | null }) {
  return { id: d.id, status: d.status, status_reason: d.status_reason };
}
