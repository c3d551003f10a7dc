import { Readable } from "node:stream";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Db } from "../db/db.ts";
import { fieldErrors } from "../http/field-errors.ts";
import { TimestampInput, timestampOf } from "../http/formats.ts";
import type { AdminCaller } from "./auth.ts";
import { FieldsError } from "./errors.ts";

/**
 * GET /admin/v1/audit (docs/operator.md, "The audit log"): the tenant's audit log, newest first,
 * for its admins (staff role admin, or the tenant's service-role key). Filters: actor (a user id,
 * key id or "cli:<command>"), object (a row's id), object_table, action, from/to (ISO times,
 * from inclusive, to exclusive). Cursor pagination as everywhere: `limit` (1-500, 50),
 * `starting_after` (the last id of the previous page), `has_more`. `format=csv` or `format=jsonl`
 * exports every matching row (no pagination), read in pages of 1000.
 *
 * The rows are read on the operator path inside the operator scope, so the database checks the
 * caller's admin role first (internal.require_staff), and only the caller's target tenant's rows
 * are asked for.
 */
export interface AuditOptions {
  db: Db;
  callerOf: (request: FastifyRequest) => AdminCaller;
}

const Query = z.strictObject({
  actor: z.string().min(1).max(300).optional(),
  object: z.string().min(1).max(300).optional(),
  object_table: z.string().min(1).max(100).optional(),
  action: z.string().min(1).max(100).optional(),
  from: TimestampInput.optional(),
  to: TimestampInput.optional(),
  starting_after: z
    .string()
    .regex(/^\d{1,18}$/, "must be an id from a previous page")
    .optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  format: z.enum(["json", "csv", "jsonl"]).default("json"),
});
type AuditQuery = z.infer<typeof Query>;

interface AuditRow {
  id: string;
  at: Date;
  tenant_id: string | null;
  actor_type: string;
  actor: string;
  actor_detail: Record<string, unknown>;
  ip: string | null;
  action: string;
  object_table: string;
  object_id: string | null;
  before: unknown;
  after: unknown;
}

const COLUMNS = [
  "id",
  "at",
  "actor_type",
  "actor",
  "actor_detail",
  "ip",
  "action",
  "object_table",
  "object_id",
  "before",
  "after",
] as const;

function json(r: AuditRow) {
  return {
    id: Number(r.id),
    at: timestampOf(r.at),
    tenant_id: r.tenant_id,
    actor_type: r.actor_type,
    actor: r.actor,
    actor_detail: r.actor_detail,
    ip: r.ip,
    action: r.action,
    object_table: r.object_table,
    object_id: r.object_id,
    before: r.before,
    after: r.after,
  };
}

function csvCell(value: unknown): string {
  const text =
    value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  // A cell a spreadsheet would run as a formula is quoted as text.
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return /[",\r\n']/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

async function page(db: Db, tenantId: string, q: AuditQuery, after: string | undefined, limit: number) {
  const where = ["tenant_id = $1"];
  const params: unknown[] = [tenantId];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    where.push(sql.replace("?", `$${params.length}`));
  };
  if (q.actor) add("actor = ?", q.actor);
  if (q.object) add("object_id = ?", q.object);
  if (q.object_table) add("object_table = ?", q.object_table);
  if (q.action) add("action = ?", q.action);
  if (q.from) add("at >= ?::timestamptz", q.from);
  if (q.to) add("at < ?::timestamptz", q.to);
  if (after) add("id < ?::bigint", after);
  params.push(limit + 1);
  const rows = await db.asService(
    async (tx) =>
      (
        await tx.query<AuditRow>(
          `select id, at, tenant_id, actor_type, actor, actor_detail, ip, action, object_table, object_id, before, after
           from internal.audit_log where ${where.join(" and ")} order by id desc limit $${params.length}`,
          params,
        )
      ).rows,
    { readOnly: true },
  );
  return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
}

export async function auditRoutes(app: FastifyInstance, options: AuditOptions): Promise<void> {
  const { db, callerOf } = options;
  app.get("/audit", { config: { staffRole: "admin" } }, async (request, reply) => {
    const parsed = Query.safeParse(request.query ?? {});
    if (!parsed.success) {
      const errors = fieldErrors(parsed.error, request.query);
      throw new FieldsError(400, "invalid_request", errors[0]?.message ?? "Invalid query.", errors);
    }
    const q = parsed.data;
    const { tenantId } = callerOf(request);
    if (q.format === "json") {
      const { rows, hasMore } = await page(db, tenantId, q, q.starting_after, q.limit);
      return { data: rows.map(json), has_more: hasMore };
    }
    // An export: every matching row, page after page, each page its own short transaction. The
    // first page is read before the answer starts, so a refusal is still a proper error.
    let current = await page(db, tenantId, q, q.starting_after, 1000);
    async function* lines(): AsyncGenerator<string> {
      if (q.format === "csv") yield `${COLUMNS.join(",")}\r\n`;
      for (;;) {
        for (const r of current.rows) {
          const o = json(r);
          yield q.format === "csv"
            ? `${COLUMNS.map((c) => csvCell(o[c])).join(",")}\r\n`
            : `${JSON.stringify(o)}\n`;
        }
        const last = current.rows[current.rows.length - 1];
        if (!current.hasMore || !last) return;
        current = await page(db, tenantId, q, last.id, 1000);
      }
    }
    reply
      .type(q.format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson; charset=utf-8")
      .header("content-disposition", `attachment; filename="audit.${q.format}"`);
    return reply.send(Readable.from(lines()));
  });
}
