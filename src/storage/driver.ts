import type { Readable } from "node:stream";

/**
 * Where uploaded media lives (docs/uploads.md). Two drivers implement this: local disk
 * (src/storage/local.ts, the default: uploads go to Backline's own upload route) and
 * S3-compatible object storage (src/storage/s3.ts: uploads go straight to the bucket through
 * presigned requests). Object keys are made by src/storage/keys.ts only, of ids and a fixed
 * extension, e.g. `artwork/<account>/<release>/cover.jpg`.
 */

/** What a client needs to send the file: the response of the upload-URL endpoints. */
export interface UploadTarget {
  /** Where to send the bytes. */
  url: string;
  /** PUT for a single request. */
  method: "PUT";
  /** Headers the request must carry exactly as given (they are part of the signature). */
  headers: Record<string, string>;
  /** For large files on S3: a presigned multipart upload (see docs/uploads.md). */
  multipart?: MultipartTarget;
}

export interface MultipartTarget {
  upload_id: string;
  part_size: number;
  /** One presigned PUT per part, in order; each answers an ETag header the client keeps. */
  parts: { part_number: number; url: string }[];
}

export interface UploadRequest {
  /** The media_assets row the upload fills. */
  assetId: string;
  accountId: string;
  key: string;
  contentType: string;
  maxBytes: number;
  /** Declared size, when the client gave it (S3 signs it as Content-Length). */
  bytes?: number;
  expiresAt: Date;
}

/** Where an upload to a presigned URL lands before it is accepted: one key per upload. */
export function stagingKey(accountId: string, assetId: string, objectKey: string): string {
  return `uploads/${accountId}/${assetId}.${objectKey.split(".").pop()}`;
}

export interface ObjectInfo {
  bytes: number;
}

export interface ObjectStore {
  readonly kind: "local" | "s3";
  /** Signs an upload of one object; nothing is written until the client sends the bytes. */
  uploadTarget(request: UploadRequest): Promise<UploadTarget>;
  /** Finishes a multipart upload from the parts' ETags (S3 only). */
  completeMultipart?(
    key: string,
    uploadId: string,
    parts: { part_number: number; etag: string }[],
  ): Promise<void>;
  /** The object's size, or undefined when there is none. */
  stat(key: string): Promise<ObjectInfo | undefined>;
  /** The object's bytes as a stream. Rejects when there is no such object. */
  read(key: string, range?: { start: number; end?: number }): Promise<Readable>;
  /**
   * A local file holding the object, for tools that need a path (sharp, music-metadata, the DDEX
   * packager): the object itself on local disk, a temporary copy otherwise. `release()` removes
   * the copy.
   */
  localCopy(key: string, signal?: AbortSignal): Promise<{ path: string; release(): Promise<void> }>;
  /**
   * Stores whose clients write straight into the bucket take each upload at a staging key
   * (`stagingKey`) and move it into place (`promote`) only once the upload is accepted, so a file
   * sent to an upload URL never replaces the bytes of a release until Backline says so.
   */
  promote?(from: string, to: string): Promise<void>;
  /** Removes the object; no error when it is already gone. */
  remove(key: string): Promise<void>;
  /** A short-lived URL that downloads the object (S3: presigned GET; local: Backline's signed route). */
  downloadUrl?(key: string, expiresAt: Date, options?: DownloadOptions): Promise<string>;
  /**
   * Stores `body` at `key` (the /storage/v1 objects of tenants' buckets, `objects/<tenant>/<id>`),
   * counting as it goes: past `maxBytes` it throws TooLargeError (./local.ts) and keeps nothing.
   */
  put?(key: string, body: Readable, options: PutOptions): Promise<{ bytes: number; sha256: string }>;
  /** Copies an object to another key inside the store (no bytes through Backline on S3). */
  copy?(from: string, to: string): Promise<void>;
}

export interface PutOptions {
  maxBytes: number;
  contentType?: string;
}

/** How a download is answered (docs/uploads.md, "Downloads"). */
export interface DownloadOptions {
  /** The asset the URL is for: the local driver binds its token to it (a replacement is another asset). */
  assetId?: string;
  /** The answer's Content-Type (S3: `response-content-type`, signed into the URL). */
  contentType?: string;
  /** The answer's Content-Disposition (S3: `response-content-disposition`, signed into the URL). */
  contentDisposition?: string;
}
