import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { enqueue } from "../jobs/queue.ts";
import { type ObjectStore, stagingKey, type UploadTarget } from "./driver.ts";
import { inspectArtwork, inspectAudio, trackDurationOf } from "./inspect.ts";
import type { TransformLimits } from "./transform.ts";

/**
 * Media uploads (docs/uploads.md), the same for /api/public/v1 and /storage/v1:
 *
 * 1. `createUpload` (as the caller, under row-level security): a media_assets row for the release's
 *    artwork or a track's audio, and the storage driver's signed target for the bytes.
 * 2. The bytes arrive: at the local driver's upload route, or in S3 followed by the complete call.
 *    `completeUpload` (as the server) makes the asset its slot's current one and queues
 *    `media.validate`.
 * 3. `validateAsset` (the job) inspects the bytes and leaves the asset valid or invalid; valid audio
 *    gives its track a duration and audio_metadata. Submission needs valid media
 *    (internal.media_problems).
 */

export interface UploadLimits {
  /** How long an upload URL takes bytes. */
  urlTtlSeconds: number;
  maxBytes: { artwork: number; audio: number };
  /** Image transforms' bounds (./transform.ts); unset: TRANSFORM_LIMITS. */
  transform?: TransformLimits;
}

export const DEFAULT_UPLOAD_LIMITS: UploadLimits = {
  urlTtlSeconds: 900,
  maxBytes: { artwork: 50 * 1024 * 1024, audio: 2 * 1024 * 1024 * 1024 },
};

export const ASSET_COLUMNS = [
  "id",
  "account_id",
  "release_id",
  "track_id",
  "kind",
  "object_key",
  "filename",
  "content_type",
  "declared_bytes",
  "declared_sha256",
  "max_bytes",
  "status",
  "problems",
  "metadata",
  "bytes",
  "sha256",
  "upload_expires_at",
  "uploaded_at",
  "validated_at",
  "superseded_at",
  "created_at",
  "updated_at",
] as const;

export interface AssetRow {
  id: string;
  account_id: string;
  release_id: string;
  track_id: string | null;
  kind: "artwork" | "audio";
  object_key: string;
  filename: string | null;
  content_type: string;
  declared_bytes: string | number | null;
  declared_sha256: string | null;
  max_bytes: string | number;
  status: "pending" | "uploaded" | "validating" | "valid" | "invalid";
  problems: { code: string; message: string }[];
  metadata: Record<string, unknown>;
  bytes: string | number | null;
  sha256: string | null;
  upload_expires_at: Date | string;
  uploaded_at: Date | string | null;
  validated_at: Date | string | null;
  superseded_at: Date | string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const ASSET_SELECT = ASSET_COLUMNS.map((c) => `"${c}"`).join(", ");

/** Why an upload cannot go on; the HTTP layers map `code` to their error shapes. */
export class UploadError extends Error {
  readonly status: number;
  readonly code: string;
  readonly param: string | undefined;

  constructor(status: number, code: string, message: string, param?: string) {
    super(message);
    this.name = "UploadError";
    this.status = status;
    this.code = code;
    this.param = param;
  }
}

export interface NewUpload {
  releaseId: string;
  /** For audio: the track. */
  trackId?: string;
  kind: "artwork" | "audio";
  contentType: string;
  filename?: string;
  bytes?: number;
  sha256?: string;
}

/**
 * Makes the asset and its upload target, as the caller: row-level security decides whether the
 * caller may upload to this release (a release it cannot see is 404, one it may not change 403 or
 * 409 from the database's rules).
 */
export async function createUpload(
  tx: Tx,
  store: ObjectStore,
  limits: UploadLimits,
  input: NewUpload,
  now: Date = new Date(),
): Promise<{ asset: AssetRow; target: UploadTarget }> {
  const release = (
    await tx.query<{ id: string }>("select id from public.releases where id = $1", [input.releaseId])
  ).rows[0];
  if (!release) throw new UploadError(404, "resource_missing", `No such release: ${input.releaseId}`, "id");
  if (input.kind === "audio") {
    const track = (
      await tx.query<{ id: string }>("select id from public.tracks where id = $1 and release_id = $2", [
        input.trackId,
        input.releaseId,
      ])
    ).rows[0];
    if (!track) throw new UploadError(404, "resource_missing", `No such track: ${input.trackId}`, "trackId");
  }
  const maxBytes = limits.maxBytes[input.kind];
  if (input.bytes !== undefined && input.bytes > maxBytes) {
    throw new UploadError(
      413,
      "file_too_large",
      `The file is ${input.bytes} bytes; ${input.kind} uploads take at most ${maxBytes} bytes.`,
      "size",
    );
  }
  const expiresAt = new Date(now.getTime() + limits.urlTtlSeconds * 1000);
  const asset = (
    await tx.query<AssetRow>(
      `insert into public.media_assets (release_id, track_id, kind, filename, content_type, declared_bytes,
         declared_sha256, max_bytes, upload_expires_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       returning ${ASSET_SELECT}`,
      [
        input.releaseId,
        input.kind === "audio" ? input.trackId : null,
        input.kind,
        input.filename ?? null,
        input.contentType,
        input.bytes ?? null,
        input.sha256 ?? null,
        maxBytes,
        expiresAt,
      ],
    )
  ).rows[0] as AssetRow;
  const target = await store.uploadTarget({
    assetId: asset.id,
    accountId: asset.account_id,
    // Straight into a bucket, an upload lands at its own key until it is accepted (completeUpload).
    key: store.promote ? stagingKey(asset.account_id, asset.id, asset.object_key) : asset.object_key,
    contentType: input.contentType,
    maxBytes,
    bytes: input.bytes,
    expiresAt,
  });
  return { asset, target };
}

/** An asset as the server sees it (no row-level security), or undefined. */
export async function assetById(db: Db, id: string): Promise<AssetRow | undefined> {
  return db.asService(
    async (tx) =>
      (await tx.query<AssetRow>(`select ${ASSET_SELECT} from public.media_assets where id = $1`, [id]))
        .rows[0],
  );
}

/**
 * The bytes of a pending asset have arrived: inside one transaction (the asset locked), `place`
 * puts them where the key says (the local driver's rename; nothing for S3), the slot's previous
 * asset is superseded, and `media.validate` is queued. Returns the asset and the object keys of
 * superseded assets that are no longer in use (another extension), which the caller removes.
 */
export async function completeUpload(
  db: Db,
  assetId: string,
  arrived: { bytes: number; sha256?: string },
  place: () => Promise<void> = async () => {},
): Promise<{ asset: AssetRow; staleKeys: string[] }> {
  return db.asService(async (tx) => {
    const asset = (
      await tx.query<AssetRow>(`select ${ASSET_SELECT} from public.media_assets where id = $1 for update`, [
        assetId,
      ])
    ).rows[0];
    if (!asset) throw new UploadError(404, "resource_missing", `No such upload: ${assetId}`);
    if (asset.status !== "pending") {
      throw new UploadError(
        409,
        "upload_already_completed",
        "This upload URL was already used: ask for a new one to replace the file.",
      );
    }
    if (arrived.bytes > Number(asset.max_bytes)) {
      throw new UploadError(413, "file_too_large", `The upload takes at most ${asset.max_bytes} bytes.`);
    }
    if (arrived.bytes === 0) {
      throw new UploadError(400, "empty_upload", "The upload has no bytes.");
    }
    if (asset.declared_sha256 && arrived.sha256 && asset.declared_sha256 !== arrived.sha256) {
      throw new UploadError(
        400,
        "checksum_mismatch",
        `The bytes' SHA-256 is ${arrived.sha256}, not ${asset.declared_sha256} as declared: the file changed on the way.`,
        "sha256",
      );
    }
    // The release must still take media (a release submitted meanwhile keeps what it was submitted with).
    const release = (
      await tx.query<{ status: string }>("select status from public.releases where id = $1 for update", [
        asset.release_id,
      ])
    ).rows[0];
    if (!release || !["draft", "pending", "rejected"].includes(release.status)) {
      throw new UploadError(
        409,
        "release_not_editable",
        `The release is ${release?.status ?? "deleted"} and its media can no longer be changed.`,
      );
    }
    await place();
    const superseded = await tx.query<{ object_key: string }>(
      `update public.media_assets set superseded_at = now()
       where release_id = $1 and kind = $2 and track_id is not distinct from $3 and id <> $4
         and status <> 'pending' and superseded_at is null
       returning object_key`,
      [asset.release_id, asset.kind, asset.track_id, asset.id],
    );
    const updated = (
      await tx.query<AssetRow>(
        `update public.media_assets set status = 'uploaded', bytes = $2, sha256 = $3, uploaded_at = now()
         where id = $1 returning ${ASSET_SELECT}`,
        [asset.id, arrived.bytes, arrived.sha256 ?? null],
      )
    ).rows[0] as AssetRow;
    await enqueue(tx, "media.validate", { asset_id: asset.id }, { dedupeKey: asset.id });
    const staleKeys = [
      ...new Set(superseded.rows.map((r) => r.object_key).filter((k) => k !== asset.object_key)),
    ];
    return { asset: updated, staleKeys };
  });
}

async function sha256Of(file: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file, { signal })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/**
 * The `media.validate` job: inspects an uploaded asset's bytes and records what it found. An asset
 * superseded meanwhile, or already judged, is left alone.
 */
export async function validateAsset(
  db: Db,
  store: ObjectStore,
  assetId: string,
  signal?: AbortSignal,
): Promise<"valid" | "invalid" | "skipped"> {
  const asset = await db.asService(
    async (tx) =>
      (
        await tx.query<AssetRow>(
          `update public.media_assets set status = 'validating'
           where id = $1 and status in ('uploaded', 'validating') and superseded_at is null
           returning ${ASSET_SELECT}`,
          [assetId],
        )
      ).rows[0],
  );
  if (!asset) return "skipped";
  const info = await store.stat(asset.object_key);
  let problems: { code: string; message: string }[];
  let metadata: Record<string, unknown> = {};
  let sha256 = asset.sha256;
  let bytes = asset.bytes === null ? null : Number(asset.bytes);
  if (!info) {
    problems = [{ code: "missing", message: "no file arrived in storage for this upload" }];
  } else {
    bytes = info.bytes;
    const copy = await store.localCopy(asset.object_key, signal);
    try {
      const inspection =
        asset.kind === "artwork"
          ? await inspectArtwork(copy.path, asset.content_type)
          : await inspectAudio(copy.path, asset.content_type);
      problems = [...inspection.problems];
      metadata = inspection.metadata;
      sha256 ??= await sha256Of(copy.path, signal);
    } finally {
      await copy.release();
    }
    if (info.bytes > Number(asset.max_bytes)) {
      problems.push({
        code: "too_large",
        message: `the file is ${info.bytes} bytes; ${asset.kind} takes at most ${asset.max_bytes}`,
      });
    }
    if (asset.declared_sha256 && sha256 && asset.declared_sha256 !== sha256) {
      problems.push({
        code: "checksum_mismatch",
        message: `the file's SHA-256 is ${sha256}, not ${asset.declared_sha256} as declared`,
      });
    }
  }
  const status = problems.length === 0 ? "valid" : "invalid";
  await db.asService(async (tx) => {
    const r = await tx.query(
      `update public.media_assets
       set status = $2, problems = $3::jsonb, metadata = $4::jsonb, bytes = $5, sha256 = $6, validated_at = now()
       where id = $1 and status = 'validating'`,
      [asset.id, status, JSON.stringify(problems), JSON.stringify(metadata), bytes, sha256],
    );
    if (r.rowCount === 0 || asset.kind !== "audio" || status !== "valid" || !asset.track_id) return;
    await tx.query("update public.tracks set duration = $2, audio_metadata = $3::jsonb where id = $1", [
      asset.track_id,
      trackDurationOf(metadata) ?? null,
      JSON.stringify(metadata),
    ]);
  });
  return status;
}
