import { z } from "zod";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { timestamp, timestampOf } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import { deliveriesOf, reportDelivery, retryDeliveries } from "../pipeline/delivery.ts";
import { OperatorError } from "../pipeline/errors.ts";
import { decideOac } from "../pipeline/oac.ts";
import { decideReview } from "../pipeline/review.ts";
import { checkStore } from "../pipeline/store-check.ts";
import { genreMapJson } from "../pipeline/stores.ts";
import { issueKey } from "../public-api/keys/service.ts";
import { credentialPaths, splitCredentials } from "../secrets/at-rest.ts";
import type { TokenSigner } from "../storage/tokens.ts";
import { LOGO_TYPES } from "../tenancy/brand-assets.ts";
import { addMember, MEMBERSHIP_ROLES, MembershipError } from "../tenancy/memberships.ts";
import { ACCOUNT_KINDS, createAccount } from "../tenancy/tenants.ts";
import { Bodies } from "./input.ts";
import { decision, delivery } from "./output.ts";
import {
  accountDetail,
  apiKeysOf,
  deliveryDetail,
  listAccounts,
  listDeliveries,
  listJobs,
  listOac,
  listTakedowns,
  releaseDetail,
  retryJob,
  reviewPage,
} from "./queries.ts";
import * as S from "./schemas.ts";
import { type AnyAdminRoute, adminRoute, IdParams, pageQuery, Uuid } from "./spec.ts";

/**
 * The routes of /admin/v1 (docs/operator.md, "Admin API"): the review queue and decisions, the
 * release review page, deliveries, takedowns, OAC requests, jobs, accounts, stores and settings
 * (the royalty imports are in src/royalties/admin.ts). Each declares the staff role it needs
 * (CONSOLE.md): reviewer < operator < admin, platform for the installation's stores.
 */
export interface DeskServices {
  db: Db;
  /** Signs the short-lived download URLs of covers and audio (/storage/v1/object/sign/…). */
  signer: TokenSigner;
  /** PUBLIC_URL: where those URLs point. */
  publicUrl: string;
  /** Whether the request is platform staff with the admin role (stores). */
  isPlatformAdmin: (request: import("fastify").FastifyRequest) => boolean;
  /** Sends the invitations of members added to an account. */
  mailer?: import("../mail/mailer.ts").Mailer | undefined;
}

const STORE_CODE = z
  .string()
  .regex(/^[a-z0-9]+(_[a-z0-9]+)*$/)
  .max(64)
  .meta({ description: "A store's code.", example: "spotify" });

const StoreCheck = z
  .object({
    ok: z.boolean().meta({ description: "Whether the store's destination answered as it should." }),
    message: z.string().meta({
      description:
        "What happened: where it connected, or the error (refused, host key mismatch, no such bucket, …).",
    }),
  })
  .meta({ id: "StoreCheck" });

const NewAccount = z
  .strictObject({
    name: z.string().trim().min(1).max(200).meta({ description: "The label's or artist's name." }),
    kind: z.enum(ACCOUNT_KINDS).default("label").meta({ description: "label (the default) or artist." }),
  })
  .meta({ id: "NewAccount" });

const NewApiKey = z
  .strictObject({
    name: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .meta({ description: "What the key is for, shown in lists (its secret never is)." }),
    mode: z.enum(["live", "test"]).default("live").meta({
      description: "live (the default), or test: a key of the account's sandbox twin, made on first use.",
    }),
  })
  .meta({ id: "NewApiKey" });

const NewMember = z
  .strictObject({
    email: z.email().max(320).meta({ description: "The person's e-mail address." }),
    role: z
      .enum(MEMBERSHIP_ROLES)
      .default("member")
      .meta({ description: "owner, admin, member (default) or viewer." }),
  })
  .meta({ id: "NewMember" });

const MemberAdded = z
  .object({
    status: z.enum(["added", "invited"]).meta({
      description:
        "added: a user of the tenant with this proven address is a member now; invited: an invite link was mailed.",
    }),
    account_id: Uuid,
    role: z.enum(MEMBERSHIP_ROLES),
    user_id: Uuid.optional(),
    invitation_id: Uuid.optional(),
    email: z.string().optional(),
  })
  .meta({ id: "MemberAdded" });

const IssuedKey = z
  .object({
    key: S.ApiKey,
    account_id: Uuid.meta({ description: "The account the key acts as: the sandbox twin's for a test key." }),
    secret: z
      .string()
      .meta({ description: "The key itself: shown this once, never again (only its hash is kept)." }),
  })
  .meta({ id: "IssuedApiKey" });

const JobId = z
  .string()
  .regex(/^[0-9]{1,18}$/)
  .meta({ description: "A job's id (a number).", example: "4711" });

/** The common rejection reasons the review page offers (the reviewer may write another). */
export const REVIEW_REASONS = [
  {
    code: "cover_text",
    text: "The cover art shows text that is not the artist name or the title (a URL, a social handle, a price).",
  },
  { code: "cover_quality", text: "The cover art is blurry, pixelated, stretched or has borders." },
  { code: "cover_mismatch", text: "The artist name or title on the cover does not match the metadata." },
  {
    code: "audio_quality",
    text: "The audio is clipped, distorted, silent in parts or of low quality (transcoded from a lossy file).",
  },
  { code: "audio_mismatch", text: "The audio does not match the track titles or their order." },
  {
    code: "metadata_style",
    text: "Titles or names do not follow the stores' style guide (capitalisation, extra information in the title).",
  },
  {
    code: "artist_impersonation",
    text: "The artist name or the featured artists suggest an artist who is not on the recording.",
  },
  { code: "genre", text: "The genre does not fit the music." },
  { code: "explicit", text: "The release has explicit lyrics but is not marked explicit (or the reverse)." },
  {
    code: "rights",
    text: "We could not confirm that you hold the rights to this recording (samples, covers, public domain).",
  },
  { code: "duplicate", text: "This release duplicates one that is already in the stores." },
  { code: "release_date", text: "The release date cannot be met; choose a later date." },
] as const;

const NoBody = Bodies.empty.meta({ id: "Empty", description: "Nothing (the body may be left out, or {})." });

const DeliveryStatus = z.enum([
  "pending",
  "in_progress",
  "delivered",
  "live",
  "error",
  "takedown_sent",
  "taken_down",
]);

const SettingsPatch = z
  .strictObject({
    release_lead_days: z
      .number()
      .int()
      .min(0)
      .max(365)
      .optional()
      .meta({ description: "Days between submission and the earliest release date accepted (0–365)." }),
    auto_review: z
      .boolean()
      .optional()
      .meta({ description: "Approve releases that pass the checks without a reviewer." }),
    require_media: z
      .boolean()
      .optional()
      .meta({ description: "Whether submitting needs a valid cover and audio." }),
    branding: z
      .strictObject({
        display_name: z.string().trim().min(1).max(200).nullable().optional(),
        logo_url: z
          .url({ protocol: /^https?$/ })
          .max(2000)
          .nullable()
          .optional()
          .meta({ description: "An http(s) URL of the logo." }),
        primary_color: z
          .string()
          .regex(/^#[0-9a-fA-F]{6}$/, "a colour as #rrggbb")
          .nullable()
          .optional(),
        support_email: z.email().max(320).nullable().optional(),
        custom_css: z
          .string()
          .refine((css) => Buffer.byteLength(css) <= 65536, "at most 64 KiB")
          .nullable()
          .optional()
          .meta({
            description:
              'A style sheet the portal loads after its own (docs/portal.md, "Custom CSS"), at most 64 KiB; null or "" removes it.',
          }),
      })
      .optional()
      .meta({ description: "Fields left out stay as they are; null clears one." }),
  })
  .meta({ id: "SettingsPatch" });

const StorePatch = z
  .strictObject({
    name: z.string().trim().min(1).max(200).optional(),
    enabled: z.boolean().optional(),
    offers_oac: z.boolean().optional(),
    sort: z.number().int().min(-1000000).max(1000000).optional(),
    settings: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({
        description:
          "The adapter's settings ({adapter: sandbox|ddex, sandbox: {...}, ddex: {...}}), replacing the stored ones. " +
          "Credentials (keys naming a secret, password, passphrase, private key or token) are write-only: sealed at rest, " +
          "never answered; one left out keeps its stored value, one set to null is removed.",
      }),
  })
  .meta({ id: "StorePatch" });

export function deskRoutes(services: DeskServices): AnyAdminRoute[] {
  const { db } = services;
  return [
    // Who is calling: served by src/admin/me.ts (h-staff), documented here.
    adminRoute({
      method: "GET",
      path: "/me",
      operationId: "getMe",
      summary: "Who is calling, and where they are staff",
      description:
        "For the console's tenant chooser: the user, their own tenant, their platform role and every tenant they are staff of. " +
        "A user who is staff of no tenant is 403 not_staff.",
      tag: "Staff",
      staffRole: "signed_in",
      response: { status: 200, description: "The caller.", schema: S.Me },
      external: true,
    }),
    // Review.
    adminRoute({
      method: "GET",
      path: "/reviews",
      operationId: "listReviews",
      summary: "The review queue",
      description:
        "Releases waiting for review (submitted, in_review), oldest first, with what the checks say now and the counts.",
      tag: "Review",
      staffRole: "reviewer",
      query: pageQuery(Uuid, {}),
      response: { status: 200, description: "A page of the queue.", schema: S.ReviewQueue },
      handler: async ({ tenantId, query }) => reviewPage(db, tenantId, query),
    }),
    adminRoute({
      method: "GET",
      path: "/review-reasons",
      operationId: "listReviewReasons",
      summary: "Common rejection reasons",
      tag: "Review",
      staffRole: "reviewer",
      response: {
        status: 200,
        description: "The reasons, in the order to offer them.",
        schema: S.ReviewReasons,
      },
      handler: async () => ({ data: REVIEW_REASONS }),
    }),
    adminRoute({
      method: "GET",
      path: "/releases/{id}",
      operationId: "getRelease",
      summary: "A release for review",
      description:
        "Every metadata field, the artist, the tracks with their audio, the cover, the automatic and media checks, " +
        "for a corrected release the difference against what was delivered, and short-lived signed URLs of the cover and each track's audio.",
      tag: "Review",
      staffRole: "reviewer",
      params: IdParams,
      response: { status: 200, description: "The release.", schema: S.ReleaseDetail },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        const r = await releaseDetail(services, tenantId, params.id);
        if (!r) throw new HttpError(404, "not_found", `no release ${params.id}`, "id");
        return r;
      },
    }),
    adminRoute({
      method: "POST",
      path: "/releases/{id}/approve",
      operationId: "approveRelease",
      summary: "Approve a release",
      description: "Re-runs the checks; the release goes to delivery.",
      tag: "Review",
      staffRole: "reviewer",
      params: IdParams,
      body: NoBody,
      bodyOptional: true,
      response: { status: 200, description: "The decision.", schema: S.Decision },
      errors: [404, 409, 422],
      handler: async ({ tenantId, params }) =>
        decision(await decideReview(db, params.id, { approve: true }, { tenantId })),
    }),
    adminRoute({
      method: "POST",
      path: "/releases/{id}/reject",
      operationId: "rejectRelease",
      summary: "Reject a release",
      description: "The account sees the reason (one of GET /review-reasons, or written).",
      tag: "Review",
      staffRole: "reviewer",
      reasonParam: "reason",
      params: IdParams,
      body: Bodies.reject.meta({ id: "Rejection" }),
      response: { status: 200, description: "The decision.", schema: S.Decision },
      errors: [404, 409],
      handler: async ({ tenantId, params, body }) =>
        decision(await decideReview(db, params.id, { approve: false, reason: body.reason }, { tenantId })),
    }),

    // Delivery.
    adminRoute({
      method: "GET",
      path: "/deliveries",
      operationId: "listDeliveries",
      summary: "Deliveries across the tenant",
      description:
        "Every delivery record, those in error first, then newest first; filter by status, store, release or action.",
      tag: "Deliveries",
      staffRole: "operator",
      query: pageQuery(Uuid, {
        status: DeliveryStatus.optional().meta({ description: "Only records in this status." }),
        store: STORE_CODE.optional().meta({ description: "Only records of this store." }),
        release_id: Uuid.optional().meta({ description: "Only records of this release." }),
        action: z
          .enum(["insert", "update", "takedown"])
          .optional()
          .meta({ description: "Only records of this action." }),
      }),
      response: { status: 200, description: "A page of deliveries.", schema: S.DeskDeliveries },
      handler: async ({ tenantId, query }) => listDeliveries(db, tenantId, query),
    }),
    adminRoute({
      method: "GET",
      path: "/deliveries/{id}",
      operationId: "getDelivery",
      summary: "A delivery with its history",
      description:
        "The record, its release, every record of the same release and store (the history, with the store's messages) and its jobs.",
      tag: "Deliveries",
      staffRole: "operator",
      params: IdParams,
      response: { status: 200, description: "The delivery.", schema: S.DeliveryDetail },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        const d = await deliveryDetail(db, tenantId, params.id);
        if (!d) throw new HttpError(404, "not_found", `no delivery ${params.id}`, "id");
        return d;
      },
    }),
    adminRoute({
      method: "GET",
      path: "/releases/{id}/deliveries",
      operationId: "listReleaseDeliveries",
      summary: "A release's deliveries",
      description: "Every delivery record of the release, newest first.",
      tag: "Deliveries",
      staffRole: "operator",
      params: IdParams,
      response: { status: 200, description: "The records.", schema: S.DeliveryList },
      errors: [404],
      handler: async ({ tenantId, params }) => ({
        data: (await deliveriesOf(db, params.id, { tenantId })).map(delivery),
      }),
    }),
    adminRoute({
      method: "POST",
      path: "/releases/{id}/deliveries/retry",
      operationId: "retryReleaseDeliveries",
      summary: "Retry a release's failed deliveries",
      tag: "Deliveries",
      staffRole: "operator",
      params: IdParams,
      body: NoBody,
      bodyOptional: true,
      response: { status: 200, description: "How many were queued again.", schema: S.Retried },
      errors: [404],
      handler: async ({ tenantId, params }) => ({
        release_id: params.id,
        retried: await retryDeliveries(db, params.id, { tenantId }),
      }),
    }),
    adminRoute({
      method: "POST",
      path: "/deliveries/{id}/report",
      operationId: "reportDelivery",
      summary: "Record a store's report",
      description:
        "live, error (with the store's message) or taken_down (a takedown the store confirmed: who and how).",
      tag: "Deliveries",
      staffRole: "operator",
      reasonParam: "message",
      params: IdParams,
      body: Bodies.report.meta({ id: "StoreReport" }),
      response: { status: 200, description: "The delivery record.", schema: S.Delivery },
      errors: [404, 409],
      handler: async ({ tenantId, params, body }) =>
        delivery(await reportDelivery(db, params.id, body, { tenantId, via: "admin_api" })),
    }),

    // Takedowns.
    adminRoute({
      method: "GET",
      path: "/takedowns",
      operationId: "listTakedowns",
      summary: "Takedown requests",
      description: "Newest first, with each store's state.",
      tag: "Takedowns",
      staffRole: "operator",
      query: pageQuery(Uuid, {
        status: z
          .enum(["pending", "processing", "completed", "rejected", "cancelled"])
          .optional()
          .meta({ description: "Only requests in this status." }),
      }),
      response: { status: 200, description: "A page of requests.", schema: S.Takedowns },
      handler: async ({ tenantId, query }) => listTakedowns(db, tenantId, query),
    }),

    // OAC requests.
    adminRoute({
      method: "GET",
      path: "/oac-requests",
      operationId: "listOacRequests",
      summary: "Official Artist Channel requests",
      description:
        "Without status: the requests waiting for a decision, oldest first. With status: the requests in it, newest first.",
      tag: "OAC requests",
      staffRole: "reviewer",
      query: pageQuery(Uuid, {
        status: z
          .enum(["requested", "processing", "approved", "rejected", "cancelled"])
          .optional()
          .meta({ description: "Only requests in this status (decided ones: approved, rejected)." }),
      }),
      response: { status: 200, description: "A page of requests.", schema: S.OacRequests },
      handler: async ({ tenantId, query }) => listOac(db, tenantId, query),
    }),
    adminRoute({
      method: "POST",
      path: "/oac-requests/{id}/approve",
      operationId: "approveOacRequest",
      summary: "Approve an OAC request",
      tag: "OAC requests",
      staffRole: "reviewer",
      params: IdParams,
      body: Bodies.oacApprove.meta({ id: "OacApproval" }),
      bodyOptional: true,
      response: { status: 200, description: "The decision.", schema: S.Decision },
      errors: [404, 409],
      handler: async ({ tenantId, params, body }) =>
        decision(
          await decideOac(
            db,
            params.id,
            { approve: true, ...(body.note !== undefined ? { note: body.note } : {}) },
            { tenantId },
          ),
        ),
    }),
    adminRoute({
      method: "POST",
      path: "/oac-requests/{id}/reject",
      operationId: "rejectOacRequest",
      summary: "Reject an OAC request",
      tag: "OAC requests",
      staffRole: "reviewer",
      reasonParam: "reason",
      params: IdParams,
      body: Bodies.reject.meta({ id: "Rejection" }),
      response: { status: 200, description: "The decision.", schema: S.Decision },
      errors: [404, 409],
      handler: async ({ tenantId, params, body }) =>
        decision(await decideOac(db, params.id, { approve: false, reason: body.reason }, { tenantId })),
    }),

    // Jobs.
    adminRoute({
      method: "GET",
      path: "/jobs",
      operationId: "listJobs",
      summary: "The tenant's jobs",
      description:
        "Jobs working for the tenant's releases, deliveries, takedowns, OAC requests and uploads, newest first, by state (default dead).",
      tag: "Jobs",
      staffRole: "operator",
      query: pageQuery(JobId, {
        state: z
          .enum(["dead", "queued", "running", "succeeded"])
          .default("dead")
          .meta({ description: "The jobs in this state (default dead)." }),
        kind: z
          .string()
          .regex(/^[a-z_]+(\.[a-z_]+)*$/)
          .max(100)
          .optional()
          .meta({ description: "Only jobs of this kind (e.g. delivery.send)." }),
      }),
      response: { status: 200, description: "A page of jobs.", schema: S.Jobs },
      handler: async ({ tenantId, query }) => listJobs(db, tenantId, query),
    }),
    adminRoute({
      method: "POST",
      path: "/jobs/{id}/retry",
      operationId: "retryJob",
      summary: "Retry a dead job",
      description:
        "Queued again now with fresh attempts. 409 invalid_state for a job that is not dead, or whose work another job already does.",
      tag: "Jobs",
      staffRole: "operator",
      params: z.object({ id: JobId }),
      body: NoBody,
      bodyOptional: true,
      response: { status: 200, description: "The job, queued.", schema: S.Job },
      errors: [404, 409],
      handler: async ({ tenantId, params }) => retryJob(db, tenantId, params.id),
    }),

    // Accounts.
    adminRoute({
      method: "GET",
      path: "/accounts",
      operationId: "listAccounts",
      summary: "The tenant's accounts",
      description: "Newest first.",
      tag: "Accounts",
      staffRole: "admin",
      query: pageQuery(Uuid, {
        kind: z.enum(["label", "artist"]).optional().meta({ description: "Only accounts of this kind." }),
      }),
      response: { status: 200, description: "A page of accounts.", schema: S.Accounts },
      handler: async ({ tenantId, query }) => listAccounts(db, tenantId, query),
    }),
    adminRoute({
      method: "GET",
      path: "/accounts/{id}",
      operationId: "getAccount",
      summary: "An account with its members and invitations",
      tag: "Accounts",
      staffRole: "admin",
      params: IdParams,
      response: { status: 200, description: "The account.", schema: S.AccountDetail },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        const a = await accountDetail(db, tenantId, params.id);
        if (!a) throw new HttpError(404, "not_found", `no account ${params.id}`, "id");
        return a;
      },
    }),
    adminRoute({
      method: "POST",
      path: "/accounts",
      operationId: "createAccount",
      summary: "Create an account",
      description:
        "A label or an artist's company of the tenant, as `backline accounts create` makes one; its members are invited and " +
        "its API keys issued afterwards.",
      tag: "Accounts",
      staffRole: "admin",
      body: NewAccount,
      response: { status: 201, description: "The account.", schema: S.AccountDetail },
      handler: async ({ tenantId, body }) => {
        const account = await createAccount(db, { tenantId, name: body.name, kind: body.kind });
        return (await accountDetail(db, tenantId, account.id)) as NonNullable<
          Awaited<ReturnType<typeof accountDetail>>
        >;
      },
    }),
    adminRoute({
      method: "POST",
      path: "/accounts/{id}/members",
      operationId: "addAccountMember",
      summary: "Add a member to an account, or invite them",
      description:
        "As `backline accounts add-member` does: a user of the tenant whose address is proven becomes a member at once; " +
        "any other address gets an invitation mailed in the tenant's name (accepting it makes them a member). Adding again " +
        "changes the role.",
      tag: "Accounts",
      staffRole: "admin",
      params: IdParams,
      body: NewMember,
      response: { status: 200, description: "Added, or invited.", schema: MemberAdded },
      errors: [404, 422, 503],
      handler: async ({ tenantId, params, body }) => {
        const found = await db.asService(
          async (tx) =>
            (
              await tx.query("select 1 from internal.accounts where id = $1 and tenant_id = $2", [
                params.id,
                tenantId,
              ])
            ).rows.length > 0,
          { readOnly: true },
        );
        if (!found) throw new HttpError(404, "not_found", `no account ${params.id}`, "id");
        if (!services.mailer)
          throw new HttpError(503, "unavailable", "This server sends no mail, so it cannot invite anyone.");
        try {
          return await addMember(
            db,
            { accountId: params.id, email: body.email, role: body.role },
            { mailer: services.mailer, publicUrl: services.publicUrl },
          );
        } catch (error) {
          if (error instanceof MembershipError)
            throw new HttpError(422, "invalid_request", error.message, "email");
          throw error;
        }
      },
    }),
    adminRoute({
      method: "POST",
      path: "/accounts/{id}/api-keys",
      operationId: "issueAccountApiKey",
      summary: "Issue an API key for an account",
      description:
        "An active key at once, as `backline keys issue` issues one, with the default scopes. Its secret is in this answer " +
        "only: Backline keeps its hash.",
      tag: "Accounts",
      staffRole: "admin",
      params: IdParams,
      body: NewApiKey,
      response: { status: 201, description: "The key, and its secret this once.", schema: IssuedKey },
      errors: [404],
      handler: async ({ tenantId, params, body }) => {
        const found = await db.asService(
          async (tx) =>
            (
              await tx.query<{ is_sandbox: boolean }>(
                "select is_sandbox from internal.accounts where id = $1 and tenant_id = $2",
                [params.id, tenantId],
              )
            ).rows[0],
          { readOnly: true },
        );
        if (!found) throw new HttpError(404, "not_found", `no account ${params.id}`, "id");
        if (found.is_sandbox && body.mode === "live")
          throw new HttpError(422, "invalid_request", "a sandbox account has test keys only", "mode");
        const { row, secret } = await issueKey(db, {
          accountId: params.id,
          mode: body.mode,
          name: body.name,
        });
        // As the key list shows it (src/admin/queries.ts): never the hash.
        const key = await db.asService(
          async (tx) =>
            (
              await tx.query<Record<string, unknown>>(
                `select id, name, mode, prefix, scopes, account_role, status, expires_at, last_used_at, created_at, revoked_at
                 from internal.api_keys where id = $1`,
                [row.id],
              )
            ).rows[0] as Record<string, unknown>,
          { readOnly: true },
        );
        const at = (v: unknown) => timestamp(v as Date | null);
        return {
          key: {
            ...key,
            expires_at: at(key.expires_at),
            last_used_at: at(key.last_used_at),
            created_at: at(key.created_at),
            revoked_at: at(key.revoked_at),
          },
          account_id: row.account_id,
          secret,
        };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/accounts/{id}/api-keys",
      operationId: "listAccountApiKeys",
      summary: "An account's API keys",
      description: "Newest first; never their secrets (only the visible prefix).",
      tag: "Accounts",
      staffRole: "admin",
      params: IdParams,
      query: pageQuery(Uuid, {}),
      response: { status: 200, description: "A page of keys.", schema: S.ApiKeys },
      errors: [404],
      handler: async ({ tenantId, params, query }) => {
        const keys = await apiKeysOf(db, tenantId, params.id, query);
        if (!keys) throw new HttpError(404, "not_found", `no account ${params.id}`, "id");
        return keys;
      },
    }),

    // Stores.
    adminRoute({
      method: "GET",
      path: "/stores",
      operationId: "listStores",
      summary: "The installation's stores",
      description:
        "For platform staff with their settings (credentials as paths only); for a tenant, read-only, without settings.",
      tag: "Stores",
      staffRole: "operator",
      response: { status: 200, description: "Every store, in display order.", schema: S.Stores },
      handler: async ({ request }) => {
        const full = services.isPlatformAdmin(request);
        const rows = await db.asService((tx) => storeRows(tx), { readOnly: true });
        return { data: rows.map((r) => storeOut(services, r, full)) };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/stores/{code}",
      operationId: "getStore",
      summary: "A store",
      tag: "Stores",
      staffRole: "operator",
      params: z.object({ code: STORE_CODE }),
      response: { status: 200, description: "The store.", schema: S.Store },
      errors: [404],
      handler: async ({ request, params }) => {
        const row = (await db.asService((tx) => storeRows(tx, params.code), { readOnly: true }))[0];
        if (!row) throw new HttpError(404, "not_found", `no store ${params.code}`, "code");
        return storeOut(services, row, services.isPlatformAdmin(request));
      },
    }),
    adminRoute({
      method: "PATCH",
      path: "/stores/{code}",
      operationId: "updateStore",
      summary: "Change a store (platform staff)",
      description:
        "Name, enabled, OAC offer, order and the adapter's settings. Credentials are write-only: sealed with the master key, answered as paths only.",
      tag: "Stores",
      staffRole: "platform",
      params: z.object({ code: STORE_CODE }),
      body: StorePatch,
      response: { status: 200, description: "The store as it is now.", schema: S.Store },
      errors: [404, 422],
      handler: async ({ request, params, body }) => {
        if (!services.isPlatformAdmin(request)) {
          throw new HttpError(
            403,
            "insufficient_role",
            "Changing a store needs platform staff with the admin role: stores belong to the installation.",
          );
        }
        return updateStore(services, params.code, body);
      },
    }),
    adminRoute({
      method: "POST",
      path: "/stores/{code}/check",
      operationId: "checkStore",
      summary: "Check a store's connection (platform staff)",
      description:
        'What `backline stores configure --check` runs (docs/ddex.md, "Checking a store"): reaches the store\'s destination ' +
        "with its stored settings and credentials — connects to its SFTP server (host key, credentials, folder), asks its S3 " +
        "bucket, or looks at its directory — and says what happened. A store that did not answer is 200 with ok false and " +
        "the reason; nothing is changed or sent.",
      tag: "Stores",
      staffRole: "platform",
      params: z.object({ code: STORE_CODE }),
      body: NoBody,
      bodyOptional: true,
      response: { status: 200, description: "The check's result.", schema: StoreCheck },
      errors: [404],
      handler: async ({ request, params }) => {
        if (!services.isPlatformAdmin(request)) {
          throw new HttpError(
            403,
            "insufficient_role",
            "Checking a store needs platform staff with the admin role: stores belong to the installation.",
          );
        }
        const row = (await db.asService((tx) => storeRows(tx, params.code), { readOnly: true }))[0];
        if (!row) throw new HttpError(404, "not_found", `no store ${params.code}`, "code");
        return checkStore(db, params.code);
      },
    }),

    // Settings.
    adminRoute({
      method: "GET",
      path: "/settings",
      operationId: "getSettings",
      summary: "The tenant's settings",
      tag: "Settings",
      staffRole: "admin",
      response: { status: 200, description: "The settings.", schema: S.Settings },
      handler: async ({ tenantId }) => db.asService((tx) => settingsOf(tx, tenantId), { readOnly: true }),
    }),
    adminRoute({
      method: "POST",
      path: "/settings/logo",
      operationId: "uploadLogo",
      summary: "Upload the tenant's logo",
      description:
        "The image is the body: PNG, JPEG or WebP (checked from its bytes, not its Content-Type), at most 1 MiB, 16–4096 pixels a side. " +
        "It is served at /brand/{tenant}/logo and the branding's logo_url points at it; the portal, the console and every e-mail show it.",
      tag: "Settings",
      staffRole: "admin",
      rawBody: { types: LOGO_TYPES, description: "The logo's bytes." },
      response: { status: 200, description: "The settings, with the new logo_url.", schema: S.Settings },
      errors: [413, 415, 422],
      external: true,
    }),
    adminRoute({
      method: "PATCH",
      path: "/settings",
      operationId: "updateSettings",
      summary: "Change the tenant's settings",
      description:
        "Lead days, auto-review, whether media is required, and the branding fields. Fields left out stay as they are.",
      tag: "Settings",
      staffRole: "admin",
      body: SettingsPatch,
      response: { status: 200, description: "The settings as they are now.", schema: S.Settings },
      handler: async ({ tenantId, body }) => updateSettings(db, tenantId, body),
    }),
  ];
}

// Stores.

interface StoreRow {
  code: string;
  name: string;
  kind: string;
  enabled: boolean;
  offers_oac: boolean;
  sort: number;
  settings: Record<string, unknown>;
  credentials_sealed: string | null;
  updated_at: Date | string;
}

async function storeRows(tx: Tx, code?: string, lock = false): Promise<StoreRow[]> {
  return (
    await tx.query<StoreRow>(
      `select code, name, kind, enabled, offers_oac, sort, settings, credentials_sealed, updated_at
       from internal.stores where ($1::text is null or code = $1) order by sort, code ${lock ? "for update" : ""}`,
      [code ?? null],
    )
  ).rows;
}

function storeOut(services: DeskServices, r: StoreRow, full: boolean) {
  const adapter = typeof r.settings.adapter === "string" ? r.settings.adapter : null;
  const base = {
    code: r.code,
    name: r.name,
    kind: r.kind,
    enabled: r.enabled,
    offers_oac: r.offers_oac,
    sort: r.sort,
    adapter,
    updated_at: timestampOf(r.updated_at),
  };
  if (!full) return base;
  const credentials = r.credentials_sealed
    ? credentialPaths(
        JSON.parse(services.db.secrets.decrypt(r.credentials_sealed)) as Record<string, unknown>,
      )
    : [];
  return { ...base, settings: r.settings, credentials };
}

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** The stored credentials with the given ones laid over them: a null removes one. */
function overlay(stored: JsonObject | undefined, given: JsonObject | undefined): JsonObject | undefined {
  if (!given) return stored;
  const out: JsonObject = { ...(stored ?? {}) };
  for (const [k, v] of Object.entries(given)) {
    if (v === null) delete out[k];
    else if (isObject(v) && isObject(out[k])) out[k] = overlay(out[k] as JsonObject, v) ?? {};
    else out[k] = v;
  }
  for (const [k, v] of Object.entries(out)) if (isObject(v) && Object.keys(v).length === 0) delete out[k];
  return Object.keys(out).length > 0 ? out : undefined;
}

async function updateStore(services: DeskServices, code: string, body: z.infer<typeof StorePatch>) {
  const { db } = services;
  if (body.settings !== undefined) {
    const adapter = body.settings.adapter;
    if (adapter !== undefined && adapter !== "sandbox" && adapter !== "ddex") {
      throw new HttpError(
        422,
        "invalid_settings",
        "settings.adapter is sandbox or ddex.",
        "settings.adapter",
      );
    }
  }
  const row = await db.asService(async (tx) => {
    const current = (await storeRows(tx, code, true))[0];
    if (!current) return undefined;
    let settings = current.settings;
    let sealed = current.credentials_sealed;
    if (body.settings !== undefined) {
      const split = splitCredentials(body.settings);
      const stored = current.credentials_sealed
        ? (JSON.parse(db.secrets.decrypt(current.credentials_sealed)) as JsonObject)
        : undefined;
      const credentials = overlay(stored, split.credentials);
      settings = split.settings;
      sealed = credentials ? db.secrets.encrypt(JSON.stringify(credentials)) : null;
    }
    await tx.query(
      `update internal.stores set name = coalesce($2, name), enabled = coalesce($3, enabled),
         offers_oac = coalesce($4, offers_oac), sort = coalesce($5, sort), settings = $6, credentials_sealed = $7,
         genre_map = $8, updated_at = now()
       where code = $1`,
      [
        code,
        body.name ?? null,
        body.enabled ?? null,
        body.offers_oac ?? null,
        body.sort ?? null,
        JSON.stringify(settings),
        sealed,
        genreMapJson(settings),
      ],
    );
    return (await storeRows(tx, code))[0];
  });
  if (!row) throw new HttpError(404, "not_found", `no store ${code}`, "code");
  return storeOut(services, row, true);
}

// Settings.

export async function settingsOf(tx: Tx, tenantId: string) {
  const r = (
    await tx.query<{
      settings: Record<string, unknown>;
      release_lead_days: number | null;
      display_name: string | null;
      logo_url: string | null;
      primary_color: string | null;
      support_email: string | null;
      custom_css: string | null;
      updated_at: Date | string | null;
    }>(
      `select t.settings, o.release_lead_days, o.display_name, o.logo_url, o.primary_color, o.support_email, o.custom_css,
              greatest(t.updated_at, o.updated_at) as updated_at
       from internal.tenants t left join internal.organization_settings o on o.tenant_id = t.id
       where t.id = $1`,
      [tenantId],
    )
  ).rows[0];
  if (!r) throw new HttpError(404, "not_found", `no tenant ${tenantId}`);
  return {
    tenant_id: tenantId,
    release_lead_days: r.release_lead_days ?? 7,
    auto_review: r.settings.auto_review === true,
    require_media: r.settings.require_media !== false,
    branding: {
      display_name: r.display_name,
      logo_url: r.logo_url,
      primary_color: r.primary_color,
      support_email: r.support_email,
      custom_css: r.custom_css,
    },
    updated_at: timestamp(r.updated_at),
  };
}

async function updateSettings(db: Db, tenantId: string, body: z.infer<typeof SettingsPatch>) {
  return db.asService(async (tx) => {
    const jsonb: Record<string, boolean> = {};
    if (body.auto_review !== undefined) jsonb.auto_review = body.auto_review;
    if (body.require_media !== undefined) jsonb.require_media = body.require_media;
    if (Object.keys(jsonb).length > 0) {
      await tx.query(
        "update internal.tenants set settings = settings || $2::jsonb, updated_at = now() where id = $1",
        [tenantId, JSON.stringify(jsonb)],
      );
    }
    const b = body.branding ?? {};
    const columns: [string, unknown][] = [];
    if (body.release_lead_days !== undefined) columns.push(["release_lead_days", body.release_lead_days]);
    for (const k of ["display_name", "logo_url", "primary_color", "support_email"] as const) {
      if (b[k] !== undefined) columns.push([k, b[k]]);
    }
    if (b.custom_css !== undefined) columns.push(["custom_css", b.custom_css || null]);
    // A logo_url of its own (another address, or none) replaces an uploaded logo: its file goes.
    if (b.logo_url !== undefined) {
      await tx.query("delete from internal.brand_assets where tenant_id = $1 and kind = 'logo'", [tenantId]);
    }
    if (columns.length > 0) {
      const names = columns.map(([c]) => c);
      const values = columns.map(([, v]) => v);
      await tx.query(
        `insert into internal.organization_settings (tenant_id, ${names.join(", ")})
         values ($1, ${names.map((_, i) => `$${i + 2}`).join(", ")})
         on conflict (tenant_id) do update set ${names.map((c) => `${c} = excluded.${c}`).join(", ")}, updated_at = now()`,
        [tenantId, ...values],
      );
    }
    return settingsOf(tx, tenantId);
  });
}

export { OperatorError };
