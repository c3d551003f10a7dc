import type { Readable } from "node:stream";
import busboy from "busboy";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import type { Claims } from "../db/types.ts";
import {
  bucketJson,
  builtInBucket,
  createBucket,
  deleteBucket,
  emptyBucket,
  findBucket,
  isBuiltIn,
  listBuckets,
  updateBucket,
} from "./buckets.ts";
import type { ObjectStore } from "./driver.ts";
import { STORAGE_ERRORS, StorageError } from "./errors.ts";
import { TooLargeError } from "./local.ts";
import {
  bucketForWrite,
  checkKey,
  findObject,
  infoJson,
  listObjects,
  listObjectsV2,
  listOptions,
  listV2Options,
  mayWrite,
  moveObject,
  newObjectKey,
  type ObjectRow,
  removedJson,
  removeObjects,
  saveObject,
} from "./objects.ts";
import { type ObjectGrant, TokenError, type TokenSigner } from "./tokens.ts";
import {
  parseTransform,
  TRANSFORM_LIMITS,
  type TransformOptions,
  transformClaim,
  transformStored,
} from "./transform.ts";
import type { UploadLimits } from "./uploads.ts";

/**
 * /storage/v1 for a tenant's own buckets (docs/uploads.md, "Buckets" and "Objects"): the bucket
 * routes, and the object routes for every bucket but the built-in media slots (./routes.ts keeps
 * those). Every row is read and written as the caller; only a signed URL's or a public bucket's
 * download reads as the server, for the one object the token or the public flag allows.
 */

export interface Caller {
  tenant: { id: string };
  claims: Claims;
  user?: { id: string } | undefined;
}

export interface ObjectRouteDeps {
  db: Db;
  store: ObjectStore;
  signer: TokenSigner;
  limits: UploadLimits;
  caller(request: FastifyRequest, reply: FastifyReply): Promise<Caller | undefined>;
  sendError(request: FastifyRequest, reply: FastifyReply, error: unknown): unknown;
}

type Params = { bucket: string; "*"?: string };

export function objectPath(request: FastifyRequest): { bucket: string; name: string } {
  const params = request.params as Params;
  return { bucket: params.bucket, name: params["*"] ?? "" };
}

const body = (request: FastifyRequest) => (request.body ?? {}) as Record<string, unknown>;

export function mimeAllowed(type: string, allowed: string[] | null): boolean {
  if (!allowed || allowed.length === 0) return true;
  const base = type.split(";")[0]?.trim().toLowerCase() ?? "";
  return allowed.some((a) => {
    const rule = a.toLowerCase();
    return rule.endsWith("/*") ? base.startsWith(rule.slice(0, -1)) : base === rule;
  });
}

/**
 * What a bucket takes: its size limit and media types, for bytes already stored elsewhere (a copy
 * or a move must not put into a bucket what an upload there would be refused).
 */
function checkFits(
  bucket: { file_size_limit: string | number | null; allowed_mime_types: string[] | null },
  metadata: { size?: unknown; mimetype?: unknown },
): void {
  const mimetype = typeof metadata.mimetype === "string" ? metadata.mimetype : "application/octet-stream";
  if (!mimeAllowed(mimetype, bucket.allowed_mime_types)) throw STORAGE_ERRORS.invalidMimeType(mimetype);
  if (bucket.file_size_limit !== null && Number(metadata.size ?? 0) > Number(bucket.file_size_limit)) {
    throw STORAGE_ERRORS.tooLarge();
  }
}

function expiresIn(value: unknown): number {
  const n = Number(value);
  if (value === undefined || value === null) throw STORAGE_ERRORS.missingParameter("expiresIn");
  if (!Number.isInteger(n) || n < 1 || n > 604_800) {
    throw STORAGE_ERRORS.invalidParameter(
      "expiresIn",
      "expiresIn is a whole number of seconds from 1 to 604800",
    );
  }
  return n;
}

/** `attachment; filename=…` for `download=` (the object's own name when the value is empty). */
function disposition(download: unknown, name: string): string | undefined {
  if (typeof download !== "string") return undefined;
  const filename = download === "" ? (name.split("/").pop() ?? "file") : download;
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

export interface ObjectHandlers {
  download(request: FastifyRequest, reply: FastifyReply, head: boolean): Promise<unknown>;
  info(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  sign(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  signedDownload(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  signUpload(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  signedUpload(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  upload(method: "POST" | "PUT"): (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  /** /render/image/authenticated|public|sign/{bucket}/{path} (./transform.ts). */
  render(
    kind: "authenticated" | "public" | "sign",
  ): (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
}

export function registerObjectRoutes(json: FastifyInstance, deps: ObjectRouteDeps): ObjectHandlers {
  const { db, store, signer, limits } = deps;
  const maxObject = limits.maxBytes.audio;
  const transformLimits = limits.transform ?? TRANSFORM_LIMITS;
  const handle =
    (fn: (request: FastifyRequest, reply: FastifyReply, who: Caller) => Promise<unknown>) =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      const who = await deps.caller(request, reply);
      if (!who) return reply;
      try {
        return await fn(request, reply, who);
      } catch (error) {
        return deps.sendError(request, reply, error);
      }
    };
  const asCaller = <T>(who: Caller, fn: Parameters<Db["withRequestContext"]>[1]) =>
    db.withRequestContext(who.claims, fn) as Promise<T>;
  const owner = (who: Caller) => (typeof who.claims.sub === "string" ? who.claims.sub : undefined);

  // Buckets.
  json.get(
    "/bucket",
    handle(async (request, reply, who) =>
      reply.send(
        await asCaller(who, (tx) =>
          listBuckets(tx, who.tenant.id, limits, request.query as Record<string, unknown>),
        ),
      ),
    ),
  );
  json.get(
    "/bucket/:id",
    handle(async (request, reply, who) => {
      const id = (request.params as { id: string }).id;
      if (isBuiltIn(id)) return reply.send(bucketJson(builtInBucket(id, limits), true));
      const row = await asCaller<Awaited<ReturnType<typeof findBucket>>>(who, (tx) =>
        findBucket(tx, who.tenant.id, id),
      );
      return reply.send(bucketJson(row));
    }),
  );
  json.post(
    "/bucket",
    handle(async (request, reply, who) => {
      const name = await asCaller<string>(who, (tx) =>
        createBucket(tx, who.tenant.id, owner(who), body(request), maxObject),
      );
      return reply.send({ name });
    }),
  );
  json.put(
    "/bucket/:id",
    handle(async (request, reply, who) => {
      const id = (request.params as { id: string }).id;
      await asCaller(who, (tx) => updateBucket(tx, who.tenant.id, id, body(request), maxObject));
      return reply.send({ message: "Successfully updated" });
    }),
  );
  json.post(
    "/bucket/:id/empty",
    handle(async (request, reply, who) => {
      const id = (request.params as { id: string }).id;
      const keys = await asCaller<string[]>(who, (tx) => emptyBucket(tx, who.tenant.id, id));
      await removeAll(store, keys);
      return reply.send({ message: "Successfully emptied" });
    }),
  );
  json.delete(
    "/bucket/:id",
    handle(async (request, reply, who) => {
      const id = (request.params as { id: string }).id;
      await asCaller(who, (tx) => deleteBucket(tx, who.tenant.id, id));
      return reply.send({ message: "Successfully deleted" });
    }),
  );

  /**
   * Stores the body for `name` in `bucketId` as `ownerId`, after the bucket's rules and (with
   * `claims`) the policies; without claims a signed upload token is the permission.
   */
  async function receiveObject(
    request: FastifyRequest,
    tenantId: string,
    claims: Claims | undefined,
    bucketId: string,
    name: string,
    upsert: boolean,
    ownerId: string | undefined,
  ) {
    checkKey(name);
    // One transaction asks for the bucket and whether the caller may write there, before any byte.
    const bucket = claims
      ? await db.withRequestContext(claims, async (tx) => {
          const found = await bucketForWrite(tx, tenantId, bucketId, name);
          if (!found.mayWrite)
            throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
          return found.bucket;
        })
      : await db.asService((tx) => findBucket(tx, tenantId, bucketId));
    const limit = Math.min(
      bucket.file_size_limit === null ? maxObject : Number(bucket.file_size_limit),
      maxObject,
    );
    const declared = Number(request.headers["content-length"]);
    const multipart = /^multipart\/form-data/i.test(request.headers["content-type"] ?? "");
    if (!multipart && Number.isFinite(declared) && declared > limit) throw STORAGE_ERRORS.tooLarge();
    const incoming = multipart
      ? await multipartFile(request)
      : {
          stream: request.raw as Readable,
          type: request.headers["content-type"] ?? "application/octet-stream",
          cacheControl: request.headers["cache-control"],
          metadata: headerMetadata(request.headers["x-metadata"]),
        };
    let userMetadata: Record<string, unknown> | undefined;
    try {
      userMetadata = parseUserMetadata(incoming.metadata);
    } catch (error) {
      incoming.stream.resume();
      throw error;
    }
    const mimetype = incoming.type || "application/octet-stream";
    if (!mimeAllowed(mimetype, bucket.allowed_mime_types)) {
      incoming.stream.resume();
      throw STORAGE_ERRORS.invalidMimeType(mimetype);
    }
    const objectKey = newObjectKey(tenantId);
    let stored: { bytes: number; sha256: string };
    try {
      stored = await (store.put as NonNullable<ObjectStore["put"]>).call(store, objectKey, incoming.stream, {
        maxBytes: limit,
        contentType: mimetype,
      });
    } catch (error) {
      if (error instanceof TooLargeError) throw STORAGE_ERRORS.tooLarge();
      throw error;
    }
    // Served back as a header: only a plain directive list (or Storage's bare seconds) is kept.
    const given = String(incoming.cacheControl ?? "").trim();
    const cacheControl = /^[\w=, -]{1,200}$/.test(given) ? given : "max-age=3600";
    const now = new Date().toISOString();
    const metadata = {
      eTag: `"${stored.sha256.slice(0, 32)}"`,
      size: stored.bytes,
      mimetype,
      cacheControl: /^\d+$/.test(cacheControl) ? `max-age=${cacheControl}` : cacheControl,
      lastModified: now,
      contentLength: stored.bytes,
      httpStatusCode: 200,
    };
    try {
      const save = (tx: Parameters<Parameters<Db["asService"]>[0]>[0]) =>
        saveObject(tx, {
          tenantId,
          bucket: bucketId,
          name,
          owner: ownerId,
          objectKey,
          metadata,
          userMetadata,
          upsert,
        });
      const { row, replacedKey } = claims
        ? await db.withRequestContext(claims, save)
        : await db.asService(save);
      if (replacedKey) await store.remove(replacedKey);
      return row;
    } catch (error) {
      await store.remove(objectKey);
      throw error;
    }
  }

  // Uploads: POST (x-upsert decides), PUT (update: replaces an existing object).
  const upload = (method: "POST" | "PUT") =>
    handle(async (request, reply, who) => {
      const { bucket, name } = objectPath(request);
      if (isBuiltIn(bucket)) {
        throw STORAGE_ERRORS.notSupported(
          `upload() to ${bucket}: its files go through createSignedUploadUrl and uploadToSignedUrl`,
        );
      }
      const upsert = method === "PUT" || String(request.headers["x-upsert"]).toLowerCase() === "true";
      if (method === "PUT") {
        await asCaller(who, (tx) => findObject(tx, who.tenant.id, bucket, name));
      }
      const row = await receiveObject(request, who.tenant.id, who.claims, bucket, name, upsert, owner(who));
      return reply.send({ Id: row.id, Key: `${bucket}/${name}` });
    });

  /**
   * Streams an object's bytes with Storage's headers; with `transform`, the image transformed
   * (./transform.ts) under the same headers but its own type and length.
   */
  async function sendObject(
    reply: FastifyReply,
    row: ObjectRow,
    download: unknown,
    head: boolean,
    transform?: { options: TransformOptions; accept: string | undefined },
  ) {
    const info = await store.stat(row.object_key);
    if (!info) throw STORAGE_ERRORS.noSuchKey();
    if (transform) {
      const out = await transformStored(
        store,
        row.object_key,
        info.bytes,
        transform.options,
        transform.accept,
        transformLimits,
      );
      reply
        .header("content-type", out.contentType)
        .header("content-length", String(out.body.length))
        .header("cache-control", row.metadata.cacheControl || "no-cache")
        .header("last-modified", new Date(row.updated_at).toUTCString())
        .header("content-security-policy", "default-src 'none'; sandbox");
      if (out.negotiated) reply.header("vary", "Accept");
      if (out.applied) reply.header("x-transformations", out.applied);
      const d = disposition(download, row.name);
      if (d) reply.header("content-disposition", d);
      return reply.send(out.body);
    }
    reply
      .header("content-type", row.metadata.mimetype || "application/octet-stream")
      .header("content-length", String(info.bytes))
      .header("cache-control", row.metadata.cacheControl || "no-cache")
      .header("etag", row.metadata.eTag)
      .header("last-modified", new Date(row.updated_at).toUTCString())
      // A tenant's file is served from Backline's origin: it may never run there.
      .header("content-security-policy", "default-src 'none'; sandbox");
    const d = disposition(download, row.name);
    if (d) reply.header("content-disposition", d);
    if (head) return reply.send();
    return reply.send(await store.read(row.object_key));
  }

  const downloadOf = async (request: FastifyRequest, reply: FastifyReply, head: boolean) =>
    handle(async (req, rep, who) => {
      const { bucket, name } = objectPath(req);
      const row = await asCaller<ObjectRow>(who, async (tx) => {
        await findBucket(tx, who.tenant.id, bucket);
        return findObject(tx, who.tenant.id, bucket, name);
      });
      return sendObject(rep, row, (req.query as Record<string, unknown>).download, head);
    })(request, reply);

  const info = (request: FastifyRequest, reply: FastifyReply) =>
    handle(async (req, rep, who) => {
      const { bucket, name } = objectPath(req);
      const row = await asCaller<ObjectRow>(who, async (tx) => {
        await findBucket(tx, who.tenant.id, bucket);
        return findObject(tx, who.tenant.id, bucket, name);
      });
      return rep.send(infoJson(row));
    })(request, reply);

  json.post(
    "/object/list/:bucket",
    handle(async (request, reply, who) => {
      const { bucket } = objectPath(request);
      if (isBuiltIn(bucket)) throw STORAGE_ERRORS.notSupported(`list() of ${bucket}`);
      const options = listOptions(body(request));
      // JSON text made by the database, which also checks the bucket (./objects.ts).
      const items = await asCaller(who, (tx) => listObjects(tx, who.tenant.id, bucket, options));
      return reply.type("application/json; charset=utf-8").send(items);
    }),
  );

  json.post(
    "/object/list-v2/:bucket",
    handle(async (request, reply, who) => {
      const { bucket } = objectPath(request);
      if (isBuiltIn(bucket)) throw STORAGE_ERRORS.notSupported(`listV2() of ${bucket}`);
      const options = listV2Options(body(request));
      const page = await asCaller(who, async (tx) => {
        await findBucket(tx, who.tenant.id, bucket);
        return listObjectsV2(tx, who.tenant.id, bucket, options);
      });
      return reply.send(page);
    }),
  );

  const movePaths = (request: FastifyRequest) => {
    const b = body(request);
    if (typeof b.bucketId !== "string") throw STORAGE_ERRORS.missingParameter("bucketId");
    if (typeof b.sourceKey !== "string") throw STORAGE_ERRORS.missingParameter("sourceKey");
    if (typeof b.destinationKey !== "string") throw STORAGE_ERRORS.missingParameter("destinationKey");
    const destinationBucket = typeof b.destinationBucket === "string" ? b.destinationBucket : b.bucketId;
    for (const bucket of [b.bucketId, destinationBucket]) {
      if (isBuiltIn(bucket)) throw STORAGE_ERRORS.notSupported(`move and copy in ${bucket}`);
    }
    return {
      from: { bucket: b.bucketId, name: checkKey(b.sourceKey) },
      to: { bucket: destinationBucket, name: checkKey(b.destinationKey) },
    };
  };

  json.post(
    "/object/move",
    handle(async (request, reply, who) => {
      const { from, to } = movePaths(request);
      await asCaller(who, async (tx) => {
        const destination = await findBucket(tx, who.tenant.id, to.bucket);
        if (to.bucket !== from.bucket) {
          checkFits(destination, (await findObject(tx, who.tenant.id, from.bucket, from.name)).metadata);
        }
        await moveObject(tx, who.tenant.id, from, to).catch((error: unknown) => {
          throw asDbError(error)?.sqlstate === "23505" ? STORAGE_ERRORS.resourceExists() : error;
        });
      });
      return reply.send({ message: "Successfully moved" });
    }),
  );

  json.post(
    "/object/copy",
    handle(async (request, reply, who) => {
      const { from, to } = movePaths(request);
      const source = await asCaller<ObjectRow>(who, async (tx) => {
        const destination = await findBucket(tx, who.tenant.id, to.bucket);
        const found = await findObject(tx, who.tenant.id, from.bucket, from.name);
        checkFits(destination, found.metadata);
        return found;
      });
      const objectKey = newObjectKey(who.tenant.id);
      await (store.copy as NonNullable<ObjectStore["copy"]>).call(store, source.object_key, objectKey);
      try {
        const { row } = await asCaller<{ row: ObjectRow }>(who, (tx) =>
          saveObject(tx, {
            tenantId: who.tenant.id,
            bucket: to.bucket,
            name: to.name,
            owner: owner(who),
            objectKey,
            metadata: { ...source.metadata, lastModified: new Date().toISOString() },
            userMetadata: source.user_metadata ?? undefined,
            upsert: false,
          }),
        );
        return reply.send({ Id: row.id, Key: `${to.bucket}/${to.name}`, ...objectJson(row) });
      } catch (error) {
        await store.remove(objectKey);
        throw error;
      }
    }),
  );

  json.delete(
    "/object/:bucket",
    handle(async (request, reply, who) => {
      const { bucket } = objectPath(request);
      if (isBuiltIn(bucket)) throw STORAGE_ERRORS.notSupported(`remove() in ${bucket}`);
      const prefixes = body(request).prefixes;
      if (
        !Array.isArray(prefixes) ||
        !prefixes.every((p) => typeof p === "string") ||
        prefixes.length > 1000
      ) {
        throw STORAGE_ERRORS.invalidParameter("prefixes", "prefixes is a list of at most 1000 object names");
      }
      const rows = await asCaller<ObjectRow[]>(who, async (tx) => {
        await findBucket(tx, who.tenant.id, bucket);
        return removeObjects(tx, who.tenant.id, bucket, prefixes as string[]);
      });
      await removeAll(
        store,
        rows.map((r) => r.object_key),
      );
      return reply.send(rows.map(objectJson));
    }),
  );

  json.delete(
    "/object/:bucket/*",
    handle(async (request, reply, who) => {
      const { bucket, name } = objectPath(request);
      if (isBuiltIn(bucket)) throw STORAGE_ERRORS.notSupported(`remove() in ${bucket}`);
      const rows = await asCaller<ObjectRow[]>(who, async (tx) => {
        await findBucket(tx, who.tenant.id, bucket);
        return removeObjects(tx, who.tenant.id, bucket, [name]);
      });
      if (rows.length === 0) throw STORAGE_ERRORS.noSuchKey();
      await removeAll(
        store,
        rows.map((r) => r.object_key),
      );
      return reply.send({ message: "Successfully deleted" });
    }),
  );

  /**
   * A signed URL's path for one object the caller may read (NoSuchKey otherwise); with a
   * transform, a /render/image/sign URL whose token carries it (the query cannot change it).
   */
  async function signedPath(
    who: Caller,
    bucket: string,
    name: string,
    seconds: number,
    transform?: TransformOptions,
  ): Promise<string> {
    await asCaller(who, (tx) => findObject(tx, who.tenant.id, bucket, name));
    const grant: ObjectGrant = {
      use: "object-read",
      key: `${bucket}/${name}`,
      tenant: who.tenant.id,
      bucket,
      name,
      ...(transform ? { transform: transformClaim(transform) } : {}),
      exp: Math.floor(Date.now() / 1000) + seconds,
    };
    const route = transform ? "/render/image/sign" : "/object/sign";
    return `${route}/${encodePath(bucket, name)}?token=${signer.sign(grant)}`;
  }

  json.post(
    "/object/sign/:bucket",
    handle(async (request, reply, who) => {
      const { bucket } = objectPath(request);
      const b = body(request);
      const seconds = expiresIn(b.expiresIn);
      if (!Array.isArray(b.paths) || b.paths.length > 1000 || !b.paths.every((p) => typeof p === "string")) {
        throw STORAGE_ERRORS.invalidParameter("paths", "paths is a list of at most 1000 object names");
      }
      if (isBuiltIn(bucket)) throw STORAGE_ERRORS.notSupported(`createSignedUrls in ${bucket}`);
      await asCaller(who, (tx) => findBucket(tx, who.tenant.id, bucket));
      const out = [];
      for (const path of b.paths as string[]) {
        try {
          out.push({ error: null, path, signedURL: await signedPath(who, bucket, path, seconds) });
        } catch (error) {
          if (!(error instanceof StorageError)) throw error;
          out.push({
            error: "Either the object does not exist or you do not have access to it",
            path,
            signedURL: null,
          });
        }
      }
      return reply.send(out);
    }),
  );

  const sign = (request: FastifyRequest, reply: FastifyReply) =>
    handle(async (req, rep, who) => {
      const { bucket, name } = objectPath(req);
      const seconds = expiresIn(body(req).expiresIn);
      const transform = parseTransform(
        body(req).transform as Record<string, unknown> | undefined,
        transformLimits,
      );
      await asCaller(who, (tx) => findBucket(tx, who.tenant.id, bucket));
      return rep.send({ signedURL: await signedPath(who, bucket, name, seconds, transform) });
    })(request, reply);

  /**
   * The token is the permission: one object of one tenant's bucket, read as the server. On
   * /render/image/sign (`render`), the image is transformed as the token says.
   */
  const signedDownload = async (request: FastifyRequest, reply: FastifyReply, render = false) => {
    try {
      const { bucket, name } = objectPath(request);
      const query = request.query as Record<string, unknown>;
      if (typeof query.token !== "string") throw STORAGE_ERRORS.invalidRequest("The URL has no token");
      const grant = signer.verify(query.token);
      if (grant.use !== "object-read" || grant.bucket !== bucket || grant.name !== name) {
        throw new TokenError("token_invalid", "This token is not for downloading this object.");
      }
      const row = await db.asService((tx) => findObject(tx, grant.tenant, bucket, name));
      const transform = render
        ? {
            options: parseTransform(grant.transform ?? {}, transformLimits) ?? {},
            accept: request.headers.accept,
          }
        : undefined;
      return await sendObject(reply, row, query.download, false, transform);
    } catch (error) {
      return deps.sendError(request, reply, error);
    }
  };

  /** A public bucket's object, read as the server (a private bucket is not found this way). */
  const publicDownload = async (request: FastifyRequest, reply: FastifyReply, render: boolean) => {
    const who = await deps.caller(request, reply);
    if (!who) return reply;
    try {
      const { bucket, name } = objectPath(request);
      const query = request.query as Record<string, unknown>;
      const transform = render
        ? { options: parseTransform(query, transformLimits) ?? {}, accept: request.headers.accept }
        : undefined;
      const row = await db.asService(async (tx) => {
        const b = await findBucket(tx, who.tenant.id, bucket);
        if (!b.public) throw STORAGE_ERRORS.noSuchBucket();
        return findObject(tx, who.tenant.id, bucket, name);
      });
      return await sendObject(reply, row, query.download, false, transform);
    } catch (error) {
      return deps.sendError(request, reply, error);
    }
  };
  json.get("/object/public/:bucket/*", (request, reply) => publicDownload(request, reply, false));

  /** An object the caller reads under the policies (as the download route), transformed. */
  const authenticatedRender = handle(async (request, reply, who) => {
    const { bucket, name } = objectPath(request);
    const query = request.query as Record<string, unknown>;
    const options = parseTransform(query, transformLimits) ?? {};
    const row = await asCaller<ObjectRow>(who, async (tx) => {
      await findBucket(tx, who.tenant.id, bucket);
      return findObject(tx, who.tenant.id, bucket, name);
    });
    return sendObject(reply, row, query.download, false, { options, accept: request.headers.accept });
  });

  const render =
    (kind: "authenticated" | "public" | "sign") => (request: FastifyRequest, reply: FastifyReply) =>
      kind === "authenticated"
        ? authenticatedRender(request, reply)
        : kind === "public"
          ? publicDownload(request, reply, true)
          : signedDownload(request, reply, true);

  const signUpload = (request: FastifyRequest, reply: FastifyReply) =>
    handle(async (req, rep, who) => {
      const { bucket, name } = objectPath(req);
      checkKey(name);
      const upsert = String(req.headers["x-upsert"]).toLowerCase() === "true";
      const allowed = await asCaller<boolean>(who, async (tx) => {
        await findBucket(tx, who.tenant.id, bucket);
        return mayWrite(tx, who.tenant.id, bucket, name);
      });
      if (!allowed) throw STORAGE_ERRORS.accessDenied("new row violates row-level security policy");
      const grant: ObjectGrant = {
        use: "object-upload",
        key: `${bucket}/${name}`,
        tenant: who.tenant.id,
        bucket,
        name,
        ...(owner(who) ? { owner: owner(who) } : {}),
        upsert,
        exp: Math.floor(Date.now() / 1000) + 7200,
      };
      const token = signer.sign(grant);
      return rep.send({ url: `/object/upload/sign/${encodePath(bucket, name)}?token=${token}`, token });
    })(request, reply);

  /** The token is the permission (checked against the policies when it was signed). */
  const signedUpload = async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      const { bucket, name } = objectPath(request);
      const token = (request.query as Record<string, unknown>).token;
      if (typeof token !== "string") throw STORAGE_ERRORS.invalidRequest("The URL has no token");
      const grant = signer.verify(token);
      if (grant.use !== "object-upload" || grant.bucket !== bucket || grant.name !== name) {
        throw new TokenError("token_invalid", "This token is not for uploading to this object.");
      }
      const row = await receiveObject(
        request,
        grant.tenant,
        undefined,
        bucket,
        name,
        grant.upsert === true,
        grant.owner,
      );
      return reply.send({ Id: row.id, Key: `${bucket}/${name}` });
    } catch (error) {
      return deps.sendError(request, reply, error);
    }
  };

  return {
    download: downloadOf,
    info,
    sign,
    signedDownload: (request, reply) => signedDownload(request, reply),
    signUpload,
    signedUpload,
    upload,
    render,
  };
}

/**
 * An object as Storage answers a copy (beside `Id` and `Key`) or a remove: the row's fields, with
 * `owner` and `owner_id` the uploader ("" for a key's upload), and `version` the row's, as `info`.
 */
function objectJson(row: ObjectRow): Record<string, unknown> {
  return {
    ...removedJson(row),
    owner: row.owner ?? "",
    owner_id: row.owner ?? "",
    version: row.id,
    user_metadata: row.user_metadata ?? {},
  };
}

/** Removes the bytes of deleted rows, 32 at a time (an emptied bucket may hold many thousands). */
async function removeAll(store: ObjectStore, keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 32) {
    await Promise.all(keys.slice(i, i + 32).map((k) => store.remove(k)));
  }
}

/** storage-js sends a raw body's metadata as base64 JSON in `x-metadata`. */
function headerMetadata(header: string | string[] | undefined): string | undefined {
  if (typeof header !== "string") return undefined;
  return Buffer.from(header, "base64").toString("utf8");
}

/** The uploader's metadata: a JSON object of at most 8 kB (InvalidRequest otherwise). */
function parseUserMetadata(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined || text === "") return undefined;
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

function encodePath(bucket: string, name: string): string {
  return [bucket, ...name.split("/")].map(encodeURIComponent).join("/");
}

/** The file of a multipart/form-data body (storage-js sends `cacheControl` before it). */
function multipartFile(request: FastifyRequest): Promise<{
  stream: Readable;
  type: string;
  cacheControl: string | undefined;
  metadata: string | undefined;
}> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: request.headers, limits: { files: 1, fields: 10, fieldSize: 64 * 1024 } });
    } catch {
      reject(STORAGE_ERRORS.invalidRequest("The multipart body has no boundary"));
      return;
    }
    const fields: Record<string, string> = {};
    let found = false;
    parser.on("field", (field, value) => {
      fields[field] = value;
    });
    parser.on("file", (_name, file, info) => {
      found = true;
      resolve({
        stream: file,
        type: info.mimeType,
        cacheControl: fields.cacheControl,
        metadata: fields.metadata,
      });
    });
    parser.on("error", (error) => {
      if (!found) reject(STORAGE_ERRORS.invalidRequest(`The multipart body is malformed: ${String(error)}`));
    });
    parser.on("close", () => {
      if (!found) reject(STORAGE_ERRORS.invalidRequest("No content provided"));
    });
    request.raw.pipe(parser);
  });
}
