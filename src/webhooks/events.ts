import { z } from "zod";

/**
 * The events an account's webhook endpoints can subscribe to (seed 001, "Events"), with the
 * envelope each is sent in — described here once for the OpenAPI document's `webhooks` section
 * and docs/webhooks.md. The catalog triggers write release events to internal.events in the
 * transaction of the change (migration 0005); royalty imports write royalties.imported.
 */
export const WEBHOOK_EVENT_TYPES = [
  "release.submitted",
  "release.approved",
  "release.rejected",
  "release.live",
  "release.takedown_completed",
  "royalties.imported",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const Timestamp = z.iso.datetime({ offset: true });

const ReleaseSnapshot = z
  .looseObject({
    id: z.uuid(),
    account_id: z.uuid(),
    title: z.string(),
    status: z.string(),
    status_reason: z.string().nullable(),
    upc: z.string().nullable(),
    release_date: z.string().nullable(),
    updated_at: z.string(),
  })
  .meta({
    id: "WebhookReleaseObject",
    description:
      "The release as it was when the event happened: every column of /rest/v1/releases (the public API's release fields and more).",
  });

const RoyaltyImportObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("royalty_import"),
  })
  .meta({
    id: "WebhookRoyaltyImportObject",
    description:
      "The royalty import that added lines for this account (its fields are described with royalty imports).",
  });

function envelope(type: string, object: z.ZodType, id: string) {
  return z
    .object({
      id: z
        .uuid()
        .meta({ description: "The event id; also the webhook-id header, the same on every attempt." }),
      type: z.literal(type),
      created: Timestamp.meta({ description: "When the event happened." }),
      sequence: z.number().int().min(1).meta({
        description:
          "The event's number among its release's events: 1, 2, 3… in the order they happened, given by the database when the event was written (1 for events that are not a release's). Deliveries are not sent in order unless the endpoint asks for strict ordering: order a release's events by this number.",
      }),
      account_id: z.uuid(),
      data: z.object({ object }),
    })
    .meta({ id });
}

export const WEBHOOK_EVENTS: { type: WebhookEventType; summary: string; schema: z.ZodType }[] = [
  {
    type: "release.submitted",
    summary: "A release was submitted for review (through either interface).",
    schema: envelope("release.submitted", ReleaseSnapshot, "ReleaseSubmittedEvent"),
  },
  {
    type: "release.approved",
    summary: "The operator's review approved the release; delivery to its stores begins.",
    schema: envelope("release.approved", ReleaseSnapshot, "ReleaseApprovedEvent"),
  },
  {
    type: "release.rejected",
    summary: "The review rejected the release; data.object.status_reason says why. It is editable again.",
    schema: envelope("release.rejected", ReleaseSnapshot, "ReleaseRejectedEvent"),
  },
  {
    type: "release.live",
    summary: "Every store of the release has it live.",
    schema: envelope("release.live", ReleaseSnapshot, "ReleaseLiveEvent"),
  },
  {
    type: "release.takedown_completed",
    summary: "A requested takedown is complete: every store removed the release.",
    schema: envelope("release.takedown_completed", ReleaseSnapshot, "ReleaseTakedownCompletedEvent"),
  },
  {
    type: "royalties.imported",
    summary: "Royalty lines for the account's catalog were imported.",
    schema: envelope("royalties.imported", RoyaltyImportObject, "RoyaltiesImportedEvent"),
  },
];
