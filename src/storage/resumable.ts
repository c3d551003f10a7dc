import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import path from "node:path";
import { FileStore } from "@tus/file-store";
import { MemoryLocker, Server, type ServerOptions, type Upload } from "@tus/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { asDbError, mapDbError } from "../db/errors.ts";
import type { Tx } from "../db/types.ts";
import { findBucket, isBuiltIn } from "./buckets.ts";
import { type ObjectStore, stagingKey } from "./driver.ts";
import { STORAGE_ERRORS, StorageError } from "./errors.ts";
import { SLOT_PATHS, slotOf } from "./keys.ts";
import { LocalStore, TooLargeError } from "./local.ts";
import type { Caller } from "./object-routes.ts";
import { mimeAllowed } from "./object-routes.ts";
import { checkKey, mayWrite, newObjectKey, saveObject } from "./objects.ts";
import { type AssetRow, completeUpload, createUpload, UploadError, type UploadLimits } from "./uploads.ts";

/**
 * Resumable uploads (docs/storage.md, "Resumable uploads"): TUS 1.0.0 (creation, termination,
 * expiration) at /storage/v1/upload/resumable, as Supabase Storage offers it, served by @tus/server
 * with its file store under DATA_DIR/resumable whatever the storage driver: the parts are staged
 * on local disk (they survive a restart of the server) and the finished file is handed to the
 * driver (local disk or S3) as one object, like a standard upload.
 *
 * - Creation (POST) is refused before any byte is stored unless a standard upload of the same
 *   object would be allowed: the caller's identity, the bucket's size and MIME limits, the
 *   object's insert policy (and `x-upsert`), or for the media slots `artwork` and `audio` the
 *   release's rules (a pending media asset is made as the caller).
 * - Every upload is bound to the caller who created it (tenant, role, user): anyone else gets
 *   404 for its HEAD, PATCH and DELETE, so an upload URL can neither be read nor continued.
 * - Completion writes the object row as the caller (row-level security applies again), or for a
 *   media slot completes the asset, which queues the media checks (`media.validate`).
 * - Unfinished uploads expire (24 hours after creation) and are swept by @tus/server's expiration.
 */

export interface ResumableDeps {
  db: Db;
  store: ObjectStore;
  limits: UploadLimits;
  /** Where the parts are staged (DATA_DIR/resumable). */
  dir: string;
  /** How long an unfinished upload is kept; default 24 hours. */
  expiresMs?: number;
  caller(request: FastifyRequest, reply: FastifyReply): Promise<Caller | undefined>;
  sendError(request: FastifyRequest, reply: FastifyReply, error: unknown): unknown;
}

export const RESUMABLE_EXPIRY_MS = 24 * 60 * 60 * 1000;
const SWEEP_EVERY_MS = 60 * 60 * 1000;
const UPLOAD_ID = /^[0-9a-f]{32}$/;
/**
 * Unfinished uploads staged at once, so disk use is bounded (docs/storage.md): per caller (user
 * or key) and per tenant, and the bytes a tenant's unfinished uploads may declare in all.
 */
export const OPEN_UPLOADS_PER_CALLER = 10;
export const OPEN_UPLOADS_PER_TENANT = 100;
export const OPEN_BYTES_PER_TENANT = 20 * 1024 ** 3;

/** The unfinished uploads staged in `dir` (@tus/file-store keeps each one's description in <id>.json). */
async function stagedUploads(dir: string): Promise<{ size: number; tenant?: string; binding?: string }[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const found = await Promise.all(
    names
      .filter((n) => n.endsWith(".json"))
      .map(async (n) => {
        try {
          const info = JSON.parse(await readFile(path.join(dir, n), "utf8")) as {
            size?: number;
            metadata?: Record<string, string | null>;
          };
          return {
            size: Number(info.size ?? 0),
            ...(info.metadata?.tenant ? { tenant: info.metadata.tenant } : {}),
            ...(info.metadata?.binding ? { binding: info.metadata.binding } : {}),
          };
        } catch {
          return undefined; // removed meanwhile, or being written
        }
      }),
  );
  return found.filter((f) => f !== undefined);
}

/** The TUS headers a browser must be allowed to send and read (CORS). */
export const TUS_REQUEST_HEADERS = [
  "tus-resumable",
  "upload-length",
  "upload-metadata",
  "upload-offset",
  "upload-defer-length",
  "upload-concat",
  "x-upsert",
  "x-http-method-override",
];

/** Who may continue an upload: the tenant, the role and the user that created it. */
function bindingOf(who: Caller): string {
  const sub = typeof who.claims.sub === "string" ? who.claims.sub : "";
  return `${who.tenant.id}:${String(who.claims.role)}:${sub}`;
}

const noSuchUpload = () => new StorageError(404, "NoSuchUpload", "Upload not found", "not_found");

/** An error as @tus/server answers it: Storage's error body. */
function tusError(error: StorageError): { status_code: number; body: string } {
  return {
    status_code: error.status,
    body: JSON.stringify({
      statusCode: String(error.status),
      code: error.code,
      error: error.error,
      message: error.message,
    }),
  };
}

const UPLOAD_WORDS: Record<string, [string, string]> = {
  upload_already_completed: ["The resource already exists", "Duplicate"],
  file_too_large: ["The object exceeded the maximum allowed size", "Payload too large"],
};

/** Any failure of a hook in Storage's words (as ./routes.ts's sendError answers it). */
function asStorageError(error: unknown, log: FastifyRequest["log"] | undefined): StorageError {
  if (error instanceof StorageError) return error;
  if (error instanceof UploadError) {
    const words = UPLOAD_WORDS[error.code];
    return new StorageError(error.status, error.code, words?.[0] ?? error.message, words?.[1] ?? error.code);
  }
  if (error instanceof TooLargeError) return STORAGE_ERRORS.tooLarge();
  const dbError = asDbError(error);
  if (dbError) {
    if (dbError.sqlstate === "42501") return STORAGE_ERRORS.accessDenied(dbError.message);
    if (dbError.sqlstate === "23505") return STORAGE_ERRORS.keyExists();
    const mapped = mapDbError(dbError);
    if (mapped.status < 500 || mapped.status === 503) {
      return new StorageError(mapped.status, mapped.code, dbError.message);
    }
  }
  log?.error({ err: error }, "resumable upload failed");
  return new StorageError(500, "internal_error", "The request could not be completed; it has been logged.");
}

export function registerResumableRoutes(raw: FastifyInstance, deps: ResumableDeps): void {
  const { db, store, limits } = deps;
  const maxObject = limits.maxBytes.audio;
  const datastore = new FileStore({
    directory: deps.dir,
    expirationPeriodInMilliseconds: deps.expiresMs ?? RESUMABLE_EXPIRY_MS,
  });
  // The caller of each request, identified by the route before @tus/server sees it.
  const callers = new WeakMap<IncomingMessage, { who: Caller; request: FastifyRequest }>();
  const callerOf = (req: unknown) => {
    const node = (req as { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;
    const found = node ? callers.get(node) : undefined;
    if (!found) throw new Error("a resumable upload request reached @tus/server without its caller");
    return found;
  };

  const options: ServerOptions & { datastore: FileStore } = {
    path: `${raw.prefix}/upload/resumable`,
    datastore,
    // One process serves an upload at a time (a PATCH waits for the dropped one before it to end).
    locker: new MemoryLocker(),
    // tus-js-client resolves it against the endpoint it was given (a proxy's included).
    relativeLocation: true,
    namingFunction: () => randomUUID().replaceAll("-", ""),
    // The upload's id is the path's last segment, as the route that checked its binding read it —
    // never a segment of the query string (@tus/server's default takes the URL's last "/" part,
    // query included, so "<mine>?x=/<theirs>" would pass the check on one and act on the other).
    getFileIdFromRequest: (req) => {
      const match = /\/upload\/resumable\/([^/]+)$/.exec(new URL(req.url).pathname);
      return match?.[1];
    },
    allowedOrigins: () => true,
    allowedHeaders: ["apikey", "authorization", "x-upsert", "x-client-info"],
    exposedHeaders: ["x-request-id", "backline-asset-id"],
    onUploadCreate: async (req, upload) => {
      const { who, request } = callerOf(req);
      try {
        return { metadata: await admit(who, request, upload) };
      } catch (error) {
        throw tusError(asStorageError(error, request.log));
      }
    },
    onUploadFinish: async (req, upload) => {
      const { who, request } = callerOf(req);
      try {
        await finish(who, upload);
      } catch (error) {
        const e = asStorageError(error, request.log);
        // A refusal is final: the staged file goes. A failure of the server keeps it for another try.
        if (e.status < 500) await datastore.remove(upload.id).catch(() => {});
        throw tusError(e);
      }
      await datastore.remove(upload.id).catch(() => {});
      // A media slot's upload names its asset, whose checks the client follows (docs/storage.md).
      return upload.metadata?.assetId ? { headers: { "Backline-Asset-Id": upload.metadata.assetId } } : {};
    },
  };
  const tus = new Server(options);

  /** Whether the caller may upload this object at all: asked before any byte is stored. */
  async function admit(
    who: Caller,
    request: FastifyRequest,
    upload: Upload,
  ): Promise<Record<string, string | null>> {
    const given = upload.metadata ?? {};
    const bucketName = given.bucketName;
    const objectName = given.objectName;
    if (!bucketName) throw STORAGE_ERRORS.missingParameter("bucketName");
    if (!objectName) throw STORAGE_ERRORS.missingParameter("objectName");
    if (upload.size === undefined) {
      throw STORAGE_ERRORS.invalidRequest("Upload-Length is required (deferred lengths are not supported)");
    }
    const size = upload.size;
    const contentType = given.contentType || "application/octet-stream";
    const upsert = String(request.headers["x-upsert"]).toLowerCase() === "true";
    const userMetadata = given.metadata ?? null;
    if (userMetadata !== null) parseUserMetadata(userMetadata);
    const staged = await stagedUploads(deps.dir);
    const mine = staged.filter((u) => u.binding === bindingOf(who)).length;
    const tenants = staged.filter((u) => u.tenant === who.tenant.id);
    const declared = tenants.reduce((sum, u) => sum + u.size, 0);
    if (
      mine >= OPEN_UPLOADS_PER_CALLER ||
      tenants.length >= OPEN_UPLOADS_PER_TENANT ||
      declared + size > OPEN_BYTES_PER_TENANT
    ) {
      throw new StorageError(
        429,
        "too_many_uploads",
        `Too many unfinished uploads: at most ${OPEN_UPLOADS_PER_CALLER} per user and ${OPEN_UPLOADS_PER_TENANT} (${OPEN_BYTES_PER_TENANT / 1024 ** 3} GiB) per tenant at once; finish or cancel one first`,
      );
    }
    const bound: Record<string, string | null> = {
      bucketName,
      objectName,
      contentType,
      cacheControl: given.cacheControl ?? null,
      metadata: userMetadata,
      upsert: String(upsert),
      tenant: who.tenant.id,
      binding: bindingOf(who),
    };
    if (isBuiltIn(bucketName)) {
      const slot = slotOf(bucketName, objectName);
      if (!slot) {
        throw new StorageError(
          400,
          "invalid_path",
          `${bucketName}/${objectName} names no media: paths in ${bucketName} are ${SLOT_PATHS[bucketName as keyof typeof SLOT_PATHS]}.`,
        );
      }
      const max = limits.maxBytes[slot.kind];
      if (size > max) throw STORAGE_ERRORS.tooLarge();
      // The release's rules, as the caller: the same pending asset a signed upload makes.
      const { asset } = await db.withRequestContext(who.claims, (tx) =>
        createUpload(tx, store, limits, {
          releaseId: slot.releaseId,
          trackId: slot.trackId,
          kind: slot.kind,
          contentType: slot.contentType,
          filename: objectName.split("/").pop(),
        }),
      );
      return { ...bound, contentType: slot.contentType, assetId: asset.id };
    }
    checkKey(objectName);
    const { bucket, exists } = await db.withRequestContext(who.claims, async (tx) => {
      const found = await findBucket(tx, who.tenant.id, bucketName);
      if (!(await mayWrite(tx, who.tenant.id, bucketName, objectName))) {
        throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
      }
      return { bucket: found, exists: await objectExists(tx, who.tenant.id, bucketName, objectName) };
    });
    checkLimits(bucket, size, contentType);
    if (exists && !upsert) throw STORAGE_ERRORS.keyExists();
    return bound;
  }

  function checkLimits(
    bucket: { file_size_limit: string | number | null; allowed_mime_types: string[] | null },
    size: number,
    contentType: string,
  ): number {
    const limit = Math.min(
      bucket.file_size_limit === null ? maxObject : Number(bucket.file_size_limit),
      maxObject,
    );
    if (size > limit) throw STORAGE_ERRORS.tooLarge();
    if (!mimeAllowed(contentType, bucket.allowed_mime_types)) {
      throw STORAGE_ERRORS.invalidMimeType(contentType);
    }
    return limit;
  }

  /** The last byte has arrived: the staged file becomes the object (or the slot's asset). */
  async function finish(who: Caller, upload: Upload): Promise<void> {
    const meta = upload.metadata ?? {};
    if (meta.binding !== bindingOf(who)) throw noSuchUpload();
    const file = path.join(deps.dir, upload.id);
    const size = upload.size ?? upload.offset;
    if (meta.assetId) return finishAsset(who, meta.assetId, file);
    const bucketName = meta.bucketName as string;
    const name = meta.objectName as string;
    const contentType = meta.contentType || "application/octet-stream";
    // The bucket's rules again: they may have changed while the bytes were arriving.
    const bucket = await db.withRequestContext(who.claims, (tx) => findBucket(tx, who.tenant.id, bucketName));
    const limit = checkLimits(bucket, size, contentType);
    const objectKey = newObjectKey(who.tenant.id);
    const put = store.put as NonNullable<ObjectStore["put"]>;
    const stored = await put.call(store, objectKey, createReadStream(file), { maxBytes: limit, contentType });
    const given = String(meta.cacheControl ?? "").trim();
    const cacheControl = /^[\w=, -]{1,200}$/.test(given) ? given : "max-age=3600";
    const metadata = {
      eTag: `"${stored.sha256.slice(0, 32)}"`,
      size: stored.bytes,
      mimetype: contentType,
      cacheControl: /^\d+$/.test(cacheControl) ? `max-age=${cacheControl}` : cacheControl,
      lastModified: new Date().toISOString(),
      contentLength: stored.bytes,
      httpStatusCode: 200,
    };
    try {
      // Written as the caller: the insert (or with x-upsert, update) policy decides again.
      const { replacedKey } = await db.withRequestContext(who.claims, (tx) =>
        saveObject(tx, {
          tenantId: who.tenant.id,
          bucket: bucketName,
          name,
          owner: typeof who.claims.sub === "string" ? who.claims.sub : undefined,
          objectKey,
          metadata,
          userMetadata: meta.metadata ? parseUserMetadata(meta.metadata) : undefined,
          upsert: meta.upsert === "true",
        }),
      );
      if (replacedKey) await store.remove(replacedKey);
    } catch (error) {
      await store.remove(objectKey);
      throw error;
    }
  }

  /** A media slot's upload: the asset completes as a signed upload's does (media.validate queued). */
  async function finishAsset(who: Caller, assetId: string, file: string): Promise<void> {
    // The caller must still see the asset (its release) under row-level security.
    const asset = await db.withRequestContext(
      who.claims,
      async (tx) =>
        (
          await tx.query<AssetRow>(
            "select id, account_id, object_key, content_type, max_bytes from public.media_assets where id = $1",
            [assetId],
          )
        ).rows[0],
    );
    if (!asset) throw STORAGE_ERRORS.accessDenied("The release of this upload is no longer yours to change");
    const max = Number(asset.max_bytes);
    let staleKeys: string[];
    if (store instanceof LocalStore) {
      const received = await store.receive(asset.object_key, createReadStream(file), max);
      try {
        ({ staleKeys } = await completeUpload(
          db,
          asset.id,
          { bytes: received.bytes, sha256: received.sha256 },
          received.commit,
        ));
      } catch (error) {
        await received.discard();
        throw error;
      }
    } else {
      // Straight into the bucket at its staging key, promoted once the upload is accepted.
      const staging = stagingKey(asset.account_id, asset.id, asset.object_key);
      const put = store.put as NonNullable<ObjectStore["put"]>;
      const stored = await put.call(store, staging, createReadStream(file), {
        maxBytes: max,
        contentType: asset.content_type,
      });
      try {
        ({ staleKeys } = await completeUpload(db, asset.id, stored, async () => {
          await (store.promote as NonNullable<ObjectStore["promote"]>).call(store, staging, asset.object_key);
        }));
      } catch (error) {
        await store.remove(staging);
        throw error;
      }
    }
    await Promise.all(staleKeys.map((k) => store.remove(k)));
  }

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.method !== "OPTIONS") {
      const who = await deps.caller(request, reply);
      if (!who) return reply;
      const id = (request.params as { "*"?: string })["*"] ?? "";
      try {
        if (request.method === "POST") {
          if (id !== "") throw STORAGE_ERRORS.routeNotFound(request.method, request.url.split("?")[0] ?? "");
        } else {
          // HEAD, PATCH, DELETE: only the upload's own caller finds it.
          if (!UPLOAD_ID.test(id)) throw noSuchUpload();
          const upload = await datastore.getUpload(id).catch(() => undefined);
          if (!upload || upload.metadata?.binding !== bindingOf(who)) throw noSuchUpload();
        }
      } catch (error) {
        if (request.method === "PATCH") reply.header("connection", "close");
        return deps.sendError(request, reply, error);
      }
      callers.set(request.raw, { who, request });
    }
    reply.hijack();
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value !== undefined) reply.raw.setHeader(name, value as string);
    }
    reply.raw.setHeader("x-content-type-options", "nosniff");
    await tus.handle(request.raw, reply.raw);
  };
  const methods = ["POST", "HEAD", "PATCH", "DELETE", "OPTIONS"] as const;
  raw.route({ method: [...methods], url: "/upload/resumable", handler });
  raw.route({ method: [...methods], url: "/upload/resumable/*", handler });

  // Unfinished uploads past their expiry: swept at start and every hour.
  const sweep = () =>
    datastore.deleteExpired().catch((error: unknown) => {
      raw.log.warn({ err: error }, "resumable uploads: sweeping expired uploads failed");
      return 0;
    });
  const timer = setInterval(sweep, SWEEP_EVERY_MS);
  timer.unref();
  raw.addHook("onReady", async () => {
    await sweep();
  });
  raw.addHook("onClose", async () => {
    clearInterval(timer);
  });
}

/** Removes the unfinished uploads in `dir` older than `expiresMs` (what the hourly sweep does). */
export async function sweepExpiredUploads(dir: string, expiresMs = RESUMABLE_EXPIRY_MS): Promise<number> {
  return new FileStore({ directory: dir, expirationPeriodInMilliseconds: expiresMs }).deleteExpired();
}

async function objectExists(tx: Tx, tenantId: string, bucket: string, name: string): Promise<boolean> {
  const r = await tx.query(
    "select 1 from storage.objects where tenant_id = $1 and bucket_id = $2 and name = $3",
    [tenantId, bucket, name],
  );
  return (r.rowCount ?? 0) > 0;
}

/** The uploader's `metadata` (a JSON object of at most 8 kB), as a standard upload takes it. */
function parseUserMetadata(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw STORAGE_ERRORS.invalidRequest("metadata is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value) || text.length > 8192) {
    throw STORAGE_ERRORS.invalidRequest("metadata is a JSON object of at most 8192 characters");
  }
  return value as Record<string, unknown>;
}
