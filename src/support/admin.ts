import { z } from "zod";
import { FieldsError } from "../admin/errors.ts";
import {
  type AnyAdminRoute,
  adminRoute,
  badCursor,
  IdParams,
  iso,
  page,
  pageOf,
  pageQuery,
  Uuid,
} from "../admin/spec.ts";
import type { Db } from "../db/db.ts";
import { asDbError } from "../db/errors.ts";
import { operatorScope } from "../db/operator-scope.ts";
import type { Tx } from "../db/types.ts";
import { Timestamp } from "../http/formats.ts";
import { HttpError } from "../http/problem.ts";
import type { Mailer } from "../mail/mailer.ts";
import {
  ABOUT_TYPES,
  addReply,
  mailReply,
  type ReplyRow,
  repliesOf,
  TICKET_COLUMNS,
  TICKET_STATUSES,
  type TicketRow,
  ticketById,
} from "./tickets.ts";

/**
 * The support desk under /admin/v1 (docs/operator.md, "Support desk"), for the tenant's staff
 * (reviewer and up):
 *
 *   GET   /tickets               the queue: open first, then waiting, then solved; within each, the
 *                                one waiting longest first
 *   GET   /tickets/stats         open/waiting/solved counts and the median time to the first reply
 *   GET   /tickets/{id}          a ticket with its whole conversation, internal notes included
 *   POST  /tickets/{id}/replies  a reply (the member is notified and e-mailed) or an internal note
 *   PATCH /tickets/{id}          status and assignee
 *
 * Another tenant's ticket is not_found exactly as a missing one is.
 */

const TAG = "Support";

const Status = z.enum(TICKET_STATUSES);

const DeskTicket = z
  .object({
    id: Uuid,
    object: z.literal("ticket"),
    account_id: Uuid,
    account_name: z.string(),
    subject: z.string(),
    about: z.object({ type: z.enum(ABOUT_TYPES), id: Uuid }).nullable(),
    status: Status,
    opened_by: Uuid.nullable(),
    opened_by_email: z.string().nullable(),
    assignee_user_id: Uuid.nullable(),
    assignee_email: z.string().nullable(),
    awaiting_since: Timestamp.nullable().meta({
      description: "Since when the member's unanswered message waits; null when answered or solved.",
    }),
    first_reply_at: Timestamp.nullable(),
    solved_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    replies_count: z.number().int().meta({ description: "Replies and notes." }),
  })
  .meta({ id: "DeskTicket" });

const DeskReply = z
  .object({
    id: Uuid,
    object: z.literal("ticket_reply"),
    ticket_id: Uuid,
    author: z.enum(["member", "staff"]),
    author_user_id: Uuid.nullable(),
    author_staff: z
      .string()
      .nullable()
      .meta({ description: "The staff member who wrote it (their address)." }),
    internal: z.boolean().meta({ description: "An internal note: never shown to the member." }),
    body: z.string(),
    created_at: Timestamp,
  })
  .meta({ id: "DeskTicketReply" });

const DeskTicketDetail = DeskTicket.extend({ replies: z.array(DeskReply) }).meta({ id: "DeskTicketDetail" });

const Stats = z
  .object({
    object: z.literal("ticket_stats"),
    open: z.number().int().meta({ description: "Tickets with the desk now." }),
    waiting: z.number().int().meta({ description: "Answered, waiting for the member." }),
    solved: z.number().int(),
    unassigned_open: z.number().int(),
    oldest_waiting_since: Timestamp.nullable().meta({
      description: "The open ticket waiting longest, since when.",
    }),
    days: z.number().int().meta({ description: "The window of the response-time figures, in days." }),
    opened_in_window: z.number().int().meta({ description: "Tickets opened in the window." }),
    answered_in_window: z.number().int().meta({ description: "Of those, how many the desk has answered." }),
    median_first_reply_seconds: z.number().int().nullable().meta({
      description:
        "Median time from a ticket's opening to the desk's first public reply, over the window's answered tickets.",
    }),
  })
  .meta({ id: "TicketStats" });

interface DeskRow extends TicketRow {
  account_name: string;
  opened_by_email: string | null;
  assignee_email: string | null;
  replies_count: number;
}

const DESK_SELECT = `select ${TICKET_COLUMNS}, a.name as account_name, o.email as opened_by_email,
    s.email as assignee_email,
    (select count(*)::int from internal.ticket_replies r where r.ticket_id = t.id) as replies_count
  from internal.tickets t
  join internal.accounts a on a.id = t.account_id
  left join internal.users o on o.id = t.opened_by
  left join internal.users s on s.id = t.assignee_user_id`;

// The queue's order: open, waiting, solved; the longest wait first; then the oldest.
const QUEUE_COLS = `case t.status when 'open' then 0 when 'waiting' then 1 else 2 end,
  coalesce(t.awaiting_since, 'infinity'::timestamptz), t.created_at, t.id`;

function deskTicket(row: DeskRow) {
  return {
    id: row.id,
    object: "ticket" as const,
    account_id: row.account_id,
    account_name: row.account_name,
    subject: row.subject,
    about: row.about_type && row.about_id ? { type: row.about_type, id: row.about_id } : null,
    status: row.status,
    opened_by: row.opened_by,
    opened_by_email: row.opened_by_email,
    assignee_user_id: row.assignee_user_id,
    assignee_email: row.assignee_email,
    awaiting_since: iso(row.awaiting_since),
    first_reply_at: iso(row.first_reply_at),
    solved_at: iso(row.solved_at),
    created_at: iso(row.created_at) as string,
    updated_at: iso(row.updated_at) as string,
    replies_count: row.replies_count,
  };
}

function deskReply(row: ReplyRow) {
  return {
    id: row.id,
    object: "ticket_reply" as const,
    ticket_id: row.ticket_id,
    author: row.author_staff !== null ? ("staff" as const) : ("member" as const),
    author_user_id: row.author_user_id,
    author_staff: row.author_staff,
    internal: row.is_internal,
    body: row.body,
    created_at: iso(row.created_at) as string,
  };
}

async function deskTicketById(tx: Tx, tenantId: string, id: string): Promise<DeskRow | undefined> {
  return (await tx.query<DeskRow>(`${DESK_SELECT} where t.id = $1 and t.tenant_id = $2`, [id, tenantId]))
    .rows[0];
}

async function detail(tx: Tx, tenantId: string, id: string) {
  const row = await deskTicketById(tx, tenantId, id);
  if (!row) throw new HttpError(404, "not_found", `no ticket ${id}`, "id");
  return { ...deskTicket(row), replies: (await repliesOf(tx, id)).map(deskReply) };
}

/** The staff user acting (from the operator scope), and how a reply names them. */
async function actingStaff(tx: Tx): Promise<{ userId: string | null; label: string }> {
  const sub = operatorScope.getStore()?.claims.sub;
  const userId = typeof sub === "string" && sub ? sub : null;
  if (!userId) return { userId: null, label: "service key" };
  const r = await tx.query<{ email: string | null }>("select email from internal.users where id = $1", [
    userId,
  ]);
  return { userId, label: r.rows[0]?.email ?? "staff" };
}

export interface SupportAdminOptions {
  db: Db;
  /** Mails the desk's replies to the member; without it only the notification is written. */
  mail?: { mailer: Pick<Mailer, "enqueue">; publicUrl: string } | undefined;
}

export function supportSpecs(options: SupportAdminOptions): AnyAdminRoute[] {
  const { db, mail } = options;
  return [
    adminRoute({
      method: "GET",
      path: "/tickets",
      operationId: "listTickets",
      summary: "The support queue",
      description:
        "Open tickets first, then waiting, then solved; within each, the ticket whose member waits longest first. " +
        "`assignee` keeps one staff user's tickets (`me`: the caller's, `none`: unassigned).",
      tag: TAG,
      staffRole: "reviewer",
      query: pageQuery(Uuid, {
        status: Status.optional().meta({ description: "Only tickets with this status." }),
        assignee: z
          .union([z.literal("me"), z.literal("none"), Uuid])
          .optional()
          .meta({ description: "A staff user's id, `me` or `none`." }),
        account_id: Uuid.optional().meta({ description: "Only this account's tickets." }),
      }),
      response: {
        status: 200,
        description: "A page of the queue.",
        schema: pageOf(DeskTicket, "DeskTicketPage"),
      },
      handler: async ({ tenantId, query }) => {
        const me = operatorScope.getStore()?.claims.sub ?? null;
        const assignee = query.assignee === "me" ? (me ?? "none") : query.assignee;
        const rows = await db.asService(
          async (tx) => {
            if (query.starting_after && !(await deskTicketById(tx, tenantId, query.starting_after))) {
              throw badCursor(query.starting_after);
            }
            return (
              await tx.query<DeskRow>(
                `${DESK_SELECT}
                 where t.tenant_id = $1 and ($2::text is null or t.status = $2)
                   and ($3::text is null or ($3 = 'none' and t.assignee_user_id is null) or t.assignee_user_id::text = $3)
                   and ($4::uuid is null or t.account_id = $4)
                   and ($5::uuid is null or (${QUEUE_COLS}) > (select ${QUEUE_COLS} from internal.tickets t where t.id = $5))
                 order by ${QUEUE_COLS} limit $6`,
                [
                  tenantId,
                  query.status ?? null,
                  assignee ?? null,
                  query.account_id ?? null,
                  query.starting_after ?? null,
                  query.limit + 1,
                ],
              )
            ).rows;
          },
          { readOnly: true },
        );
        return page(rows.map(deskTicket), query.limit);
      },
    }),
    adminRoute({
      method: "GET",
      path: "/tickets/stats",
      operationId: "ticketStats",
      summary: "The desk's figures: counts and the median time to a first reply",
      tag: TAG,
      staffRole: "reviewer",
      query: z.strictObject({
        days: z.coerce.number().int().min(1).max(366).default(30).meta({
          description:
            "The window of the response-time figures: tickets opened in the last N days (default 30).",
        }),
      }),
      response: { status: 200, description: "The figures.", schema: Stats },
      handler: async ({ tenantId, query }) => {
        const r = await db.asService(
          async (tx) =>
            (
              await tx.query<{
                open: number;
                waiting: number;
                solved: number;
                unassigned_open: number;
                oldest: Date | null;
                opened: number;
                answered: number;
                median: number | null;
              }>(
                `select
                   count(*) filter (where status = 'open')::int as open,
                   count(*) filter (where status = 'waiting')::int as waiting,
                   count(*) filter (where status = 'solved')::int as solved,
                   count(*) filter (where status = 'open' and assignee_user_id is null)::int as unassigned_open,
                   min(awaiting_since) filter (where status = 'open') as oldest,
                   count(*) filter (where created_at > now() - make_interval(days => $2))::int as opened,
                   count(*) filter (where created_at > now() - make_interval(days => $2)
                     and first_reply_at is not null)::int as answered,
                   (percentile_cont(0.5) within group (order by extract(epoch from first_reply_at - created_at))
                     filter (where created_at > now() - make_interval(days => $2) and first_reply_at is not null))::float8
                     as median
                 from internal.tickets where tenant_id = $1`,
                [tenantId, query.days],
              )
            ).rows[0],
          { readOnly: true },
        );
        return {
          object: "ticket_stats",
          open: r?.open ?? 0,
          waiting: r?.waiting ?? 0,
          solved: r?.solved ?? 0,
          unassigned_open: r?.unassigned_open ?? 0,
          oldest_waiting_since: iso(r?.oldest ?? null),
          days: query.days,
          opened_in_window: r?.opened ?? 0,
          answered_in_window: r?.answered ?? 0,
          median_first_reply_seconds:
            r?.median === null || r?.median === undefined ? null : Math.round(Number(r.median)),
        };
      },
    }),
    adminRoute({
      method: "GET",
      path: "/tickets/{id}",
      operationId: "getTicket",
      summary: "A ticket with its whole conversation, internal notes included",
      tag: TAG,
      staffRole: "reviewer",
      params: IdParams,
      response: { status: 200, description: "The ticket.", schema: DeskTicketDetail },
      errors: [404],
      handler: async ({ tenantId, params }) =>
        db.asService((tx) => detail(tx, tenantId, params.id), { readOnly: true }),
    }),
    adminRoute({
      method: "POST",
      path: "/tickets/{id}/replies",
      operationId: "replyToTicket",
      summary: "Answer a ticket, or add an internal note",
      description:
        "A reply (internal false) is shown to the member, who is notified and e-mailed in the tenant's branding; the " +
        "ticket then waits for them (status waiting, unless solved). An internal note (internal true) is for staff " +
        "only: the member's queries never return it, and nothing is sent.",
      tag: TAG,
      staffRole: "reviewer",
      params: IdParams,
      body: z.strictObject({
        body: z.string().trim().min(1).max(20_000).meta({ description: "The message (plain text)." }),
        internal: z
          .boolean()
          .default(false)
          .meta({ description: "An internal note, not shown to the member." }),
      }),
      response: { status: 201, description: "The ticket after the reply.", schema: DeskTicketDetail },
      errors: [404],
      handler: async ({ tenantId, params, body, reply }) => {
        const out = await db.asService(async (tx) => {
          const ticket = await ticketById(tx, params.id, tenantId);
          if (!ticket) throw new HttpError(404, "not_found", `no ticket ${params.id}`, "id");
          const staff = await actingStaff(tx);
          await addReply(tx, ticket.id, body.body, { ...staff, internal: body.internal });
          if (!body.internal && mail) await mailReply(tx, mail, ticket, body.body);
          return detail(tx, tenantId, ticket.id);
        });
        reply.status(201);
        return out;
      },
    }),
    adminRoute({
      method: "PATCH",
      path: "/tickets/{id}",
      operationId: "updateTicket",
      summary: "Change a ticket's status or assignee",
      description:
        "`assignee_user_id` names a staff user of the tenant (or platform staff), or null to unassign; another user is " +
        "400 on that field.",
      tag: TAG,
      staffRole: "reviewer",
      params: IdParams,
      body: z
        .strictObject({
          status: Status.optional(),
          assignee_user_id: Uuid.nullable().optional(),
        })
        .refine((b) => b.status !== undefined || b.assignee_user_id !== undefined, {
          message: "name status or assignee_user_id",
        }),
      response: { status: 200, description: "The ticket.", schema: DeskTicketDetail },
      errors: [404],
      handler: async ({ tenantId, params, body }) =>
        db.asService(async (tx) => {
          try {
            const r = await tx.query(
              `update internal.tickets set
                 status = coalesce($3, status),
                 assignee_user_id = case when $4::boolean then $5::uuid else assignee_user_id end
               where id = $1 and tenant_id = $2`,
              [
                params.id,
                tenantId,
                body.status ?? null,
                body.assignee_user_id !== undefined,
                body.assignee_user_id ?? null,
              ],
            );
            if (r.rowCount === 0) throw new HttpError(404, "not_found", `no ticket ${params.id}`, "id");
          } catch (error) {
            if (asDbError(error)?.sqlstate === "23503") {
              const message = `user ${body.assignee_user_id} is not staff of this tenant`;
              throw new FieldsError(400, "invalid_request", message, [
                { param: "assignee_user_id", code: "invalid_value", message },
              ]);
            }
            throw error;
          }
          return detail(tx, tenantId, params.id);
        }),
    }),
  ];
}
