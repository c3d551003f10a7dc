import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import type { Db } from "../db/db.ts";
import type { Tx } from "../db/types.ts";
import { Count, Timestamp, timestamp } from "../http/formats.ts";
import { runTransfer, TransferError, type TransferReport } from "./import.ts";
import type { MediaTarget } from "./media.ts";
import type { TransferProblem } from "./model.ts";

/**
 * The public API's catalogue transfer as a job (docs/public-api.md, "Transfers"; migration 0038):
 * POST /transfers records an internal.transfer_jobs row and queues `transfer.run`; the worker reads
 * the uploaded file (internal.transfer_uploads), runs the same import as the CLI and the admin API
 * (src/transfer/import.ts) for the job's account, keeps the counts and the first problems on the job,
 * and writes a transfer.completed event.
 */

export const TRANSFER_JOB_KIND = "transfer.run";

/** Problems kept on a job (GET /transfers/{id}); problem_count says how many there were. */
export const JOB_PROBLEMS = 100;

/**
 * The largest transfer file a slot takes: a 10,000-track CSV is about 3 MB, kept in the database
 * beside its slot. An archive (a delivery with its audio: hundreds of MB) goes to media storage
 * (migration 0042); 2 GiB is an album or two of WAV, and what an archive entry may be at most
 * (src/transfer/archive.ts). A larger delivery goes in several archives, or through the CLI.
 */
export const TRANSFER_UPLOAD_MAX_BYTES = {
  csv: 32 * 1024 * 1024,
  ern: 16 * 1024 * 1024,
  zip: 2 * 1024 * 1024 * 1024,
};

export const TransferJobProblem = z
  .object({
    where: z
      .string()
      .meta({ description: "The row and column, or the XML path.", example: "row 12, column isrc" }),
    code: z.string().meta({ example: "invalid_isrc" }),
    message: z.string(),
    severity: z
      .enum(["error", "warning"])
      .meta({ description: "An error keeps its release out; a warning does not." }),
  })
  .meta({ id: "TransferJobProblem" });

export const TransferJobCounts = z
  .object({
    releases_created: Count.meta({ description: "Created (a dry run: would be created)." }),
    releases_existing: Count.meta({ description: "Already there, matched by UPC or the source's key." }),
    releases_with_problems: Count.meta({ description: "Left out for an error." }),
    tracks_created: Count,
    tracks_existing: Count.meta({ description: "Already there, matched by ISRC within their release." }),
    tracks_with_problems: Count,
    artists_created: Count,
    errors: Count,
    warnings: Count,
    problems: Count.meta({ description: "Errors and warnings together (the list shows the first 100)." }),
  })
  .meta({ id: "TransferJobCounts", description: "What the transfer did (a dry run: would do)." });

export const TransferJob = z
  .object({
    id: z.uuid(),
    object: z.literal("transfer"),
    status: z.enum(["queued", "running", "completed", "failed"]).meta({
      description:
        "queued, running, then completed (the import ran: see counts and problems, some releases may have been " +
        "left out) or failed (the file could not be read as a transfer at all: see problems).",
    }),
    dry_run: z
      .boolean()
      .meta({ description: "Whether nothing is written: the report of what would happen." }),
    source_format: z.enum(["csv", "ern"]).meta({
      description: "csv (the template) or ern (one ERN message, or a zip archive of them with their media).",
    }),
    filename: z.string().nullable(),
    upload_id: z.uuid().nullable().meta({ description: "The transfer upload the file came from." }),
    counts: TransferJobCounts.nullable().meta({ description: "Null until the transfer has run." }),
    problems: z
      .array(TransferJobProblem)
      .meta({ description: "The first 100 problems, errors first, each with its row or XML path." }),
    created_at: Timestamp,
    completed_at: Timestamp.nullable(),
  })
  .meta({ id: "Transfer", description: "A catalogue transfer job and its report." });

export type TransferJobObject = z.infer<typeof TransferJob>;

export interface TransferJobRow {
  id: string;
  account_id: string;
  tenant_id: string;
  upload_id: string | null;
  dry_run: boolean;
  source_format: "csv" | "ern";
  filename: string | null;
  status: "queued" | "running" | "completed" | "failed";
  counts: Record<string, number>;
  problems: z.infer<typeof TransferJobProblem>[];
  created_at: Date | string;
  completed_at: Date | string | null;
}

export const JOB_COLUMNS =
  "id, account_id, tenant_id, upload_id, dry_run, source_format, filename, status, counts, problems, created_at, completed_at";

export function transferJobOut(r: TransferJobRow): TransferJobObject {
  return {
    id: r.id,
    object: "transfer",
    status: r.status,
    dry_run: r.dry_run,
    source_format: r.source_format,
    filename: r.filename,
    upload_id: r.upload_id,
    counts: Object.keys(r.counts).length ? (r.counts as TransferJobObject["counts"]) : null,
    problems: r.problems,
    created_at: timestamp(r.created_at) as string,
    completed_at: timestamp(r.completed_at),
  };
}

function countsOf(report: TransferReport): NonNullable<TransferJobObject["counts"]> {
  const c = report.counts;
  return {
    releases_created: c.releases.create,
    releases_existing: c.releases.exists,
    releases_with_problems: c.releases.problem,
    tracks_created: c.tracks.create,
    tracks_existing: c.tracks.exists,
    tracks_with_problems: c.tracks.problem,
    artists_created: c.artists_created,
    errors: c.errors,
    warnings: c.warnings,
    problems: c.errors + c.warnings,
  };
}

function problemsOf(report: TransferReport): TransferProblem[] {
  const all = [
    ...report.problems,
    ...report.releases.flatMap((r) => [...r.problems, ...r.tracks.flatMap((t) => t.problems)]),
  ];
  return all.filter((p) => p.severity === "error").concat(all.filter((p) => p.severity === "warning"));
}

const slim = (p: TransferProblem) => ({
  where: p.where,
  code: p.code,
  message: p.message,
  severity: p.severity,
});

/** Ends a job: its report on the row and the transfer.completed event, in one transaction. */
async function finish(
  tx: Tx,
  job: { id: string; tenant_id: string; account_id: string },
  status: "completed" | "failed",
  counts: TransferJobObject["counts"],
  problems: TransferProblem[],
  transferId: string | null,
): Promise<void> {
  const row = (
    await tx.query<TransferJobRow>(
      `update internal.transfer_jobs set status = $2, counts = $3, problems = $4, problem_count = $5,
         transfer_id = $6, completed_at = now()
       where id = $1 returning ${JOB_COLUMNS}`,
      [
        job.id,
        status,
        JSON.stringify(counts ?? {}),
        JSON.stringify(problems.slice(0, JOB_PROBLEMS).map(slim)),
        problems.length,
        transferId,
      ],
    )
  ).rows[0] as TransferJobRow;
  await tx.query(
    `insert into internal.events (tenant_id, account_id, type, data)
     values ($1, $2, 'transfer.completed', jsonb_build_object('object', $3::jsonb))`,
    [job.tenant_id, job.account_id, JSON.stringify(transferJobOut(row))],
  );
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/**
 * The `transfer.run` job. A job already ended is left alone (a job runs at least once); a file that
 * cannot be read as a transfer at all ends the job as failed, with why.
 */
export async function runTransferJob(
  db: Db,
  jobId: string,
  options: {
    lastAttempt?: boolean;
    /** Where an archive's checked audio and artwork go (the installation's storage). */
    media?: MediaTarget | undefined;
  } = {},
): Promise<void> {
  const job = await db.asService(async (tx) => {
    const j = (
      await tx.query<{
        id: string;
        tenant_id: string;
        account_id: string;
        upload_id: string | null;
        dry_run: boolean;
        source_format: "csv" | "ern";
        filename: string | null;
      }>(
        `update internal.transfer_jobs set status = 'running', started_at = now()
         where id = $1 and status in ('queued', 'running')
         returning id, tenant_id, account_id, upload_id, dry_run, source_format, filename`,
        [jobId],
      )
    ).rows[0];
    if (!j) return undefined;
    const u = (
      await tx.query<{
        content: Buffer | Uint8Array | null;
        content_type: string | null;
        object_key: string | null;
        sha256: string | null;
      }>("select content, content_type, object_key, sha256 from internal.transfer_uploads where id = $1", [
        j.upload_id,
      ])
    ).rows[0];
    return {
      ...j,
      content: u?.content ?? null,
      objectKey: u?.object_key ?? null,
      sha256: u?.sha256 ?? null,
      archive: u?.content_type === "application/zip",
    };
  });
  if (!job) return;
  if (!job.content && !job.objectKey) {
    await db.asService((tx) =>
      finish(
        tx,
        job,
        "failed",
        null,
        [
          {
            severity: "error",
            where: "upload",
            code: "upload_gone",
            message: "the uploaded file is no longer there: upload it again",
          },
        ] as TransferProblem[],
        null,
      ),
    );
    return;
  }
  const dir = path.join(os.tmpdir(), `backline-transfer-job-${job.id}`);
  const ext = job.archive ? ".zip" : job.source_format === "csv" ? ".csv" : ".xml";
  const base = (job.filename ?? "transfer")
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/\.(csv|xml|txt|zip)$/i, "");
  let file = path.join(dir, `${base || "transfer"}${ext}`);
  let archive: { path: string; release(): Promise<void> } | undefined;
  try {
    await mkdir(dir, { recursive: true });
    if (job.objectKey) {
      // An archive in media storage: read where it is (local disk) or from a private copy (S3).
      const store = options.media?.store;
      if (!store) throw new Error("a transfer archive is in media storage, and this worker has no store");
      archive = await store.localCopy(job.objectKey);
      file = archive.path;
    } else await writeFile(file, Buffer.from(job.content as Buffer | Uint8Array));
    let report: TransferReport;
    try {
      // Two PUTs racing on one slot could leave other bytes than the slot's SHA-256 says.
      if (job.objectKey && (await sha256Of(file)) !== job.sha256) {
        throw new TransferError(
          "the stored archive is not the file that was uploaded (its SHA-256 differs): upload it again",
          "upload_changed",
        );
      }
      report = await runTransfer(db, {
        accountId: job.account_id,
        sourceName: `${base || "transfer"}${ext}`,
        input: file,
        dryRun: job.dry_run,
        via: "admin",
        media: options.media,
      });
    } catch (error) {
      if (!(error instanceof TransferError)) {
        // A fault, not the file: tried again by the queue, and on its last attempt the transfer is
        // failed (rather than left running) and transfer.completed says so.
        if (options.lastAttempt) {
          await db.asService((tx) =>
            finish(
              tx,
              job,
              "failed",
              null,
              [
                {
                  severity: "error",
                  where: "transfer",
                  code: "internal_error",
                  message:
                    "the transfer could not run; the operator has its error (backline jobs list --status dead)",
                },
              ] as TransferProblem[],
              null,
            ),
          );
        }
        throw error;
      }
      await db.asService((tx) =>
        finish(
          tx,
          job,
          "failed",
          null,
          [
            {
              severity: "error",
              where: error.where ?? `${base || "transfer"}${ext}`,
              code: error.code,
              message: error.message,
            },
          ] as TransferProblem[],
          null,
        ),
      );
      return;
    }
    await db.asService(async (tx) => {
      if (report.transfer_id) {
        await tx.query("update internal.transfers set via = 'api' where id = $1", [report.transfer_id]);
      }
      await finish(tx, job, "completed", countsOf(report), problemsOf(report), report.transfer_id);
      // A real run has used the file: its bytes are not kept longer than needed.
      if (!job.dry_run) {
        await tx.query(
          "update internal.transfer_uploads set content = null, object_key = null where id = $1",
          [job.upload_id],
        );
      }
    });
    if (!job.dry_run && job.objectKey) await options.media?.store.remove(job.objectKey);
  } finally {
    await archive?.release();
    await rm(dir, { recursive: true, force: true });
  }
}
