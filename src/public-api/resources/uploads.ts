import { z } from "zod";
import { prepared } from "../../db/prepared.ts";
import type { Tx } from "../../db/types.ts";
import { Timestamp, timestamp } from "../../http/formats.ts";
import { stagingKey } from "../../storage/driver.ts";
import { CONTENT_TYPES, TYPE_OF_EXTENSION } from "../../storage/keys.ts";
import {
  ASSET_COLUMNS,
  type AssetRow,
  assetById,
  completeUpload,
  createUpload,
  UploadError,
} from "../../storage/uploads.ts";
import { ApiError } from "../errors.ts";
import { Id, route } from "../route.ts";
import { Track } from "./schemas.ts";
import { columns } from "./sql.ts";

/**
 * Signed upload URLs (seed 001; docs/uploads.md). The file goes straight to storage: to
 * Backline's upload route (local disk) or to the S3 bucket (presigned), never through these
 * endpoints. Once it has arrived it is checked (media.validate) and the result shows on the
 * upload, on the release (artwork) and on the track (audio).
 */

const Problem = z.object({ code: z.string(), message: z.string() }).meta({ id: "MediaProblem" });

export const MediaAsset = z
  .object({
    id: Id,
    object: z.literal("media_asset"),
    kind: z.enum(["artwork", "audio"]),
    release_id: Id,
    track_id: Id.nullable(),
    status: z.enum(["pending", "uploaded", "validating", "valid", "invalid"]).meta({
      description:
        "pending: the URL was issued, no bytes yet; uploaded: the bytes arrived, checks queued; validating; " +
        "valid; invalid (see problems).",
    }),
    problems: z.array(Problem).meta({ description: "What the checks found wrong; empty unless invalid." }),
    metadata: z.record(z.string(), z.unknown()).meta({
      description:
        "What the checks measured. Artwork: format, width, height, color_space, channels, bytes. Audio: " +
        "format, codec, sample_rate, bit_depth, channels, duration_seconds, bytes.",
    }),
    filename: z.string().nullable(),
    content_type: z.string(),
    bytes: z.number().int().nullable(),
    sha256: z.string().nullable(),
    current: z.boolean().meta({
      description: "Whether this is the file the release uses now (the newest upload of its slot).",
    }),
    upload_expires_at: Timestamp,
    uploaded_at: Timestamp.nullable(),
    validated_at: Timestamp.nullable(),
    created_at: Timestamp,
  })
  .meta({ id: "MediaAsset" });

/** A track with its current audio upload (GET of a track, and the tracks of a release's detail). */
export const TrackDetail = Track.extend({
  audio: MediaAsset.nullable().meta({
    description: "The track's current audio upload and its checks (null before any upload arrived).",
  }),
}).meta({ id: "TrackDetail" });

const iso = timestamp;

export function assetOut(a: AssetRow): z.infer<typeof MediaAsset> {
  return {
    id: a.id,
    object: "media_asset",
    kind: a.kind,
    release_id: a.release_id,
    track_id: a.track_id,
    status: a.status,
    problems: a.problems,
    metadata: a.metadata,
    filename: a.filename,
    content_type: a.content_type,
    bytes: a.bytes === null ? null : Number(a.bytes),
    sha256: a.sha256,
    current: a.status !== "pending" && a.superseded_at === null,
    upload_expires_at: iso(a.upload_expires_at) as string,
    uploaded_at: iso(a.uploaded_at),
    validated_at: iso(a.validated_at),
    created_at: iso(a.created_at) as string,
  };
}

/** The current assets of release `releaseId` (an SQL expression), as the caller sees them. */
export const currentMediaSql = (releaseId: string): string =>
  `select ${columns(ASSET_COLUMNS)} from public.media_assets
   where release_id = ${releaseId} and status <> 'pending' and superseded_at is null`;

/** A release's current assets by slot: artwork, and audio by track. */
export function mediaSlots(rows: AssetRow[]): {
  artwork: AssetRow | undefined;
  audio: Map<string, AssetRow>;
} {
  return {
    artwork: rows.find((r) => r.kind === "artwork"),
    audio: new Map(rows.filter((r) => r.track_id).map((r) => [r.track_id as string, r])),
  };
}

/** The current assets of a release's slots, as the caller sees them: artwork, and audio by track. */
const CURRENT_MEDIA = prepared(currentMediaSql("$1"));

export async function currentMedia(
  tx: Tx,
  releaseId: string,
): Promise<{ artwork: AssetRow | undefined; audio: Map<string, AssetRow> }> {
  return mediaSlots((await tx.query<AssetRow>(CURRENT_MEDIA, [releaseId])).rows);
}

const UploadUrlRequest = (kind: "artwork" | "audio") =>
  z
    .object({
      filename: z
        .string()
        .min(1)
        .max(255)
        .optional()
        .meta({ description: "The file's name, kept for reference." }),
      content_type: z
        .enum(
          Object.entries(CONTENT_TYPES)
            .filter(([, v]) => v.kind === kind)
            .map(([k]) => k) as [string, ...string[]],
        )
        .optional()
        .meta({
          description:
            kind === "artwork"
              ? "image/jpeg or image/png. Default: from the filename's extension, else image/jpeg."
              : "audio/wav (audio/x-wav, audio/wave) or audio/flac (audio/x-flac). Default: from the filename's extension, else audio/wav.",
        }),
      size: z.number().int().min(1).optional().meta({
        description:
          "The file's size in bytes; refused at once when over the limit. Needed for S3 multipart.",
      }),
      sha256: z
        .string()
        .regex(/^[0-9a-f]{64}$/)
        .optional()
        .meta({
          description: "The file's SHA-256 (lower-case hex); a file that arrives different is refused.",
        }),
    })
    .strict()
    .meta({ id: kind === "artwork" ? "ArtworkUploadUrlRequest" : "AudioUploadUrlRequest" });

const UploadUrl = z
  .object({
    object: z.literal("upload_url"),
    asset_id: Id.meta({ description: "The upload's id: GET /uploads/{asset_id} follows its checks." }),
    upload_url: z.string().meta({ description: "Where to send the file." }),
    method: z.literal("PUT"),
    headers: z
      .record(z.string(), z.string())
      .meta({ description: "Headers to send with the file, exactly as given." }),
    expires_at: Timestamp.meta({ description: "The URL takes the file until then." }),
    max_bytes: z.number().int(),
    multipart: z
      .object({
        upload_id: z.string(),
        part_size: z.number().int(),
        parts: z.array(z.object({ part_number: z.number().int(), url: z.string() })),
      })
      .optional()
      .meta({
        description:
          "S3 storage with a size above the multipart threshold: PUT each part to its URL, keep each ETag, then " +
          "POST /uploads/{asset_id}/complete with the parts.",
      }),
    complete_url: z.string().nullable().meta({
      description:
        "S3 storage: POST here once the file is uploaded. Null on local storage, where the upload itself completes it.",
    }),
    asset: MediaAsset,
  })
  .meta({ id: "UploadUrl" });

type UploadUrlBody = { filename?: string; content_type?: string; size?: number; sha256?: string };

function contentTypeOf(kind: "artwork" | "audio", body: UploadUrlBody): string {
  if (body.content_type) return body.content_type;
  const ext = body.filename?.split(".").pop()?.toLowerCase() ?? "";
  const byExt = TYPE_OF_EXTENSION[ext];
  if (byExt && CONTENT_TYPES[byExt]?.kind === kind) return byExt;
  return kind === "artwork" ? "image/jpeg" : "audio/wav";
}

function apiError(error: unknown): never {
  if (error instanceof UploadError) {
    throw new ApiError(error.status, error.code, error.message, error.param ? { param: error.param } : {});
  }
  throw error;
}

const ofRelease = z.object({ id: Id }).strict();
const ofTrack = z.object({ id: Id, trackId: Id }).strict();
const ofAsset = z.object({ assetId: Id }).strict();

const CompleteRequest = z
  .object({
    upload_id: z
      .string()
      .min(1)
      .max(1024)
      .optional()
      .meta({ description: "For a multipart upload: multipart.upload_id of the upload URL." }),
    parts: z
      .array(
        z
          .object({ part_number: z.number().int().min(1).max(10000), etag: z.string().min(1).max(200) })
          .strict(),
      )
      .min(1)
      .max(10000)
      .optional()
      .meta({ description: "For a multipart upload: every part's number and the ETag its PUT answered." }),
  })
  .strict()
  .meta({ id: "UploadComplete" });

function uploadUrlRoute(kind: "artwork" | "audio") {
  const path =
    kind === "artwork"
      ? "/releases/{id}/artwork-upload-url"
      : "/releases/{id}/tracks/{trackId}/audio-upload-url";
  return route({
    method: "POST",
    path,
    operationId: kind === "artwork" ? "createArtworkUploadUrl" : "createAudioUploadUrl",
    summary: kind === "artwork" ? "Signed URL for cover artwork" : "Signed URL for a track's master audio",
    description:
      (kind === "artwork"
        ? "A short-lived URL to upload the release's front cover (JPEG or PNG, RGB, square, at least 3000×3000)."
        : "A short-lived URL to upload the track's master (WAV or FLAC, 16 or 24 bit, at least 44.1 kHz, stereo).") +
      " Send the file with the method and headers given. It is checked once it has arrived; a new upload replaces " +
      "the previous file. The release must be draft, pending or rejected.",
    tag: "Uploads",
    scope: "catalog:write",
    // Each call makes a new URL: replaying a stored response would hand out an expired one.
    idempotent: false,
    params: kind === "artwork" ? ofRelease : ofTrack,
    body: UploadUrlRequest(kind),
    bodyOptional: true,
    response: { status: 201, description: "The upload URL.", schema: UploadUrl },
    errors: [404, 409, 413, 422],
    handler: async ({ params, body, write, services }) => {
      const b = (body ?? {}) as UploadUrlBody;
      const p = params as { id: string; trackId?: string };
      try {
        const { asset, target } = await write((tx) =>
          createUpload(tx, services.storage, services.uploadLimits, {
            releaseId: p.id,
            trackId: p.trackId,
            kind,
            contentType: contentTypeOf(kind, b),
            filename: b.filename,
            bytes: b.size,
            sha256: b.sha256,
          }),
        );
        return {
          status: 201,
          body: {
            object: "upload_url",
            asset_id: asset.id,
            upload_url: target.url,
            method: target.method,
            headers: target.headers,
            expires_at: iso(asset.upload_expires_at) as string,
            max_bytes: Number(asset.max_bytes),
            ...(target.multipart ? { multipart: target.multipart } : {}),
            complete_url:
              services.storage.kind === "local"
                ? null
                : `${services.publicUrl}/api/public/v1/uploads/${asset.id}/complete`,
            asset: assetOut(asset),
          },
        };
      } catch (error) {
        apiError(error);
      }
    },
  });
}

async function visibleAsset(tx: Tx, id: string): Promise<AssetRow> {
  const asset = (
    await tx.query<AssetRow>(
      `select ${ASSET_COLUMNS.map((c) => `"${c}"`).join(", ")} from public.media_assets where id = $1`,
      [id],
    )
  ).rows[0];
  if (!asset) throw new ApiError(404, "resource_missing", `No such upload: ${id}`, { param: "assetId" });
  return asset;
}

export const uploadRoutes = [
  uploadUrlRoute("artwork"),
  uploadUrlRoute("audio"),

  route({
    method: "GET",
    path: "/uploads/{assetId}",
    operationId: "getUpload",
    summary: "Get an upload and its checks",
    tag: "Uploads",
    scope: "catalog:read",
    params: ofAsset,
    response: { status: 200, description: "The upload.", schema: MediaAsset },
    errors: [404],
    handler: async ({ params, read }) => ({
      body: assetOut(await read((tx) => visibleAsset(tx, params.assetId))),
    }),
  }),

  route({
    method: "POST",
    path: "/uploads/{assetId}/complete",
    operationId: "completeUpload",
    summary: "Say an upload to S3 storage is finished",
    description:
      "On S3 storage the file goes to the bucket directly: call this once it is there (with the parts' ETags for a " +
      "multipart upload), and its checks start. On local storage the upload completes itself; calling this after it " +
      "returns the upload as it is.",
    tag: "Uploads",
    scope: "catalog:write",
    params: ofAsset,
    body: CompleteRequest,
    bodyOptional: true,
    response: {
      status: 200,
      description: "The upload, now uploaded (its checks queued).",
      schema: MediaAsset,
    },
    errors: [404, 409, 413, 422],
    handler: async ({ params, body, read, services }) => {
      // The caller must be able to see the upload (and so its release); the rest is the server's.
      const seen = await read((tx) => visibleAsset(tx, params.assetId));
      if (seen.status !== "pending") return { body: assetOut(seen) };
      const store = services.storage;
      if (store.kind === "local") {
        throw new ApiError(409, "upload_not_received", "No file has arrived at the upload URL yet.");
      }
      const { parts, upload_id: uploadId } =
        (body as { upload_id?: string; parts?: { part_number: number; etag: string }[] } | undefined) ?? {};
      try {
        const asset = await assetById(services.db, seen.id);
        if (!asset) throw new ApiError(404, "resource_missing", `No such upload: ${seen.id}`);
        // The file waits at its staging key; completeUpload moves it into place once it is accepted.
        const staged = store.promote
          ? stagingKey(asset.account_id, asset.id, asset.object_key)
          : asset.object_key;
        if (parts) {
          if (!store.completeMultipart)
            throw new ApiError(400, "multipart_unsupported", "This storage takes no parts.");
          if (!uploadId) {
            throw new ApiError(422, "validation_failed", "upload_id is required with parts.", {
              param: "upload_id",
            });
          }
          await store.completeMultipart(staged, uploadId, parts).catch((error: unknown) => {
            // Only the driver's verdict on the client's parts is the client's mistake; a failing or
            // misconfigured store (AccessDenied, a 5xx, a network error) stays a server error.
            if ((error as { code?: unknown } | null)?.code !== "multipart_invalid") throw error;
            throw new ApiError(
              409,
              "multipart_invalid",
              `The parts could not be put together: ${(error as Error).message}`,
              { param: "parts" },
            );
          });
        }
        const info = await store.stat(staged);
        if (!info)
          throw new ApiError(409, "upload_not_received", "No file has arrived at the upload URL yet.");
        if (info.bytes > Number(asset.max_bytes)) {
          await store.remove(staged);
          throw new ApiError(
            413,
            "file_too_large",
            `The file is ${info.bytes} bytes; at most ${asset.max_bytes}.`,
          );
        }
        const { asset: done, staleKeys } = await completeUpload(
          services.db,
          asset.id,
          { bytes: info.bytes },
          () => (store.promote ? store.promote(staged, asset.object_key) : Promise.resolve()),
        );
        await Promise.all(staleKeys.map((k) => store.remove(k)));
        return { body: assetOut(done) };
      } catch (error) {
        apiError(error);
      }
    },
  }),
];
