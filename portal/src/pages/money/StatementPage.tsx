import { useQuery } from "@tanstack/react-query";
import { type ReactNode, useState } from "react";
import { Loading, Status, TableWrap, When } from "../../../../ui-shared/common.tsx";
import { Link } from "../../../../ui-shared/router.tsx";
import {
  downloadStatement,
  myDraftStatement,
  myStatement,
  type Statement,
  type StatementRef,
} from "../../api/money.ts";
import { ErrorState, FormError, Page } from "../../ui.tsx";
import { amount, periodName } from "./format.ts";

function Figure({ label, value, testid }: { label: string; value: ReactNode; testid: string }) {
  return (
    <>
      <dt>{label}</dt>
      <dd className="num" data-testid={testid}>
        {value}
      </dd>
    </>
  );
}

function Downloads({ target }: { target: StatementRef }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<"pdf" | "csv" | null>(null);
  const get = async (format: "pdf" | "csv") => {
    setError(null);
    setBusy(format);
    try {
      await downloadStatement(target, format);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(null);
    }
  };
  return (
    <div>
      <div className="buttons">
        <button
          type="button"
          className="secondary"
          disabled={busy !== null}
          onClick={() => get("pdf")}
          data-testid="statement-pdf"
        >
          Download PDF
        </button>
        <button
          type="button"
          className="secondary"
          disabled={busy !== null}
          onClick={() => get("csv")}
          data-testid="statement-csv"
        >
          Download CSV
        </button>
      </div>
      <FormError error={error} testid="statement-download-error" />
    </div>
  );
}

/** "apple_music" → "Apple Music". */
const storeName = (code: string) =>
  code
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join(" ");

/** "GB" → "United Kingdom", in the reader's language. */
function countryName(code: string): string {
  try {
    return new Intl.DisplayNames(undefined, { type: "region" }).of(code) ?? code;
  } catch {
    return code;
  }
}

function where(e: Statement["earnings"][number]): string {
  return [
    e.store ? storeName(e.store) : "A store",
    e.territory ? countryName(e.territory) : "no territory said",
  ].join(", ");
}

function View({ doc, target }: { doc: Statement; target: StatementRef }) {
  const cur = doc.currency;
  const m = (v: string) => amount(v, cur);
  return (
    <>
      <p className="lede">
        <Status value={doc.status} />{" "}
        <span data-testid="statement-status" data-status={doc.status}>
          {doc.status === "draft" ? (
            "Draft: the month is still open, so these figures change as reports and payouts come in."
          ) : (
            <>
              Approved <When at={doc.approved_at} />: this statement will not change.
            </>
          )}
        </span>
      </p>
      <p>
        From {doc.account_name}, through {doc.tenant_name}, to {doc.payee.name}
        {doc.payee.email ? ` (${doc.payee.email})` : ""}. Amounts in {cur}.
      </p>
      <Downloads target={target} />
      <section className="card" aria-labelledby="statement-summary-heading">
        <h2 id="statement-summary-heading">Summary</h2>
        <dl className="facts money-facts" data-testid="statement-summary">
          <Figure label="Opening balance" value={m(doc.opening_balance)} testid="statement-opening" />
          <Figure label="Earned" value={m(doc.totals.earned)} testid="statement-earned" />
          <Figure label="Fees" value={`− ${m(doc.totals.fees)}`} testid="statement-fees" />
          <Figure
            label="Recouped (advances and expenses)"
            value={`− ${m(doc.totals.recouped)}`}
            testid="statement-recouped"
          />
          <Figure label="Net earnings" value={m(doc.totals.net)} testid="statement-net" />
          <Figure label="Payments" value={m(doc.payments_total)} testid="statement-payments" />
          <Figure label="Adjustments" value={m(doc.adjustments_total)} testid="statement-adjustments" />
          <dt>Closing balance</dt>
          <dd className="num closing" data-testid="statement-closing" data-amount={doc.closing_balance}>
            {m(doc.closing_balance)}
          </dd>
        </dl>
      </section>
      <section className="card" aria-labelledby="statement-earnings-heading">
        <h2 id="statement-earnings-heading">Earnings</h2>
        {doc.earnings.length === 0 ? (
          <p data-testid="statement-earnings-empty">No earnings this month.</p>
        ) : (
          <TableWrap label="Earnings by release, track, store and territory">
            <table data-testid="statement-earnings">
              <thead>
                <tr>
                  <th scope="col">Release and track</th>
                  <th scope="col">Store, territory</th>
                  <th scope="col" className="num">
                    Earned
                  </th>
                  <th scope="col" className="num">
                    Fees
                  </th>
                  <th scope="col" className="num">
                    Recouped
                  </th>
                  <th scope="col" className="num">
                    Net
                  </th>
                </tr>
              </thead>
              <tbody>
                {doc.earnings.map((e) => (
                  <tr
                    key={`${e.release_id}-${e.track_id}-${e.store}-${e.territory}-${e.original_currency}-${e.rate}`}
                    data-testid="statement-earning"
                  >
                    <th scope="row">
                      {e.release_title ?? "A release"}
                      {e.track_title ? ` · ${e.track_title}` : ""}
                      {e.isrc ? <span className="muted"> {e.isrc}</span> : null}
                    </th>
                    <td>
                      {where(e)}
                      {e.rate ? (
                        <span className="muted">
                          {" "}
                          ({e.original_currency} at {e.rate})
                        </span>
                      ) : null}
                    </td>
                    <td className="num">{m(e.earned)}</td>
                    <td className="num">{m(e.fees)}</td>
                    <td className="num">{m(e.recouped)}</td>
                    <td className="num">{m(e.net)}</td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row" colSpan={2}>
                    Total
                  </th>
                  <td className="num">{m(doc.totals.earned)}</td>
                  <td className="num">{m(doc.totals.fees)}</td>
                  <td className="num">{m(doc.totals.recouped)}</td>
                  <td className="num">{m(doc.totals.net)}</td>
                </tr>
              </tfoot>
            </table>
          </TableWrap>
        )}
      </section>
      {doc.payments.length > 0 ? (
        <section className="card" aria-labelledby="statement-payments-heading">
          <h2 id="statement-payments-heading">Payments</h2>
          <TableWrap label="Payments">
            <table data-testid="statement-payment-rows">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Status</th>
                  <th scope="col" className="num">
                    Amount
                  </th>
                  <th scope="col" className="num">
                    Withheld for tax
                  </th>
                </tr>
              </thead>
              <tbody>
                {doc.payments.map((p) => (
                  <tr key={`${p.payout_id}-${p.status}`}>
                    <th scope="row">
                      <When at={p.at} />
                    </th>
                    <td>
                      <Status value={p.status} />
                    </td>
                    <td className="num">{m(p.amount)}</td>
                    <td className="num">{m(p.withholding)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        </section>
      ) : null}
      {doc.rates.length > 0 || doc.recoupables.length > 0 ? (
        <section className="card" aria-labelledby="statement-more-heading">
          <h2 id="statement-more-heading">Rates and recoupment</h2>
          {doc.rates.length > 0 ? (
            <ul data-testid="statement-rates">
              {doc.rates.map((r) => (
                <li key={`${r.from}-${r.to}`}>
                  1 {r.from} = {r.rate} {r.to}
                </li>
              ))}
            </ul>
          ) : null}
          {doc.recoupables.length > 0 ? (
            <ul data-testid="statement-recoupables">
              {doc.recoupables.map((c) => (
                <li key={c.id}>
                  {c.kind === "advance" ? "Advance" : "Expense"} “{c.description}”:{" "}
                  {amount(c.amount, c.currency)}, still to recoup {amount(c.unrecouped, c.currency)}
                </li>
              ))}
            </ul>
          ) : null}
        </section>
      ) : null}
    </>
  );
}

/** One statement: an approved one (`id`), or a payee's draft (`draftOf`). */
export function StatementPage({ target }: { target: StatementRef }) {
  const key = "id" in target ? target.id : `draft-${target.draftOf}`;
  const q = useQuery({
    queryKey: ["money", "statement-page", key],
    queryFn: () => ("id" in target ? myStatement(target.id) : myDraftStatement(target.draftOf)),
  });
  const title = q.data
    ? `Statement for ${periodName(q.data.period)}${q.data.status === "draft" ? " (draft)" : ""}`
    : "Statement";
  return (
    <Page title={title} testid="page-statement" actions={<Link to="/money">Back to Money</Link>}>
      {q.isPending ? <Loading /> : null}
      {q.isError ? <ErrorState error={q.error} onRetry={() => q.refetch()} /> : null}
      {q.data === null ? (
        <p data-testid="statement-not-found">
          There is no open statement any more: the month was approved.{" "}
          <Link to="/money">See your statements</Link>.
        </p>
      ) : null}
      {q.data ? <View doc={q.data} target={target} /> : null}
    </Page>
  );
}
