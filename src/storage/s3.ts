import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type * as ClientS3 from "@aws-sdk/client-s3";
import type * as Presigner from "@aws-sdk/s3-request-presigner";
import type {
  DownloadOptions,
  MultipartTarget,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  UploadRequest,
  UploadTarget,
} from "./driver.ts";
import { TooLargeError } from "./local.ts";

/**
 * S3-compatible object storage (AWS S3, MinIO, R2, …): uploads go straight to the bucket through
 * presigned requests, so the bytes never pass through Backline. Parsed from the environment by
 * src/config.ts.
 */
export interface S3Settings {
  /** Custom endpoint (MinIO, R2, …); AWS when absent. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** Both or neither; the SDK's default credential chain when absent. */
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  /** Bytes; a declared size above it gets a multipart upload target. */
  multipartThreshold: number;
  /** Bytes per part of a multipart upload (at least 5 MiB, S3's minimum for all parts but the last). */
  partSize: number;
}

const requireCjs = createRequire(import.meta.url);
let loaded: { s3: typeof ClientS3; presigner: typeof Presigner } | undefined;

/**
 * The AWS SDK (tens of MB once loaded) is loaded when the first S3 store is made, not at start:
 * a server on local disk never pays for it (docs/operations.md, "Memory").
 */
function sdk(): { s3: typeof ClientS3; presigner: typeof Presigner } {
  loaded ??= {
    s3: requireCjs("@aws-sdk/client-s3") as typeof ClientS3,
    presigner: requireCjs("@aws-sdk/s3-request-presigner") as typeof Presigner,
  };
  return loaded;
}

const MIB = 1024 * 1024;
/** S3's limits: parts of at least 5 MiB (except the last), at most 10,000 of them, 5 GiB each. */
const MIN_PART = 5 * MIB;
const MAX_PART = 5 * 1024 * MIB;
const MAX_PARTS = 10_000;
/** A single PUT carries at most 5 GiB. */
const MAX_SINGLE_PUT = 5 * 1024 * MIB;
/** SigV4 presigned URLs live at most a week. */
const MAX_EXPIRY_SECONDS = 7 * 24 * 3600;

/**
 * S3 errors that mean the client's parts or upload id are wrong, not that the store failed. Only
 * these: a generic 400 may as well be a configuration error (InvalidBucketName, …).
 */
const MULTIPART_CLIENT_ERRORS = new Set([
  "InvalidPart",
  "InvalidPartOrder",
  "NoSuchUpload",
  "EntityTooSmall",
  "EntityTooLarge",
]);

/** An Error with a machine-readable `code`, as the rest of Backline maps them. */
function codedError(code: string, message: string, cause?: unknown): Error & { code: string } {
  const error = new Error(message, cause === undefined ? undefined : { cause }) as Error & { code: string };
  error.code = code;
  return error;
}

function statusOf(error: unknown): number | undefined {
  return error instanceof sdk().s3.S3ServiceException ? error.$metadata?.httpStatusCode : undefined;
}

function isNotFound(error: unknown): boolean {
  if (!(error instanceof sdk().s3.S3ServiceException)) return false;
  return error.name === "NotFound" || error.name === "NoSuchKey" || statusOf(error) === 404;
}

/** Seconds from now until `expiresAt`, within what a SigV4 presigned URL allows. */
function expiresIn(expiresAt: Date): number {
  const seconds = Math.ceil((expiresAt.getTime() - Date.now()) / 1000);
  if (!Number.isFinite(seconds)) throw new RangeError("expiresAt is not a valid date");
  return Math.min(MAX_EXPIRY_SECONDS, Math.max(1, seconds));
}

export class S3Store implements ObjectStore {
  readonly kind = "s3" as const;
  readonly settings: S3Settings;
  readonly client: ClientS3.S3Client;

  constructor(settings: S3Settings) {
    if (!settings.bucket) throw new Error("S3 storage needs a bucket");
    if ((settings.accessKeyId === undefined) !== (settings.secretAccessKey === undefined)) {
      throw new Error("S3 storage needs both an access key id and a secret access key, or neither");
    }
    if (
      !Number.isSafeInteger(settings.partSize) ||
      settings.partSize < MIN_PART ||
      settings.partSize > MAX_PART
    ) {
      throw new RangeError(`S3 part size must be between ${MIN_PART} and ${MAX_PART} bytes`);
    }
    if (!Number.isSafeInteger(settings.multipartThreshold) || settings.multipartThreshold < 0) {
      throw new RangeError("S3 multipart threshold must be a non-negative whole number of bytes");
    }
    this.settings = settings;
    this.client = new (sdk().s3.S3Client)({
      region: settings.region,
      endpoint: settings.endpoint,
      forcePathStyle: settings.forcePathStyle,
      credentials:
        settings.accessKeyId !== undefined && settings.secretAccessKey !== undefined
          ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
          : undefined,
      // Since SDK v3.729 the default is WHEN_SUPPORTED: every PutObject/UploadPart gets a CRC32
      // checksum of the body the SDK sees. When presigning there is no body, so the URL carries
      // `x-amz-sdk-checksum-algorithm=CRC32&x-amz-checksum-crc32=AAAAAA==` (the checksum of zero
      // bytes), and S3 then refuses any real upload with BadDigest; plain clients (curl, fetch, a
      // browser) cannot compute a trailing checksum either. WHEN_REQUIRED only adds checksums to
      // the operations that need one, so presigned PUTs carry none. Response validation is turned
      // down to match: S3-compatible servers (MinIO, R2, s3rver) do not all send the checksums.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }

  /** Frees the SDK's sockets (on shutdown, and in tests). */
  close(): void {
    this.client.destroy();
  }

  /**
   * A presigned PUT for an upload up to the multipart threshold, or a presigned multipart upload
   * above it (only possible when the size is declared). Without a declared size S3 cannot bound the
   * upload: a presigned PUT has no size limit other than S3's 5 GiB, so the caller must check
   * stat(key).bytes against maxBytes when the upload completes.
   */
  async uploadTarget(request: UploadRequest): Promise<UploadTarget> {
    const key = this.checkKey(request.key);
    const { bytes, contentType } = request;
    if (bytes !== undefined) {
      if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RangeError("bytes must be a whole number");
      if (bytes > request.maxBytes) {
        throw codedError(
          "file_too_large",
          `the upload declares ${bytes} bytes; at most ${request.maxBytes} are allowed`,
        );
      }
    }
    const seconds = expiresIn(request.expiresAt);

    if (bytes === undefined || bytes <= this.settings.multipartThreshold) {
      if (bytes !== undefined && bytes > MAX_SINGLE_PUT) {
        throw codedError(
          "file_too_large",
          "a single upload carries at most 5 GiB; raise the multipart threshold",
        );
      }
      const command = new (sdk().s3.PutObjectCommand)({
        Bucket: this.settings.bucket,
        Key: key,
        ContentType: contentType,
        ContentLength: bytes,
      });
      // The presigner leaves Content-Type unsigned by default; sign it (and Content-Length when the
      // size is known) so the client must send exactly what was declared.
      const signed = bytes === undefined ? ["content-type"] : ["content-type", "content-length"];
      const url = await sdk().presigner.getSignedUrl(this.client, command, {
        expiresIn: seconds,
        signableHeaders: new Set(signed),
      });
      const headers: Record<string, string> = { "content-type": contentType };
      if (bytes !== undefined) headers["content-length"] = String(bytes);
      return { url, method: "PUT", headers };
    }

    const multipart = await this.multipartTarget(key, contentType, bytes, seconds);
    // The top-level URL of a multipart target is the object's plain (unsigned) URL: it names where
    // the object will be, and a client that ignores `multipart` and PUTs the whole file there is
    // refused (403) rather than leaving a half-finished upload behind. The parts need no headers
    // of their own: each part URL signs its Content-Length, which every HTTP client sends, and the
    // content type was fixed when the upload was created.
    return { url: this.objectUrl(key), method: "PUT", headers: {}, multipart };
  }

  private async multipartTarget(
    key: string,
    contentType: string,
    bytes: number,
    seconds: number,
  ): Promise<MultipartTarget> {
    // Bigger parts when the configured size would need more than S3's 10,000 (whole MiB).
    let partSize = this.settings.partSize;
    if (Math.ceil(bytes / partSize) > MAX_PARTS) partSize = Math.ceil(bytes / MAX_PARTS / MIB) * MIB;
    if (partSize > MAX_PART) throw codedError("file_too_large", "the upload is larger than S3 can store");
    const created = await this.client.send(
      new (sdk().s3.CreateMultipartUploadCommand)({
        Bucket: this.settings.bucket,
        Key: key,
        ContentType: contentType,
      }),
    );
    const uploadId = created.UploadId;
    if (!uploadId) throw new Error("S3 did not return an upload id");
    const count = Math.max(1, Math.ceil(bytes / partSize));
    const parts: MultipartTarget["parts"] = [];
    for (let n = 1; n <= count; n++) {
      const length = n < count ? partSize : bytes - partSize * (count - 1);
      const command = new (sdk().s3.UploadPartCommand)({
        Bucket: this.settings.bucket,
        Key: key,
        UploadId: uploadId,
        PartNumber: n,
        ContentLength: length,
      });
      const url = await sdk().presigner.getSignedUrl(this.client, command, {
        expiresIn: seconds,
        signableHeaders: new Set(["content-length"]),
      });
      parts.push({ part_number: n, url });
    }
    return { upload_id: uploadId, part_size: partSize, parts };
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: { part_number: number; etag: string }[],
  ): Promise<void> {
    this.checkKey(key);
    if (!uploadId) throw codedError("multipart_invalid", "no upload id");
    if (parts.length === 0)
      throw codedError("multipart_invalid", "a multipart upload needs at least one part");
    const sorted = [...parts].sort((a, b) => a.part_number - b.part_number);
    for (const [i, part] of sorted.entries()) {
      if (!Number.isInteger(part.part_number) || part.part_number < 1 || part.part_number > MAX_PARTS) {
        throw codedError(
          "multipart_invalid",
          `part number ${part.part_number} is not between 1 and ${MAX_PARTS}`,
        );
      }
      if (i > 0 && sorted[i - 1]?.part_number === part.part_number) {
        throw codedError("multipart_invalid", `part ${part.part_number} is listed twice`);
      }
      if (typeof part.etag !== "string" || !/^"?[^"\s]+"?$/.test(part.etag)) {
        throw codedError("multipart_invalid", `part ${part.part_number} has no valid ETag`);
      }
    }
    try {
      await this.client.send(
        new (sdk().s3.CompleteMultipartUploadCommand)({
          Bucket: this.settings.bucket,
          Key: key,
          UploadId: uploadId,
          MultipartUpload: {
            // ETags as S3 answers them, quoted (clients often keep them with or without quotes).
            Parts: sorted.map((p) => ({
              PartNumber: p.part_number,
              ETag: `"${p.etag.replaceAll('"', "")}"`,
            })),
          },
        }),
      );
    } catch (error) {
      if (error instanceof sdk().s3.S3ServiceException && MULTIPART_CLIENT_ERRORS.has(error.name)) {
        throw codedError(
          "multipart_invalid",
          `the multipart upload cannot be completed: ${error.message}`,
          error,
        );
      }
      throw error;
    }
  }

  async stat(key: string): Promise<ObjectInfo | undefined> {
    try {
      const head = await this.client.send(
        new (sdk().s3.HeadObjectCommand)({ Bucket: this.settings.bucket, Key: this.checkKey(key) }),
      );
      return { bytes: head.ContentLength ?? 0 };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** The object's bytes; `range` is inclusive at both ends, like HTTP's Range and fs.createReadStream. */
  async read(key: string, range?: { start: number; end?: number }): Promise<Readable> {
    return this.body(key, range);
  }

  /** Streams the object to a private temporary directory; never holds it in memory. */
  async localCopy(key: string, signal?: AbortSignal): Promise<{ path: string; release(): Promise<void> }> {
    const checked = this.checkKey(key);
    const dir = await mkdtemp(path.join(os.tmpdir(), "backline-s3-"));
    const release = () => rm(dir, { recursive: true, force: true });
    // The key's own file name (ids and a fixed extension), for tools that look at the extension.
    const file = path.join(dir, path.posix.basename(checked) || randomUUID());
    try {
      const body = await this.body(checked, undefined, signal);
      await pipeline(body, createWriteStream(file, { flags: "wx", mode: 0o600 }), { signal });
    } catch (error) {
      await release();
      throw error;
    }
    return { path: file, release };
  }

  async remove(key: string): Promise<void> {
    try {
      await this.client.send(
        new (sdk().s3.DeleteObjectCommand)({ Bucket: this.settings.bucket, Key: this.checkKey(key) }),
      );
    } catch (error) {
      // S3 answers 204 for a missing key; some compatible servers answer 404.
      if (isNotFound(error)) return;
      throw error;
    }
  }

  /**
   * Moves an uploaded object from its staging key into place: a server-side copy (no bytes pass
   * through Backline; S3 copies up to 5 GiB in one request), then the staging object is removed.
   */
  async promote(from: string, to: string): Promise<void> {
    const source = `${this.settings.bucket}/${this.checkKey(from)
      .split("/")
      .map((p) => encodeURIComponent(p))
      .join("/")}`;
    await this.client.send(
      new (sdk().s3.CopyObjectCommand)({
        Bucket: this.settings.bucket,
        Key: this.checkKey(to),
        CopySource: source,
      }),
    );
    await this.remove(from);
  }

  /**
   * A presigned GET. The answer's Content-Type and Content-Disposition are signed into it
   * (`response-content-type`, `response-content-disposition`), so the bucket serves the file as
   * Backline decides (an uninspected file as an attachment), whatever type it was uploaded with.
   */
  async downloadUrl(key: string, expiresAt: Date, options: DownloadOptions = {}): Promise<string> {
    const command = new (sdk().s3.GetObjectCommand)({
      Bucket: this.settings.bucket,
      Key: this.checkKey(key),
      ...(options.contentType ? { ResponseContentType: options.contentType } : {}),
      ...(options.contentDisposition ? { ResponseContentDisposition: options.contentDisposition } : {}),
    });
    return sdk().presigner.getSignedUrl(this.client, command, { expiresIn: expiresIn(expiresAt) });
  }

  /**
   * Spools the body to a private temporary file (counting, hashing, stopping past `maxBytes`), then
   * PUTs it with its length: S3 takes a single PUT only with a known Content-Length.
   */
  async put(key: string, body: Readable, options: PutOptions): Promise<{ bytes: number; sha256: string }> {
    const checked = this.checkKey(key);
    const dir = await mkdtemp(path.join(os.tmpdir(), "backline-s3-put-"));
    try {
      const file = path.join(dir, "object");
      const hash = createHash("sha256");
      let bytes = 0;
      const limit = Math.min(options.maxBytes, MAX_SINGLE_PUT);
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          bytes += chunk.length;
          if (bytes > limit) return callback(new TooLargeError(limit));
          hash.update(chunk);
          callback(null, chunk);
        },
      });
      await pipeline(body, counter, createWriteStream(file, { flags: "wx", mode: 0o600 }));
      await this.client.send(
        new (sdk().s3.PutObjectCommand)({
          Bucket: this.settings.bucket,
          Key: checked,
          Body: createReadStream(file),
          ContentLength: bytes,
          ...(options.contentType ? { ContentType: options.contentType } : {}),
        }),
      );
      return { bytes, sha256: hash.digest("hex") };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** A server-side copy: no bytes pass through Backline. */
  async copy(from: string, to: string): Promise<void> {
    const source = `${this.settings.bucket}/${this.checkKey(from)
      .split("/")
      .map((p) => encodeURIComponent(p))
      .join("/")}`;
    await this.client.send(
      new (sdk().s3.CopyObjectCommand)({
        Bucket: this.settings.bucket,
        Key: this.checkKey(to),
        CopySource: source,
      }),
    );
  }

  private async body(
    key: string,
    range?: { start: number; end?: number },
    signal?: AbortSignal,
  ): Promise<Readable> {
    let header: string | undefined;
    if (range) {
      const { start, end } = range;
      if (
        !Number.isSafeInteger(start) ||
        start < 0 ||
        (end !== undefined && (!Number.isSafeInteger(end) || end < start))
      ) {
        throw new RangeError("invalid byte range");
      }
      header = `bytes=${start}-${end ?? ""}`;
    }
    const response = await this.client.send(
      new (sdk().s3.GetObjectCommand)({
        Bucket: this.settings.bucket,
        Key: this.checkKey(key),
        Range: header,
      }),
      { abortSignal: signal },
    );
    const body = response.Body;
    // On Node the SDK's body is an http.IncomingMessage (a Readable) with helper methods mixed in.
    if (body instanceof Readable) return body;
    throw new Error(`S3 returned no readable body for ${key}`);
  }

  /** The object's URL without a signature (path style or virtual-hosted, as configured). */
  private objectUrl(key: string): string {
    const encoded = key.split("/").map(encodeURIComponent).join("/");
    const { bucket, endpoint, region, forcePathStyle } = this.settings;
    const base = new URL(endpoint ?? `https://s3.${region}.amazonaws.com`);
    if (!forcePathStyle) base.hostname = `${bucket}.${base.hostname}`;
    const prefix = base.pathname.replace(/\/+$/, "");
    base.pathname = forcePathStyle ? `${prefix}/${bucket}/${encoded}` : `${prefix}/${encoded}`;
    base.search = "";
    return base.toString();
  }

  /** Keys come from src/storage/keys.ts; this is a last line of defence, not the validation. */
  private checkKey(key: string): string {
    if (
      typeof key !== "string" ||
      key === "" ||
      key.startsWith("/") ||
      key.includes("..") ||
      key.includes("\\") ||
      [...key].some((c) => c.charCodeAt(0) < 0x20)
    ) {
      throw codedError("invalid_key", `invalid object key: ${JSON.stringify(key)}`);
    }
    return key;
  }
}
