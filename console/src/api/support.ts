/**
 * The support desk's routes of /admin/v1 (docs/operator.md, "Support desk"): the queue, a ticket
 * with its whole conversation (notes included), replies and notes, status and assignee, figures.
 */
import { admin, type Params, query } from "./admin.ts";
import type { Page } from "./types.ts";

export type TicketStatus = "open" | "waiting" | "solved";

export interface DeskTicket {
  id: string;
  account_id: string;
  account_name: string;
  subject: string;
  about: { type: string; id: string } | null;
  status: TicketStatus;
  opened_by_email: string | null;
  assignee_user_id: string | null;
  assignee_email: string | null;
  awaiting_since: string | null;
  first_reply_at: string | null;
  created_at: string;
  replies_count: number;
}

export interface DeskReply {
  id: string;
  author: "member" | "staff";
  author_staff: string | null;
  internal: boolean;
  body: string;
  created_at: string;
}

export interface DeskTicketDetail extends DeskTicket {
  replies: DeskReply[];
}

export interface TicketStats {
  open: number;
  waiting: number;
  solved: number;
  unassigned_open: number;
  oldest_waiting_since: string | null;
  days: number;
  opened_in_window: number;
  answered_in_window: number;
  median_first_reply_seconds: number | null;
}

const id = encodeURIComponent;

export const support = {
  tickets: (params: Params) => admin<Page<DeskTicket>>("GET", `/tickets${query(params)}`),
  ticket: (ticketId: string) => admin<DeskTicketDetail>("GET", `/tickets/${id(ticketId)}`),
  stats: () => admin<TicketStats>("GET", "/tickets/stats"),
  reply: (ticketId: string, body: string, internal: boolean) =>
    admin<DeskTicketDetail>("POST", `/tickets/${id(ticketId)}/replies`, { body, internal }),
  update: (ticketId: string, patch: { status?: TicketStatus; assignee_user_id?: string | null }) =>
    admin<DeskTicketDetail>("PATCH", `/tickets/${id(ticketId)}`, patch),
};

/** A duration in seconds in words: "45 s", "12 min", "3.5 h", "2.1 days". */
export function duration(seconds: number | null): string {
  if (seconds === null) return "—";
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86_400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86_400).toFixed(1)} days`;
}
