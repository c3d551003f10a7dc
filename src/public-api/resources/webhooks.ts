import { z } from "zod";
import type { Tx } from "../../db/types.ts";
import { Count, Timestamp } from "../../http/formats.ts";
import { retryDeliveryNow } from "../../webhooks/dispatcher.ts";
import { CURRENT_PAYLOAD_VERSION, PAYLOAD_VERSIONS } from "../../webhooks/envelope.ts";
import { WEBHOOK_EVENT_TYPES } from "../../webhooks/events.ts";
import { newSigningSecret } from "../../webhooks/secrets.ts";
import { checkWebhookUrl } from "../../webhooks/ssrf.ts";
import { ApiError, notFound, validationFailed } from "../errors.ts";
import { type Context, Id, listOf, Pagination, page, route } from "../route.ts";
import { columns, countAndPage, type PageQuery } from "./sql.ts";

/**
 * Webhook endpoints (seed 001; docs/webhooks.md): registered by a key with webhooks:manage, each
 * with its own signing secret, shown once (at registration, and at each rotation). Row-level
 * security on internal.webhook_endpoints keeps every account to its own endpoints; the secret is
 * stored encrypted by the server and never read back by a client.
 */

const withId = z.object({ id: Id }).strict();
const EventType = z.enum(WEBHOOK_EVENT_TYPES);
const Ordering = z.enum(["best_effort", "strict"]).meta({
  description:
    'best_effort (the default): deliveries go in parallel and a failing one does not hold the others, so events may arrive out of order; order them by `sequence` and `created`. strict: one delivery at a time, in the order the events happened; a failing one holds the later ones until it succeeds or fails for good (docs/webhooks.md, "Order").',
});

const PayloadVersion = z.enum(PAYLOAD_VERSIONS).meta({
  description:
    "The form events are sent in (docs/webhooks.md, \"Payload versions\"). 1.1 (the default): times RFC 3339 in UTC with milliseconds, counts as integers. 1.0 (deprecated, until at least 2027-11-26): as before 1.1.0 — a row's times as PostgreSQL wrote them, and the royalty totals' units as decimal strings; endpoints registered before 1.1.0 have it until moved.",
});

const Endpoint = z
  .object({
    id: Id,
    object: z.literal("webhook_endpoint"),
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(EventType),
    ordering: Ordering,
    payload_version: PayloadVersion,
    enabled: z.boolean(),
    disabled_reason: z
      .string()
      .nullable()
      .meta({ description: "Why it is disabled: by you, by a 410 answer, or after five days of failures." }),
    failing_since: Timestamp.nullable().meta({
      description: "Since when every delivery has failed; five days of it disable the endpoint.",
    }),
    last_success_at: Timestamp.nullable(),
    previous_secret_expires_at: Timestamp.nullable().meta({
      description: "During a rotation: until when the previous secret still signs beside the new one.",
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "WebhookEndpoint" });

const EndpointWithSecret = Endpoint.extend({
  secret: z.string().meta({
    description: "The signing secret, whsec_ + base64 of 32 random bytes. Shown only now: store it.",
  }),
}).meta({ id: "WebhookEndpointWithSecret" });

const Url = z.string().max(2048).meta({
  description:
    "Where events are POSTed: https, on a public address (plain http and local addresses only where the operator allows them, for development).",
});

const EndpointCreate = z
  .object({
    url: Url,
    events: z.array(EventType).min(1).max(20).meta({
      description:
        "The event types to receive. Each needs the scope that reads what it carries: release events catalog:read, royalties.imported and royalties.voided royalties:read, statement.ready and payout.* payouts:read.",
    }),
    description: z.string().trim().max(500).optional(),
    ordering: Ordering.optional(),
    payload_version: PayloadVersion.optional(),
  })
  .strict()
  .meta({ id: "WebhookEndpointCreate" });

const EndpointUpdate = z
  .object({
    url: Url.optional(),
    events: z.array(EventType).min(1).max(20).optional(),
    description: z.string().trim().max(500).nullable().optional(),
    ordering: Ordering.optional(),
    payload_version: PayloadVersion.optional(),
    enabled: z
      .boolean()
      .optional()
      .meta({ description: "false stops deliveries (they wait); true sends them again, oldest first." }),
  })
  .strict()
  .meta({ id: "WebhookEndpointUpdate" });

const RotateBody = z
  .object({
    previous_secret_hours: z.number().int().min(0).max(168).default(24).meta({
      description:
        "How long the previous secret keeps signing beside the new one (0 to 168 hours; default 24).",
    }),
  })
  .strict()
  .meta({ id: "WebhookSecretRotate" });

const Attempt = z
  .object({
    attempt: z.number().int(),
    started_at: Timestamp,
    duration_ms: z.number().int(),
    status_code: z.number().int().nullable().meta({ description: "null when no answer came." }),
    outcome: z
      .enum(["ok", "http_status", "timeout", "connection", "dns", "blocked_address", "redirect", "tls"])
      .meta({ description: "ok, or why the attempt failed." }),
    error: z.string().nullable(),
    response_body: z.string().nullable().meta({ description: "The first 1 KiB of the answer." }),
  })
  .meta({ id: "WebhookAttempt" });

const Delivery = z
  .object({
    id: Id,
    object: z.literal("webhook_delivery"),
    endpoint_id: Id,
    event_id: Id.meta({ description: "Also the webhook-id header: the same on every attempt." }),
    event_type: z.string(),
    status: z.enum(["pending", "succeeded", "failed"]).meta({
      description:
        "pending while attempts remain; succeeded on a 2xx; failed after the last attempt, or a 410.",
    }),
    attempts: Count,
    next_attempt_at: Timestamp.nullable(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    completed_at: Timestamp.nullable(),
    created_at: Timestamp,
    attempt_log: z.array(Attempt),
  })
  .meta({ id: "WebhookDelivery" });

const ENDPOINT_COLUMNS = [
  "id",
  "url",
  "description",
  "events",
  "ordering",
  "payload_version",
  "enabled",
  "disabled_reason",
  "failing_since",
  "last_success_at",
  "previous_secret_expires_at",
  "created_at",
  "updated_at",
];

const endpointOut = (row: Record<string, unknown>) => ({ id: row.id, object: "webhook_endpoint", ...row });

type Ctx = Context<{ id: string }, unknown, unknown>;

async function visibleEndpoint(tx: Tx, id: string): Promise<Record<string, unknown>> {
  const row = (
    await tx.query<Record<string, unknown>>(
      `select ${columns(ENDPOINT_COLUMNS)} from internal.webhook_endpoints where id = $1`,
      [id],
    )
  ).rows[0];
  if (!row) throw notFound("webhook endpoint", id);
  return row;
}

/** The URL must be one the dispatcher will send to: checked (and resolved) before it is saved. */
async function checkUrl(ctx: Pick<Ctx, "services">, url: string): Promise<void> {
  const verdict = await checkWebhookUrl(url, { allowPrivate: ctx.services.webhooks.allowPrivate });
  if (!verdict.ok) throw validationFailed([{ param: "url", code: verdict.code, message: verdict.message }]);
}

async function deliveriesOf(tx: Tx, endpointId: string, where: string, params: unknown[], query: PageQuery) {
  const { rows, total, has_more } = await countAndPage<Record<string, unknown>>(
    tx,
    {
      // An event's type through a definer function: the events themselves are the server's (migration 0030).
      from: "internal.webhook_deliveries d",
      where: `d.endpoint_id = $1 ${where}`,
      order: "d.created_at desc, d.id",
      columns: `d.id, d.endpoint_id, d.event_id, internal.delivery_event_type(d.id) as event_type, d.status, d.attempts,
        case when d.status = 'pending' then d.next_attempt_at end as next_attempt_at, d.last_status_code, d.last_error,
        d.completed_at, d.created_at`,
    },
    [endpointId, ...params],
    query,
  );
  const ids = rows.map((r) => r.id);
  const attempts =
    ids.length === 0
      ? []
      : (
          await tx.query<Record<string, unknown> & { delivery_id: string }>(
            `select delivery_id, attempt, started_at, duration_ms, status_code, outcome, error, response_body
             from internal.webhook_attempts where delivery_id = any ($1::uuid[]) order by delivery_id, attempt`,
            [ids],
          )
        ).rows;
  const byDelivery = new Map<unknown, Record<string, unknown>[]>();
  for (const { delivery_id, ...a } of attempts) {
    byDelivery.set(delivery_id, [...(byDelivery.get(delivery_id) ?? []), a]);
  }
  return {
    rows: rows.map((r) => ({ ...r, object: "webhook_delivery", attempt_log: byDelivery.get(r.id) ?? [] })),
    total,
    has_more,
  };
}

const common = { tag: "Webhooks", scope: "webhooks:manage" } as const;

/** Decided by the database (migration 0013; docs/security.md). */
const SCOPE_RULE =
  "A key changes an endpoint (registers, updates, deletes it, rotates its secret) only if it may read every event " +
  "the endpoint carries, before and after the change: royalties.imported and royalties.voided need royalties:read, " +
  "statement.ready and payout.* payouts:read, release events catalog:read; else 403 insufficient_scope.";
const SEALED_REPLAY =
  "With Idempotency-Key, a retry gets the same answer, secret included (Idempotent-Replayed: true): that answer " +
  "is kept 24 hours, encrypted, and replayed only to the same key or user.";

export const webhookRoutes = [
  route({
    ...common,
    method: "GET",
    path: "/webhooks",
    operationId: "listWebhooks",
    summary: "List webhook endpoints",
    description: "The account's endpoints, oldest first. Secrets are never shown again.",
    query: Pagination,
    response: {
      status: 200,
      description: "A page of endpoints.",
      schema: listOf(Endpoint, "WebhookEndpointList"),
    },
    handler: async ({ query, read }) => {
      const listed = await read((tx) =>
        countAndPage<Record<string, unknown>>(
          tx,
          {
            from: "internal.webhook_endpoints",
            where: "true",
            order: "created_at, id",
            columns: columns(ENDPOINT_COLUMNS),
          },
          [],
          query,
        ),
      );
      return { body: page(listed.rows.map(endpointOut), query, listed) };
    },
  }),
  route({
    ...common,
    method: "POST",
    path: "/webhooks",
    operationId: "createWebhook",
    summary: "Register a webhook endpoint",
    description:
      "Registers the URL for the given event types and returns the endpoint with its signing secret — the only time the secret is shown. Deliveries follow Standard Webhooks (docs/webhooks.md). " +
      SCOPE_RULE +
      " " +
      SEALED_REPLAY,
    secretInResponse: true,
    body: EndpointCreate,
    response: { status: 201, description: "The endpoint and its secret.", schema: EndpointWithSecret },
    errors: [422],
    handler: async (ctx) => {
      const { body, caller, services } = ctx;
      await checkUrl(ctx, body.url);
      const secret = newSigningSecret();
      const row = await ctx.write(async (tx) => {
        const inserted = await tx.query<Record<string, unknown>>(
          `insert into internal.webhook_endpoints (account_id, url, description, events, secret_ciphertext, ordering,
             payload_version)
           values ($1, $2, $3, $4, $5, $6, $7) returning ${columns(ENDPOINT_COLUMNS)}`,
          [
            caller.accountId,
            body.url,
            body.description || null,
            [...new Set(body.events)],
            services.secrets.encrypt(secret),
            body.ordering ?? "best_effort",
            body.payload_version ?? CURRENT_PAYLOAD_VERSION,
          ],
        );
        return inserted.rows[0] as Record<string, unknown>;
      });
      return { status: 201, body: { ...endpointOut(row), secret } };
    },
  }),
  route({
    ...common,
    method: "GET",
    path: "/webhooks/{id}",
    operationId: "getWebhook",
    summary: "Retrieve a webhook endpoint",
    params: withId,
    response: { status: 200, description: "The endpoint.", schema: Endpoint },
    errors: [404],
    handler: async ({ params, read }) => ({
      body: endpointOut(await read((tx) => visibleEndpoint(tx, params.id))),
    }),
  }),
  route({
    ...common,
    method: "PATCH",
    path: "/webhooks/{id}",
    operationId: "updateWebhook",
    summary: "Update a webhook endpoint",
    description: `Change its URL, events, description, ordering or payload version, or disable and enable it. ${SCOPE_RULE}`,
    params: withId,
    body: EndpointUpdate,
    response: { status: 200, description: "The endpoint as it is now.", schema: Endpoint },
    errors: [404, 422],
    handler: async (ctx) => {
      const { params, body } = ctx;
      if (body.url !== undefined) await checkUrl(ctx, body.url);
      const row = await ctx.write(async (tx) => {
        await visibleEndpoint(tx, params.id);
        const sets: string[] = [];
        const values: unknown[] = [params.id];
        const set = (column: string, value: unknown) => {
          values.push(value);
          sets.push(`${column} = $${values.length}`);
        };
        if (body.url !== undefined) set("url", body.url);
        if (body.events !== undefined) set("events", [...new Set(body.events)]);
        if (body.description !== undefined) set("description", body.description || null);
        if (body.ordering !== undefined) set("ordering", body.ordering);
        if (body.payload_version !== undefined) set("payload_version", body.payload_version);
        if (body.enabled !== undefined) {
          set("enabled", body.enabled);
          set("disabled_reason", body.enabled ? null : "Disabled by the account.");
        }
        if (sets.length > 0) {
          await tx.query(`update internal.webhook_endpoints set ${sets.join(", ")} where id = $1`, values);
          // Enabled, or no longer strict: what waited may go now.
          if (body.enabled || body.ordering === "best_effort")
            await tx.query("select pg_notify('backline_webhooks', '')");
        }
        return visibleEndpoint(tx, params.id);
      });
      return { body: endpointOut(row) };
    },
  }),
  route({
    ...common,
    method: "DELETE",
    path: "/webhooks/{id}",
    operationId: "deleteWebhook",
    summary: "Remove a webhook endpoint",
    description: `The endpoint goes, with its pending deliveries and its delivery log. ${SCOPE_RULE}`,
    params: withId,
    response: {
      status: 200,
      description: "The endpoint is gone.",
      schema: z
        .object({ id: Id, object: z.literal("webhook_endpoint"), deleted: z.literal(true) })
        .meta({ id: "DeletedWebhookEndpoint" }),
    },
    errors: [404],
    handler: async ({ params, write }) => {
      const n = await write(
        async (tx) =>
          (await tx.query("delete from internal.webhook_endpoints where id = $1", [params.id])).rowCount,
      );
      if (n === 0) throw notFound("webhook endpoint", params.id);
      return { body: { id: params.id, object: "webhook_endpoint", deleted: true } };
    },
  }),
  route({
    ...common,
    method: "POST",
    path: "/webhooks/{id}/rotate-secret",
    operationId: "rotateWebhookSecret",
    summary: "Rotate an endpoint's signing secret",
    description:
      "Makes a new secret and returns it (the only time it is shown). The previous secret keeps signing beside it — every message carries both signatures — for previous_secret_hours, so receivers can switch without losing a message. " +
      SCOPE_RULE +
      " " +
      SEALED_REPLAY,
    secretInResponse: true,
    params: withId,
    body: RotateBody,
    bodyOptional: true,
    response: { status: 200, description: "The endpoint and its new secret.", schema: EndpointWithSecret },
    errors: [404, 422],
    handler: async ({ params, body, write, services }) => {
      const secret = newSigningSecret();
      // As the caller: the database function moves the secrets (which clients never read) and the
      // scope check of migration 0013 applies as to any change of the endpoint.
      const row = await write(async (tx) => {
        const rotated = await tx.query<{ ok: boolean }>(
          "select internal.rotate_webhook_secret($1, $2, $3) as ok",
          [params.id, services.secrets.encrypt(secret), body.previous_secret_hours],
        );
        if (!rotated.rows[0]?.ok) throw notFound("webhook endpoint", params.id);
        return visibleEndpoint(tx, params.id);
      });
      return { body: { ...endpointOut(row), secret } };
    },
  }),
  route({
    ...common,
    method: "GET",
    path: "/webhooks/{id}/deliveries",
    operationId: "listWebhookDeliveries",
    summary: "List an endpoint's deliveries",
    description:
      "The delivery log, newest first: each event sent to the endpoint, its status, and every attempt (status code, duration, outcome, the start of the answer).",
    params: withId,
    query: Pagination.extend({
      status: z
        .enum(["pending", "succeeded", "failed"])
        .optional()
        .meta({ description: "Only deliveries with this status." }),
    }).strict(),
    response: {
      status: 200,
      description: "A page of deliveries.",
      schema: listOf(Delivery, "WebhookDeliveryList"),
    },
    errors: [404],
    handler: async ({ params, query, read }) => {
      const listed = await read(async (tx) => {
        await visibleEndpoint(tx, params.id);
        return query.status
          ? deliveriesOf(tx, params.id, "and d.status = $2", [query.status], query)
          : deliveriesOf(tx, params.id, "", [], query);
      });
      return { body: page(listed.rows, query, listed) };
    },
  }),
  route({
    ...common,
    method: "POST",
    path: "/webhooks/{id}/deliveries/{deliveryId}/retry",
    operationId: "retryWebhookDelivery",
    summary: "Send a delivery again now",
    description:
      "A failed delivery is sent again (one more attempt; a failure leaves it failed); a pending one goes now instead of at its scheduled time. A succeeded one is 409.",
    params: z.object({ id: Id, deliveryId: Id }).strict(),
    response: { status: 202, description: "The delivery, queued.", schema: Delivery },
    errors: [404, 409],
    handler: async ({ params, read, services }) => {
      const status = await read(async (tx) => {
        await visibleEndpoint(tx, params.id);
        const found = (
          await tx.query<{ status: string }>(
            "select status from internal.webhook_deliveries where id = $1 and endpoint_id = $2",
            [params.deliveryId, params.id],
          )
        ).rows[0];
        if (!found) throw notFound("webhook delivery", params.deliveryId);
        return found.status;
      });
      if (status === "succeeded") {
        throw new ApiError(409, "delivery_succeeded", "This delivery succeeded; there is nothing to retry.");
      }
      await retryDeliveryNow(services.db, params.deliveryId);
      const { rows } = await read((tx) =>
        deliveriesOf(tx, params.id, "and d.id = $2", [params.deliveryId], { limit: 1 }),
      );
      return { status: 202, body: rows[0] };
    },
  }),
  route({
    ...common,
    method: "POST",
    path: "/webhooks/{id}/test",
    operationId: "testWebhook",
    summary: "Send a test event",
    description:
      "Sends a webhook.test event to this endpoint alone, signed like any other; its delivery appears in the log.",
    params: withId,
    bodyOptional: true,
    body: z.object({}).strict().meta({ id: "WebhookTest" }),
    response: { status: 202, description: "The test delivery, queued.", schema: Delivery },
    errors: [404, 422],
    handler: async ({ params, read, caller, services }) => {
      await read((tx) => visibleEndpoint(tx, params.id));
      // The caller may see the endpoint: the service writes the event and its one delivery.
      const deliveryId = await services.db.asService(async (tx) => {
        const event = (
          await tx.query<{ id: string }>(
            `insert into internal.events (tenant_id, account_id, type, data)
             values ($1, $2, 'webhook.test', jsonb_build_object('object', jsonb_build_object(
               'object', 'webhook_test', 'endpoint_id', $3::uuid, 'message', 'This is a test event from Backline.')))
             returning id`,
            [caller.tenantId, caller.accountId, params.id],
          )
        ).rows[0] as { id: string };
        const d = await tx.query<{ id: string }>(
          `insert into internal.webhook_deliveries (endpoint_id, event_id, account_id) values ($1, $2, $3) returning id`,
          [params.id, event.id, caller.accountId],
        );
        await tx.query("select pg_notify('backline_webhooks', '')");
        return (d.rows[0] as { id: string }).id;
      });
      const { rows } = await read((tx) =>
        deliveriesOf(tx, params.id, "and d.id = $2", [deliveryId], { limit: 1 }),
      );
      return { status: 202, body: rows[0] };
    },
  }),
];
