/**
 * @backline/client — a typed client for Backline's public API (docs/clients.md).
 */
export { type BacklineClient, type BacklineClientOptions, createBacklineClient } from "./client.ts";
export { BacklineApiError, type DataOf, type FieldError, type Problem, unwrap } from "./errors.ts";
export type { components, operations, paths, webhooks } from "./generated/openapi.ts";
export { type CursorPath, type ItemOf, type PaginateInit, pages, paginate } from "./paginate.ts";
export { type RetryEvent, type RetryOptions, retryAfterMs, retryingFetch } from "./retry.ts";
export {
  verifyWebhook,
  type WebhookEvent,
  type WebhookEventOf,
  type WebhookEventType,
  type WebhookHeaders,
  type WebhookTestEvent,
  WebhookVerificationError,
} from "./webhooks.ts";
