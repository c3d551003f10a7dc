import { z } from "zod";
import { asDbError } from "../../db/errors.ts";
import { Timestamp } from "../../http/formats.ts";
import {
  ABOUT_TYPES,
  addReply,
  memberReply,
  memberTicket,
  repliesOf,
  TICKET_COLUMNS,
  TICKET_STATUSES,
  type TicketRow,
  ticketById,
} from "../../support/tickets.ts";
import { notFound, validationFailed } from "../errors.ts";
import { Id, listOf, OffsetPagination, page, route } from "../route.ts";

/**
 * The support desk, a member's side (docs/public-api.md, "Support"): file a ticket for the account,
 * about one of its releases, deliveries or payouts or nothing in particular, read the account's
 * tickets and their conversation, and answer. Row security decides (migration 0049): the account's
 * tickets only, and never the desk's internal notes. The desk answers through /admin/v1.
 */

const TAG = "Support";

const Body = z
  .string()
  .trim()
  .min(1)
  .max(20_000)
  .meta({ description: "The message: plain text, up to 20,000 characters." });

const About = z
  .strictObject({
    type: z.enum(ABOUT_TYPES).meta({ description: "What kind of object the ticket is about." }),
    id: Id.meta({ description: "The release's, delivery's or payout's id: one of this account's." }),
  })
  .meta({ id: "TicketAbout", description: "The object a ticket is about; null for a general question." });

const Reply = z
  .object({
    id: Id,
    object: z.literal("ticket_reply"),
    ticket_id: Id,
    author: z
      .enum(["member", "staff"])
      .meta({ description: "Who wrote it: a member (or key) or the support desk." }),
    author_user_id: Id.nullable().meta({
      description: "The member who wrote it; null for the desk's replies and for an API key's.",
    }),
    body: z.string(),
    created_at: Timestamp,
  })
  .meta({ id: "TicketReply" });

const Ticket = z
  .object({
    id: Id,
    object: z.literal("ticket"),
    account_id: Id,
    subject: z.string(),
    about: About.nullable(),
    status: z.enum(TICKET_STATUSES).meta({
      description:
        "open: with the support desk; waiting: the desk answered and waits for you; solved: closed " +
        "(your next reply opens it again).",
    }),
    opened_by: Id.nullable().meta({ description: "The member who filed it; null when an API key did." }),
    created_at: Timestamp,
    updated_at: Timestamp,
    first_reply_at: Timestamp.nullable().meta({ description: "When the desk first answered." }),
    solved_at: Timestamp.nullable(),
  })
  .meta({ id: "Ticket" });

const TicketWithReplies = Ticket.extend({
  replies: z.array(Reply).meta({ description: "The conversation, oldest first (the first is the request)." }),
}).meta({ id: "TicketWithReplies" });

const NewTicket = z
  .strictObject({
    subject: z
      .string()
      .trim()
      .min(1)
      .max(300)
      .meta({ description: "A one-line summary (1–300 characters)." }),
    body: Body,
    about: About.nullable().optional(),
  })
  .meta({ id: "NewTicket" });

const withId = z.object({ id: Id });

/** The database refused the object a ticket is about (not one of the account's): 422 on about.id. */
function aboutRefused(error: unknown, about: { type: string; id: string } | null | undefined): never {
  const db = asDbError(error);
  if (about && db?.sqlstate === "23503") {
    throw validationFailed([
      {
        param: "about.id",
        code: "not_found",
        message: `no ${about.type} ${about.id} in this account`,
      },
    ]);
  }
  throw error;
}

export const ticketRoutes = [
  route({
    method: "POST",
    path: "/tickets",
    operationId: "createTicket",
    summary: "File a support ticket",
    description:
      "Opens a ticket for the account with its first message. `about` names one of the account's releases, " +
      "deliveries or payouts (another account's is 422 on about.id), or is left out. The tenant's support desk " +
      "sees it at once in its queue; you are notified (and e-mailed) when it answers.",
    tag: TAG,
    scope: "catalog:write",
    body: NewTicket,
    response: { status: 201, description: "The ticket, with its first message.", schema: TicketWithReplies },
    errors: [413, 415, 422],
    handler: async ({ body, caller, write }) => {
      const about = body.about ?? null;
      const made = await write(async (tx) => {
        const t = await tx
          .query<TicketRow>(
            `insert into internal.tickets as t (account_id, subject, about_type, about_id)
             values ($1, $2, $3, $4) returning ${TICKET_COLUMNS}`,
            [caller.accountId, body.subject, about?.type ?? null, about?.id ?? null],
          )
          .catch((error: unknown) => aboutRefused(error, about));
        const ticket = t.rows[0];
        if (!ticket) throw new Error("insert into tickets returned no row");
        await addReply(tx, ticket.id, body.body);
        return {
          ticket: (await ticketById(tx, ticket.id)) ?? ticket,
          replies: await repliesOf(tx, ticket.id),
        };
      });
      return {
        status: 201,
        body: { ...memberTicket(made.ticket), replies: made.replies.map(memberReply) },
      };
    },
  }),

  route({
    method: "GET",
    path: "/tickets",
    operationId: "listTickets",
    summary: "List the account's support tickets",
    description: "Newest first; `status` keeps one status.",
    tag: TAG,
    scope: "catalog:read",
    query: OffsetPagination.extend({
      status: z.enum(TICKET_STATUSES).optional().meta({ description: "Only tickets with this status." }),
    }).strict(),
    response: { status: 200, description: "A page of tickets.", schema: listOf(Ticket, "TicketList") },
    handler: async ({ query, read }) => {
      const { rows, total } = await read(async (tx) => {
        const status = query.status ?? null;
        const rows = (
          await tx.query<TicketRow>(
            `select ${TICKET_COLUMNS} from internal.tickets t
             where ($1::text is null or t.status = $1)
             order by t.created_at desc, t.id desc limit $2 offset $3`,
            [status, query.limit + 1, query.offset],
          )
        ).rows;
        const n = await tx.query<{ n: string }>(
          "select count(*) as n from internal.tickets t where ($1::text is null or t.status = $1)",
          [status],
        );
        return { rows, total: Number(n.rows[0]?.n ?? 0) };
      });
      return {
        body: page(rows.slice(0, query.limit).map(memberTicket), query, {
          total,
          has_more: rows.length > query.limit,
        }),
      };
    },
  }),

  route({
    method: "GET",
    path: "/tickets/{id}",
    operationId: "getTicket",
    summary: "A support ticket and its conversation",
    description: "The desk's internal notes are never part of it.",
    tag: TAG,
    scope: "catalog:read",
    params: withId,
    response: { status: 200, description: "The ticket.", schema: TicketWithReplies },
    errors: [404],
    handler: async ({ params, read }) => {
      const found = await read(async (tx) => {
        const ticket = await ticketById(tx, params.id);
        return ticket ? { ticket, replies: await repliesOf(tx, ticket.id) } : undefined;
      });
      if (!found) throw notFound("ticket", params.id);
      return { body: { ...memberTicket(found.ticket), replies: found.replies.map(memberReply) } };
    },
  }),

  route({
    method: "POST",
    path: "/tickets/{id}/replies",
    operationId: "replyToTicket",
    summary: "Answer on a support ticket",
    description: "Your reply puts the ticket back with the desk (status open), a solved one too.",
    tag: TAG,
    scope: "catalog:write",
    params: withId,
    body: z.strictObject({ body: Body }).meta({ id: "NewTicketReply" }),
    response: { status: 201, description: "The reply.", schema: Reply },
    errors: [404, 413, 415, 422],
    handler: async ({ params, body, write }) => {
      const reply = await write(async (tx) => {
        if (!(await ticketById(tx, params.id))) return undefined;
        return addReply(tx, params.id, body.body);
      });
      if (!reply) throw notFound("ticket", params.id);
      return { status: 201, body: memberReply(reply) };
    },
  }),
];
