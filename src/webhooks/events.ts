import { z } from "zod";
import { Count, Currency, Money, Timestamp } from "../http/formats.ts";
import { Release } from "../public-api/resources/schemas.ts";
import { CurrencyTotalSchema } from "../royalties/import.ts";
import { TransferJob } from "../transfer/job.ts";

/**
 * The events an account's webhook endpoints can subscribe to (seed 001, "Events"), with the
 * envelope each is sent in — described here once for the OpenAPI document's `webhooks` section
 * and docs/webhooks.md. The catalog triggers write release events to internal.events in the
 * transaction of the change (migration 0005); royalty imports write royalties.imported, and
 * voiding one royalties.voided; approving a period writes statement.ready for each statement, and
 * a payout's request and settlement payout.requested, payout.paid or payout.failed (migration
 * 0036, docs/payouts.md); a catalogue transfer of the public API writes transfer.completed when its
 * job ends (src/transfer/job.ts, migration 0038); buying an add-on for a release writes
 * add_on.purchased (internal.buy_add_on, migration 0051).
 */
export const WEBHOOK_EVENT_TYPES = [
  "release.submitted",
  "release.approved",
  "release.rejected",
  "release.live",
  "release.takedown_completed",
  "royalties.imported",
  "royalties.voided",
  "statement.ready",
  "payout.requested",
  "payout.paid",
  "payout.failed",
  "transfer.completed",
  "add_on.purchased",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const DateOnly = z.iso.date().meta({ description: "A date, YYYY-MM-DD." });

/**
 * The release row as it was (to_jsonb of public.releases): the public API's release fields, read
 * with the same schema, and the columns only /rest/v1 shows.
 */
const ReleaseSnapshot = Release.omit({ object: true })
  .extend({ created_by: z.uuid().nullable().meta({ description: "The user who created it, if one did." }) })
  .loose()
  .meta({
    id: "WebhookReleaseObject",
    description:
      "The release as it was when the event happened: every column of /rest/v1/releases (the public API's release fields and more).",
  });

const RoyaltyTotal = CurrencyTotalSchema;

const RoyaltyImportObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("royalty_import"),
    format: z.string().meta({ description: "The report format (backline, streaming-monthly, ...)." }),
    store: z.string().nullable(),
    reporting_period: z.string().nullable().meta({ description: "YYYY-MM, when the import named one." }),
    period_from: DateOnly.nullable(),
    period_to: DateOnly.nullable(),
    lines: Count.meta({ description: "How many of the report's lines credit this account." }),
    totals: z.array(RoyaltyTotal).meta({ description: "This account's sums, per currency." }),
    imported_at: Timestamp.nullable(),
  })
  .meta({
    id: "WebhookRoyaltyImportObject",
    description: "The royalty import that added lines for this account, with this account's sums.",
  });

const TakedownObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("takedown_request"),
    release_id: z.uuid(),
    status: z.literal("completed"),
    reason: z.string().nullable(),
    created_at: Timestamp,
    completed_at: Timestamp,
    stores: z.array(
      z.object({
        store: z.string(),
        status: z.literal("taken_down"),
        sent_at: Timestamp.nullable().meta({ description: "When the takedown reached the store." }),
        taken_down_at: Timestamp.meta({ description: "When the store confirmed the removal." }),
        confirmed_by: z.enum(["store", "sandbox", "operator", "assumed"]).meta({
          description:
            "Who confirmed it: the store, the sandbox store, the operator (recorded by hand from the store's word), or assumed (recorded before stores had to confirm).",
        }),
      }),
    ),
  })
  .nullable()
  .meta({
    id: "WebhookTakedownObject",
    description:
      "The completed takedown request, with each store's confirmation time (null when the release was taken down without a request).",
  });

const RoyaltyVoidObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("royalty_import"),
    status: z.literal("voided"),
    void_reason: z.string(),
    voided_at: Timestamp,
    lines: Count.meta({ description: "How many of the account's lines no longer count." }),
    totals: z.array(RoyaltyTotal).meta({
      description: "Per currency, the account's sums that no longer count (negative: they are reversed).",
    }),
  })
  .meta({
    id: "WebhookRoyaltyVoidObject",
    description:
      "The voided royalty import: per currency, the account's amounts that no longer count (as the import had counted them), now reversed.",
  });

const StatementObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("statement"),
    account_id: z.uuid().meta({ description: "The account that pays." }),
    payee_id: z.uuid(),
    period: z.string().meta({ description: "The accounting period, YYYY-MM." }),
    currency: Currency.meta({ description: "The payee's currency: every figure is in it." }),
    status: z.literal("approved"),
    approved_at: Timestamp,
    opening_balance: Money,
    earnings_total: Money.meta({ description: "The period's net earnings, after fees and recoupment." }),
    payments_total: Money.meta({ description: "Payout requests (negative) and failed payouts (positive)." }),
    adjustments_total: Money,
    closing_balance: Money,
  })
  .meta({
    id: "WebhookStatementObject",
    description:
      "The approved statement's summary; GET /statements/{id} has its lines (also as ?format=csv and ?format=pdf).",
  });

const PayoutObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("payout"),
    payee_id: z.uuid(),
    account_id: z.uuid(),
    status: z.enum(["requested", "approved", "paid", "failed"]),
    currency: Currency,
    amount: Money.meta({ description: "What left the payee's balance." }),
    withholding: Money.meta({ description: "Kept for tax, by the payee's verified tax form." }),
    net_amount: Money.meta({ description: "What the provider sends: amount − withholding." }),
    batch_id: z.uuid().nullable(),
    requested_at: Timestamp,
    settled_at: Timestamp.nullable(),
    failure_reason: z
      .string()
      .nullable()
      .meta({ description: "Why the provider could not pay, when it failed." }),
  })
  .meta({ id: "WebhookPayoutObject", description: "The payout request, as GET /payouts shows it." });

const AddOnOrderObject = z
  .looseObject({
    id: z.uuid(),
    object: z.literal("add_on_order"),
    account_id: z.uuid(),
    release_id: z.uuid(),
    add_on: z.string().meta({ description: "The add-on's code." }),
    name: z.string(),
    effect: z.enum(["unlock_store", "priority_review", "informational"]),
    store_codes: z.array(z.string()),
    billing: z.enum(["per_release", "per_year"]),
    currency: Currency,
    price: Money.meta({ description: "What it was bought at, charged to the account." }),
    active: z.boolean(),
    created_at: Timestamp.meta({ description: "When it was bought." }),
    expires_at: Timestamp.nullable().meta({ description: "per_year: when it runs out." }),
  })
  .meta({ id: "WebhookAddOnOrderObject", description: "The order, as GET /releases/{id}/add-ons lists it." });

function envelope(type: string, object: z.ZodType, id: string, extra: Record<string, z.ZodType> = {}) {
  return z
    .object({
      id: z
        .uuid()
        .meta({ description: "The event id; also the webhook-id header, the same on every attempt." }),
      type: z.literal(type),
      created: Timestamp.meta({ description: "When the event happened." }),
      sequence: Count.min(1).meta({
        description:
          "The event's number among its release's events: 1, 2, 3… in the order they happened, given by the database when the event was written (1 for events that are not a release's). Deliveries are not sent in order unless the endpoint asks for strict ordering: order a release's events by this number.",
      }),
      account_id: z.uuid(),
      data: z.object({ object, ...extra }),
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
    summary:
      "A requested takedown is complete: every store confirmed the removal. data.takedown has each store's times.",
    schema: envelope("release.takedown_completed", ReleaseSnapshot, "ReleaseTakedownCompletedEvent", {
      takedown: TakedownObject,
    }),
  },
  {
    type: "royalties.imported",
    summary: "Royalty lines for the account's catalog were imported.",
    schema: envelope("royalties.imported", RoyaltyImportObject, "RoyaltiesImportedEvent"),
  },
  {
    type: "royalties.voided",
    summary:
      "A royalty import that added lines for the account was voided: its lines no longer count in any total or analytics figure.",
    schema: envelope("royalties.voided", RoyaltyVoidObject, "RoyaltiesVoidedEvent"),
  },
  {
    type: "statement.ready",
    summary:
      "The operator approved a period: a payee's statement from this account is final (needs payouts:read, as every money event).",
    schema: envelope("statement.ready", StatementObject, "StatementReadyEvent"),
  },
  {
    type: "payout.requested",
    summary: "A payee asked to be paid their available balance; it left the balance at once.",
    schema: envelope("payout.requested", PayoutObject, "PayoutRequestedEvent"),
  },
  {
    type: "payout.paid",
    summary: "The operator settled the payout's batch: the provider sent the money.",
    schema: envelope("payout.paid", PayoutObject, "PayoutPaidEvent"),
  },
  {
    type: "payout.failed",
    summary:
      "The provider could not pay: the amount is back in the payee's balance; failure_reason says why.",
    schema: envelope("payout.failed", PayoutObject, "PayoutFailedEvent"),
  },
  {
    type: "transfer.completed",
    summary:
      "A catalogue transfer asked for through POST /transfers ended: completed (see its counts and problems) or failed.",
    schema: envelope("transfer.completed", TransferJob, "TransferCompletedEvent"),
  },
  {
    type: "add_on.purchased",
    summary:
      "An add-on was bought for one of the account's releases (its price is charged to the account as a recoupable expense).",
    schema: envelope("add_on.purchased", AddOnOrderObject, "AddOnPurchasedEvent"),
  },
];
