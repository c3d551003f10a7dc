/**
 * The event as an endpoint receives it (docs/webhooks.md, "Events"): `{id, type, created,
 * sequence, account_id, data: {object}}`, made from an internal.events row. `created` is the
 * event's time and `sequence` its number among its release's events (1, 2, 3…, given by the
 * database when the event was written, migration 0014; 1 for other events): receivers order a
 * release's events by it, as deliveries are not sent in order (docs/webhooks.md, "Order"). The JSON text returned by
 * `envelopeBody` is exactly what is signed and sent, byte for byte; it is the same on every retry
 * (the row does not change), though receivers must not depend on that: they verify the bytes they got.
 */

export interface EventRow {
  id: string;
  type: string;
  account_id: string | null;
  /** `{"object": <the row as it was>}` (migration 0004). */
  data: Record<string, unknown>;
  created_at: Date | string;
  /** The event's number among its release's events (a bigint: a string from some drivers). */
  seq: number | string;
}

export interface Envelope {
  id: string;
  type: string;
  /** ISO 8601, UTC, milliseconds. */
  created: string;
  /** 1, 2, 3… per release, in the order the release's events happened. */
  sequence: number;
  account_id: string | null;
  data: Record<string, unknown>;
}

export function toEnvelope(event: EventRow): Envelope {
  const created = event.created_at instanceof Date ? event.created_at : new Date(event.created_at);
  if (Number.isNaN(created.getTime())) throw new Error(`event ${event.id} has no valid created_at`);
  const sequence = Number(event.seq);
  if (!Number.isSafeInteger(sequence) || sequence < 1) throw new Error(`event ${event.id} has no valid seq`);
  return {
    id: event.id,
    type: event.type,
    created: created.toISOString(),
    sequence,
    account_id: event.account_id,
    data: event.data,
  };
}

/** The request body: the envelope as JSON. */
export function envelopeBody(event: EventRow): string {
  return JSON.stringify(toEnvelope(event));
}
