import { z } from "zod";
import { asDbError } from "../../db/errors.ts";
import { prepared } from "../../db/prepared.ts";
import type { Tx } from "../../db/types.ts";
import { Timestamp, timestamp } from "../../http/formats.ts";
import { releaseProblems } from "../../pipeline/review.ts";
import type { AssetRow } from "../../storage/uploads.ts";
import { ApiError, notFound } from "../errors.ts";
import {
  conditionalGet,
  ifMatchOf,
  preconditionFailed,
  splitVersion,
  tagged,
  VERSION_SQL,
  versionIn,
  versionsToMatch,
} from "../etag.ts";
import { Id, listOf, Pagination, page, route } from "../route.ts";
import {
  ARTIST_COLUMNS,
  Artist,
  checkReleaseCodes,
  checkReleaseCreate,
  RELEASE_COLUMNS,
  Release,
  ReleaseCreate,
  ReleaseMetadataUpdate,
  ReleaseStatus,
  ReleaseUpdate,
  TRACK_COLUMNS,
} from "./schemas.ts";
import { columns, countAndPage, insertRow, jsonRows, updateRow, withDates } from "./sql.ts";
import { assetOut, currentMediaSql, MediaAsset, mediaSlots, TrackDetail } from "./uploads.ts";

/** Releases (seed 001): the same rows as /rest/v1/releases, under the same row-level security. */

const EDITABLE = ["draft", "pending", "rejected"];
const SUBMITTABLE = EDITABLE;

type Row = Record<string, unknown> & { id: string; status: string };

export const releaseOut = (row: Record<string, unknown>) => ({ id: row.id, object: "release", ...row });
export const trackOut = (row: Record<string, unknown>) => ({ id: row.id, object: "track", ...row });
export const artistOut = (row: Record<string, unknown>) => ({ id: row.id, object: "artist", ...row });

/** The timestamp columns of tracks and artist profiles. */
const TIMESTAMPS = ["created_at", "updated_at"];

interface DetailLists {
  tracks__: Record<string, unknown>[];
  artists__: Record<string, unknown>[];
  media__: AssetRow[];
}

/**
 * A release's detail in one statement (one round trip), prepared (planned once per connection): the
 * release row, and as JSON arrays its tracks (in disc and track order), the artist profiles the
 * release and its tracks' contributors name (the release's own first, then by name), and its
 * current media; all read as the caller. The tracks are read once (`t`) for both lists, and the
 * artists by id, so row-level security's checks run once per table.
 */
const RELEASE_DETAIL = prepared(`with t as (
    select ${columns(TRACK_COLUMNS)} from public.tracks where release_id = $1)
  select ${columns(RELEASE_COLUMNS)}, ${VERSION_SQL},
  ${jsonRows("select * from t", "x.disc_number, x.track_number nulls last, x.created_at, x.id")} as "tracks__",
  ${jsonRows(
    `select ${columns(ARTIST_COLUMNS)} from public.artist_profiles
     where id in (select r.artist_id union
       select (c ->> 'artist_id')::uuid from t,
         jsonb_array_elements(case jsonb_typeof(t.contributors) when 'array' then t.contributors else '[]' end) c
       where coalesce(c ->> 'artist_id', '') <> '')`,
    "(x.id = r.artist_id) desc, x.name",
  )} as "artists__",
  ${jsonRows(currentMediaSql("r.id"))} as "media__"
  from public.releases r where r.id = $1`);

/**
 * A release with its tracks (each with its current audio), artists and artwork, as GET
 * /releases/{id} answers it (ReleaseDetail), and its version; undefined when the caller sees no
 * such release. The catalogue export (catalogue-export.ts) answers the same shape.
 */
export async function releaseDetail(
  tx: Tx,
  id: string,
): Promise<{ version: string; body: Record<string, unknown> } | undefined> {
  const found = (await tx.query<Row & DetailLists>(RELEASE_DETAIL, [id])).rows[0];
  if (!found) return undefined;
  const { tracks__: tracks, artists__: artists, media__: assets, ...rest } = found;
  const { version, row: release } = splitVersion(rest);
  const media = mediaSlots(assets);
  const body = {
    ...releaseOut(release),
    artwork: media.artwork ? assetOut(media.artwork) : null,
    tracks: tracks.map((row) => {
      const track = withDates(row, TIMESTAMPS);
      const audio = media.audio.get(String(track.id));
      return { ...trackOut(track), audio: audio ? assetOut(audio) : null };
    }),
    artists: artists.map((row) => artistOut(withDates(row, TIMESTAMPS))),
  };
  return { version, body };
}

const RELEASE_BY_ID = prepared(`select ${columns(RELEASE_COLUMNS)} from public.releases where id = $1`);
const RELEASE_BY_ID_LOCKED = prepared(`${RELEASE_BY_ID.text} for update`);

export async function findRelease(tx: Tx, id: string, lock = false): Promise<Row> {
  const r = await tx.query<Row>(lock ? RELEASE_BY_ID_LOCKED : RELEASE_BY_ID, [id]);
  const row = r.rows[0];
  if (!row) throw notFound("release", id);
  return row;
}

/** The artist profile a release names: artist_id when given (and visible), else one found or created by name. */
async function resolveArtist(
  tx: Tx,
  artistId: string | undefined,
  artistName: string | undefined,
): Promise<string> {
  if (artistId) {
    const r = await tx.query("select 1 from public.artist_profiles where id = $1", [artistId]);
    if (r.rowCount === 0) {
      throw new ApiError(422, "validation_failed", `No artist with id ${artistId} in this account.`, {
        errors: [
          {
            param: "artist_id",
            code: "invalid_reference",
            message: `No artist with id ${artistId} in this account.`,
          },
        ],
      });
    }
    return artistId;
  }
  const name = (artistName ?? "").trim();
  // One profile per name, also when several requests name a new artist at once.
  await tx.query(
    "select pg_advisory_xact_lock(hashtextextended('artist:' || auth.default_account_id() || ':' || $1, 0))",
    [name],
  );
  const found = await tx.query<{ id: string }>(
    "select id from public.artist_profiles where name = $1 order by created_at, id limit 1",
    [name],
  );
  if (found.rows[0]) return found.rows[0].id;
  return (await insertRow<{ id: string }>(tx, "public.artist_profiles", { name }, ["id"])).id;
}

const withId = z.object({ id: Id }).strict();

const ListQuery = Pagination.extend({
  status: z
    .string()
    .max(200)
    .regex(/^[a-z_]+(,[a-z_]+)*$/)
    .refine((v) => v.split(",").every((s) => ReleaseStatus.safeParse(s).success), "unknown status")
    .optional()
    .meta({ description: "Only releases in this status (or any of a comma-separated list)." }),
}).strict();

export const ReleaseDetail = Release.extend({
  artwork: MediaAsset.nullable().meta({
    description: "The current cover artwork upload and its checks (null before any upload arrived).",
  }),
  tracks: z.array(TrackDetail),
  artists: z.array(Artist).meta({ description: "The artist profiles the release and its tracks name." }),
}).meta({ id: "ReleaseDetail" });

const TakedownConfirmedBy = z.enum(["store", "sandbox", "operator", "assumed"]).nullable().meta({
  description:
    "Who confirmed the removal: the store, the sandbox store (by itself), the operator (recorded by hand from the store's word), or assumed (a takedown recorded before stores had to confirm). Null until confirmed.",
});

const StoreDelivery = z
  .object({
    store: z.string(),
    action: z.enum(["insert", "update", "takedown"]).meta({
      description: "What the latest delivery to this store does: insert, update (a correction) or takedown.",
    }),
    status: z
      .enum(["pending", "in_progress", "delivered", "live", "takedown_sent", "taken_down", "error"])
      .meta({
        description:
          "Where that delivery stands. An insert or update: pending, in_progress, delivered (at the store), live, error. A takedown: pending, in_progress, takedown_sent (at the store, waiting for it to confirm), taken_down (the store confirmed), error.",
      }),
    message: z.string().nullable().meta({ description: "The store's answer, e.g. why it failed." }),
    delivered_at: Timestamp.nullable().meta({
      description: "When the delivery (or the takedown) reached the store.",
    }),
    live_at: Timestamp.nullable(),
    taken_down_at: Timestamp.nullable().meta({
      description: "A takedown: when the store confirmed the removal.",
    }),
    confirmed_by: TakedownConfirmedBy,
    updated_at: Timestamp,
  })
  .meta({ id: "StoreDelivery" });

const TakedownStore = z
  .object({
    store: z.string(),
    status: z.enum(["pending", "in_progress", "takedown_sent", "taken_down", "error"]),
    sent_at: Timestamp.nullable().meta({ description: "When the takedown reached the store." }),
    taken_down_at: Timestamp.nullable().meta({ description: "When the store confirmed the removal." }),
    confirmed_by: TakedownConfirmedBy,
  })
  .meta({ id: "TakedownStore" });

const TakedownRequest = z
  .object({
    id: Id,
    object: z.literal("takedown_request"),
    release_id: Id,
    status: z.enum(["pending", "processing", "completed", "rejected", "cancelled"]).meta({
      description:
        "pending, then processing while the stores remove the release; completed once every store confirmed the removal.",
    }),
    reason: z.string().nullable(),
    status_reason: z.string().nullable(),
    stores: z.array(TakedownStore).meta({
      description: "Per store, where its removal stands and when it was sent and confirmed.",
    }),
    created_at: Timestamp,
    completed_at: Timestamp.nullable(),
  })
  .meta({ id: "TakedownRequest" });

const ReleaseStatusReport = z
  .object({
    object: z.literal("release_status"),
    id: Id,
    status: ReleaseStatus,
    approval: z
      .enum(["not_submitted", "in_review", "approved", "rejected"])
      .meta({ description: "Where review stands: not_submitted, in_review, approved or rejected." }),
    rejection_reason: z.string().nullable(),
    live: z.boolean().meta({ description: "Whether the release is live in at least one store." }),
    submitted_at: Timestamp.nullable(),
    stores: z.array(StoreDelivery).meta({ description: "Per store, its latest delivery." }),
    takedown: TakedownRequest.nullable().meta({ description: "The latest takedown request, if any." }),
  })
  .meta({ id: "ReleaseStatusReport" });

const ReleaseProblems = z
  .object({
    object: z.literal("release_problems"),
    id: Id,
    ready: z.boolean().meta({
      description:
        "True when submit would accept the release now (its status allows it and nothing is missing).",
    }),
    submittable_status: z.boolean().meta({
      description: "Whether the status allows a submission (draft, pending or rejected).",
    }),
    errors: z
      .array(
        z.object({
          param: z.string().meta({ description: "The field at fault: upc, tracks[0].isrc, artwork, …" }),
          code: z.string(),
          message: z.string(),
        }),
      )
      .meta({ description: "Every problem submit would list (422 release_incomplete), in its order." }),
  })
  .meta({ id: "ReleaseProblems" });

const Deleted = z
  .object({ id: Id, object: z.literal("release"), deleted: z.literal(true) })
  .meta({ id: "DeletedRelease" });

const TakedownBody = z
  .object({ reason: z.string().trim().min(1).max(2000).optional() })
  .strict()
  .meta({ id: "TakedownCreate" });

const TAKEDOWN_COLUMNS = [
  "id",
  "release_id",
  "status",
  "reason",
  "status_reason",
  "stores",
  "created_at",
  "completed_at",
];

/**
 * A takedown request as answered. Its stores are jsonb (migration 0018), whose times are
 * PostgreSQL's JSON text (microseconds, the session's offset): written as every time is.
 */
function takedownOut(row: Record<string, unknown>) {
  const stores = (row.stores ?? []) as Record<string, unknown>[];
  return {
    id: row.id,
    object: "takedown_request",
    ...row,
    stores: stores.map((s) => ({
      ...s,
      sent_at: timestamp(s.sent_at as string | null),
      taken_down_at: timestamp(s.taken_down_at as string | null),
    })),
  };
}

function approvalOf(status: string): "not_submitted" | "in_review" | "approved" | "rejected" {
  if (status === "draft" || status === "pending") return "not_submitted";
  if (status === "submitted" || status === "in_review") return "in_review";
  if (status === "rejected") return "rejected";
  return "approved";
}

export const releaseRoutes = [
  route({
    method: "GET",
    path: "/releases",
    operationId: "listReleases",
    summary: "List releases",
    description: "The account's releases, newest first.",
    tag: "Releases",
    scope: "catalog:read",
    query: ListQuery,
    response: { status: 200, description: "A page of releases.", schema: listOf(Release, "ReleaseList") },
    handler: async ({ query, read }) => {
      const statuses = query.status ? query.status.split(",") : null;
      const listed = await read((tx) =>
        countAndPage<Row>(
          tx,
          {
            from: "public.releases",
            where: "($1::text[] is null or status = any ($1::text[]))",
            order: "created_at desc, id",
            columns: columns(RELEASE_COLUMNS),
          },
          [statuses],
          query,
        ),
      );
      return { body: page(listed.rows.map(releaseOut), query, listed) };
    },
  }),

  route({
    method: "POST",
    path: "/releases",
    operationId: "createRelease",
    summary: "Create a release",
    description:
      "Creates a release as draft (default) or pending. The artist is artist_id, or the profile named " +
      "artist_name (created when the account has none by that name). Territory, store and genre codes are " +
      "checked against GET /rules.",
    tag: "Releases",
    scope: "catalog:write",
    body: ReleaseCreate,
    check: checkReleaseCreate,
    response: { status: 201, description: "The new release.", schema: Release },
    errors: [409, 413, 415, 422],
    handler: async ({ body, write }) => {
      const row = await write(async (tx) => {
        const { artist_id, ...fields } = body;
        const artistId = await resolveArtist(tx, artist_id, body.artist_name);
        return insertRow<Row>(tx, "public.releases", { ...fields, artist_id: artistId }, RELEASE_COLUMNS);
      });
      return { status: 201, body: releaseOut(row) };
    },
  }),

  route({
    method: "GET",
    path: "/releases/{id}",
    operationId: "getRelease",
    summary: "Get a release with its tracks and artists",
    tag: "Releases",
    scope: "catalog:read",
    params: withId,
    response: { status: 200, description: "The release.", schema: ReleaseDetail },
    etag: true,
    errors: [404],
    handler: async ({ params, read, request }) => {
      const { version, body } = await read(async (tx) => {
        const found = await releaseDetail(tx, params.id);
        if (!found) throw notFound("release", params.id);
        return found;
      });
      // The tag's digest covers the tracks, artists and media in the answer, so If-None-Match
      // sees a track's change too; If-Match on a write compares the release row's version.
      return conditionalGet(request, version, body);
    },
  }),

  route({
    method: "PATCH",
    path: "/releases/{id}",
    operationId: "updateRelease",
    summary: "Update a release while it is editable",
    description:
      "Draft, pending and rejected releases can be edited. A release in review or delivered answers 409 " +
      "release_not_editable; correct a delivered release with PATCH /releases/{id}/metadata.",
    tag: "Releases",
    scope: "catalog:write",
    params: withId,
    body: ReleaseUpdate,
    check: checkReleaseCodes,
    response: { status: 200, description: "The updated release.", schema: Release },
    etag: true,
    errors: [404, 409, 413, 415, 422],
    handler: async ({ params, body, write, request }) => {
      const versions = versionsToMatch(ifMatchOf(request));
      const updated = await write(async (tx) => {
        const current = await findRelease(tx, params.id, true);
        if (!EDITABLE.includes(current.status)) {
          throw new ApiError(
            409,
            "release_not_editable",
            `Release ${params.id} is ${current.status} and can no longer be edited; ` +
              "use PATCH /releases/{id}/metadata for corrections after delivery.",
          );
        }
        if (body.artist_id) await resolveArtist(tx, body.artist_id, undefined);
        const row = await updateRow<Row>(tx, "public.releases", params.id, body, RELEASE_COLUMNS, undefined, {
          versions,
        });
        // The row exists (it is locked above): matching nothing means If-Match named another version.
        if (!row && versions) throw preconditionFailed("release", params.id);
        return row;
      });
      if (!updated) throw notFound("release", params.id);
      const { version, row } = splitVersion(updated);
      const out = releaseOut(row);
      return tagged(version, out);
    },
  }),

  route({
    method: "DELETE",
    path: "/releases/{id}",
    operationId: "deleteRelease",
    summary: "Delete a release that was never delivered",
    description:
      "Deletes the release and its tracks while it has not gone to any store (draft, pending, in review, " +
      "approved or rejected). A delivered release answers 409; take it down instead.",
    tag: "Releases",
    scope: "catalog:write",
    params: withId,
    response: { status: 200, description: "The release is gone.", schema: Deleted },
    etag: true,
    errors: [404, 409],
    handler: async ({ params, write, request }) => {
      const versions = versionsToMatch(ifMatchOf(request));
      const deleted = await write(async (tx) => {
        try {
          const r = versions
            ? await tx.query(`delete from public.releases where id = $1 and ${versionIn(2)} returning id`, [
                params.id,
                versions,
              ])
            : await tx.query("delete from public.releases where id = $1 returning id", [params.id]);
          if (r.rowCount === 0 && versions) {
            const exists = await tx.query("select 1 from public.releases where id = $1", [params.id]);
            if ((exists.rowCount ?? 0) > 0) throw preconditionFailed("release", params.id);
          }
          return r.rowCount;
        } catch (error) {
          if (asDbError(error)?.sqlstate === "BL001") {
            throw new ApiError(
              409,
              "release_delivered",
              asDbError(error)?.message ?? "The release was delivered.",
            );
          }
          throw error;
        }
      });
      if (deleted === 0) throw notFound("release", params.id);
      return { body: { id: params.id, object: "release", deleted: true } };
    },
  }),

  route({
    method: "PATCH",
    path: "/releases/{id}/metadata",
    operationId: "correctReleaseMetadata",
    summary: "Correct the metadata of a delivered release",
    description:
      "For delivered and live releases: changes display metadata (title, version, artist name, genres, " +
      "label, copyright lines, explicit, language) and queues an update delivery to the stores. Other " +
      "releases answer 409 release_not_delivered.",
    tag: "Releases",
    scope: "catalog:write",
    params: withId,
    body: ReleaseMetadataUpdate,
    check: checkReleaseCodes,
    response: { status: 200, description: "The corrected release.", schema: Release },
    errors: [404, 409, 413, 415, 422],
    handler: async ({ params, body, write }) => {
      const row = await write(
        async (tx) =>
          (
            await tx.query<Row>(
              `select ${columns(RELEASE_COLUMNS, "r")} from internal.correct_release_metadata($1, $2::jsonb) r`,
              [params.id, JSON.stringify(body)],
            )
          ).rows[0],
      );
      if (!row?.id) throw notFound("release", params.id);
      return { body: releaseOut(row) };
    },
  }),

  route({
    method: "POST",
    path: "/releases/{id}/submit",
    operationId: "submitRelease",
    summary: "Submit a release for review and delivery",
    description:
      "Checks that the release is complete (a UPC and tracks with ISRCs — assigned now from the platform's " +
      "number ranges when the operator configured them, else required —, track numbers, splits totalling 100, a known " +
      "primary genre — one each store with its own genre list can name (problem unmapped_genre, naming the store) —, " +
      "territories, stores, a release date at least the platform's lead time away) and lists " +
      "every problem at once (422 release_incomplete). Then the release is submitted: review and delivery " +
      "start and the release.submitted event is sent.",
    tag: "Releases",
    scope: "catalog:write",
    params: withId,
    response: { status: 200, description: "The submitted release.", schema: Release },
    errors: [404, 409, 422],
    handler: async ({ params, write }) => {
      const row = await write(async (tx) => {
        const current = await findRelease(tx, params.id, true);
        if (!SUBMITTABLE.includes(current.status)) {
          throw new ApiError(
            409,
            "invalid_status_transition",
            `Release ${params.id} is ${current.status}; only draft, pending and rejected releases can be submitted.`,
          );
        }
        const problems = await releaseProblems(tx, params.id);
        if (problems.length > 0) {
          throw new ApiError(
            422,
            "release_incomplete",
            `The release cannot be submitted yet: ${problems.length} problem${problems.length === 1 ? "" : "s"}.`,
            { errors: problems },
          );
        }
        return updateRow<Row>(tx, "public.releases", params.id, { status: "submitted" }, RELEASE_COLUMNS);
      });
      if (!row) throw notFound("release", params.id);
      return { body: releaseOut(row) };
    },
  }),

  route({
    method: "GET",
    path: "/releases/{id}/problems",
    operationId: "getReleaseProblems",
    summary: "What submitting the release would refuse now",
    description:
      "The completeness list that POST /releases/{id}/submit applies, without submitting: every problem at " +
      "once (missing or invalid fields, tracks, cover and audio, identifiers), each with the field at fault. " +
      "An app shows it while the release is edited; `ready` says whether submit would accept it now.",
    tag: "Releases",
    scope: "catalog:read",
    params: withId,
    response: { status: 200, description: "The release's problems.", schema: ReleaseProblems },
    errors: [404],
    handler: async ({ params, read }) => {
      const body = await read(async (tx) => {
        const release = await findRelease(tx, params.id);
        const errors = await releaseProblems(tx, params.id);
        const submittable = SUBMITTABLE.includes(release.status);
        return {
          object: "release_problems" as const,
          id: release.id,
          ready: submittable && errors.length === 0,
          submittable_status: submittable,
          errors: errors.map((e) => ({ param: e.param, code: e.code, message: e.message })),
        };
      });
      return { body };
    },
  }),

  route({
    method: "GET",
    path: "/releases/{id}/status",
    operationId: "getReleaseStatus",
    summary: "Approval, rejection reason, live status and per-store delivery",
    tag: "Releases",
    scope: "catalog:read",
    params: withId,
    response: { status: 200, description: "Where the release stands.", schema: ReleaseStatusReport },
    errors: [404],
    handler: async ({ params, read }) => {
      const body = await read(async (tx) => {
        const release = await findRelease(tx, params.id);
        const stores = (
          await tx.query<{ action: string; status: string }>(
            `select distinct on (store) store, action, status, message, delivered_at, live_at, taken_down_at,
                    confirmed_by, updated_at
             from internal.release_deliveries where release_id = $1 order by store, created_at desc, id`,
            [params.id],
          )
        ).rows;
        const takedown = (
          await tx.query<Record<string, unknown>>(
            `select ${columns(TAKEDOWN_COLUMNS)} from public.takedown_requests where release_id = $1
             order by created_at desc, id limit 1`,
            [params.id],
          )
        ).rows[0];
        return {
          object: "release_status",
          id: release.id,
          status: release.status,
          approval: approvalOf(release.status),
          rejection_reason: release.status === "rejected" ? (release.status_reason ?? null) : null,
          live:
            release.status === "live" || stores.some((s) => s.action !== "takedown" && s.status === "live"),
          submitted_at: release.submitted_at ?? null,
          stores,
          takedown: takedown ? takedownOut(takedown) : null,
        };
      });
      return { body };
    },
  }),

  route({
    method: "POST",
    path: "/releases/{id}/takedown",
    operationId: "requestTakedown",
    summary: "Take a delivered release down from its stores",
    description:
      "For delivered and live releases. The release moves to takedown_requested; the operator's backend " +
      "sends the takedown to every store that has it, and once every store has confirmed the removal the release " +
      "is taken_down and the release.takedown_completed event follows (per-store times in the request's stores).",
    tag: "Releases",
    scope: "catalog:write",
    params: withId,
    body: TakedownBody,
    bodyOptional: true,
    response: { status: 202, description: "The takedown request, accepted.", schema: TakedownRequest },
    errors: [404, 409, 422],
    handler: async ({ params, body, write }) => {
      const row = await write(async (tx) => {
        await findRelease(tx, params.id);
        try {
          return await insertRow<Record<string, unknown>>(
            tx,
            "public.takedown_requests",
            { release_id: params.id, reason: body.reason },
            TAKEDOWN_COLUMNS,
          );
        } catch (error) {
          const db = asDbError(error);
          if (db?.sqlstate === "23505") {
            throw new ApiError(
              409,
              "takedown_already_requested",
              `Release ${params.id} already has an open takedown request.`,
            );
          }
          throw error;
        }
      });
      return { status: 202, body: takedownOut(row) };
    },
  }),
];
