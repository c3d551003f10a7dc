import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, lazy, Suspense, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { Link } from "../router.tsx";
import { ErrorState, Loading, Page, Status, TableWrap, When } from "../ui/common.tsx";
import { ConfirmDialog } from "../ui/Dialog.tsx";

// Chart.js loads with this page only (ui-shared/charts.tsx).
const BarList = lazy(() => import("../../../ui-shared/charts.tsx").then((m) => ({ default: m.BarList })));

interface Total {
  currency: string;
  lines: number;
  units: number;
  gross: string;
  fees: string;
  net: string;
}
interface Unmatched {
  isrc: string | null;
  upc: string | null;
  reason: string;
  lines: number;
  units: number;
}

/** One import's report: matched, unmatched with reasons, totals per currency; void it. */
export default function RoyaltyImportPage({ id }: { id: string }) {
  const client = useQueryClient();
  const report = useQuery({
    queryKey: ["royalty-import", id],
    queryFn: () => api.royaltyImport(id),
    // A running import is polled until it is done.
    refetchInterval: (q) =>
      q.state.data && !q.state.data.completed_at && q.state.data.status === "running" ? 1000 : false,
  });
  const [reason, setReason] = useState("");
  // Voiding asks first, in a dialog saying what it does.
  const [confirming, setConfirming] = useState(false);
  const ids = useId();
  const voidIt = useMutation({
    mutationFn: () => api.voidImport(id, reason.trim()),
    onSuccess: () => {
      setConfirming(false);
      void client.invalidateQueries({ queryKey: ["royalty-import", id] });
      void client.invalidateQueries({ queryKey: ["royalty-imports"] });
    },
  });
  const r = report.data;
  const totals = (r?.totals ?? []) as Total[];
  const unmatched = (r?.unmatched ?? []) as Unmatched[];
  const errors = (r?.errors ?? []) as { line: number; message: string }[];

  return (
    <Page
      title="Import report"
      testid="page-royalty-import"
      actions={
        <Link to="/royalties" className="button-link">
          All imports
        </Link>
      }
    >
      {report.isPending ? (
        <Loading />
      ) : report.isError ? (
        <ErrorState error={report.error} onRetry={() => report.refetch()} />
      ) : r ? (
        <>
          <ul className="counts" data-testid="import-counts">
            <li>
              <Status value={r.status} />
            </li>
            <li data-testid="import-lines-total">
              <span className="count">{r.lines_total.toLocaleString()}</span> lines
            </li>
            <li data-testid="import-lines-matched">
              <span className="count">{r.lines_matched.toLocaleString()}</span> matched
            </li>
            <li data-testid="import-lines-unmatched">
              <span className="count">{r.lines_unmatched.toLocaleString()}</span> unmatched
            </li>
            <li data-testid="import-lines-malformed">
              <span className="count">{r.lines_malformed.toLocaleString()}</span> malformed
            </li>
          </ul>
          <div className="grid">
            <section className="card" aria-labelledby="t-h" data-testid="import-totals">
              <h2 id="t-h">Totals per currency</h2>
              {totals.length === 0 ? (
                <p className="muted">Nothing was credited.</p>
              ) : (
                <>
                  {/* Lines, not amounts: a yen and a dollar on one axis would mislead. */}
                  <Suspense fallback={<Loading />}>
                    <BarList
                      testid="import-totals-chart"
                      unit="Lines"
                      summary={`Lines credited per currency: ${totals.map((t) => `${t.currency} ${t.lines}`).join(", ")}.`}
                      points={[...totals]
                        .sort((a, b) => b.lines - a.lines)
                        .map((t) => ({ label: t.currency, value: t.lines }))}
                    />
                  </Suspense>
                  <TableWrap label="Totals per currency">
                    <table>
                      <thead>
                        <tr>
                          <th scope="col">Currency</th>
                          <th scope="col">Lines</th>
                          <th scope="col">Units</th>
                          <th scope="col">Gross</th>
                          <th scope="col">Fees</th>
                          <th scope="col">Net</th>
                        </tr>
                      </thead>
                      <tbody>
                        {totals.map((t) => (
                          <tr key={t.currency} data-testid="import-total-row">
                            <th scope="row">{t.currency}</th>
                            <td>{t.lines.toLocaleString()}</td>
                            <td>{t.units}</td>
                            <td>{t.gross}</td>
                            <td>{t.fees}</td>
                            <td>{t.net}</td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </TableWrap>
                </>
              )}
            </section>
            <section className="card" aria-labelledby="about-h">
              <h2 id="about-h">About</h2>
              <dl className="fields">
                <dt>file</dt>
                <dd>{r.file_name ?? "—"}</dd>
                <dt>format</dt>
                <dd>{r.format}</dd>
                <dt>period</dt>
                <dd>{r.reporting_period ?? "—"}</dd>
                <dt>store</dt>
                <dd>{r.store ?? "—"}</dd>
                <dt>started</dt>
                <dd>
                  <When at={r.started_at} />
                </dd>
                <dt>completed</dt>
                <dd>
                  <When at={r.completed_at} />
                </dd>
                {r.voided_at ? (
                  <>
                    <dt>voided</dt>
                    <dd>
                      <When at={r.voided_at} /> — {r.void_reason}
                    </dd>
                  </>
                ) : null}
              </dl>
            </section>
          </div>
          <section className="card" aria-labelledby="u-h" data-testid="import-unmatched">
            <h2 id="u-h">Unmatched ({r.lines_unmatched.toLocaleString()} lines)</h2>
            {unmatched.length === 0 ? (
              <p className="muted">Every line matched a release.</p>
            ) : (
              <TableWrap label="Unmatched">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">ISRC</th>
                      <th scope="col">UPC</th>
                      <th scope="col">Reason</th>
                      <th scope="col">Lines</th>
                      <th scope="col">Units</th>
                    </tr>
                  </thead>
                  <tbody>
                    {unmatched.map((u) => (
                      <tr key={`${u.isrc}-${u.upc}`} data-testid="import-unmatched-row">
                        <td>{u.isrc ?? "—"}</td>
                        <td>{u.upc ?? "—"}</td>
                        <td>
                          {u.reason === "ambiguous" ? "ambiguous (several accounts)" : "no delivered release"}
                        </td>
                        <td>{u.lines.toLocaleString()}</td>
                        <td>{u.units}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            )}
          </section>
          {errors.length > 0 ? (
            <section className="card" aria-labelledby="e-h" data-testid="import-errors">
              <h2 id="e-h">Malformed lines</h2>
              <ul>
                {errors.map((e) => (
                  <li key={e.line}>
                    line {e.line}: {e.message}
                  </li>
                ))}
              </ul>
            </section>
          ) : null}
          {r.status === "completed" ? (
            <form
              className="card"
              onSubmit={(e: FormEvent) => {
                e.preventDefault();
                if (reason.trim()) setConfirming(true);
              }}
              aria-labelledby="v-h"
            >
              <h2 id="v-h">Void this import</h2>
              <p className="help">Its lines leave every total; the report stays for audit.</p>
              <label htmlFor={`${ids}-reason`}>Reason</label>
              <input
                id={`${ids}-reason`}
                value={reason}
                required
                maxLength={2000}
                onChange={(e) => setReason(e.target.value)}
                data-testid="import-void-reason"
              />
              <button
                type="submit"
                className="reject"
                disabled={!reason.trim() || voidIt.isPending}
                data-testid="import-void"
              >
                Void…
              </button>
              {voidIt.isError && !confirming ? <ErrorState error={voidIt.error} /> : null}
            </form>
          ) : null}
          <ConfirmDialog
            open={confirming}
            onClose={() => setConfirming(false)}
            onConfirm={() => voidIt.mutate()}
            busy={voidIt.isPending}
            title="Void this import?"
            confirmLabel={voidIt.isPending ? "Voiding…" : "Void the import"}
            testid="import-void-dialog"
          >
            <p>
              The import of <strong>{r.file_name ?? "this file"}</strong>
              {r.reporting_period ? ` (${r.reporting_period})` : ""} is voided: its{" "}
              {r.lines_matched.toLocaleString()} matched lines leave every total, and what they credited the
              payees is taken back in the current open month (an approved statement is never rewritten).
            </p>
            <p>This cannot be undone; the report stays for the audit log. Reason given: “{reason.trim()}”.</p>
            {voidIt.isError ? <ErrorState error={voidIt.error} /> : null}
          </ConfirmDialog>
        </>
      ) : null}
    </Page>
  );
}
