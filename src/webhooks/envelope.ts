import { count, timestamp } from "../http/formats.ts";

/**
 * The event as an endpoint receives it (docs/webhooks.md, "Events"): `{id, type, created,
 * sequence, account_id, data: {object}}`, made from an internal.events row. `created` is the
 * event's time and `sequence` its number among its release's events (1, 2, 3…, given by the
 * database when the event was written, migration 0014; 1 for other events): receivers order a
 * release's events by it, as deliveries are not sent in order (docs/webhooks.md, "Order"). The JSON text returned by
 * `envelopeBody` is exactly what is signed and sent, byte for byte; it is the same on every retry
 * (the row does not change), though receivers must not depend on that: they verify the bytes they got.
 *
 * `data` is written in the endpoint's payload version (docs/webhooks.md, "Payload versions"):
 * - "1.1" — the formats of docs/public-api.md ("Formats"): every time RFC 3339 in UTC with
 *   milliseconds (a row's times are stored by to_jsonb, in PostgreSQL's own text: microseconds and
 *   the session's offset), every count an integer;
 * - "1.0" — as before 1.1.0, for endpoints registered then until they move: `data` exactly as
 *   stored, except that the royalty totals' `units` stay decimal strings as they were.
 */

export const PAYLOAD_VERSIONS = ["1.0", "1.1"] as const;
export type PayloadVersion = (typeof PAYLOAD_VERSIONS)[number];
/** What a new endpoint gets. */
export const CURRENT_PAYLOAD_VERSION: PayloadVersion = "1.1";

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
  /** RFC 3339, UTC, milliseconds. */
  created: string;
  /** 1, 2, 3… per release, in the order the release's events happened. */
  sequence: number;
  account_id: string | null;
  data: Record<string, unknown>;
}

export function toEnvelope(event: EventRow, version: PayloadVersion = CURRENT_PAYLOAD_VERSION): Envelope {
  const created = event.created_at instanceof Date ? event.created_at : new Date(event.created_at);
  if (Number.isNaN(created.getTime())) throw new Error(`event ${event.id} has no valid created_at`);
  const sequence = Number(event.seq);
  if (!Number.isSafeInteger(sequence) || sequence < 1) throw new Error(`event ${event.id} has no valid seq`);
  return {
    id: event.id,
    type: event.type,
    created: timestamp(created) as string,
    sequence,
    account_id: event.account_id,
    data: version === "1.0" ? legacyData(event.data) : currentData(event.data),
  };
}

/** The request body: the envelope as JSON. */
export function envelopeBody(event: EventRow, version: PayloadVersion = CURRENT_PAYLOAD_VERSION): string {
  return JSON.stringify(toEnvelope(event, version));
}

// The names of Backline's times and counts in event data (the release row's columns, a takedown's
// stores, a royalty import and its totals); test/formats.test.ts holds every event schema to them.
const TIME = /(_at|_since)$/;
const COUNT = new Set(["lines", "units"]);

/** Times as Timestamp, counts as integers, at every depth of the event's data. */
function currentData(data: Record<string, unknown>): Record<string, unknown> {
  return mapFields(data, (key, value) => {
    if (TIME.test(key) && (typeof value === "string" || value instanceof Date)) return timeOrAsIs(value);
    if (COUNT.has(key) && typeof value === "string" && /^-?\d+$/.test(value)) return count(value);
    return value;
  });
}

/** Payload 1.0: the stored data, with the royalty totals' units as the strings they were. */
function legacyData(data: Record<string, unknown>): Record<string, unknown> {
  const object = data.object as Record<string, unknown> | undefined;
  if (object?.object !== "royalty_import" || !Array.isArray(object.totals)) return data;
  const totals = (object.totals as Record<string, unknown>[]).map((t) =>
    typeof t.units === "number" ? { ...t, units: String(t.units) } : t,
  );
  return { ...data, object: { ...object, totals } };
}

/** A value that is no time with a zone is sent as it is rather than held back (the schema test finds it). */
function timeOrAsIs(value: string | Date): unknown {
  try {
    return timestamp(value);
  } catch {
    return value;
  }
}

function mapFields(
  value: Record<string, unknown>,
  fn: (key: string, value: unknown) => unknown,
): Record<string, unknown> {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (!v || typeof v !== "object" || v instanceof Date) return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = walk(fn(k, x));
    return out;
  };
  return walk(value) as Record<string, unknown>;
}
