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
import { Bodies } from "../admin/input.ts";
import * as S from "../admin/schemas.ts";
import {
  type AnyAdminRoute,
  adminRoute,
  badCursor,
  IdParams,
  iso,
  page,
  pageQuery,
  parseQuery,
  Uuid,
} from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import { HttpError } from "../http/problem.ts";
import { FORMAT_NAMES } from "./formats/index.ts";
import { findImport, IMPORT_COLUMNS, ImportError, importOut, importRoyalties } from "./import.ts";
import { resultJson } from "./operator.ts";
import { VOID_ERROR_STATUS, VoidError, voidImport } from "./void.ts";

/**
 * The admin API's royalty imports (docs/royalties.md, "Admin API"; docs/operator.md), under
 * /admin/v1 with the tenant's service-role key or an operator's token:
 *
 *   POST /royalty-imports?format=...&period=...&store=...&file_name=...&id=...   the report as the
 *        body (text/csv, application/octet-stream for any bytes; text/plain is not accepted):
 *        streamed to a temporary file, never held in memory, at most ROYALTY_IMPORT_MAX_BYTES (else
 *        413 file_too_large, and the file is deleted), then imported. 201 completed, 200 duplicate,
 *        422 rejected.
 *   GET  /royalty-imports            the tenant's imports, newest first (running ones first)
 *   GET  /royalty-imports/{id}       one import's report; while it runs, its progress
 *   POST /royalty-imports/{id}/void  {"reason": "..."}: the import's lines leave every total
 *
 * Progress: the upload records itself in internal.royalty_import_runs under the import's id (the
 * client's `id`, so it can poll before the answer comes, or a new one): the bytes received, then
 * the bytes read and lines parsed, every PROGRESS_EVERY_MS in short transactions of their own —
 * the import's own transaction is open until the end, so nothing of it is visible before. This
 * process also keeps the figures in memory and answers from them: the embedded database has one
 * connection, which the import holds, so there only this process's memory can answer while it runs.
 */

const REPORT_TYPES = ["text/csv", "application/csv", "text/tab-separated-values", "application/octet-stream"];

/** How often a running import writes its progress. */
export const PROGRESS_EVERY_MS = 500;

/** A run not updated for this long was left by a process that ended. */
const STALE_MS = 2 * 60_000;

const ImportQuery = z.strictObject({
  format: z
    .enum(FORMAT_NAMES as [string, ...string[]])
    .meta({ description: "The report's format (docs/formats/)." }),
  period: z
    .string()
    .regex(/^\d{4}-(0[1-9]|1[0-2])$/, "a month, YYYY-MM")
    .optional()
    .meta({ description: "The reporting month, YYYY-MM, when the file does not say." }),
  store: z
    .string()
    .regex(/^[a-z0-9]+(_[a-z0-9]+)*$/)
    .optional()
    .meta({
      description:
        "The store, for formats whose lines do not name it. A `ddex-dsr` report without it is from the store whose " +
        "`ddex.recipient.dpid` is the sender's DDEX party id in its HEAD record (SenderPartyId); 422 `invalid_import` " +
        "names that id when no store has it.",
    }),
  file_name: z.string().min(1).max(500).optional().meta({ description: "The name to record." }),
  id: Uuid.optional().meta({
    description:
      "The id the import gets, chosen by the client to poll GET /royalty-imports/{id} while it runs.",
  }),
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

interface RunRow {
  id: string;
  tenant_id: string;
  format: string;
  file_name: string | null;
  phase: "receiving" | "importing" | "done" | "failed";
  total_bytes: string | number | null;
  bytes_received: string | number;
  bytes_read: string | number;
  lines: string | number;
  outcome: "completed" | "duplicate" | "rejected" | null;
  import_id: string | null;
  error: string | null;
  started_at: Date | string;
  updated_at: Date | string;
  finished_at: Date | string | null;
}

/** The runs of this process, by id: what a poll answers while the database is busy with the import. */
const live = new Map<string, RunRow>();

/** A run as an import report that has not finished: status running (or failed, duplicate). */
function runOut(r: RunRow) {
  const stale =
    (r.phase === "receiving" || r.phase === "importing") &&
    Date.now() - new Date(r.updated_at).getTime() > STALE_MS;
  const phase = stale ? "failed" : r.phase;
  const status = phase === "failed" ? "failed" : phase === "done" ? (r.outcome ?? "completed") : "running";
  return {
    id: r.id,
    object: "royalty_import" as const,
    tenant_id: r.tenant_id,
    format: r.format,
    file_name: r.file_name,
    file_sha256: null,
    content_sha256: null,
    reporting_period: null,
    store: null,
    status,
    lines_total: Number(r.lines),
    lines_matched: 0,
    lines_unmatched: 0,
    lines_malformed: 0,
    errors: [],
    warnings: [],
    totals: [],
    unmatched: [],
    period_from: null,
    period_to: null,
    account_ids: [],
    source: "admin_api",
    started_at: iso(r.started_at) ?? "",
    completed_at: iso(r.finished_at),
    voided_at: null,
    void_reason: null,
    voided_via: null,
    progress: {
      phase,
      total_bytes: r.total_bytes === null ? null : Number(r.total_bytes),
      bytes_received: Number(r.bytes_received),
      bytes_read: Number(r.bytes_read),
      lines: Number(r.lines),
      updated_at: iso(r.updated_at) ?? "",
      import_id: r.import_id,
      error: stale ? "The import stopped: the process running it ended." : r.error,
    },
  };
}

/** Records a run's progress: in memory at once, in the database at most every PROGRESS_EVERY_MS (one write at a time). */
class RunRecorder {
  readonly row: RunRow;
  private readonly db: Db;
  private writing: Promise<void> = Promise.resolve();
  private lastWrite = 0;
  /** On the embedded database the import holds the one connection: progress stays in memory meanwhile. */
  private paused = false;

  constructor(db: Db, row: RunRow) {
    this.db = db;
    this.row = row;
    live.set(row.id, row);
  }

  async start(): Promise<void> {
    const r = this.row;
    await this.db.asService((tx) =>
      tx.query(
        `insert into internal.royalty_import_runs (id, tenant_id, format, file_name, total_bytes)
         values ($1, $2, $3, $4, $5)`,
        [r.id, r.tenant_id, r.format, r.file_name, r.total_bytes],
      ),
    );
  }

  update(change: Partial<RunRow>, force = false): Promise<void> {
    Object.assign(this.row, change, { updated_at: new Date() });
    const now = Date.now();
    if (!force && (this.paused || now - this.lastWrite < PROGRESS_EVERY_MS)) return this.writing;
    this.lastWrite = now;
    const r = { ...this.row };
    this.writing = this.writing
      .then(() =>
        this.db.asService((tx) =>
          tx.query(
            `update internal.royalty_import_runs set phase = $2, bytes_received = $3, bytes_read = $4, lines = $5,
               outcome = $6, import_id = $7, error = $8, finished_at = $9, updated_at = now()
             where id = $1`,
            [
              r.id,
              r.phase,
              r.bytes_received,
              r.bytes_read,
              r.lines,
              r.outcome,
              r.import_id,
              r.error,
              r.finished_at,
            ],
          ),
        ),
      )
      .then(
        () => undefined,
        () => undefined,
      );
    return this.writing;
  }

  pause(paused: boolean): void {
    this.paused = paused;
  }

  async finish(change: Partial<RunRow>): Promise<void> {
    this.paused = false;
    await this.update({ ...change, finished_at: new Date() }, true);
    // A poll arriving now reads the database, which has the outcome.
    setTimeout(() => live.delete(this.row.id), 60_000).unref();
  }
}

async function runById(db: Db, id: string, tenantId: string): Promise<RunRow | undefined> {
  const mine = live.get(id);
  if (mine) return mine.tenant_id === tenantId ? mine : undefined;
  return db.asService(
    async (tx) =>
      (
        await tx.query<RunRow>(
          "select * from internal.royalty_import_runs where id = $1 and tenant_id = $2",
          [id, tenantId],
        )
      ).rows[0],
    { readOnly: true },
  );
}

/** The specs of the royalty routes (the upload is registered by royaltyAdminRoutes, with its body parser). */
export function royaltySpecs(options: RoyaltyAdminOptions): AnyAdminRoute[] {
  const { db } = options;
  return [
    adminRoute({
      method: "POST",
      path: "/royalty-imports",
      operationId: "importRoyalties",
      summary: "Import a store's royalty report",
      description:
        "The report is the body (at most ROYALTY_IMPORT_MAX_BYTES). 201 completed, 200 a duplicate (nothing counted again), " +
        "422 rejected (malformed lines, nothing loaded), or 422 `invalid_import` when the import cannot be made as asked " +
        "(e.g. a `ddex-dsr` report whose sender's party id no store has, without `store`: the message names the id). " +
        "What was read past without refusing the report is in the import's `warnings`. " +
        "Send `id` to poll GET /royalty-imports/{id} while it runs.",
      tag: "Royalty imports",
      staffRole: "operator",
      query: ImportQuery,
      rawBody: { types: REPORT_TYPES, description: "The report file's bytes." },
      response: { status: 201, description: "Imported: the report.", schema: S.ImportResult },
      otherResponses: [{ status: 200, description: "A duplicate: the import that already counted it." }],
      errors: [409, 413, 415, 422],
      external: true,
    }),
    adminRoute({
      method: "GET",
      path: "/royalty-imports",
      operationId: "listRoyaltyImports",
      summary: "The tenant's royalty imports",
      description: "Newest first; the first page starts with the imports still running.",
      tag: "Royalty imports",
      staffRole: "operator",
      query: pageQuery(Uuid, {}),
      response: { status: 200, description: "A page of imports.", schema: S.RoyaltyImports },
      handler: async ({ tenantId, query }) => {
        const running = query.starting_after
          ? []
          : await db.asService(
              async (tx) =>
                (
                  await tx.query<RunRow>(
                    `select * from internal.royalty_import_runs
                     where tenant_id = $1 and phase in ('receiving', 'importing') and updated_at > now() - interval '2 minutes'
                     order by started_at desc, id limit 20`,
                    [tenantId],
                  )
                ).rows,
              { readOnly: true },
            );
        const rows = await db.asService(
          async (tx) => {
            let after: { at: Date | string; id: string } | undefined;
            if (query.starting_after) {
              const c = (
                await tx.query<{ started_at: Date | string }>(
                  "select started_at::text as started_at from internal.royalty_imports where id = $1 and tenant_id = $2",
                  [query.starting_after, tenantId],
                )
              ).rows[0];
              if (!c) throw badCursor(query.starting_after);
              after = { at: c.started_at, id: query.starting_after };
            }
            return (
              await tx.query<Parameters<typeof importOut>[0]>(
                `select ${IMPORT_COLUMNS} from internal.royalty_imports
                 where tenant_id = $1 and ($2::timestamptz is null or (started_at, id) < ($2::timestamptz, $3::uuid))
                 order by started_at desc, id desc limit $4`,
                [tenantId, after?.at ?? null, after?.id ?? null, query.limit + 1],
              )
            ).rows;
          },
          { readOnly: true },
        );
        const p = page(rows.map(importOut), query.limit);
        return {
          data: [...running.map((r) => runOut(live.get(r.id) ?? r)), ...p.data],
          has_more: p.has_more,
        };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/royalty-imports/{id}",
      operationId: "getRoyaltyImport",
      summary: "A royalty import: its report, or its progress while it runs",
      tag: "Royalty imports",
      staffRole: "operator",
      params: IdParams,
      response: { status: 200, description: "The import.", schema: S.RoyaltyImport },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        // This process's own run first: on the embedded database, the import holds the connection.
        const mine = live.get(params.id);
        if (
          mine &&
          mine.tenant_id === tenantId &&
          (mine.phase === "receiving" || mine.phase === "importing")
        ) {
          return runOut(mine);
        }
        const r = await db.asService((tx) => findImport(tx, params.id, tenantId), { readOnly: true });
        if (r) return r;
        const run = await runById(db, params.id, tenantId);
        if (run) return runOut(run);
        throw new HttpError(404, "not_found", `no royalty import ${params.id}`, "id");
      },
    }),
    adminRoute({
      method: "POST",
      path: "/royalty-imports/{id}/void",
      operationId: "voidRoyaltyImport",
      summary: "Void a royalty import",
      description: 'Its lines leave every total (docs/royalties.md, "Voiding an import").',
      tag: "Royalty imports",
      staffRole: "operator",
      reasonParam: "reason",
      params: IdParams,
      body: Bodies.void.meta({ id: "VoidRequest" }),
      response: { status: 200, description: "The voided import.", schema: S.RoyaltyImport },
      errors: [404, 409],
      handler: async ({ tenantId, params, body }) => {
        try {
          return await voidImport(db, params.id, { reason: body.reason, via: "admin_api", tenantId });
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
      },
    }),
  ];
}

/**
 * The upload, registered as its own (encapsulated) plugin: the raw content-type parser below then
 * serves this route only, and the admin API's other POST routes never receive a stream for a
 * text/csv body.
 */
export async function royaltyAdminRoutes(app: FastifyInstance, options: RoyaltyAdminOptions): Promise<void> {
  const { db, tenantOf, maxBytes } = options;
  // The report's bytes reach the handler as a stream.
  app.addContentTypeParser(REPORT_TYPES, (_request, payload, done) => done(null, payload));

  app.post("/royalty-imports", { config: { staffRole: "operator" } }, async (request, reply) => {
    const tenantId = tenantOf(request);
    const q = parseQuery(ImportQuery, request.query);
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
    const id = q.id ?? randomUUID();
    if (
      live.has(id) ||
      (await db.asService((tx) => findImport(tx, id), { readOnly: true })) ||
      (await runById(db, id, tenantId))
    ) {
      throw new HttpError(409, "id_in_use", `an import ${id} exists already: choose another id`, "id");
    }
    const recorder = new RunRecorder(db, {
      id,
      tenant_id: tenantId,
      format: q.format,
      file_name: q.file_name ?? null,
      phase: "receiving",
      total_bytes: Number.isFinite(declared) ? declared : null,
      bytes_received: 0,
      bytes_read: 0,
      lines: 0,
      outcome: null,
      import_id: null,
      error: null,
      started_at: new Date(),
      updated_at: new Date(),
      finished_at: null,
    });
    try {
      await recorder.start();
    } catch (error) {
      live.delete(id);
      // Another upload chose the same id at this moment.
      if ((error as { code?: string }).code === "23505" || /duplicate key/.test(String(error))) {
        throw new HttpError(409, "id_in_use", `an import ${id} exists already: choose another id`, "id");
      }
      throw error;
    }
    const file = path.join(os.tmpdir(), `backline-royalty-${randomUUID()}`);
    // Counted as it is written: a body without Content-Length (chunked) stops at the limit too.
    let bytes = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        if (bytes > maxBytes) return callback(new TooLarge());
        void recorder.update({ bytes_received: bytes });
        callback(null, chunk);
      },
    });
    const out = createWriteStream(file);
    try {
      await pipeline(body, counter, out).catch((error: unknown) => {
        throw error instanceof TooLarge ? tooLarge(reply, maxBytes) : error;
      });
      await recorder.update({ bytes_received: bytes, phase: "importing" }, true);
      recorder.pause(db.kind === "pglite");
      const result = await importRoyalties(db, {
        tenantId,
        format: q.format,
        file,
        fileName: q.file_name ?? null,
        period: q.period,
        store: q.store,
        source: "admin_api",
        importId: id,
        progressEveryMs: PROGRESS_EVERY_MS,
        onProgress: (p) => void recorder.update({ bytes_read: p.bytes, lines: p.lines }),
      }).catch((error: unknown) => {
        throw error instanceof ImportError ? new HttpError(422, "invalid_import", error.message) : error;
      });
      const made = result.status === "duplicate" ? result.existing : result.report;
      await recorder.finish({
        phase: "done",
        outcome: result.status,
        import_id: made.id,
        bytes_read: bytes,
        lines: made.lines_total,
      });
      const status = result.status === "completed" ? 201 : result.status === "duplicate" ? 200 : 422;
      return reply.status(status).send(resultJson(result));
    } catch (error) {
      await recorder.finish({
        phase: "failed",
        error: (error instanceof Error ? error.message : String(error)).slice(0, 2000),
      });
      throw error;
    } finally {
      // After an error the file may still be opening: wait for it to close, or rm would run first.
      if (!out.closed) await once(out, "close");
      await rm(file, { force: true });
    }
  });
}
