import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import type { Db } from "../db/db.ts";
import { type ObjectStore, stagingKey } from "../storage/driver.ts";
import { TYPE_OF_EXTENSION } from "../storage/keys.ts";
import { LocalStore } from "../storage/local.ts";
import { completeUpload, createUpload, type UploadLimits } from "../storage/uploads.ts";

/**
 * A transferred release's media (docs/catalogue.md, "Media"): each file the source names, once it
 * matched its checksum, goes into Backline's storage the way an upload does (src/storage/uploads.ts)
 * — a media asset for the release's cover or the track's audio, the bytes put where its key says,
 * then `completeUpload`, which queues `media.validate` like any upload. Nothing here decides more
 * than an upload would: the worker inspects the file and leaves it valid or invalid.
 */

export interface MediaTarget {
  store: ObjectStore;
  limits: UploadLimits;
}

export class MediaRefused extends Error {}

export async function storeMediaFile(
  db: Db,
  target: MediaTarget,
  input: { releaseId: string; trackId?: string | undefined; kind: "artwork" | "audio"; file: string },
): Promise<void> {
  const { store, limits } = target;
  const ext = path.extname(input.file).slice(1).toLowerCase();
  const contentType = TYPE_OF_EXTENSION[ext];
  if (!contentType || contentType.startsWith("audio/") !== (input.kind === "audio")) {
    throw new MediaRefused(
      `.${ext} is not ${input.kind === "audio" ? "audio Backline takes (WAV, FLAC)" : "artwork Backline takes (JPEG, PNG)"}`,
    );
  }
  const bytes = (await stat(input.file)).size;
  const { asset, target: upload } = await db.asService((tx) =>
    createUpload(tx, store, limits, {
      releaseId: input.releaseId,
      trackId: input.trackId,
      kind: input.kind,
      contentType,
      filename: path.basename(input.file),
      bytes,
    }),
  );
  if (store instanceof LocalStore) {
    const received = await store.receive(
      asset.object_key,
      createReadStream(input.file),
      Number(asset.max_bytes),
    );
    try {
      const { staleKeys } = await completeUpload(
        db,
        asset.id,
        { bytes: received.bytes, sha256: received.sha256 },
        received.commit,
      );
      await Promise.all(staleKeys.map((k) => store.remove(k)));
    } catch (error) {
      await received.discard();
      throw error;
    }
    return;
  }
  // A bucket: the bytes go to the signed URL as a client's would, then into place once accepted.
  const res = await fetch(upload.url, {
    method: upload.method,
    headers: upload.headers,
    body: createReadStream(input.file) as unknown as RequestInit["body"],
    duplex: "half",
  } as RequestInit);
  if (!res.ok) throw new MediaRefused(`the storage refused the file (${res.status})`);
  const staged = store.promote ? stagingKey(asset.account_id, asset.id, asset.object_key) : asset.object_key;
  const { staleKeys } = await completeUpload(db, asset.id, { bytes }, () =>
    store.promote ? store.promote(staged, asset.object_key) : Promise.resolve(),
  );
  await Promise.all(staleKeys.map((k) => store.remove(k)));
}
