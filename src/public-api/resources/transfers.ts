import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Db } from "../../db/db.ts";
import type { Tx } from "../../db/types.ts";
import { Count, Timestamp, timestamp } from "../../http/formats.ts";
import { enqueue } from "../../jobs/queue.ts";
import type { ObjectStore } from "../../storage/driver.ts";
import { TooLargeError } from "../../storage/local.ts";
import {
  JOB_COLUMNS,
  TRANSFER_JOB_KIND,
  TRANSFER_UPLOAD_MAX_BYTES,
  TransferJob,
  type TransferJobRow,
  transferJobOut,
} from "../../transfer/job.ts";
import type { Caller } from "../auth.ts";
import { ApiError, notFound } from "../errors.ts";
import { Id, listOf, Pagination, route } from "../route.ts";

/**
 * Catalogue transfer through the public API (docs/public-api.md, "Transfers"; issue 40): a transfer
 * file (the CSV template, or one ERN 4.3 / 3.8.2 message) goes to a signed upload slot of its own
 * kind, then POST /transfers runs the import (src/transfer/import.ts) for the key's account as a
 * job in the worker (src/transfer/job.ts), polled with GET /transfers/{id}, ending with a
 * transfer.completed event.
 *
 * The slot's URL carries a secret token (its SHA-256 kept, as an API key's): whoever holds it may
 * send one file of at most max_bytes until it expires. A CSV's or a message's bytes go to the
 * database beside the slot (migration 0038): they are small and belong to the account, not to a
 * release. An archive's (a zip of an ERN delivery with its media, up to 2 GiB) go to the
 * installation's media storage through the driver's put (local disk or S3; migration 0042), under
 * a key of the tenant's own made like a bucket object's, `objects/<tenant>/<upload id>`, and are
 * removed once a real run has used them.
 */

const TAG = "Transfers";
/** How long a transfer upload URL takes bytes. */
const UPLOAD_TTL_SECONDS = 900;

const TYPES = {
  "text/csv": "csv",
  "application/xml": "ern",
  "application/zip": "ern",
} as const;
type SlotType = keyof typeof TYPES;
const SLOT_TYPES = Object.keys(TYPES) as [SlotType, ...SlotType[]];
/** The slot's limit by its type (TRANSFER_UPLOAD_MAX_BYTES). */
const LIMIT_OF = { "text/csv": "csv", "application/xml": "ern", "application/zip": "zip" } as const;
/** What the PUT may carry besides the slot's own type: the bytes are read by the import anyway. */
const ALSO_ACCEPTED: Record<string, SlotType> = {
  "application/csv": "text/csv",
  "text/xml": "application/xml",
  "application/x-zip-compressed": "application/zip",
  "application/x-zip": "application/zip",
};
/** The slot's type when none is given: from the filename's extension, else the CSV template. */
const typeOfName = (filename: string | undefined): SlotType =>
  /\.zip$/i.test(filename ?? "")
    ? "application/zip"
    : /\.xml$/i.test(filename ?? "")
      ? "application/xml"
      : "text/csv";
const WHAT = { csv: "CSV", ern: "ERN message", zip: "zip archive" } as const;

const TransferUpload = z
  .object({
    id: Id,
    object: z.literal("transfer_upload"),
    status: z.enum(["pending", "uploaded"]).meta({
      description:
        "pending: the URL was issued, no file yet; uploaded: the file arrived (POST /transfers takes it).",
    }),
    filename: z.string().nullable(),
    content_type: z.enum(SLOT_TYPES),
    source_format: z
      .enum(["csv", "ern"])
      .meta({ description: "csv, or ern (an ERN message or a zip of them)." }),
    max_bytes: Count,
    bytes: Count.nullable(),
    sha256: z.string().nullable(),
    upload_expires_at: Timestamp,
    uploaded_at: Timestamp.nullable(),
    created_at: Timestamp,
  })
  .meta({ id: "TransferUpload", description: "A transfer file's upload slot." });

const TransferUploadRequest = z
  .object({
    filename: z.string().min(1).max(255).optional().meta({
      description: "The file's name, kept for reference; .xml means an ERN message, .zip an archive.",
    }),
    content_type: z
      .enum(SLOT_TYPES)
      .optional()
      .meta({
        description:
          "text/csv (the CSV template, at most 32 MiB), application/xml (one ERN 4.3 or 3.8.2 message, at most " +
          "16 MiB) or application/zip (a previous distributor's ERN delivery: messages with their audio and " +
          "artwork in the folders the messages name, at most 2 GiB; docs/catalogue.md). Default: from the " +
          "filename's extension, else text/csv.",
      }),
    size: z
      .number()
      .int()
      .min(1)
      .optional()
      .meta({ description: "The file's size in bytes; refused at once when over the limit." }),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional()
      .meta({
        description: "The file's SHA-256 (lower-case hex); a file that arrives different is refused.",
      }),
  })
  .strict()
  .meta({ id: "TransferUploadRequest" });

const TransferUploadUrl = z
  .object({
    object: z.literal("transfer_upload_url"),
    upload_id: Id.meta({ description: "The slot's id: POST /transfers takes it once the file has arrived." }),
    upload_url: z.string().meta({ description: "Where to send the file." }),
    method: z.literal("PUT"),
    headers: z
      .record(z.string(), z.string())
      .meta({ description: "Headers to send with the file, exactly as given." }),
    expires_at: Timestamp.meta({ description: "The URL takes the file until then." }),
    max_bytes: Count,
    upload: TransferUpload,
  })
  .meta({ id: "TransferUploadUrl" });

const CreateTransfer = z
  .object({
    upload_id: Id.meta({ description: "The transfer upload holding the file (status uploaded)." }),
    dry_run: z.boolean().default(false).meta({
      description: "true: write nothing, report what would happen (the same file can then run for real).",
    }),
  })
  .strict()
  .meta({ id: "TransferRequest" });

interface UploadRow {
  id: string;
  filename: string | null;
  content_type: SlotType;
  max_bytes: string | number;
  status: "pending" | "uploaded";
  bytes: string | number | null;
  sha256: string | null;
  upload_expires_at: Date | string;
  uploaded_at: Date | string | null;
  created_at: Date | string;
}

const UPLOAD_COLUMNS =
  "id, filename, content_type, max_bytes, status, bytes, sha256, upload_expires_at, uploaded_at, created_at";

const uploadOut = (r: UploadRow): z.infer<typeof TransferUpload> => ({
  id: r.id,
  object: "transfer_upload",
  status: r.status,
  filename: r.filename,
  content_type: r.content_type,
  source_format: TYPES[r.content_type],
  max_bytes: Number(r.max_bytes),
  bytes: r.bytes === null ? null : Number(r.bytes),
  sha256: r.sha256,
  upload_expires_at: timestamp(r.upload_expires_at) as string,
  uploaded_at: timestamp(r.uploaded_at),
  created_at: timestamp(r.created_at) as string,
});

/** The account the caller acts for, refused unless the caller may write it (the database's rule). */
async function writableAccount(tx: Tx, caller: Caller): Promise<string> {
  const account = caller.accountId as string;
  const ok = (
    await tx.query<{ ok: boolean }>(
      "select $1::uuid = any ((select auth.writable_account_ids())::uuid[]) as ok",
      [account],
    )
  ).rows[0]?.ok;
  if (!ok) {
    throw new ApiError(403, "account_read_only", "This caller may read the account but not write to it.");
  }
  return account;
}

const sha256Hex = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

const ofUpload = z.object({ id: Id }).strict();
const ofTransfer = z.object({ id: Id }).strict();

const ListQuery = Pagination.pick({ limit: true, starting_after: true });

export const transferRoutes = [
  route({
    method: "POST",
    path: "/transfer-uploads",
    operationId: "createTransferUpload",
    summary: "Signed URL for a transfer file",
    description:
      "A short-lived URL to upload a catalogue transfer file: the CSV template (text/csv, at most 32 MiB), one ERN " +
      "4.3 / 3.8.2 message (application/xml, at most 16 MiB), or a zip of a previous distributor's ERN delivery " +
      "with its audio and artwork (application/zip, at most 2 GiB; its limits and problem codes in " +
      "docs/catalogue.md). Send the file with the method and headers given, then POST /transfers with the " +
      "upload's id.",
    tag: TAG,
    scope: "catalog:write",
    // Each call makes a new URL: replaying a stored response would hand out a used one.
    idempotent: false,
    body: TransferUploadRequest,
    bodyOptional: true,
    response: { status: 201, description: "The upload URL.", schema: TransferUploadUrl },
    errors: [413, 422],
    handler: async ({ body, caller, write, services }) => {
      const b = (body ?? {}) as z.infer<typeof TransferUploadRequest>;
      const contentType = b.content_type ?? typeOfName(b.filename);
      const limit = LIMIT_OF[contentType];
      const maxBytes = TRANSFER_UPLOAD_MAX_BYTES[limit];
      if (b.size !== undefined && b.size > maxBytes) {
        throw new ApiError(
          413,
          "file_too_large",
          `The file is ${b.size} bytes; a ${WHAT[limit]} takes at most ${maxBytes} bytes.`,
          { param: "size" },
        );
      }
      const account = await write((tx) => writableAccount(tx, caller));
      const id = randomUUID();
      // An archive goes to media storage at a key of the tenant's own; the others beside the slot.
      const objectKey = contentType === "application/zip" ? `objects/${caller.tenantId}/${id}` : null;
      const token = randomBytes(32).toString("base64url");
      const expiresAt = new Date(Date.now() + UPLOAD_TTL_SECONDS * 1000);
      const row = await services.db.asService(
        async (tx) =>
          (
            await tx.query<UploadRow>(
              `insert into internal.transfer_uploads (tenant_id, account_id, filename, content_type, token_hash,
                 declared_bytes, declared_sha256, max_bytes, upload_expires_at, id, object_key)
               values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) returning ${UPLOAD_COLUMNS}`,
              [
                caller.tenantId,
                account,
                b.filename ?? null,
                contentType,
                sha256Hex(token),
                b.size ?? null,
                b.sha256 ?? null,
                maxBytes,
                expiresAt,
                id,
                objectKey,
              ],
            )
          ).rows[0] as UploadRow,
      );
      return {
        status: 201,
        body: {
          object: "transfer_upload_url",
          upload_id: row.id,
          upload_url: `${services.publicUrl}/api/public/v1/transfer-uploads/${row.id}/file?token=${token}`,
          method: "PUT",
          headers: { "content-type": contentType },
          expires_at: timestamp(row.upload_expires_at) as string,
          max_bytes: maxBytes,
          upload: uploadOut(row),
        },
      };
    },
  }),

  route({
    method: "GET",
    path: "/transfer-uploads/{id}",
    operationId: "getTransferUpload",
    summary: "Get a transfer upload",
    description: "Whether the file has arrived (status uploaded), with its size and SHA-256.",
    tag: TAG,
    scope: "catalog:read",
    params: ofUpload,
    response: { status: 200, description: "The upload.", schema: TransferUpload },
    errors: [404],
    handler: async ({ params, caller, read }) => {
      const row = await read(
        async (tx) =>
          (
            await tx.query<UploadRow>(
              `select ${UPLOAD_COLUMNS} from internal.transfer_uploads where id = $1 and account_id = $2`,
              [params.id, caller.accountId],
            )
          ).rows[0],
      );
      if (!row) throw notFound("transfer upload", params.id);
      return { body: uploadOut(row) };
    },
  }),

  route({
    method: "POST",
    path: "/transfers",
    operationId: "createTransfer",
    summary: "Transfer a catalogue from an uploaded file",
    description:
      "Runs the catalogue transfer (the same import as `backline transfer import`, docs/catalogue.md) of an uploaded " +
      "transfer file for this account, as a job: 202 with the transfer queued; poll GET /transfers/{id} until it is " +
      "completed or failed, or subscribe to transfer.completed. A dry run writes nothing and reports what would " +
      "happen. Releases arrive as drafts marked as transferred, matched by UPC and ISRC, so the same file twice " +
      "changes nothing; a release with a problem is left out, the others go in.",
    tag: TAG,
    scope: "catalog:write",
    body: CreateTransfer,
    response: { status: 202, description: "The transfer, queued.", schema: TransferJob },
    errors: [404, 409, 422],
    handler: async ({ body, caller, write, services }) => {
      const account = await write((tx) => writableAccount(tx, caller));
      const row = await services.db.asService(async (tx) => {
        const upload = (
          await tx.query<{
            id: string;
            status: string;
            filename: string | null;
            content_type: SlotType;
            has_content: boolean;
          }>(
            `select id, status, filename, content_type,
               content is not null or object_key is not null as has_content
             from internal.transfer_uploads where id = $1 and account_id = $2 for update`,
            [body.upload_id, account],
          )
        ).rows[0];
        if (!upload) {
          throw new ApiError(
            404,
            "resource_missing",
            `No transfer upload with id ${body.upload_id} in this account.`,
            {
              param: "upload_id",
            },
          );
        }
        if (upload.status !== "uploaded") {
          throw new ApiError(409, "upload_not_received", "No file has arrived at the upload URL yet.", {
            param: "upload_id",
          });
        }
        if (!upload.has_content) {
          throw new ApiError(
            409,
            "upload_used",
            "A transfer already imported this file and it is no longer kept: upload it again.",
            { param: "upload_id" },
          );
        }
        const job = (
          await tx.query<TransferJobRow>(
            `insert into internal.transfer_jobs (tenant_id, account_id, upload_id, dry_run, source_format, filename)
             values ($1, $2, $3, $4, $5, $6) returning ${JOB_COLUMNS}`,
            [caller.tenantId, account, upload.id, body.dry_run, TYPES[upload.content_type], upload.filename],
          )
        ).rows[0] as TransferJobRow;
        await enqueue(
          tx,
          TRANSFER_JOB_KIND,
          { transfer_job_id: job.id },
          { dedupeKey: job.id, maxAttempts: 3 },
        );
        return job;
      });
      return { status: 202, body: transferJobOut(row) };
    },
  }),

  route({
    method: "GET",
    path: "/transfers",
    operationId: "listTransfers",
    summary: "List catalogue transfers",
    description: "This account's transfers (dry runs too), newest first.",
    tag: TAG,
    scope: "catalog:read",
    query: ListQuery,
    response: {
      status: 200,
      description: "A page of transfers.",
      schema: listOf(TransferJob, "TransferList"),
    },
    handler: async ({ query, caller, read }) => {
      const rows = await read(async (tx) => {
        let after: { at: string; id: string } | undefined;
        if (query.starting_after) {
          const c = (
            await tx.query<{ at: string }>(
              "select created_at::text as at from internal.transfer_jobs where id = $1 and account_id = $2",
              [query.starting_after, caller.accountId],
            )
          ).rows[0];
          if (!c) {
            throw new ApiError(
              400,
              "invalid_parameter",
              `starting_after: no transfer ${query.starting_after}.`,
              {
                param: "starting_after",
              },
            );
          }
          after = { at: c.at, id: query.starting_after };
        }
        return (
          await tx.query<TransferJobRow>(
            `select ${JOB_COLUMNS} from internal.transfer_jobs
             where account_id = $1 and ($2::timestamptz is null or (created_at, id) < ($2::timestamptz, $3::uuid))
             order by created_at desc, id desc limit $4`,
            [caller.accountId, after?.at ?? null, after?.id ?? null, query.limit + 1],
          )
        ).rows;
      });
      return {
        body: {
          object: "list",
          data: rows.slice(0, query.limit).map(transferJobOut),
          limit: query.limit,
          has_more: rows.length > query.limit,
        },
      };
    },
  }),

  route({
    method: "GET",
    path: "/transfers/{id}",
    operationId: "getTransfer",
    summary: "Get a catalogue transfer: its status, counts and problems",
    tag: TAG,
    scope: "catalog:read",
    params: ofTransfer,
    response: { status: 200, description: "The transfer.", schema: TransferJob },
    errors: [404],
    handler: async ({ params, caller, read }) => {
      const row = await read(
        async (tx) =>
          (
            await tx.query<TransferJobRow>(
              `select ${JOB_COLUMNS} from internal.transfer_jobs where id = $1 and account_id = $2`,
              [params.id, caller.accountId],
            )
          ).rows[0],
      );
      if (!row) throw notFound("transfer", params.id);
      return { body: transferJobOut(row) };
    },
  }),
];

/**
 * The slot's upload URL: PUT the file with ?token=. Not an operation of the document (the token is
 * the permission, as for a media upload URL); the body is read as it comes, counted against the
 * slot's limit, and kept with the slot.
 */
export async function transferUploadReceiver(
  app: FastifyInstance,
  options: { db: Db; store: ObjectStore },
): Promise<void> {
  const { db, store } = options;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
  app.put("/transfer-uploads/:id/file", async (request: FastifyRequest, reply) => {
    const id = (request.params as { id: string }).id;
    const token = (request.query as { token?: unknown }).token;
    if (typeof token !== "string" || token.length > 200) {
      throw new ApiError(403, "token_invalid", "The URL has no valid token: ask for a new upload URL.");
    }
    const slot = z.uuid().safeParse(id).success
      ? await db.asService(
          async (tx) =>
            (
              await tx.query<{
                id: string;
                token_hash: string;
                status: string;
                content_type: SlotType;
                max_bytes: string | number;
                declared_sha256: string | null;
                object_key: string | null;
                expired: boolean;
              }>(
                `select id, token_hash, status, content_type, max_bytes, declared_sha256, object_key,
                     upload_expires_at <= now() as expired
                   from internal.transfer_uploads where id = $1`,
                [id],
              )
            ).rows[0],
          { readOnly: true },
        )
      : undefined;
    if (!slot || slot.token_hash !== sha256Hex(token)) {
      throw new ApiError(403, "token_invalid", "This token is not for uploading to this slot.");
    }
    if (slot.expired) throw new ApiError(403, "token_expired", "The upload URL expired: ask for a new one.");
    if (slot.status !== "pending") {
      throw new ApiError(
        409,
        "upload_already_completed",
        "This upload URL was already used: ask for a new one.",
      );
    }
    const given = String(request.headers["content-type"] ?? "")
      .split(";")[0]
      ?.trim()
      .toLowerCase();
    if (
      given &&
      given !== slot.content_type &&
      ALSO_ACCEPTED[given] !== slot.content_type &&
      given !== "application/octet-stream" &&
      given !== "text/plain"
    ) {
      throw new ApiError(
        415,
        "content_type_mismatch",
        `Send the file with Content-Type: ${slot.content_type}, as the upload URL's headers say.`,
      );
    }
    const max = Number(slot.max_bytes);
    const declared = Number(request.headers["content-length"]);
    if (Number.isFinite(declared) && declared > max) {
      reply.header("connection", "close");
      throw new ApiError(
        413,
        "file_too_large",
        `The file is ${declared} bytes; this URL takes at most ${max}.`,
      );
    }
    if (slot.object_key)
      return receiveArchive(db, store, slot as typeof slot & { object_key: string }, request, reply);
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of request.raw) {
      bytes += (chunk as Buffer).length;
      if (bytes > max) {
        reply.header("connection", "close");
        throw new ApiError(413, "file_too_large", `The file is larger than the ${max} bytes this URL takes.`);
      }
      chunks.push(chunk as Buffer);
    }
    if (bytes === 0) throw new ApiError(400, "empty_upload", "The upload has no bytes.");
    const content = Buffer.concat(chunks);
    const sha256 = sha256Hex(content);
    if (slot.declared_sha256 && slot.declared_sha256 !== sha256) {
      throw new ApiError(
        400,
        "checksum_mismatch",
        `The bytes' SHA-256 is ${sha256}, not ${slot.declared_sha256} as declared: the file changed on the way.`,
        { param: "sha256" },
      );
    }
    const done = await db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string }>(
            `update internal.transfer_uploads set status = 'uploaded', content = $2, bytes = $3, sha256 = $4,
               uploaded_at = now()
             where id = $1 and status = 'pending' returning id`,
            [slot.id, content, bytes, sha256],
          )
        ).rows[0],
    );
    if (!done) {
      throw new ApiError(
        409,
        "upload_already_completed",
        "This upload URL was already used: ask for a new one.",
      );
    }
    return reply.send({ object: "transfer_upload", upload_id: slot.id, status: "uploaded", bytes, sha256 });
  });
}

/**
 * An archive's bytes into media storage (the driver's put: counted and hashed as they stream, never
 * whole in memory), then the slot marked uploaded; a refused or unfinished file leaves no object.
 */
async function receiveArchive(
  db: Db,
  store: ObjectStore,
  slot: { id: string; object_key: string; max_bytes: string | number; declared_sha256: string | null },
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const max = Number(slot.max_bytes);
  if (!store.put) throw new Error("the storage driver cannot store a transfer archive (no put)");
  let stored: { bytes: number; sha256: string };
  try {
    stored = await store.put(slot.object_key, request.raw, { maxBytes: max, contentType: "application/zip" });
  } catch (error) {
    if (error instanceof TooLargeError || (error as { code?: string }).code === "file_too_large") {
      reply.header("connection", "close");
      throw new ApiError(413, "file_too_large", `The file is larger than the ${max} bytes this URL takes.`);
    }
    throw error;
  }
  const keep = async () => {
    if (stored.bytes === 0) throw new ApiError(400, "empty_upload", "The upload has no bytes.");
    if (slot.declared_sha256 && slot.declared_sha256 !== stored.sha256) {
      throw new ApiError(
        400,
        "checksum_mismatch",
        `The bytes' SHA-256 is ${stored.sha256}, not ${slot.declared_sha256} as declared: the file changed on the way.`,
        { param: "sha256" },
      );
    }
    const done = await db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string }>(
            `update internal.transfer_uploads set status = 'uploaded', bytes = $2, sha256 = $3, uploaded_at = now()
             where id = $1 and status = 'pending' returning id`,
            [slot.id, stored.bytes, stored.sha256],
          )
        ).rows[0],
    );
    if (!done) {
      throw new ApiError(
        409,
        "upload_already_completed",
        "This upload URL was already used: ask for a new one.",
      );
    }
  };
  try {
    await keep();
  } catch (error) {
    // Two PUTs at once would share the key; the one that lost does not remove the winner's bytes.
    if (!(error instanceof ApiError && error.code === "upload_already_completed")) {
      await store.remove(slot.object_key);
    }
    throw error;
  }
  return reply.send({
    object: "transfer_upload",
    upload_id: slot.id,
    status: "uploaded",
    bytes: stored.bytes,
    sha256: stored.sha256,
  });
}
