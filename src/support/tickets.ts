import type { Tx } from "../db/types.ts";
import { timestamp } from "../http/formats.ts";
import type { Mailer } from "../mail/mailer.ts";
import { portalUrl } from "../portal/links.ts";

/**
 * The support desk (migration 0049; docs/operator.md, "Support desk"): what a ticket and a reply
 * look like on both interfaces, and the queries both use. The public API runs them as the caller
 * (row security: their account's tickets, never a note); /admin/v1 as the operator, for one tenant.
 */

export const TICKET_STATUSES = ["open", "waiting", "solved"] as const;
export type TicketStatus = (typeof TICKET_STATUSES)[number];
export const ABOUT_TYPES = ["release", "delivery", "payout"] as const;
export type AboutType = (typeof ABOUT_TYPES)[number];

export interface TicketRow {
  id: string;
  tenant_id: string;
  account_id: string;
  opened_by: string | null;
  subject: string;
  status: TicketStatus;
  about_type: AboutType | null;
  about_id: string | null;
  assignee_user_id: string | null;
  awaiting_since: Date | null;
  first_reply_at: Date | null;
  solved_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface ReplyRow {
  id: string;
  ticket_id: string;
  author_user_id: string | null;
  author_staff: string | null;
  body: string;
  is_internal: boolean;
  created_at: Date;
}

export const TICKET_COLUMNS =
  "t.id, t.tenant_id, t.account_id, t.opened_by, t.subject, t.status, t.about_type, t.about_id, " +
  "t.assignee_user_id, t.awaiting_since, t.first_reply_at, t.solved_at, t.created_at, t.updated_at";
const REPLY_COLUMNS =
  "r.id, r.ticket_id, r.author_user_id, r.author_staff, r.body, r.is_internal, r.created_at";

/** A ticket as the member sees it (public API). */
export function memberTicket(row: TicketRow) {
  return {
    id: row.id,
    object: "ticket" as const,
    account_id: row.account_id,
    subject: row.subject,
    about: row.about_type && row.about_id ? { type: row.about_type, id: row.about_id } : null,
    status: row.status,
    opened_by: row.opened_by,
    created_at: timestamp(row.created_at) as string,
    updated_at: timestamp(row.updated_at) as string,
    first_reply_at: timestamp(row.first_reply_at),
    solved_at: timestamp(row.solved_at),
  };
}

/** A reply as the member sees it: who wrote it is "member" (with the user, when a person did) or "staff". */
export function memberReply(row: ReplyRow) {
  return {
    id: row.id,
    object: "ticket_reply" as const,
    ticket_id: row.ticket_id,
    author: row.author_staff !== null ? ("staff" as const) : ("member" as const),
    author_user_id: row.author_staff !== null ? null : row.author_user_id,
    body: row.body,
    created_at: timestamp(row.created_at) as string,
  };
}

/** One ticket by id, as the transaction's caller may read it. */
export async function ticketById(tx: Tx, id: string, tenantId?: string): Promise<TicketRow | undefined> {
  const r = await tx.query<TicketRow>(
    `select ${TICKET_COLUMNS} from internal.tickets t where t.id = $1 and ($2::uuid is null or t.tenant_id = $2)`,
    [id, tenantId ?? null],
  );
  return r.rows[0];
}

/** A ticket's replies, oldest first: under row security a member's query returns no note. */
export async function repliesOf(tx: Tx, ticketId: string): Promise<ReplyRow[]> {
  const r = await tx.query<ReplyRow>(
    `select ${REPLY_COLUMNS} from internal.ticket_replies r where r.ticket_id = $1 order by r.created_at, r.id`,
    [ticketId],
  );
  return r.rows;
}

/** Adds a reply; `staff` names the desk's author (the operator path), absent for a member. */
export async function addReply(
  tx: Tx,
  ticketId: string,
  body: string,
  staff?: { userId: string | null; label: string; internal: boolean },
): Promise<ReplyRow> {
  const r = staff
    ? await tx.query<ReplyRow>(
        `insert into internal.ticket_replies as r (ticket_id, body, author_user_id, author_staff, is_internal)
         values ($1, $2, $3, $4, $5) returning ${REPLY_COLUMNS}`,
        [ticketId, body, staff.userId, staff.label, staff.internal],
      )
    : await tx.query<ReplyRow>(
        `insert into internal.ticket_replies as r (ticket_id, body) values ($1, $2) returning ${REPLY_COLUMNS}`,
        [ticketId, body],
      );
  const row = r.rows[0];
  if (!row) throw new Error("insert into ticket_replies returned no row");
  return row;
}

/** What the desk's e-mail to the member says: the reply, and a link to the ticket in the portal. */
export function replyMessage(ticket: Pick<TicketRow, "subject">, reply: string, link: string) {
  return {
    subject: `Re: ${ticket.subject}`,
    text: [
      `Our support team answered your request “${ticket.subject}”:`,
      "",
      reply,
      "",
      "Read the conversation and answer in your portal:",
      link,
    ].join("\n"),
  };
}

/**
 * Queues the desk's reply as an e-mail to whoever opened the ticket (every member of the account
 * when an API key opened it), in the reply's transaction. The tenant's branding is put on when the
 * mail leaves (src/mail/branding.ts). Answers how many messages were queued.
 */
export async function mailReply(
  tx: Tx,
  mail: { mailer: Pick<Mailer, "enqueue">; publicUrl: string },
  ticket: TicketRow,
  reply: string,
): Promise<number> {
  const tenant = (
    await tx.query<{ slug: string; settings: Record<string, unknown> }>(
      "select slug, settings from internal.tenants where id = $1",
      [ticket.tenant_id],
    )
  ).rows[0];
  if (!tenant) return 0;
  const to = await tx.query<{ email: string }>(
    `select distinct u.email from internal.memberships m join internal.users u on u.id = m.user_id
     where m.account_id = $1 and ($2::uuid is null or m.user_id = $2)
       and u.email is not null and u.deleted_at is null`,
    [ticket.account_id, ticket.opened_by],
  );
  const link = `${portalUrl(mail.publicUrl, tenant)}support/${ticket.id}`;
  for (const { email } of to.rows) {
    await mail.mailer.enqueue(tx, {
      tenantId: ticket.tenant_id,
      to: email,
      kind: "ticket.replied",
      ...replyMessage(ticket, reply, link),
    });
  }
  return to.rows.length;
}
