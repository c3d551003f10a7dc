/**
 * Names of media objects. The database makes each asset's object key of ids
 * (`artwork/<account>/<release>/cover.jpg`, `audio/<account>/<release>/<track>.flac`, migration
 * 0010); /storage/v1 shows the same objects as bucket and path without the account
 * (`artwork` + `<release>/cover.jpg`, `audio` + `<release>/<track>.flac`), since a caller's
 * access, not the path, decides the account.
 */

export const BUCKETS = ["artwork", "audio"] as const;
export type Bucket = (typeof BUCKETS)[number];

export const CONTENT_TYPES: Record<string, { kind: Bucket; ext: string }> = {
  "image/jpeg": { kind: "artwork", ext: "jpg" },
  "image/png": { kind: "artwork", ext: "png" },
  "audio/wav": { kind: "audio", ext: "wav" },
  "audio/x-wav": { kind: "audio", ext: "wav" },
  "audio/wave": { kind: "audio", ext: "wav" },
  "audio/flac": { kind: "audio", ext: "flac" },
  "audio/x-flac": { kind: "audio", ext: "flac" },
};

/** The content type an extension stands for (for /storage/v1, where a path names the file). */
export const TYPE_OF_EXTENSION: Record<string, string> = {
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  png: "image/png",
  wav: "audio/wav",
  flac: "audio/flac",
};

const UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
const ARTWORK_PATH = new RegExp(`^(${UUID})/cover\\.(jpg|jpeg|png)$`);
const AUDIO_PATH = new RegExp(`^(${UUID})/(${UUID})\\.(wav|flac)$`);

/** `artwork/<account>/<release>/cover.jpg` → `artwork/<release>/cover.jpg`. */
export function storagePathOf(key: string): string {
  const [bucket, , ...rest] = key.split("/");
  return `${bucket}/${rest.join("/")}`;
}

export interface Slot {
  kind: Bucket;
  releaseId: string;
  trackId: string | undefined;
  contentType: string;
}

/** What a /storage/v1 bucket and path name, or undefined for a path that names no media slot. */
export function slotOf(bucket: string, objectPath: string): Slot | undefined {
  if (bucket === "artwork") {
    const m = ARTWORK_PATH.exec(objectPath);
    if (!m?.[1] || !m[2]) return undefined;
    return {
      kind: "artwork",
      releaseId: m[1].toLowerCase(),
      trackId: undefined,
      contentType: TYPE_OF_EXTENSION[m[2]] ?? "",
    };
  }
  if (bucket === "audio") {
    const m = AUDIO_PATH.exec(objectPath);
    if (!m?.[1] || !m[2] || !m[3]) return undefined;
    return {
      kind: "audio",
      releaseId: m[1].toLowerCase(),
      trackId: m[2].toLowerCase(),
      contentType: TYPE_OF_EXTENSION[m[3]] ?? "",
    };
  }
  return undefined;
}

export const SLOT_PATHS = {
  artwork: "<release_id>/cover.jpg | <release_id>/cover.png",
  audio: "<release_id>/<track_id>.wav | <release_id>/<track_id>.flac",
};
