import { Webhook, WebhookVerificationError } from "standardwebhooks";
import type { webhooks } from "./generated/openapi.ts";

/**
 * Receiving Backline's webhooks (docs/webhooks.md): each delivery is signed per Standard Webhooks,
 * and `verifyWebhook` checks it with the `standardwebhooks` library — the signature over
 * `<webhook-id>.<webhook-timestamp>.<body>`, and a timestamp within five minutes — before it
 * returns the event, typed by its `type`.
 */

type EventBody<K extends keyof webhooks> = webhooks[K] extends {
  post: { requestBody: { content: { "application/json": infer E } } };
}
  ? E
  : never;

/** `POST /webhooks/{id}/test`'s event, sent to that endpoint only (not in the document's `webhooks`). */
export interface WebhookTestEvent {
  id: string;
  type: "webhook.test";
  created: string;
  sequence: number;
  account_id: string;
  data: { object: { object: "webhook_test"; endpoint_id: string; message: string } };
}

/** Every event an endpoint can receive; narrow it with `switch (event.type)`. */
export type WebhookEvent = { [K in keyof webhooks]: EventBody<K> }[keyof webhooks] | WebhookTestEvent;
export type WebhookEventType = WebhookEvent["type"];
/** The event of one type: `WebhookEventOf<"release.live">`. */
export type WebhookEventOf<T extends WebhookEventType> = Extract<WebhookEvent, { type: T }>;

export { WebhookVerificationError };

/** Request headers as Node's `req.headers`, a `Headers` (fetch, Request) or a plain object. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

function plainHeaders(headers: WebhookHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      out[name] = value;
    });
    return out;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

/**
 * The event of a delivery, verified: `payload` is the raw body as received (before any JSON
 * parser), `secret` the endpoint's `whsec_…` secret — or several, during a rotation, any of which
 * may have signed it. Throws `WebhookVerificationError` when no secret verifies it or the
 * timestamp is stale; answer the delivery 400 then.
 */
export function verifyWebhook(
  payload: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string | readonly string[],
): WebhookEvent {
  const body = typeof payload === "string" ? payload : new TextDecoder().decode(payload);
  const plain = plainHeaders(headers);
  const secrets = typeof secret === "string" ? [secret] : secret;
  if (secrets.length === 0) throw new WebhookVerificationError("No secret to verify the webhook with");
  let failure: unknown;
  for (const s of secrets) {
    try {
      return new Webhook(s).verify(body, plain) as WebhookEvent;
    } catch (error) {
      failure = error;
    }
  }
  throw failure;
}
