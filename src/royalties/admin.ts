import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { type Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { FieldsError } from "../admin/errors.ts";
import { Bodies, parseBody, pathId } from "../admin/input.ts";
import type { Db } from "../db/db.ts";
import { fieldErrors } from "../http/field-errors.ts";
import { HttpError } from "../http/problem.ts";
import { FORMAT_NAMES } from "./formats/index.ts";
import { findImport, ImportError, importRoyalties, listImports } from "./import.ts";
import { resultJson } from "./operator.ts";
import { VOID_ERROR_STATUS, VoidError, voidImport } from "./void.ts";

/**
 * The admin API's royalty imports (docs/royalties.md, "Admin API"), under /admin/v1 with the
 * tenant's service-role key:
 *
 *   POST /royalty-imports?format=...&period=...&store=...&file_name=...   the report as the body
 *        (text/csv, text/plain is not accepted; application/octet-stream for any bytes): streamed to
 *        a temporary file, never held in memory, at most ROYALTY_IMPORT_MAX_BYTES (else 413
 *        file_too_large, and the file is deleted), then imported. 201 completed, 200 duplicate,
 *        422 rejected.
 *   GET  /royalty-imports            the tenant's imports, newest first
 *   GET  /royalty-imports/{id}       one import's report
 *   POST /royalty-imports/{id}/void  {"reason": "..."}: the import's lines leave every total (200 the
 *        voided import; 409 already_voided, 409 not_voidable for a rejected import, 404 not_found)
 */

const REPORT_TYPES = ["text/csv", "application/csv", "text/tab-separated-values", "application/octet-stream"];

const ImportQuery = z.strictObject({
  format: z.enum(FORMAT_NAMES as [string, ...string[]]),
  period: z
    .string()
    .regex(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM")
    .optional(),
  store: z
    .string()
    .regex(/^[a-z0-9]+(_[a-z0-9]+)*$/)
    .optional(),
  file_name: z.string().min(1).max(500).optional(),
});

export interface RoyaltyAdminOptions {
  db: Db;
  tenantOf: (request: FastifyRequest) => string;
  /** ROYALTY_IMPORT_MAX_BYTES: the largest report body taken. */
  maxBytes: number;
}

class TooLarge extends Error {}

function tooLarge(reply: FastifyReply, maxBytes: number): HttpError {
  // The rest of the body is not read: the connection closes after the answer.
  reply.header("connection", "close");
  return new HttpError(
    413,
    "file_too_large",
    `The report is larger than ${maxBytes} bytes (ROYALTY_IMPORT_MAX_BYTES); import it with the CLI or raise the limit.`,
  );
}

/**
 * Registered as its own (encapsulated) plugin: the raw content-type parser below then serves these
 * routes only, and the admin API's other POST routes never receive a stream for a text/csv body.
 */
export async function royaltyAdminRoutes(app: FastifyInstance, options: RoyaltyAdminOptions): Promise<void> {
  const { db, tenantOf, maxBytes } = options;
  // The report's bytes reach the handler as a stream.
  app.addContentTypeParser(REPORT_TYPES, (_request, payload, done) => done(null, payload));

  app.post("/royalty-imports", { config: { staffRole: "operator" } }, async (request, reply) => {
    const tenantId = tenantOf(request);
    const q = ImportQuery.safeParse(request.query ?? {});
    if (!q.success) {
      const errors = fieldErrors(q.error, request.query);
      throw new FieldsError(400, "invalid_request", errors[0]?.message ?? "Invalid query.", errors);
    }
    const body = request.body as Readable | undefined;
    if (!body || typeof (body as Readable).pipe !== "function") {
      throw new HttpError(
        415,
        "unsupported_media_type",
        `Send the report as the request body with Content-Type ${REPORT_TYPES.join(", ")}.`,
      );
    }
    const declared = Number(request.headers["content-length"]);
    if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(reply, maxBytes);
    const file = path.join(os.tmpdir(), `backline-royalty-${randomUUID()}`);
    // Counted as it is written: a body without Content-Length (chunked) stops at the limit too.
    let bytes = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        if (bytes > maxBytes) return callback(new TooLarge());
        callback(null, chunk);
      },
    });
    const out = createWriteStream(file);
    try {
      await pipeline(body, counter, out).catch((error: unknown) => {
        throw error instanceof TooLarge ? tooLarge(reply, maxBytes) : error;
      });
      const result = await importRoyalties(db, {
        tenantId,
        format: q.data.format,
        file,
        fileName: q.data.file_name ?? null,
        period: q.data.period,
        store: q.data.store,
        source: "admin_api",
      }).catch((error: unknown) => {
        throw error instanceof ImportError ? new HttpError(422, "invalid_import", error.message) : error;
      });
      const status = result.status === "completed" ? 201 : result.status === "duplicate" ? 200 : 422;
      return reply.status(status).send(resultJson(result));
    } finally {
      // After an error the file may still be opening: wait for it to close, or rm would run first.
      if (!out.closed) await once(out, "close");
      await rm(file, { force: true });
    }
  });

  app.get("/royalty-imports", { config: { staffRole: "operator" } }, async (request) => ({
    data: await listImports(db, { tenantId: tenantOf(request), limit: 100 }),
  }));

  app.post("/royalty-imports/:id/void", { config: { staffRole: "operator" } }, async (request) => {
    const id = pathId(request.params, "royalty import");
    const { reason } = parseBody(Bodies.void, request.body);
    try {
      return await voidImport(db, id, { reason, via: "admin_api", tenantId: tenantOf(request) });
    } catch (error) {
      if (error instanceof VoidError) {
        throw new HttpError(
          VOID_ERROR_STATUS[error.code],
          error.code,
          error.message,
          error.code === "reason_required" ? "reason" : error.code === "not_found" ? "id" : undefined,
        );
      }
      throw error;
    }
  });

  app.get("/royalty-imports/:id", { config: { staffRole: "operator" } }, async (request) => {
    const id = pathId(request.params, "royalty import");
    const r = await db.asService((tx) => findImport(tx, id, tenantOf(request)), { readOnly: true });
    if (!r) throw new HttpError(404, "not_found", `no royalty import ${id}`, "id");
    return r;
  });
}
