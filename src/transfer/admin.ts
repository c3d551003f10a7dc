import { randomUUID } from "node:crypto";
import { rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
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
import { Count, Timestamp } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import { runTransfer, TransferError } from "./import.ts";

/**
 * Catalogue transfers under /admin/v1 (docs/catalogue.md, "Admin API"), with the tenant's
 * service-role key or an operator's token:
 *
 *   POST /transfers?account_id=…&dry_run=true&file_name=…   the CSV template (text/csv) or one ERN
 *        message (application/xml) as the body, at most TRANSFER_MAX_BYTES: the same transfer as
 *        `backline transfer import`; 200 with the dry run's report, 201 with the real run's.
 *   GET  /transfers              the tenant's transfers, newest first (account_id narrows them)
 *   GET  /transfers/{id}         one transfer: its counts and its problems
 *
 * A folder of messages with their media goes through the CLI (media cannot come with one body).
 */

/** The largest body taken: a 10,000-track CSV is about 3 MB. */
export const TRANSFER_MAX_BYTES = 64 * 1024 * 1024;

const TAG = "Transfers";
const BODY_TYPES: Record<string, ".csv" | ".xml"> = {
  "text/csv": ".csv",
  "application/csv": ".csv",
  "application/xml": ".xml",
  "text/xml": ".xml",
};

const Problem = z
  .object({
    severity: z
      .enum(["error", "warning"])
      .meta({ description: "An error keeps its release out; a warning does not." }),
    where: z
      .string()
      .meta({ description: "The row and column, or the file and XML path.", example: "row 12, column isrc" }),
    code: z.string().meta({ example: "invalid_isrc" }),
    message: z.string(),
  })
  .meta({ id: "TransferProblem", description: "A problem of the source, and where it is." });

const Action = z.enum(["create", "exists", "problem"]).meta({
  description: "To create (created), already there (matched by UPC or key, and ISRC), or left out.",
});

const Counts = z
  .object({
    releases: z.object({ create: Count, exists: Count, problem: Count }),
    tracks: z.object({ create: Count, exists: Count, problem: Count }),
    artists_created: Count,
    errors: Count,
    warnings: Count,
  })
  .meta({
    id: "TransferCounts",
    description: "Releases and tracks by what happened to them, and the problems.",
  });

const Report = z
  .object({
    object: z.literal("transfer_report"),
    transfer_id: Uuid.nullable().meta({ description: "The transfer recorded (null for a dry run)." }),
    account_id: Uuid,
    source: z.string(),
    format: z.enum(["csv", "ern"]),
    dry_run: z.boolean(),
    counts: Counts,
    problems: z.array(Problem).meta({ description: "Problems of the source as a whole." }),
    releases: z.array(
      z
        .object({
          where: z.string(),
          key: z.string().meta({ description: "How the source knows the release (upc:…, grid:…, csv:…)." }),
          title: z.string(),
          artist_name: z.string(),
          upc: z.string().nullable(),
          action: Action,
          release_id: Uuid.optional(),
          problems: z.array(Problem),
          tracks: z.array(
            z.object({
              where: z.string(),
              isrc: z.string().nullable(),
              title: z.string(),
              disc_number: Count,
              track_number: Count.nullable(),
              action: Action,
              track_id: Uuid.optional(),
              problems: z.array(Problem),
            }),
          ),
        })
        .meta({ id: "TransferPlannedRelease" }),
    ),
    seconds: z.number(),
  })
  .meta({
    id: "TransferReport",
    description: "What a transfer did (or, as a dry run, would do), release by release.",
  });

const Transfer = z
  .object({
    id: Uuid,
    object: z.literal("transfer"),
    account_id: Uuid,
    source: z.string(),
    format: z.enum(["csv", "ern"]),
    via: z.string().meta({ description: "cli or admin." }),
    counts: Counts.partial(),
    problems: z.array(Problem).meta({ description: "Its problems, errors first (at most 1,000)." }),
    created_at: Timestamp,
    completed_at: Timestamp.nullable(),
  })
  .meta({ id: "Transfer", description: "A catalogue transfer that ran (not a dry run)." });

const Transfers = z
  .object({ data: z.array(Transfer), has_more: z.boolean() })
  .meta({ id: "Transfers", description: "A page of transfers." });

const ImportQuery = z.strictObject({
  account_id: Uuid.meta({ description: "The account the catalogue belongs to (of this tenant)." }),
  dry_run: z
    .enum(["true", "false"])
    .default("false")
    .meta({ description: "`true`: write nothing, report what would happen." }),
  file_name: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .meta({ description: "The name to record, e.g. catalogue.csv." }),
});

interface TransferRow {
  id: string;
  account_id: string;
  source: string;
  format: "csv" | "ern";
  via: string;
  counts: Record<string, unknown>;
  problems: z.infer<typeof Problem>[];
  created_at: Date | string;
  completed_at: Date | string | null;
}

const transferOut = (r: TransferRow) => ({
  id: r.id,
  object: "transfer" as const,
  account_id: r.account_id,
  source: r.source,
  format: r.format,
  via: r.via,
  counts: r.counts,
  problems: r.problems,
  created_at: iso(r.created_at) ?? "",
  completed_at: iso(r.completed_at),
});

const COLUMNS = "id, account_id, source, format, via, counts, problems, created_at, completed_at";

export function transferSpecs(options: { db: Db }): AnyAdminRoute[] {
  const { db } = options;
  return [
    adminRoute({
      method: "POST",
      path: "/transfers",
      operationId: "importTransfer",
      summary: "Transfer a catalogue into an account",
      description:
        "The CSV template or one ERN 4.3 / 3.8.2 message is the body (docs/catalogue.md). 200 with the dry run's report " +
        "(nothing written), 201 with the real run's: releases arrive as drafts marked as transferred, matched by UPC and ISRC, " +
        "so the same body twice changes nothing. A release with a problem is left out; the others go in.",
      tag: TAG,
      staffRole: "operator",
      query: ImportQuery,
      rawBody: { types: Object.keys(BODY_TYPES), description: "The CSV file or the ERN message." },
      response: { status: 201, description: "Imported: the report.", schema: Report },
      otherResponses: [{ status: 200, description: "A dry run: the report of what would happen." }],
      errors: [404, 413, 415, 422],
      external: true,
    }),
    adminRoute({
      method: "GET",
      path: "/transfers",
      operationId: "listTransfers",
      summary: "The tenant's catalogue transfers",
      description: "Newest first.",
      tag: TAG,
      staffRole: "operator",
      query: pageQuery(Uuid, { account_id: Uuid.optional().meta({ description: "Only this account's." }) }),
      response: { status: 200, description: "A page of transfers.", schema: Transfers },
      handler: async ({ tenantId, query }) => {
        const rows = await db.asService(
          async (tx) => {
            let after: { at: string; id: string } | undefined;
            if (query.starting_after) {
              const c = (
                await tx.query<{ created_at: string }>(
                  "select created_at::text as created_at from internal.transfers where id = $1 and tenant_id = $2",
                  [query.starting_after, tenantId],
                )
              ).rows[0];
              if (!c) throw badCursor(query.starting_after);
              after = { at: c.created_at, id: query.starting_after };
            }
            return (
              await tx.query<TransferRow>(
                `select ${COLUMNS} from internal.transfers
                 where tenant_id = $1 and ($2::uuid is null or account_id = $2)
                   and ($3::timestamptz is null or (created_at, id) < ($3::timestamptz, $4::uuid))
                 order by created_at desc, id desc limit $5`,
                [tenantId, query.account_id ?? null, after?.at ?? null, after?.id ?? null, query.limit + 1],
              )
            ).rows;
          },
          { readOnly: true },
        );
        return page(rows.map(transferOut), query.limit);
      },
    }),
    adminRoute({
      method: "GET",
      path: "/transfers/{id}",
      operationId: "getTransfer",
      summary: "A catalogue transfer: its counts and problems",
      tag: TAG,
      staffRole: "operator",
      params: IdParams,
      response: { status: 200, description: "The transfer.", schema: Transfer },
      errors: [404],
      handler: async ({ tenantId, params }) => {
        const row = await db.asService(
          async (tx) =>
            (
              await tx.query<TransferRow>(
                `select ${COLUMNS} from internal.transfers where id = $1 and tenant_id = $2`,
                [params.id, tenantId],
              )
            ).rows[0],
          { readOnly: true },
        );
        if (!row) throw new HttpError(404, "not_found", `no transfer ${params.id}`, "id");
        return transferOut(row);
      },
    }),
  ];
}

/**
 * The upload, as its own encapsulated plugin: its CSV and XML body parser serves this route only.
 */
export async function transferAdminRoutes(
  app: FastifyInstance,
  options: { db: Db; tenantOf: (request: FastifyRequest) => string },
): Promise<void> {
  const { db, tenantOf } = options;
  app.addContentTypeParser(
    Object.keys(BODY_TYPES),
    { parseAs: "buffer", bodyLimit: TRANSFER_MAX_BYTES },
    (_request, body, done) => done(null, body),
  );
  app.post(
    "/transfers",
    { config: { staffRole: "operator" }, bodyLimit: TRANSFER_MAX_BYTES },
    async (request, reply) => {
      const tenantId = tenantOf(request);
      const q = parseQuery(ImportQuery, request.query);
      const type = String(request.headers["content-type"] ?? "")
        .split(";")[0]
        ?.trim()
        .toLowerCase();
      const ext = type ? BODY_TYPES[type] : undefined;
      if (!Buffer.isBuffer(request.body) || !ext) {
        throw new HttpError(
          415,
          "unsupported_media_type",
          `Send the CSV template or one ERN message as the body, with Content-Type ${Object.keys(BODY_TYPES).join(", ")}.`,
        );
      }
      const account = await db.asService(
        async (tx) =>
          (
            await tx.query<{ id: string }>(
              "select id from internal.accounts where id = $1 and tenant_id = $2",
              [q.account_id, tenantId],
            )
          ).rows[0],
        { readOnly: true },
      );
      if (!account) throw new HttpError(404, "not_found", `no account ${q.account_id}`, "account_id");
      const name = (q.file_name ?? `transfer${ext}`).replace(/[^A-Za-z0-9._-]+/g, "_");
      const dir = path.join(os.tmpdir(), `backline-transfer-${randomUUID()}`);
      const file = path.join(dir, name.toLowerCase().endsWith(ext) ? name : `${name}${ext}`);
      try {
        const { mkdir } = await import("node:fs/promises");
        await mkdir(dir, { recursive: true });
        await writeFile(file, request.body);
        const report = await runTransfer(db, {
          accountId: account.id,
          input: file,
          dryRun: q.dry_run === "true",
          via: "admin",
        }).catch((error: unknown) => {
          if (error instanceof TransferError) throw new HttpError(422, error.code, error.message);
          throw error;
        });
        return reply.status(q.dry_run === "true" ? 200 : 201).send({ object: "transfer_report", ...report });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
}
