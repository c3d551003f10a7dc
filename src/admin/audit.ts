import { Readable } from "node:stream";
import { z } from "zod";
import type { Db } from "../db/db.ts";
import { Timestamp, TimestampInput, timestampOf } from "../http/formats.ts";
import { adminRoute } from "./spec.ts";

/**
 * GET /admin/v1/audit (docs/operator.md, "The audit log"): the tenant's audit log, newest first,
 * for its admins (staff role admin, or the tenant's service-role key). A route spec like the
 * others (src/admin/spec.ts), so its filters, cursor and exports are in the OpenAPI document.
 * Filters: actor (a user id, key id or "cli:<command>"), object (a row's id), object_table, action,
 * from/to (ISO times, from inclusive, to exclusive). Cursor pagination as everywhere: `limit`
 * (1-500, 50), `starting_after` (the last id of the previous page), `has_more`. `format=csv` or
 * `format=jsonl` exports every matching row (no pagination), read in pages of 1000.
 *
 * The rows are read on the operator path inside the operator scope, so the database checks the
 * caller's admin role first (internal.require_staff), and only the caller's target tenant's rows
 * are asked for.
 */
const Query = z.strictObject({
  actor: z
    .string()
    .min(1)
    .max(300)
    .optional()
    .meta({ description: 'Who acted: a user id, an API key id or "cli:<command>".' }),
  object: z.string().min(1).max(300).optional().meta({ description: "The id of the row acted on." }),
  object_table: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .meta({ description: "The table acted on, schema-qualified (internal.organization_settings)." }),
  action: z.string().min(1).max(100).optional().meta({ description: "insert, update or delete." }),
  from: TimestampInput.optional().meta({
    description: "Entries at or after this time (ISO 8601 with a zone).",
  }),
  to: TimestampInput.optional().meta({ description: "Entries before this time (ISO 8601 with a zone)." }),
  starting_after: z
    .string()
    .regex(/^\d{1,18}$/, "must be an id from a previous page")
    .optional()
    .meta({ description: "The id of the last entry of the previous page: the page after it." }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(500)
    .default(50)
    .meta({ description: "Page size: 1 to 500, default 50 (not used by the exports)." }),
  format: z.enum(["json", "csv", "jsonl"]).default("json").meta({
    description:
      "json: a page. csv or jsonl: every matching entry, streamed (text/csv; application/x-ndjson), from starting_after on.",
  }),
});
type AuditQuery = z.infer<typeof Query>;

const AuditEntry = z
  .object({
    id: z.number().int().meta({ description: "Increasing: the cursor of the next page." }),
    at: Timestamp,
    tenant_id: z.string().nullable(),
    actor_type: z.string().meta({ description: "user, api_key, service_key, cli, system, …" }),
    actor: z.string(),
    actor_detail: z.record(z.string(), z.unknown()),
    ip: z.string().nullable(),
    action: z.string(),
    object_table: z.string(),
    object_id: z.string().nullable(),
    before: z.unknown().meta({
      description:
        "The changed columns before (update, delete). Columns holding a secret, or its hash or ciphertext, never appear.",
    }),
    after: z.unknown().meta({
      description:
        'The changed columns after (insert, update). A hidden column that changed reads "changed"; a secret inside a ' +
        'setting "hidden"; a value removed later by the operator "redacted" (docs/security.md).',
    }),
  })
  .meta({ id: "AuditEntry" });

const AuditPage = z
  .object({
    data: z.array(AuditEntry),
    has_more: z.boolean().meta({ description: "Whether a next page exists (ask with starting_after)." }),
  })
  .meta({ id: "AuditPage" });

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

export function auditSpec(db: Db) {
  return adminRoute({
    method: "GET",
    path: "/audit",
    operationId: "listAuditLog",
    summary: "Read or export the audit log",
    description:
      "The tenant's audit log, newest first: who changed what, when and from where, with the changed columns " +
      "before and after. `format=csv` or `format=jsonl` exports every matching entry instead of a page " +
      "(CSV cells a spreadsheet would run as a formula are prefixed with `'`).",
    tag: "Audit",
    staffRole: "admin",
    query: Query,
    response: {
      status: 200,
      description: "A page of entries (format=json), or every matching entry as CSV or JSON lines.",
      schema: AuditPage,
      exports: ["text/csv", "application/x-ndjson"],
    },
    handler: async ({ query: q, tenantId, reply }) => {
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
      return Readable.from(lines());
    },
  });
}
