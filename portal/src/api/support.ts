/**
 * The portal's support requests: the account's tickets on the public API (/api/public/v1/tickets,
 * docs/public-api.md "Support"), with the member's own token and the account named. The desk's
 * internal notes never come back from these calls (the database does not return them).
 */
import { call } from "./public.ts";

export type TicketStatus = "open" | "waiting" | "solved";

export interface TicketReply {
  id: string;
  author: "member" | "staff";
  author_user_id: string | null;
  body: string;
  created_at: string;
}

export interface Ticket {
  id: string;
  subject: string;
  status: TicketStatus;
  about: { type: "release" | "delivery" | "payout"; id: string } | null;
  created_at: string;
  updated_at: string;
  first_reply_at: string | null;
  solved_at: string | null;
}

export interface TicketWithReplies extends Ticket {
  replies: TicketReply[];
}

export async function listTickets(accountId: string): Promise<Ticket[]> {
  const page = await call<{ data: Ticket[] }>(accountId, "GET", "/tickets?limit=100");
  return page.data;
}

export async function getTicket(accountId: string, id: string): Promise<TicketWithReplies> {
  return call<TicketWithReplies>(accountId, "GET", `/tickets/${encodeURIComponent(id)}`);
}

export async function fileTicket(
  accountId: string,
  input: { subject: string; body: string; releaseId: string | null },
): Promise<TicketWithReplies> {
  return call<TicketWithReplies>(accountId, "POST", "/tickets", {
    subject: input.subject,
    body: input.body,
    ...(input.releaseId ? { about: { type: "release", id: input.releaseId } } : {}),
  });
}

export async function replyToTicket(accountId: string, id: string, body: string): Promise<TicketReply> {
  return call<TicketReply>(accountId, "POST", `/tickets/${encodeURIComponent(id)}/replies`, { body });
}

/** A ticket's status in the member's words. */
export const STATUS_WORDS: Record<TicketStatus, string> = {
  open: "With support",
  waiting: "Answered",
  solved: "Solved",
};
