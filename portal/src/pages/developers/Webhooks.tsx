import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { Checkbox, Empty, Loading, Status, TableWrap, When } from "../../../../ui-shared/common.tsx";
import { PlainError } from "../../api/portal.ts";
import {
  createWebhook,
  deleteWebhook,
  listDeliveries,
  listWebhooks,
  retryDelivery,
  rotateWebhookSecret,
  setWebhookEnabled,
  testWebhook,
  type WebhookEndpoint,
} from "../../api/public.ts";
import { ErrorState, errorFor, Field, FormError } from "../../ui.tsx";
import { SecretOnce } from "./Secret.tsx";

/** The events an endpoint can receive (docs/webhooks.md), in words. */
const EVENTS: [string, string][] = [
  ["release.submitted", "A release is submitted"],
  ["release.approved", "A release is approved"],
  ["release.rejected", "A release is rejected"],
  ["release.live", "A release is live"],
  ["release.takedown_completed", "A takedown is done"],
  ["royalties.imported", "Royalties are imported"],
  ["royalties.voided", "An import of royalties is voided"],
];

/** An endpoint's recent deliveries, asked again every 3 seconds while one is pending; a failed one can be sent again. */
function Deliveries({ accountId, endpoint }: { accountId: string; endpoint: WebhookEndpoint }) {
  const deliveries = useQuery({
    queryKey: ["webhook-deliveries", endpoint.id],
    queryFn: () => listDeliveries(accountId, endpoint.id),
    refetchInterval: (q) => (q.state.data?.data.some((d) => d.status === "pending") ? 3000 : false),
  });
  const [error, setError] = useState<unknown>(null);
  const retry = async (id: string) => {
    setError(null);
    try {
      await retryDelivery(accountId, endpoint.id, id);
      await deliveries.refetch();
    } catch (e) {
      setError(e);
    }
  };
  if (deliveries.isPending) return <Loading what="Loading the deliveries" />;
  if (deliveries.isError) return <ErrorState error={deliveries.error} onRetry={() => deliveries.refetch()} />;
  const rows = deliveries.data.data;
  if (rows.length === 0)
    return (
      <Empty>
        <span data-testid="deliveries-empty">
          Nothing sent yet. “Send a test event” tries the endpoint now.
        </span>
      </Empty>
    );
  return (
    <>
      <FormError error={error} testid="delivery-error" />
      <TableWrap label={`Deliveries to ${endpoint.url}`}>
        <table data-testid="deliveries">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Outcome</th>
              <th scope="col">Tries</th>
              <th scope="col">Answer</th>
              <th scope="col">When</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((d) => (
              <tr key={d.id} data-testid="delivery-row" data-status={d.status} data-event={d.event_type}>
                <th scope="row">{d.event_type}</th>
                <td>
                  <Status value={d.status} />
                </td>
                <td>{d.attempts}</td>
                <td>{d.last_status_code ?? d.last_error ?? "—"}</td>
                <td>
                  <When at={d.created_at} />
                </td>
                <td>
                  {d.status === "failed" ? (
                    <button
                      type="button"
                      className="secondary"
                      onClick={() => retry(d.id)}
                      data-testid="delivery-retry"
                    >
                      Send again
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </>
  );
}

function EndpointItem({
  accountId,
  endpoint,
  onSecret,
}: {
  accountId: string;
  endpoint: WebhookEndpoint;
  onSecret: (secret: string) => void;
}) {
  const client = useQueryClient();
  const [error, setError] = useState<unknown>(null);
  const [note, setNote] = useState<string | null>(null);
  const act = async (fn: () => Promise<unknown>, done?: string) => {
    setError(null);
    setNote(null);
    try {
      await fn();
      if (done) setNote(done);
      await client.invalidateQueries({ queryKey: ["webhooks", accountId] });
      await client.invalidateQueries({ queryKey: ["webhook-deliveries", endpoint.id] });
    } catch (e) {
      setError(e);
    }
  };
  return (
    <li className="endpoint" data-testid="endpoint" data-url={endpoint.url}>
      <h3>
        <code>{endpoint.url}</code> {endpoint.enabled ? null : <Status value="disabled" />}
      </h3>
      {endpoint.description ? <p>{endpoint.description}</p> : null}
      {!endpoint.enabled && endpoint.disabled_reason ? (
        <p className="reason">{endpoint.disabled_reason}</p>
      ) : null}
      <p className="muted">{endpoint.events.join(", ")}</p>
      <div className="buttons">
        <button
          type="button"
          className="secondary"
          onClick={() =>
            act(() => testWebhook(accountId, endpoint.id), "A test event is on its way: see it below.")
          }
          data-testid="endpoint-test"
        >
          Send a test event
        </button>
        <button
          type="button"
          className="secondary"
          onClick={() =>
            act(async () => {
              const rotated = await rotateWebhookSecret(accountId, endpoint.id);
              onSecret(rotated.secret);
            }, "The endpoint has a new secret; the old one still verifies for 24 hours.")
          }
          data-testid="endpoint-rotate"
        >
          New secret
        </button>
        <button
          type="button"
          className="secondary"
          onClick={() => act(() => setWebhookEnabled(accountId, endpoint.id, !endpoint.enabled))}
          data-testid="endpoint-toggle"
        >
          {endpoint.enabled ? "Pause" : "Resume"}
        </button>
        <button
          type="button"
          className="secondary danger"
          onClick={() => {
            if (confirm(`Remove the endpoint ${endpoint.url}? It receives nothing more.`))
              void act(() => deleteWebhook(accountId, endpoint.id));
          }}
          data-testid="endpoint-delete"
        >
          Remove
        </button>
      </div>
      {note ? (
        <p role="status" data-testid="endpoint-note">
          {note}
        </p>
      ) : null}
      <FormError error={error} testid="endpoint-error" />
      <details open>
        <summary>Recent deliveries</summary>
        <Deliveries accountId={accountId} endpoint={endpoint} />
      </details>
    </li>
  );
}

/** The account's webhook endpoints: add one (its secret shown once), test, rotate, pause, the delivery log. */
export function Webhooks({ accountId }: { accountId: string }) {
  const client = useQueryClient();
  const endpoints = useQuery({ queryKey: ["webhooks", accountId], queryFn: () => listWebhooks(accountId) });
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["release.approved", "release.rejected", "release.live"]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const add = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    const fields: Record<string, string> = {};
    if (!/^https?:\/\/\S+$/i.test(url.trim()))
      fields.url = "Enter the address that receives the events, starting with https://.";
    if (events.length === 0) fields.events = "Choose at least one event.";
    if (Object.keys(fields).length > 0) {
      setError(new PlainError("Some fields need a change.", { fields }));
      return;
    }
    setBusy(true);
    try {
      const made = await createWebhook(accountId, { url: url.trim(), events });
      setSecret(made.secret);
      setUrl("");
      await client.invalidateQueries({ queryKey: ["webhooks", accountId] });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const rows = endpoints.data?.data ?? [];
  return (
    <section className="card" aria-labelledby="webhooks-heading" data-testid="developers-webhooks">
      <h2 id="webhooks-heading">Webhooks</h2>
      <p className="hint">
        Backline tells your software what happens by POSTing signed events to your address (Standard Webhooks:
        check the signature with the endpoint's secret).
      </p>
      {secret ? (
        <SecretOnce
          label="The endpoint's signing secret:"
          secret={secret}
          testid="endpoint-secret"
          onDone={() => setSecret(null)}
        />
      ) : null}
      {endpoints.isPending ? <Loading /> : null}
      {endpoints.isError ? <ErrorState error={endpoints.error} onRetry={() => endpoints.refetch()} /> : null}
      {endpoints.data && rows.length === 0 ? (
        <Empty>
          <span data-testid="endpoints-empty">No endpoints yet. Add the address of your software below.</span>
        </Empty>
      ) : null}
      {rows.length > 0 ? (
        <ul className="endpoints" data-testid="endpoints">
          {rows.map((ep) => (
            <EndpointItem key={ep.id} accountId={accountId} endpoint={ep} onSecret={setSecret} />
          ))}
        </ul>
      ) : null}
      <form className="form" onSubmit={add} noValidate aria-label="New webhook endpoint">
        <h3>Add an endpoint</h3>
        <Field
          label="Address"
          type="url"
          placeholder="https://example.com/backline-events"
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          error={errorFor(error, "url")}
          testid="endpoint-url"
        />
        <fieldset className="checks" data-testid="endpoint-events">
          <legend>Events to send</legend>
          {EVENTS.map(([type, words]) => (
            <Checkbox
              key={type}
              checked={events.includes(type)}
              onChange={(on) => setEvents((s) => (on ? [...s, type] : s.filter((x) => x !== type)))}
              testid={`endpoint-event-${type}`}
            >
              <span>
                {words} <code>{type}</code>
              </span>
            </Checkbox>
          ))}
          {errorFor(error, "events") ? (
            <p className="field-error" role="alert">
              {errorFor(error, "events")}
            </p>
          ) : null}
        </fieldset>
        <FormError error={error} testid="endpoint-create-error" />
        <div className="buttons">
          <button type="submit" disabled={busy} data-testid="endpoint-create">
            Add the endpoint
          </button>
        </div>
      </form>
    </section>
  );
}
