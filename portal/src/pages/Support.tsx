import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { Empty, Loading, TableWrap, When } from "../../../ui-shared/common.tsx";
import { Link, navigate } from "../../../ui-shared/router.tsx";
import { type Account, canEdit, listReleases } from "../api/portal.ts";
import { fileTicket, getTicket, listTickets, replyToTicket, STATUS_WORDS } from "../api/support.ts";
import { ErrorState, errorFor, Field, FormError, Page, SelectField } from "../ui.tsx";

/**
 * Support (docs/portal.md): the account's requests to the platform's support desk, newest first,
 * a form to write a new one (about one of the account's releases, or nothing in particular), and
 * each request's conversation with a reply box. Everything goes through the public API's /tickets.
 */
export function Support({ account }: { account: Account }) {
  const tickets = useQuery({ queryKey: ["tickets", account.id], queryFn: () => listTickets(account.id) });
  const [writing, setWriting] = useState(false);
  const writes = canEdit(account.role);
  return (
    <Page
      title="Support"
      testid="page-support"
      actions={
        writes && !writing ? (
          <button type="button" onClick={() => setWriting(true)} data-testid="ticket-new">
            Write to support
          </button>
        ) : null
      }
    >
      {writing ? <NewTicket account={account} onCancel={() => setWriting(false)} /> : null}
      {tickets.isPending ? <Loading /> : null}
      {tickets.isError ? <ErrorState error={tickets.error} onRetry={() => tickets.refetch()} /> : null}
      {tickets.data && tickets.data.length === 0 ? (
        <Empty>
          <span data-testid="tickets-empty">
            No requests yet. Write to support about a release, a delivery, a payment, or anything else.
          </span>
        </Empty>
      ) : null}
      {tickets.data && tickets.data.length > 0 ? (
        <TableWrap label="Your requests">
          <table data-testid="tickets">
            <thead>
              <tr>
                <th scope="col">Subject</th>
                <th scope="col">Status</th>
                <th scope="col">Written</th>
              </tr>
            </thead>
            <tbody>
              {tickets.data.map((t) => (
                <tr key={t.id} data-testid="ticket-row" data-status={t.status}>
                  <td>
                    <Link to={`/support/${t.id}`}>{t.subject}</Link>
                  </td>
                  <td>
                    <span className={`status status-${t.status}`}>{STATUS_WORDS[t.status]}</span>
                  </td>
                  <td>
                    <When at={t.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </Page>
  );
}

function NewTicket({ account, onCancel }: { account: Account; onCancel: () => void }) {
  const client = useQueryClient();
  const releases = useQuery({
    queryKey: ["support", "releases", account.id],
    queryFn: () => listReleases(account.id, 0),
  });
  const [subject, setSubject] = useState("");
  const [body, setBody] = useState("");
  const [about, setAbout] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const made = await fileTicket(account.id, { subject, body, releaseId: about || null });
      await client.invalidateQueries({ queryKey: ["tickets", account.id] });
      navigate(`/support/${made.id}`);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const options: [string, string][] = [
    ["", "Nothing in particular"],
    ...(releases.data?.rows ?? []).map((r) => [r.id, `The release “${r.title}”`] as [string, string]),
  ];
  return (
    <form className="card" onSubmit={submit} data-testid="ticket-form" noValidate>
      <Field
        label="Subject"
        testid="ticket-subject"
        value={subject}
        maxLength={300}
        required
        onChange={(e) => setSubject(e.target.value)}
        error={errorFor(error, "subject")}
      />
      <SelectField
        label="About"
        testid="ticket-about"
        value={about}
        options={options}
        onChange={(e) => setAbout(e.target.value)}
        error={errorFor(error, "about.id")}
      />
      <MessageBox
        label="Your message"
        testid="ticket-body"
        value={body}
        onChange={setBody}
        error={errorFor(error, "body")}
      />
      <FormError error={error} testid="ticket-error" shown={["subject", "about.id", "body"]} />
      <div className="buttons">
        <button type="submit" disabled={busy} data-testid="ticket-send">
          Send
        </button>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** A multi-line message with its label and error, as Field is for one line. */
function MessageBox({
  label,
  testid,
  value,
  onChange,
  error,
}: {
  label: string;
  testid: string;
  value: string;
  onChange: (value: string) => void;
  error: string | undefined;
}) {
  const id = useId();
  return (
    <div className={error ? "field has-error" : "field"}>
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        rows={6}
        maxLength={20000}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        data-testid={testid}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? `${id}-error` : undefined}
      />
      {error ? (
        <p className="field-error" id={`${id}-error`} role="alert" data-testid={`${testid}-error`}>
          {error}
        </p>
      ) : null}
    </div>
  );
}

/** One request: its conversation, oldest first, and a reply box (a solved request opens again). */
export function TicketPage({ account, id }: { account: Account; id: string }) {
  const client = useQueryClient();
  const ticket = useQuery({
    queryKey: ["tickets", account.id, id],
    queryFn: () => getTicket(account.id, id),
  });
  const [body, setBody] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const send = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await replyToTicket(account.id, id, body);
      setBody("");
      await client.invalidateQueries({ queryKey: ["tickets", account.id] });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const t = ticket.data;
  return (
    <Page title={t ? t.subject : "Support request"} testid="page-ticket">
      <p>
        <Link to="/support">All your requests</Link>
      </p>
      {ticket.isPending ? <Loading /> : null}
      {ticket.isError ? <ErrorState error={ticket.error} onRetry={() => ticket.refetch()} /> : null}
      {t ? (
        <>
          <p>
            <span className={`status status-${t.status}`} data-testid="ticket-status" data-status={t.status}>
              {STATUS_WORDS[t.status]}
            </span>{" "}
            {t.about?.type === "release" ? (
              <Link to={`/releases/${t.about.id}`}>About a release</Link>
            ) : t.about ? (
              <span>About a {t.about.type}</span>
            ) : null}
          </p>
          <ol className="conversation" data-testid="ticket-replies">
            {t.replies.map((r) => (
              <li
                key={r.id}
                className={`reply reply-${r.author}`}
                data-testid="ticket-reply"
                data-author={r.author}
              >
                <p className="reply-head">
                  <strong>{r.author === "staff" ? "Support" : "You"}</strong> <When at={r.created_at} />
                </p>
                <p className="reply-body">{r.body}</p>
              </li>
            ))}
          </ol>
          {canEdit(account.role) ? (
            <form onSubmit={send} data-testid="reply-form" noValidate>
              <MessageBox
                label={t.status === "solved" ? "Write again (this opens the request again)" : "Your reply"}
                testid="reply-body"
                value={body}
                onChange={setBody}
                error={errorFor(error, "body")}
              />
              <FormError error={error} testid="reply-error" shown={["body"]} />
              <button type="submit" disabled={busy} data-testid="reply-send">
                Send
              </button>
            </form>
          ) : null}
        </>
      ) : null}
    </Page>
  );
}
