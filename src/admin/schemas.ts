import { z } from "zod";
import { Count, Timestamp } from "../http/formats.ts";
import { CurrencyTotalSchema } from "../royalties/import.ts";
import { pageOf, Uuid } from "./spec.ts";

/**
 * The shapes /admin/v1 answers, as zod schemas: the OpenAPI document (src/admin/openapi.ts) is made
 * of them, and the tests check answers against that document. docs/operator.md describes them.
 */

const nullable = <T extends z.ZodType>(s: T) => s.nullable();
const Ts = Timestamp;
const DateOnly = z.iso.date().meta({ description: "A date, YYYY-MM-DD." });
const Problem = z
  .object({ param: z.string(), code: z.string(), message: z.string() })
  .meta({ id: "Check", description: "One failing check: the field it is about, a code, a message." });

export const Decision = z
  .object({ id: Uuid, status: z.string(), status_reason: nullable(z.string()) })
  .meta({ id: "Decision" });

// Review.
export const QueuedRelease = z
  .object({
    id: Uuid,
    account_id: Uuid,
    title: z.string(),
    artist_name: nullable(z.string()),
    status: z.enum(["submitted", "in_review"]),
    submitted_at: nullable(Ts),
    priority: z
      .boolean()
      .meta({ description: "A priority_review add-on was bought for it: such releases come first." }),
    problems: z.array(Problem).meta({ description: "What the automatic checks say now." }),
  })
  .meta({ id: "QueuedRelease" });

export const ReviewCounts = z
  .object({
    submitted: Count,
    in_review: Count,
    total: Count.meta({ description: "Every release waiting for review in the tenant." }),
  })
  .meta({ id: "ReviewCounts" });

export const ReviewQueue = pageOf(QueuedRelease, "ReviewQueue", { counts: ReviewCounts });

export const ReviewReason = z
  .object({
    code: z.string(),
    text: z
      .string()
      .meta({ description: "The reason as the account reads it: send it as the rejection's reason." }),
  })
  .meta({ id: "ReviewReason" });
export const ReviewReasons = z.object({ data: z.array(ReviewReason) }).meta({ id: "ReviewReasons" });

const Media = z
  .object({
    asset_id: Uuid,
    status: z.enum(["uploaded", "validating", "valid", "invalid"]),
    content_type: z.string(),
    filename: nullable(z.string()),
    bytes: nullable(Count),
    sha256: nullable(z.string()),
    metadata: z.record(z.string(), z.unknown()).meta({
      description:
        "What inspection measured: width, height, format; or codec, sample_rate, bit_depth, channels, duration.",
    }),
    problems: z.array(z.object({ code: z.string(), message: z.string() })),
    uploaded_at: nullable(Ts),
    validated_at: nullable(Ts),
    url: z.string().meta({
      description:
        "A short-lived signed URL of the file (/storage/v1/object/sign/…): an <img> or <audio> source.",
    }),
    url_expires_at: Ts,
  })
  .meta({ id: "MediaFile", description: "The current file of a slot (the cover, or a track's audio)." });

export const MediaCheck = z
  .object({
    slot: z.enum(["cover", "audio"]),
    track_id: nullable(Uuid),
    status: z.enum(["missing", "uploaded", "validating", "valid", "invalid"]),
    problems: z.array(z.object({ code: z.string(), message: z.string() })),
  })
  .meta({ id: "MediaCheck" });

export const ReleaseTrack = z
  .object({
    id: Uuid,
    title: z.string(),
    version: nullable(z.string()),
    isrc: nullable(z.string()),
    duration: nullable(z.number().int()).meta({ description: "Seconds." }),
    track_number: nullable(z.number().int()),
    disc_number: z.number().int(),
    artist_name: nullable(z.string()),
    explicit: z.boolean(),
    language: nullable(z.string()),
    contributors: z.array(z.unknown()),
    splits: z.array(z.unknown()),
    audio_metadata: z.record(z.string(), z.unknown()),
    audio: nullable(Media),
  })
  .meta({ id: "ReleaseTrack" });

export const Artist = z
  .object({
    id: Uuid,
    name: z.string(),
    bio: nullable(z.string()),
    store_ids: z.record(z.string(), z.unknown()),
    platform_links: z.record(z.string(), z.unknown()),
    localized_names: z.record(z.string(), z.unknown()),
  })
  .meta({ id: "Artist" });

export const CorrectionChange = z
  .object({ field: z.string(), delivered: z.unknown(), current: z.unknown() })
  .meta({ id: "CorrectionChange" });

export const Correction = z
  .object({
    version: z.number().int().meta({ description: "How many corrections the release had." }),
    corrected_at: Ts,
    delivered: nullable(
      z.object({
        delivery_id: Uuid,
        store: z.string(),
        action: z.enum(["insert", "update"]),
        correction_version: nullable(z.number().int()),
        delivered_at: nullable(Ts),
      }),
    ).meta({ description: "The delivery compared against: the latest one that reached a store." }),
    changes: nullable(z.array(CorrectionChange)).meta({
      description:
        "Fields whose value differs from what was delivered; null when that delivery predates recording it.",
    }),
  })
  .meta({ id: "Correction" });

export const HistoryEntry = z
  .object({
    from_status: nullable(z.string()),
    to_status: z.string(),
    reason: nullable(z.string()),
    actor_role: z.string(),
    actor: z.string().meta({
      description:
        "Who made the change, in words: the person's e-mail, `API key <name>`, or `operator` (the operator's backend or the service-role key).",
    }),
    created_at: Ts,
  })
  .meta({ id: "HistoryEntry" });

export const ReleaseDetail = z
  .object({
    id: Uuid,
    account: z.object({ id: Uuid, name: z.string(), kind: z.string(), is_sandbox: z.boolean() }),
    status: z.string(),
    status_reason: nullable(z.string()),
    submitted_at: nullable(Ts),
    created_at: Ts,
    updated_at: Ts,
    title: z.string(),
    version: nullable(z.string()),
    release_type: z.string(),
    artist_id: Uuid,
    artist_name: nullable(z.string()),
    primary_genre: nullable(z.string()),
    secondary_genre: nullable(z.string()),
    genres: z.array(z.string()),
    release_date: nullable(DateOnly),
    original_release_date: nullable(DateOnly),
    upc: nullable(z.string()),
    label_name: nullable(z.string()),
    catalog_number: nullable(z.string()),
    licensed_territories_include: nullable(z.string()),
    territories: z.array(z.string()),
    territories_exclude: z.array(z.string()),
    services: z.array(z.string()),
    copyright: nullable(z.string()),
    copyright_year: nullable(z.number().int()),
    phonographic_copyright: nullable(z.string()),
    phonographic_year: nullable(z.number().int()),
    explicit: z.boolean(),
    language: nullable(z.string()),
    artist: nullable(Artist),
    cover: nullable(Media),
    tracks: z.array(ReleaseTrack),
    checks: z.array(Problem).meta({ description: "The automatic checks now (internal.release_problems)." }),
    media_checks: z.array(MediaCheck),
    correction: nullable(Correction).meta({
      description: "Null unless the release was corrected after delivery.",
    }),
    history: z.array(HistoryEntry).meta({ description: "Its status changes, newest first (the last 50)." }),
  })
  .meta({ id: "ReleaseDetail" });

// Delivery.
export const Delivery = z
  .object({
    id: Uuid,
    store: z.string(),
    action: z.enum(["insert", "update", "takedown"]),
    status: z.string(),
    attempts: Count,
    message: nullable(z.string()).meta({ description: "The store's message (an error's reason)." }),
    store_reference: nullable(z.string()),
    correction_version: nullable(z.number().int()),
    created_at: Ts,
    delivered_at: nullable(Ts),
    live_at: nullable(Ts),
    taken_down_at: nullable(Ts),
    confirmed_by: nullable(z.string()),
    confirmed_via: nullable(z.string()),
    confirmation_note: nullable(z.string()),
    updated_at: Ts,
  })
  .meta({ id: "Delivery" });

export const DeliveryList = z.object({ data: z.array(Delivery) }).meta({ id: "DeliveryList" });

const ReleaseRef = z
  .object({
    id: Uuid,
    account_id: Uuid,
    title: z.string(),
    artist_name: nullable(z.string()),
    status: z.string(),
  })
  .meta({ id: "ReleaseRef" });

export const DeskDelivery = Delivery.extend({ release: ReleaseRef }).meta({ id: "DeskDelivery" });
export const DeskDeliveries = pageOf(DeskDelivery, "DeskDeliveries");

export const JobSummary = z
  .object({
    id: z.string().meta({ description: "The job's id (a number, as a string)." }),
    kind: z.string(),
    status: z.enum(["queued", "running", "succeeded", "dead"]),
    attempts: Count,
    max_attempts: Count,
    run_at: Ts,
    last_error: nullable(z.string()),
    created_at: Ts,
    updated_at: Ts,
    finished_at: nullable(Ts),
  })
  .meta({ id: "JobSummary" });

export const DeliveryAcknowledgement = z
  .object({
    file: z.string().meta({ description: "The acknowledgement file's name in the store's answer folder." }),
    outcome: z.enum(["applied", "waiting", "expired", "invalid", "unreadable"]).meta({
      description:
        "applied: its statuses were applied; waiting: it names this delivery before the delivery was recorded as sent, and is read again at each poll; expired: still unmatched when the store's unmatched_after_s ran out (moved to unmatched/); invalid: not valid against DDEX's ERN choreography 1.8 schema, kept aside and unread; unreadable: of no form Backline reads, kept aside (docs/ddex.md).",
    }),
    error: z.string().nullable().meta({ description: "Why the file was kept aside; null when it was read." }),
    errors: z.array(z.string()).meta({ description: "Each schema error of an invalid file, with its line." }),
    tries: Count.meta({ description: "How many polls read it." }),
    received_at: Ts,
    last_tried_at: Ts,
  })
  .meta({ id: "DeliveryAcknowledgement" });

export const DeliveryDetail = DeskDelivery.extend({
  acknowledgements: z.array(DeliveryAcknowledgement).meta({
    description:
      "The store's acknowledgement files about this delivery, newest first, the set-aside ones (invalid, unreadable) with their validation error.",
  }),
  history: z.array(Delivery).meta({
    description: "Every delivery record of the same release and store, newest first (this one included).",
  }),
  jobs: z
    .array(JobSummary)
    .meta({ description: "The jobs that sent or confirmed this record, newest first." }),
}).meta({ id: "DeliveryDetail" });

export const Retried = z.object({ release_id: Uuid, retried: Count }).meta({ id: "Retried" });

// Takedowns.
export const Takedown = z
  .object({
    id: Uuid,
    release: ReleaseRef,
    reason: nullable(z.string()),
    status: z.enum(["pending", "processing", "completed", "rejected", "cancelled"]),
    status_reason: nullable(z.string()),
    stores: z.array(
      z.object({
        store: z.string(),
        status: z.string(),
        sent_at: nullable(Ts),
        taken_down_at: nullable(Ts),
        confirmed_by: nullable(z.string()),
      }),
    ),
    created_at: Ts,
    updated_at: Ts,
    completed_at: nullable(Ts),
  })
  .meta({ id: "Takedown" });
export const Takedowns = pageOf(Takedown, "Takedowns");

// OAC requests.
export const OacRequest = z
  .object({
    id: Uuid,
    artist_id: Uuid,
    artist_name: z.string(),
    store: z.string(),
    channel_url: nullable(z.string()),
    status: z.string(),
    created_at: Ts,
    status_reason: nullable(z.string()),
    account_id: Uuid,
    completed_at: nullable(Ts),
  })
  .meta({ id: "OacRequest" });
export const OacRequests = pageOf(OacRequest, "OacRequests");

// Jobs.
export const Job = JobSummary.extend({
  payload: z.record(z.string(), z.unknown()),
}).meta({ id: "Job" });
export const Jobs = pageOf(Job, "Jobs");

// Royalty imports.
export const ImportProgress = z
  .object({
    phase: z.enum(["receiving", "importing", "done", "failed"]),
    total_bytes: nullable(Count).meta({
      description: "The upload's Content-Length, when it gave one.",
    }),
    bytes_received: Count,
    bytes_read: Count.meta({ description: "Of the received file, read by the import so far." }),
    lines: Count.meta({ description: "Lines read so far." }),
    updated_at: Ts,
    import_id: nullable(Uuid).meta({
      description:
        "When done: the import made (for a duplicate, the import that already counted the report).",
    }),
    error: nullable(z.string()).meta({ description: "When failed: why." }),
  })
  .meta({ id: "ImportProgress" });

const ImportTotal = CurrencyTotalSchema;

const Unmatched = z
  .object({
    isrc: nullable(z.string()),
    upc: nullable(z.string()),
    reason: z.enum(["no_match", "ambiguous"]),
    lines: Count,
    units: Count,
  })
  .meta({ id: "UnmatchedIdentifier" });

export const RoyaltyImport = z
  .object({
    id: Uuid,
    object: z.literal("royalty_import"),
    tenant_id: Uuid,
    format: z.string(),
    file_name: nullable(z.string()),
    file_sha256: nullable(z.string()),
    content_sha256: nullable(z.string()),
    reporting_period: nullable(z.string()),
    store: nullable(z.string()),
    status: z.enum(["running", "completed", "duplicate", "rejected", "voided", "failed"]).meta({
      description: "running while the import works (progress says how far), then its outcome.",
    }),
    lines_total: Count,
    lines_matched: Count,
    lines_unmatched: Count,
    lines_malformed: Count,
    errors: z.array(z.object({ line: z.number().int(), message: z.string() })),
    warnings: z
      .array(z.object({ line: nullable(z.number().int()), message: z.string(), lines: Count }))
      .meta({
        description:
          'What the import read past without refusing the report, once per message: the line first seen on (null: the file as a whole) and on how many lines (docs/royalties.md, "Warnings").',
      }),
    totals: z.array(ImportTotal).meta({ description: "Per currency: lines, units, gross, fees, net." }),
    unmatched: z.array(Unmatched).meta({
      description:
        "Identifiers that matched no release (or more than one account's), ambiguous first, then most lines first; at most 100.",
    }),
    period_from: nullable(DateOnly).meta({ description: "The first day of sale or use the report covers." }),
    period_to: nullable(DateOnly).meta({ description: "The last day of sale or use the report covers." }),
    account_ids: z.array(Uuid),
    source: z.string(),
    started_at: Ts,
    completed_at: nullable(Ts),
    voided_at: nullable(Ts),
    void_reason: nullable(z.string()),
    voided_via: nullable(z.string()),
    progress: nullable(ImportProgress).optional(),
  })
  .meta({ id: "RoyaltyImport" });
export const RoyaltyImports = pageOf(RoyaltyImport, "RoyaltyImports");
export const ImportResult = z
  .object({
    status: z.enum(["completed", "duplicate", "rejected"]),
    reason: z.enum(["same_file", "same_lines"]).optional(),
    import: RoyaltyImport,
    seconds: z.number().optional(),
  })
  .meta({ id: "ImportResult" });

// Accounts.
export const AccountSummary = z
  .object({
    id: Uuid,
    name: z.string(),
    kind: z.enum(["label", "artist"]),
    is_sandbox: z.boolean(),
    created_at: Ts,
    updated_at: Ts,
  })
  .meta({ id: "AccountSummary" });
export const Accounts = pageOf(AccountSummary, "Accounts");

export const Member = z
  .object({
    user_id: Uuid,
    email: nullable(z.string()),
    role: z.enum(["owner", "admin", "member", "viewer"]),
    created_at: Ts,
    last_sign_in_at: nullable(Ts),
  })
  .meta({ id: "Member" });

export const Invitation = z
  .object({
    id: Uuid,
    email: z.string(),
    role: z.enum(["owner", "admin", "member", "viewer"]),
    created_at: Ts,
    accepted_at: nullable(Ts),
  })
  .meta({ id: "Invitation" });

export const AccountDetail = AccountSummary.extend({
  members: z.array(Member),
  invitations: z.array(Invitation).meta({ description: "Invitations not accepted yet, newest first." }),
  counts: z.object({
    releases: Count,
    artists: Count,
    api_keys: Count,
  }),
}).meta({ id: "AccountDetail" });

export const ApiKey = z
  .object({
    id: Uuid,
    name: z.string(),
    mode: z.enum(["live", "test"]),
    prefix: z
      .string()
      .meta({ description: "The visible start of the key; the secret itself is never shown." }),
    scopes: z.array(z.string()),
    account_role: z.string(),
    status: z.enum(["pending_reveal", "active", "frozen", "revoked"]),
    expires_at: nullable(Ts),
    last_used_at: nullable(Ts),
    created_at: Ts,
    revoked_at: nullable(Ts),
  })
  .meta({ id: "ApiKey" });
export const ApiKeys = pageOf(ApiKey, "ApiKeys");

// Stores.
export const Store = z
  .object({
    code: z.string(),
    name: z.string(),
    kind: z.enum(["dsp", "download", "ugc"]),
    enabled: z.boolean(),
    offers_oac: z.boolean(),
    sort: z.number().int(),
    adapter: nullable(z.string()).meta({ description: "settings.adapter: sandbox, ddex, or none." }),
    updated_at: Ts,
    settings: z.record(z.string(), z.unknown()).optional().meta({
      description: "Platform staff only: the adapter's settings, without credentials.",
    }),
    credentials: z.array(z.string()).optional().meta({
      description: "Platform staff only: where credentials are set (paths), never their values.",
    }),
  })
  .meta({ id: "Store" });
export const Stores = z.object({ data: z.array(Store) }).meta({ id: "Stores" });

// Settings.
export const Settings = z
  .object({
    tenant_id: Uuid,
    release_lead_days: z.number().int(),
    auto_review: z.boolean(),
    require_media: z.boolean(),
    branding: z.object({
      display_name: nullable(z.string()),
      logo_url: nullable(z.string()),
      primary_color: nullable(z.string()),
      support_email: nullable(z.string()),
      custom_css: nullable(z.string()),
    }),
    updated_at: nullable(Ts),
  })
  .meta({ id: "Settings" });

// Who is calling (GET /me, src/admin/me.ts).
export const Me = z
  .object({
    user: nullable(z.object({ id: Uuid, email: nullable(z.string()) })).meta({
      description: "The signed-in user; null for a tenant's service-role key.",
    }),
    tenant_id: Uuid.meta({ description: "The caller's own tenant (the token's or the key's)." }),
    platform_role: nullable(z.enum(["reviewer", "operator", "admin"])),
    staff: z.array(
      z.object({
        tenant_id: Uuid,
        tenant_slug: z.string(),
        tenant_name: z.string(),
        role: z.enum(["reviewer", "operator", "admin"]),
      }),
    ),
  })
  .meta({ id: "Me" });
