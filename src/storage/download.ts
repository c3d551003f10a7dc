import { storagePathOf, TYPE_OF_EXTENSION } from "./keys.ts";
import type { AssetRow } from "./uploads.ts";

/**
 * How a media file is served (docs/uploads.md, "Downloads"; docs/security.md, "Downloads"). Only a
 * file the platform inspected and found valid — artwork that is a JPEG or PNG, audio that is WAV
 * or FLAC — is served inline with its own media type (the type of its bytes, which inspection
 * checked against the declared one). Anything else (not inspected yet, failed inspection) is an
 * attachment of type application/octet-stream: a browser saves it and never renders it, whatever
 * the uploader declared. Every answer also carries `X-Content-Type-Options: nosniff` (the routes).
 */

const SERVABLE: Record<AssetRow["kind"], Set<string>> = {
  artwork: new Set(["image/jpeg", "image/png"]),
  audio: new Set(["audio/wav", "audio/flac"]),
};

export const SAFE_CONTENT_TYPE = "application/octet-stream";

export interface DownloadHeaders {
  contentType: string;
  contentDisposition: string;
}

export function downloadHeaders(asset: Pick<AssetRow, "kind" | "object_key" | "status">): DownloadHeaders {
  const name = storagePathOf(asset.object_key).split("/").pop() ?? "file";
  // Names are ids and a fixed extension (src/storage/keys.ts); anything else is not put in a header.
  const filename = /^[A-Za-z0-9._-]{1,100}$/.test(name) ? name : "file";
  const type = TYPE_OF_EXTENSION[filename.split(".").pop() ?? ""];
  if (asset.status === "valid" && type && SERVABLE[asset.kind]?.has(type)) {
    return { contentType: type, contentDisposition: `inline; filename="${filename}"` };
  }
  return { contentType: SAFE_CONTENT_TYPE, contentDisposition: `attachment; filename="${filename}"` };
}
