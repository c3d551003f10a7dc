import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { Link } from "../router.tsx";
import { ErrorState, Fields, Loading, Page, Status, TableWrap, When } from "../ui/common.tsx";
import { ConfirmDialog } from "../ui/Dialog.tsx";

/** One delivery: its fields, its history and the store's messages; retry; record a store report. */
export default function DeliveryPage({ id }: { id: string }) {
  const client = useQueryClient();
  const delivery = useQuery({ queryKey: ["delivery", id], queryFn: () => api.delivery(id) });
  const refresh = () => {
    void client.invalidateQueries({ queryKey: ["delivery", id] });
    void client.invalidateQueries({ queryKey: ["deliveries"] });
  };
  const retry = useMutation({
    mutationFn: (releaseId: string) => api.retryRelease(releaseId),
    onSuccess: refresh,
  });
  const report = useMutation({
    mutationFn: (body: { status: string; message?: string; note?: string }) => api.report(id, body),
    onSuccess: () => {
      setConfirming(false);
      refresh();
    },
  });
  // Recording a takedown asks first: the release is then off that store as far as Backline knows.
  const [confirming, setConfirming] = useState(false);
  const [status, setStatus] = useState("live");
  const [text, setText] = useState("");
  const ids = useId();
  const d = delivery.data;

  function submit(event: FormEvent) {
    event.preventDefault();
    if (status === "taken_down") setConfirming(true);
    else send();
  }
  function send() {
    const body: { status: string; message?: string; note?: string } = { status };
    if (status === "error") body.message = text.trim();
    else if (status === "taken_down" && text.trim()) body.note = text.trim();
    report.mutate(body);
  }

  return (
    <Page
      title="Delivery"
      testid="page-delivery"
      actions={
        <Link to="/deliveries" className="button-link">
          All deliveries
        </Link>
      }
    >
      {delivery.isPending ? (
        <Loading />
      ) : delivery.isError ? (
        <ErrorState error={delivery.error} onRetry={() => delivery.refetch()} />
      ) : d ? (
        <>
          <div className="grid">
            <section className="card" aria-labelledby="d-h">
              <h2 id="d-h">
                {d.release?.title ?? "Release"} → {d.store} <Status value={d.status} />
              </h2>
              <Fields record={d} omit={["history", "jobs", "release", "acknowledgements"]} />
              {d.release ? (
                <p>
                  Release:{" "}
                  <Link to={`/reviews/${encodeURIComponent(d.release.id)}`} data-testid="delivery-release">
                    {d.release.title || "(untitled)"}
                  </Link>
                  {d.release.artist_name ? ` by ${d.release.artist_name}` : null}{" "}
                  <Status value={d.release.status} /> ·{" "}
                  <Link to={`/deliveries?release_id=${encodeURIComponent(d.release.id)}`}>
                    its deliveries
                  </Link>
                </p>
              ) : null}
              {d.status === "error" && d.release ? (
                <button
                  type="button"
                  className="primary"
                  onClick={() => retry.mutate((d.release as { id: string }).id)}
                  disabled={retry.isPending}
                  data-testid="delivery-retry"
                >
                  Retry
                </button>
              ) : null}
              {retry.isSuccess ? <p role="status">{retry.data.retried} queued again.</p> : null}
              {retry.isError ? <ErrorState error={retry.error} /> : null}
            </section>
            <section className="card" aria-labelledby="r-h">
              <h2 id="r-h">Record a store report</h2>
              <form onSubmit={submit} data-testid="delivery-report-form">
                <label htmlFor={`${ids}-s`}>What the store says</label>
                <select
                  id={`${ids}-s`}
                  value={status}
                  onChange={(e) => setStatus(e.target.value)}
                  data-testid="delivery-report-status"
                >
                  <option value="live">live</option>
                  <option value="error">error</option>
                  <option value="taken_down">taken down (the store confirmed the takedown)</option>
                </select>
                {status !== "live" ? (
                  <>
                    <label htmlFor={`${ids}-t`}>
                      {status === "error"
                        ? "The store's message (required)"
                        : "Note: who confirmed it and how"}
                    </label>
                    <textarea
                      id={`${ids}-t`}
                      rows={3}
                      value={text}
                      required={status === "error"}
                      onChange={(e) => setText(e.target.value)}
                      data-testid="delivery-report-text"
                    />
                  </>
                ) : null}
                <button
                  type="submit"
                  className="primary"
                  disabled={report.isPending}
                  data-testid="delivery-report-submit"
                >
                  Record
                </button>
                {report.isSuccess ? (
                  <p role="status" data-testid="delivery-report-done">
                    Recorded: now {report.data.status}.
                  </p>
                ) : null}
                {report.isError && !confirming ? <ErrorState error={report.error} /> : null}
              </form>
              <ConfirmDialog
                open={confirming}
                onClose={() => setConfirming(false)}
                onConfirm={send}
                busy={report.isPending}
                title="Record the takedown?"
                confirmLabel={report.isPending ? "Recording…" : "Record as taken down"}
                testid="delivery-takedown-dialog"
              >
                <p>
                  <strong>{d.release?.title || "The release"}</strong> is recorded as taken down at{" "}
                  <strong>{d.store}</strong>: the delivery's status becomes taken down, with your note, and
                  the release no longer counts as live there.
                </p>
                {report.isError ? <ErrorState error={report.error} /> : null}
              </ConfirmDialog>
            </section>
          </div>
          {d.acknowledgements && d.acknowledgements.length > 0 ? (
            <section className="card" aria-labelledby="a-h" data-testid="delivery-acknowledgements">
              <h2 id="a-h">The store's acknowledgements</h2>
              <TableWrap label="Acknowledgement files">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Last read</th>
                      <th scope="col">File</th>
                      <th scope="col">Outcome</th>
                      <th scope="col">Reads</th>
                      <th scope="col">Why it was set aside</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.acknowledgements.map((a) => (
                      <tr key={`${a.file}-${a.received_at}`} data-testid="delivery-acknowledgement-row">
                        <td>
                          <When at={a.last_tried_at} />
                        </td>
                        <td>
                          <code>{a.file}</code>
                        </td>
                        <td>
                          <Status value={a.outcome} />
                        </td>
                        <td>{a.tries}</td>
                        <td>
                          {a.errors.length > 0 ? (
                            <ul>
                              {a.errors.map((e) => (
                                <li key={e}>
                                  <code className="error-text">{e}</code>
                                </li>
                              ))}
                            </ul>
                          ) : a.error ? (
                            <code className="error-text">{a.error}</code>
                          ) : (
                            ""
                          )}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            </section>
          ) : null}
          <section className="card" aria-labelledby="h-h" data-testid="delivery-history">
            <h2 id="h-h">History at {d.store}</h2>
            {d.history && d.history.length > 0 ? (
              <TableWrap label="Delivery history">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">When</th>
                      <th scope="col">Action</th>
                      <th scope="col">Status</th>
                      <th scope="col">Attempts</th>
                      <th scope="col">The store's message</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.history.map((h) => (
                      <tr key={h.id} data-testid="delivery-history-row">
                        <td>
                          <When at={h.updated_at ?? h.created_at} />
                        </td>
                        <td>{h.action ?? "—"}</td>
                        <td>
                          <Status value={h.status} />
                        </td>
                        <td>{h.attempts ?? "—"}</td>
                        <td>{typeof h.message === "string" ? h.message : ""}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            ) : (
              <p className="muted">No other records.</p>
            )}
            {d.jobs && d.jobs.length > 0 ? (
              <>
                <h2 className="spaced">Jobs</h2>
                <ul>
                  {d.jobs.map((j) => (
                    <li key={j.id}>
                      <code>{j.kind}</code> <Status value={j.status} /> {j.attempts}/{j.max_attempts ?? "?"}{" "}
                      {j.last_error ? <code className="error-text">{j.last_error}</code> : null}
                    </li>
                  ))}
                </ul>
              </>
            ) : null}
          </section>
        </>
      ) : null}
    </Page>
  );
}
