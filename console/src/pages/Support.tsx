import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { type DeskTicket, duration, support, type TicketStatus } from "../api/support.ts";
import { Link, useLocation } from "../router.tsx";
import { Checkbox, ErrorState, Loading, Page, Status, When } from "../ui/common.tsx";
import { SearchSelect } from "../ui/filters.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/**
 * The support desk (docs/operator.md, "Support desk"): the tenant's figures (open, waiting,
 * median time to a first reply), then the queue — open first, the longest wait first — filtered
 * by status and assignee in the address.
 */
export default function Support() {
  const { search } = useLocation();
  const status = search.get("status") ?? "";
  const assignee = search.get("assignee") ?? "";
  const stats = useQuery({ queryKey: ["tickets", "stats"], queryFn: support.stats, refetchInterval: 60_000 });
  const page = useCursorPage<DeskTicket>(
    "tickets",
    support.tickets,
    { status: status || undefined, assignee: assignee || undefined },
    50,
    60_000,
  );
  const s = stats.data;
  return (
    <Page title="Support" testid="page-support">
      {s ? (
        <dl className="figures" data-testid="support-stats">
          <div>
            <dt>Open</dt>
            <dd data-testid="stat-open">{s.open}</dd>
          </div>
          <div>
            <dt>Waiting for the member</dt>
            <dd data-testid="stat-waiting">{s.waiting}</dd>
          </div>
          <div>
            <dt>Open, unassigned</dt>
            <dd data-testid="stat-unassigned">{s.unassigned_open}</dd>
          </div>
          <div>
            <dt>Median first reply ({s.days} days)</dt>
            <dd data-testid="stat-median">{duration(s.median_first_reply_seconds)}</dd>
          </div>
        </dl>
      ) : null}
      {stats.isError ? <ErrorState error={stats.error} onRetry={() => stats.refetch()} /> : null}
      <div className="filters">
        <SearchSelect
          label="Status"
          param="status"
          value={status}
          choices={[["", "any"], "open", "waiting", "solved"]}
          testid="tickets-filter-status"
        />
        <SearchSelect
          label="Assignee"
          param="assignee"
          value={assignee}
          choices={[
            ["", "anyone"],
            ["me", "me"],
            ["none", "nobody"],
          ]}
          testid="tickets-filter-assignee"
        />
      </div>
      <PagedTable
        page={page}
        label="Tickets"
        testid="tickets-table"
        empty="No tickets."
        cards
        columns={["Subject", "Status", "Account", "Waiting since", "Assignee"]}
        row={(t) => (
          <tr key={t.id} data-testid="ticket-row" data-status={t.status}>
            <th scope="row">
              <Link to={`/support/${encodeURIComponent(t.id)}`}>{t.subject}</Link>
              {t.opened_by_email ? <div className="muted">{t.opened_by_email}</div> : null}
            </th>
            <td data-label="Status">
              <Status value={t.status} />
            </td>
            <td data-label="Account">{t.account_name}</td>
            <td data-label="Waiting since">
              <When at={t.awaiting_since} />
            </td>
            <td data-label="Assignee">{t.assignee_email ?? <span className="muted">nobody</span>}</td>
          </tr>
        )}
      />
    </Page>
  );
}

/** One ticket: the conversation with the notes marked, a reply or note, status and assignee. */
export function TicketPage({ id }: { id: string }) {
  const client = useQueryClient();
  const ticket = useQuery({ queryKey: ["tickets", "one", id], queryFn: () => support.ticket(id) });
  const me = useQuery({ queryKey: ["me"], queryFn: api.me, staleTime: 60_000 });
  const [body, setBody] = useState("");
  const [internal, setInternal] = useState(false);
  const ids = useId();
  const settle = (fresh: unknown) => {
    client.setQueryData(["tickets", "one", id], fresh);
    void client.invalidateQueries({ queryKey: ["tickets"] });
  };
  const reply = useMutation({
    mutationFn: () => support.reply(id, body.trim(), internal),
    onSuccess: (fresh) => {
      setBody("");
      setInternal(false);
      settle(fresh);
    },
  });
  const update = useMutation({
    mutationFn: (patch: { status?: TicketStatus; assignee_user_id?: string | null }) =>
      support.update(id, patch),
    onSuccess: settle,
  });
  const t = ticket.data;
  const myId = me.data?.user?.id ?? null;
  const send = (e: FormEvent) => {
    e.preventDefault();
    if (body.trim()) reply.mutate();
  };
  return (
    <Page title={t ? t.subject : "Ticket"} testid="page-ticket">
      <p>
        <Link to="/support">Back to the queue</Link>
      </p>
      {ticket.isPending ? <Loading /> : null}
      {ticket.isError ? <ErrorState error={ticket.error} onRetry={() => ticket.refetch()} /> : null}
      {t ? (
        <>
          <p data-testid="ticket-meta">
            <Status value={t.status} /> {t.account_name}
            {t.opened_by_email ? ` · ${t.opened_by_email}` : ""}
            {t.about ? ` · about a ${t.about.type} (${t.about.id})` : ""}
          </p>
          <div className="page-actions">
            <label htmlFor={`${ids}-status`}>Status</label>
            <select
              id={`${ids}-status`}
              value={t.status}
              disabled={update.isPending}
              onChange={(e) => update.mutate({ status: e.target.value as TicketStatus })}
              data-testid="ticket-status"
            >
              <option value="open">open</option>
              <option value="waiting">waiting</option>
              <option value="solved">solved</option>
            </select>
            {myId && t.assignee_user_id !== myId ? (
              <button
                type="button"
                className="secondary"
                disabled={update.isPending}
                onClick={() => update.mutate({ assignee_user_id: myId })}
                data-testid="ticket-assign-me"
              >
                Assign to me
              </button>
            ) : null}
            {t.assignee_user_id ? (
              <span data-testid="ticket-assignee">
                Assigned to {t.assignee_email ?? t.assignee_user_id}{" "}
                <button
                  type="button"
                  className="secondary"
                  disabled={update.isPending}
                  onClick={() => update.mutate({ assignee_user_id: null })}
                >
                  Unassign
                </button>
              </span>
            ) : null}
          </div>
          {update.isError ? <ErrorState error={update.error} /> : null}
          <ol className="conversation" data-testid="ticket-replies">
            {t.replies.map((r) => (
              <li
                key={r.id}
                className={r.internal ? "reply reply-note" : `reply reply-${r.author}`}
                data-testid="ticket-reply"
                data-author={r.author}
                data-internal={String(r.internal)}
              >
                <p className="reply-head">
                  <strong>
                    {r.internal ? "Internal note · " : ""}
                    {r.author === "staff" ? (r.author_staff ?? "Staff") : (t.opened_by_email ?? "Member")}
                  </strong>{" "}
                  <When at={r.created_at} />
                </p>
                <p className="reply-body">{r.body}</p>
              </li>
            ))}
          </ol>
          <form onSubmit={send} data-testid="ticket-reply-form">
            <label htmlFor={`${ids}-body`}>
              {internal ? "Internal note (never shown to the member)" : "Reply"}
            </label>
            <textarea
              id={`${ids}-body`}
              rows={5}
              maxLength={20000}
              value={body}
              onChange={(e) => setBody(e.target.value)}
              data-testid="ticket-reply-body"
            />
            <Checkbox checked={internal} onChange={setInternal} testid="ticket-reply-internal">
              Internal note
            </Checkbox>
            <button type="submit" disabled={!body.trim() || reply.isPending} data-testid="ticket-reply-send">
              {internal ? "Add the note" : "Send the reply"}
            </button>
            {reply.isError ? <ErrorState error={reply.error} /> : null}
          </form>
          <p className="muted" data-testid="ticket-first-reply">
            {t.first_reply_at
              ? `First answered after ${duration(Math.round((Date.parse(t.first_reply_at) - Date.parse(t.created_at)) / 1000))}.`
              : "Not answered yet."}
          </p>
        </>
      ) : null}
    </Page>
  );
}
