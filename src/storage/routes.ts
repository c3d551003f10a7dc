import type { Readable } from "node:stream";
import busboy from "busboy";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { asDbError, mapDbError } from "../db/errors.ts";
import { identify, postgrestGatewayError } from "../http/gateway.ts";
import type { TenantDirectory } from "../tenancy/directory.ts";
import { isBuiltIn } from "./buckets.ts";
import { downloadHeaders } from "./download.ts";
import type { ObjectStore } from "./driver.ts";
import { STORAGE_ERRORS, StorageError } from "./errors.ts";
import { BUCKETS, type Bucket, SLOT_PATHS, type Slot, slotOf, storagePathOf } from "./keys.ts";
import { LocalStore, TooLargeError } from "./local.ts";
import { type ObjectHandlers, registerObjectRoutes } from "./object-routes.ts";
import { registerResumableRoutes } from "./resumable.ts";
import { TokenError, type TokenSigner } from "./tokens.ts";
import { parseTransform, TRANSFORM_LIMITS, transformStored } from "./transform.ts";
import {
  type AssetRow,
  assetById,
  completeUpload,
  createUpload,
  UploadError,
  type UploadLimits,
} from "./uploads.ts";

/**
 * /storage/v1 (docs/uploads.md): the storage interface of the table world, shaped as Supabase
 * Storage so that storage-js (supabase-js's `storage`) works unchanged. Two kinds of bucket:
 *
 * - a tenant's own buckets and their objects (./object-routes.ts: buckets, upload, download, list,
 *   move, copy, remove, info, signed and public URLs), rows of storage.buckets and storage.objects
 *   under row-level security;
 * - the built-in media slots `artwork` and `audio` (here): signed uploads into a release's cover
 *   (`<release_id>/cover.jpg|png`) or a track's audio (`<release_id>/<track_id>.wav|flac`), checked
 *   by the pipeline, signed URLs bound to the file's version, downloads as the caller; the PUT
 *   upload route is also the local driver's upload URL of /api/public/v1.
 *
 * Every failure, on every path of the prefix, answers in Storage's error shape (./errors.ts).
 */
export interface StorageRoutesOptions {
  db: Db;
  directory: TenantDirectory;
  store: ObjectStore;
  signer: TokenSigner;
  limits: UploadLimits;
  /** Where resumable uploads are staged (DATA_DIR/resumable; ./resumable.ts); unset: no TUS endpoint. */
  resumableDir?: string;
}

const ERROR_NAMES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "not_found",
  409: "Conflict",
  410: "Gone",
  413: "Payload too large",
  415: "Unsupported Media Type",
  500: "Internal",
  504: "Gateway Timeout",
};

export function send(reply: FastifyReply, status: number, code: string, message: string, error?: string) {
  return reply
    .code(status)
    .type("application/json")
    .send({ statusCode: String(status), error: error ?? ERROR_NAMES[status] ?? "Error", code, message });
}

/** Storage's words for the upload conditions whose Backline codes stay (they are documented). */
const UPLOAD_WORDS: Record<string, [string, string]> = {
  upload_already_completed: ["The resource already exists", "Duplicate"],
  file_too_large: ["The object exceeded the maximum allowed size", "Payload too large"],
};

export function sendError(request: FastifyRequest, reply: FastifyReply, error: unknown) {
  if (error instanceof StorageError) {
    if (error.status === 413) reply.header("connection", "close");
    return send(reply, error.status, error.code, error.message, error.error);
  }
  if (error instanceof UploadError) {
    const words = UPLOAD_WORDS[error.code];
    return send(reply, error.status, error.code, words?.[0] ?? error.message, words?.[1]);
  }
  if (error instanceof TokenError) return send(reply, 403, error.code, error.message);
  if (error instanceof TooLargeError) {
    reply.header("connection", "close");
    return send(reply, 413, "file_too_large", error.message, "Payload too large");
  }
  const dbError = asDbError(error);
  if (dbError) {
    const mapped = mapDbError(dbError);
    if (dbError.sqlstate === "42501") {
      // Storage's answer to a policy's refusal.
      return send(reply, 403, "AccessDenied", dbError.message, "Unauthorized");
    }
    if (dbError.sqlstate === "23505")
      return send(reply, 409, "KeyAlreadyExists", "The resource already exists", "Duplicate");
    // A refusal (4xx) or a busy database (503) is the caller's to read.
    if (mapped.status < 500 || mapped.status === 503)
      return send(reply, mapped.status, mapped.code, dbError.message);
    if (mapped.code === "statement_timeout") {
      request.log.warn({ sqlstate: dbError.sqlstate }, "storage statement cancelled (statement timeout)");
      return send(
        reply,
        504,
        mapped.code,
        "The request ran longer than its statement timeout and was cancelled.",
      );
    }
  }
  request.log.error({ err: error }, "storage request failed");
  return send(reply, 500, "internal_error", "The request could not be completed; it has been logged.");
}

function slotFrom(request: FastifyRequest): { bucket: Bucket; path: string; slot: Slot } {
  const params = request.params as { bucket: string; "*": string };
  const bucket = params.bucket;
  if (!(BUCKETS as readonly string[]).includes(bucket)) {
    throw STORAGE_ERRORS.noSuchBucket();
  }
  const path = params["*"] ?? "";
  const slot = slotOf(bucket, path);
  if (!slot) {
    throw new StorageError(
      400,
      "invalid_path",
      `${bucket}/${path} names no media: paths in ${bucket} are ${SLOT_PATHS[bucket as Bucket]}.`,
    );
  }
  return { bucket: bucket as Bucket, path, slot };
}

export async function storageRoutes(app: FastifyInstance, options: StorageRoutesOptions): Promise<void> {
  const { db, directory, store, signer, limits } = options;
  const transformLimits = limits.transform ?? TRANSFORM_LIMITS;

  // No answer of /storage/v1 is ever sniffed into another type than it says (a file, an error, a redirect).
  app.addHook("onSend", async (_request, reply) => {
    reply.header("x-content-type-options", "nosniff");
  });

  async function caller(request: FastifyRequest, reply: FastifyReply) {
    let who: Awaited<ReturnType<typeof identify>>;
    try {
      who = await identify(directory, request, { requireAuthorization: false });
    } catch (error) {
      // The tenant lookup failed in the database: storage's own error shape, as for any other failure.
      sendError(request, reply, error);
      return undefined;
    }
    if (!who.ok) {
      const e = postgrestGatewayError(who.failure);
      reply.headers(e.headers);
      send(reply, e.status, e.body.code === "PGRST301" ? "invalid_jwt" : "unauthorized", e.body.message);
      return undefined;
    }
    return who.caller;
  }

  /** The slot's current asset as the caller sees it (RLS), or a 404. */
  async function currentAsset(claims: Record<string, unknown>, slot: Slot): Promise<AssetRow> {
    const asset = await db.withRequestContext(
      claims as never,
      async (tx) =>
        (
          await tx.query<AssetRow>(
            `select id, kind, object_key, content_type, bytes, status, superseded_at from public.media_assets
             where release_id = $1 and kind = $2 and track_id is not distinct from $3
               and status <> 'pending' and superseded_at is null`,
            [slot.releaseId, slot.kind, slot.trackId ?? null],
          )
        ).rows[0],
    );
    if (!asset || storagePathOf(asset.object_key).split(".")[0] !== `${slot.kind}/${objectBase(slot)}`) {
      throw new StorageError(404, "not_found", "Object not found");
    }
    return asset;
  }

  /**
   * The asset's bytes, with the headers its inspection allows (./download.ts). Bytes whose size is
   * not the asset's are another version being put in place: refused, never served in its name.
   */
  async function sendAsset(reply: FastifyReply, asset: AssetRow, download?: unknown) {
    const info = await store.stat(asset.object_key);
    if (!info) throw new StorageError(404, "not_found", "Object not found");
    if (asset.bytes !== null && Number(asset.bytes) !== info.bytes) {
      throw replaced("The file is being replaced at this moment: ask again.");
    }
    const { contentType } = downloadHeaders(asset);
    const contentDisposition = dispositionFor(asset, download);
    const body = await store.read(asset.object_key);
    return reply
      .header("content-type", contentType)
      .header("content-disposition", contentDisposition)
      .header("content-length", String(info.bytes))
      .header("cache-control", "private, max-age=0")
      .send(body);
  }

  /**
   * A release's cover transformed (/render/image/authenticated/artwork/...), read as the caller
   * like its download; only a cover the pipeline found valid (a JPEG or PNG) is transformed.
   */
  async function slotRender(request: FastifyRequest, reply: FastifyReply) {
    const who = await caller(request, reply);
    if (!who) return reply;
    try {
      const options = parseTransform(request.query as Record<string, unknown>, transformLimits) ?? {};
      const { slot } = slotFrom(request);
      const asset = await currentAsset(who.claims, slot);
      if (asset.kind !== "artwork" || asset.status !== "valid") {
        throw new StorageError(
          422,
          "InvalidImage",
          "The object cannot be transformed: only a cover that passed inspection is",
          "Unprocessable Entity",
        );
      }
      const info = await store.stat(asset.object_key);
      if (!info) throw new StorageError(404, "not_found", "Object not found");
      const out = await transformStored(
        store,
        asset.object_key,
        info.bytes,
        options,
        request.headers.accept,
        transformLimits,
      );
      if (out.negotiated) reply.header("vary", "Accept");
      if (out.applied) reply.header("x-transformations", out.applied);
      return reply
        .header("content-type", out.contentType)
        .header("content-disposition", "inline")
        .header("content-length", String(out.body.length))
        .header("cache-control", "private, max-age=0")
        .send(out.body);
    } catch (error) {
      return sendError(request, reply, error);
    }
  }

  /** Storage's object info for a media slot's current file. */
  async function slotInfo(request: FastifyRequest, reply: FastifyReply) {
    const who = await caller(request, reply);
    if (!who) return reply;
    try {
      const { bucket, path, slot } = slotFrom(request);
      const asset = await currentAsset(who.claims, slot);
      const { contentType } = downloadHeaders(asset);
      return reply.send({
        id: asset.id,
        name: path,
        version: asset.id,
        bucket_id: bucket,
        size: asset.bytes === null ? null : Number(asset.bytes),
        content_type: contentType,
        cache_control: "private, max-age=0",
        etag: null,
        metadata: { status: asset.status },
        last_modified: null,
        created_at: null,
      });
    } catch (error) {
      return sendError(request, reply, error);
    }
  }

  // Storage's answers for every path and every failure of this interface, never problem+json.
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, STORAGE_ERRORS.routeNotFound(request.method, request.url.split("?")[0] ?? "")),
  );
  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    const status = error.statusCode;
    if (status === 413) return sendError(request, reply, STORAGE_ERRORS.tooLarge());
    if (status === 415)
      return sendError(
        request,
        reply,
        STORAGE_ERRORS.invalidMimeType(String(request.headers["content-type"] ?? "")),
      );
    if (status && status >= 400 && status < 500) {
      return sendError(request, reply, STORAGE_ERRORS.invalidRequest(error.message));
    }
    return sendError(request, reply, error);
  });

  const builtIn = (request: FastifyRequest) => isBuiltIn((request.params as { bucket: string }).bucket);
  let objects: ObjectHandlers | undefined;
  const handlers = () => objects as ObjectHandlers;

  // JSON routes.
  app.register(async (json) => {
    objects = registerObjectRoutes(json, {
      db,
      store,
      signer,
      limits,
      caller: async (request, reply) => (await caller(request, reply)) as never,
      sendError,
    });
    json.get("/object/info/:bucket/*", async (request, reply) =>
      builtIn(request) ? slotInfo(request, reply) : handlers().info(request, reply),
    );
    json.get("/object/info/authenticated/:bucket/*", async (request, reply) =>
      builtIn(request) ? slotInfo(request, reply) : handlers().info(request, reply),
    );
    json.get("/object/info/public/:bucket/*", async (request, reply) =>
      builtIn(request) ? slotInfo(request, reply) : handlers().info(request, reply),
    );

    json.post("/object/upload/sign/:bucket/*", async (request, reply) => {
      if (!builtIn(request)) return handlers().signUpload(request, reply);
      const who = await caller(request, reply);
      if (!who) return reply;
      try {
        const { bucket, path, slot } = slotFrom(request);
        const { target } = await db.withRequestContext(who.claims, (tx) =>
          createUpload(tx, store, limits, {
            releaseId: slot.releaseId,
            trackId: slot.trackId,
            kind: slot.kind,
            contentType: slot.contentType,
            filename: path.split("/").pop(),
          }),
        );
        // storage-js uploads to /object/upload/sign/{path}?token=: the token is what counts.
        const token = new URL(target.url).searchParams.get("token");
        if (!token) {
          throw new StorageError(
            400,
            "not_supported",
            "This server's storage driver takes uploads at presigned URLs: use POST /api/public/v1/releases/{id}/artwork-upload-url.",
          );
        }
        return reply.send({ url: `/object/upload/sign/${bucket}/${path}?token=${token}`, token });
      } catch (error) {
        return sendError(request, reply, error);
      }
    });

    json.post("/object/sign/:bucket/*", async (request, reply) => {
      if (!builtIn(request)) return handlers().sign(request, reply);
      const who = await caller(request, reply);
      if (!who) return reply;
      try {
        const { bucket, path, slot } = slotFrom(request);
        if ((request.body as { transform?: unknown } | undefined)?.transform) {
          throw STORAGE_ERRORS.notSupported(
            "image transformation on a signed URL of a media slot (use /render/image/authenticated)",
          );
        }
        const expiresIn = (request.body as { expiresIn?: unknown } | undefined)?.expiresIn;
        if (
          typeof expiresIn !== "number" ||
          !Number.isInteger(expiresIn) ||
          expiresIn < 1 ||
          expiresIn > 604_800
        ) {
          throw new StorageError(
            400,
            "invalid_expires_in",
            "expiresIn is a whole number of seconds from 1 to 604800.",
          );
        }
        const asset = await currentAsset(who.claims, slot);
        // Bound to this asset: once the file is replaced (another asset), the URL answers 410.
        const token = signer.sign({
          use: "download",
          key: asset.object_key,
          asset: asset.id,
          exp: Math.floor(Date.now() / 1000) + expiresIn,
        });
        return reply.send({ signedURL: `/object/sign/${bucket}/${path}?token=${token}` });
      } catch (error) {
        return sendError(request, reply, error);
      }
    });

    const download = async (request: FastifyRequest, reply: FastifyReply) => {
      if (!builtIn(request)) return handlers().download(request, reply, request.method === "HEAD");
      const who = await caller(request, reply);
      if (!who) return reply;
      try {
        const { slot } = slotFrom(request);
        const asset = await currentAsset(who.claims, slot);
        return await sendAsset(reply, asset, (request.query as { download?: unknown }).download);
      } catch (error) {
        return sendError(request, reply, error);
      }
    };
    json.get("/object/authenticated/:bucket/*", download);

    json.get("/object/sign/:bucket/*", async (request, reply) => {
      if (!builtIn(request)) return handlers().signedDownload(request, reply);
      try {
        const { bucket, path } = slotFrom(request);
        const token = (request.query as { token?: unknown }).token;
        if (typeof token !== "string") throw new StorageError(400, "token_missing", "The URL has no token.");
        const grant = signer.verify(token);
        if (grant.use !== "download" || storagePathOf(grant.key) !== `${bucket}/${path}`) {
          throw new TokenError("token_invalid", "This token is not for downloading this object.");
        }
        if (typeof grant.asset !== "string") {
          throw new TokenError(
            "token_invalid",
            "This URL was signed before downloads were bound to a file's version: ask for a new one.",
          );
        }
        // The token is the permission; the asset it names must still be the slot's file.
        const asset = await assetById(db, grant.asset);
        if (!asset)
          throw new StorageError(404, "not_found", "The file this URL was signed for no longer exists.");
        if (asset.object_key !== grant.key || asset.superseded_at !== null || asset.status === "pending") {
          throw replaced();
        }
        if (!(store instanceof LocalStore) && store.downloadUrl) {
          // A presigned GET that lives minutes, not the token's days: it is made for this version only.
          const expiresAt = new Date(Math.min(grant.exp * 1000, Date.now() + PRESIGNED_GET_SECONDS * 1000));
          const { contentType } = downloadHeaders(asset);
          const contentDisposition = dispositionFor(
            asset,
            (request.query as { download?: unknown }).download,
          );
          return reply.redirect(
            await store.downloadUrl(grant.key, expiresAt, { contentType, contentDisposition }),
            302,
          );
        }
        return await sendAsset(reply, asset, (request.query as { download?: unknown }).download);
      } catch (error) {
        return sendError(request, reply, error);
      }
    });

    json.get("/object/:bucket/*", download);

    // Image transforms (./transform.ts). The media slots are private: no public URL, and a slot's
    // signed URL is not made with a transform (createSignedUrl answers NotSupported).
    json.get("/render/image/authenticated/:bucket/*", async (request, reply) =>
      builtIn(request) ? slotRender(request, reply) : handlers().render("authenticated")(request, reply),
    );
    json.get("/render/image/public/:bucket/*", async (request, reply) =>
      builtIn(request)
        ? sendError(request, reply, STORAGE_ERRORS.noSuchBucket())
        : handlers().render("public")(request, reply),
    );
    json.get("/render/image/sign/:bucket/*", async (request, reply) =>
      builtIn(request)
        ? sendError(request, reply, STORAGE_ERRORS.invalidRequest("This token is not for a transform"))
        : handlers().render("sign")(request, reply),
    );
  });

  // The upload itself: the body is streamed, never parsed or buffered.
  app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
    raw.post("/object/:bucket/*", (request, reply) => handlers().upload("POST")(request, reply));
    raw.put("/object/:bucket/*", (request, reply) => handlers().upload("PUT")(request, reply));
    const upload = async (request: FastifyRequest, reply: FastifyReply) => {
      if (!builtIn(request)) return handlers().signedUpload(request, reply);
      try {
        const { bucket, path } = slotFrom(request);
        const token = (request.query as { token?: unknown }).token;
        if (typeof token !== "string") throw new StorageError(400, "token_missing", "The URL has no token.");
        const grant = signer.verify(token);
        if (grant.use !== "upload" || storagePathOf(grant.key) !== `${bucket}/${path}`) {
          throw new TokenError("token_invalid", "This token is not for uploading to this object.");
        }
        if (!(store instanceof LocalStore)) {
          throw new StorageError(400, "not_supported", "Uploads go to the presigned storage URL, not here.");
        }
        const asset = await assetById(db, grant.asset);
        if (asset?.status !== "pending") {
          throw new UploadError(
            409,
            "upload_already_completed",
            "This upload URL was already used: ask for a new one to replace the file.",
          );
        }
        const declared = Number(request.headers["content-length"]);
        if (Number.isFinite(declared) && declared > grant.max && !isMultipart(request)) {
          throw new TooLargeError(grant.max);
        }
        const body = isMultipart(request) ? await firstFile(request) : request.raw;
        if (
          !isMultipart(request) &&
          grant.type &&
          !typeMatches(request.headers["content-type"], grant.type)
        ) {
          throw new StorageError(
            415,
            "content_type_mismatch",
            `Send the file with Content-Type: ${grant.type}, as the upload URL's headers say.`,
          );
        }
        const received = await store.receive(grant.key, body, grant.max);
        let staleKeys: string[];
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
        await Promise.all(staleKeys.map((k) => store.remove(k)));
        return reply.send({
          Key: `${bucket}/${path}`,
          Id: asset.id,
          asset_id: asset.id,
          status: "uploaded",
          bytes: received.bytes,
          sha256: received.sha256,
        });
      } catch (error) {
        return sendError(request, reply, error);
      }
    };
    raw.put("/object/upload/sign/:bucket/*", upload);
    // Resumable uploads (TUS): /upload/resumable, its bodies streamed to the staging files.
    if (options.resumableDir) {
      registerResumableRoutes(raw, {
        db,
        store,
        limits,
        dir: options.resumableDir,
        caller: async (request, reply) => (await caller(request, reply)) as never,
        sendError,
      });
    }
  });
}

/**
 * The answer's Content-Disposition: the inspection's (./download.ts) unless `download=` asks for
 * an attachment, named by its value (the file's own name when empty).
 */
function dispositionFor(asset: AssetRow, download: unknown): string {
  const { contentDisposition } = downloadHeaders(asset);
  if (typeof download !== "string") return contentDisposition;
  const own = storagePathOf(asset.object_key).split("/").pop() ?? "file";
  const name = download === "" ? own : download;
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** How long the S3 URL a signed download redirects to lives: long enough to follow, too short to keep. */
const PRESIGNED_GET_SECONDS = 300;

function replaced(
  message = "The file was replaced after this URL was signed: ask for a new signed URL.",
): StorageError {
  return new StorageError(410, "object_replaced", message);
}

function objectBase(slot: Slot): string {
  return slot.kind === "artwork" ? `${slot.releaseId}/cover` : `${slot.releaseId}/${slot.trackId}`;
}

function isMultipart(request: FastifyRequest): boolean {
  return /^multipart\/form-data/i.test(request.headers["content-type"] ?? "");
}

// storage-js sends text/plain unless told a type; the bytes are inspected whatever the header says,
// so only a header naming another media type is refused.
function typeMatches(header: string | undefined, expected: string): boolean {
  const given = (header ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (given === "" || given === "text/plain" || given === "application/octet-stream") return true;
  return (
    given === expected ||
    (given.startsWith("audio/") && expected.startsWith("audio/") && sameAudio(given, expected))
  );
}

function sameAudio(a: string, b: string): boolean {
  const family = (t: string) => (t.includes("flac") ? "flac" : "wav");
  return family(a) === family(b);
}

/** The first file of a multipart/form-data body, as a stream (storage-js sends a Blob this way). */
function firstFile(request: FastifyRequest): Promise<Readable> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: request.headers, limits: { files: 1, fields: 10, fieldSize: 64 * 1024 } });
    } catch {
      reject(new StorageError(400, "invalid_multipart", "The multipart body has no boundary."));
      return;
    }
    let found = false;
    parser.on("file", (_name, file) => {
      found = true;
      resolve(file);
    });
    parser.on("error", (error) => {
      if (!found)
        reject(
          new StorageError(400, "invalid_multipart", `The multipart body is malformed: ${String(error)}`),
        );
    });
    parser.on("close", () => {
      if (!found) reject(new StorageError(400, "no_file", "The multipart body holds no file."));
    });
    request.raw.pipe(parser);
  });
}
