import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { money, save } from "../../api/money.ts";
import { Link } from "../../router.tsx";
import { ErrorState, Loading, Page, Status, TableWrap, When } from "../../ui/common.tsx";
import { Amount, MoneyTabs, Section } from "./common.tsx";

interface Earning {
  release_title: string | null;
  track_title: string | null;
  isrc: string | null;
  store: string | null;
  territory: string | null;
  original_currency: string;
  rate: string | null;
  earned: string;
  fees: string;
  recouped: string;
  net: string;
}
interface Doc {
  id: string;
  account_name: string;
  payee: { id: string; name: string; email: string | null };
  period: string;
  currency: string;
  status: string;
  approved_at: string | null;
  opening_balance: string;
  earnings: Earning[];
  totals: { earned: string; fees: string; recouped: string; net: string };
  payments: { payout_id: string; status: string; amount: string; withholding: string; at: string }[];
  payments_total: string;
  adjustments_total: string;
  closing_balance: string;
  recoupables: {
    id: string;
    kind: string;
    description: string;
    currency: string;
    amount: string;
    unrecouped: string;
  }[];
  rates: { from: string; to: string; rate: string }[];
}

/** One approved statement as the payee receives it, with its CSV and PDF. */
export default function Statement({ id }: { id: string }) {
  const statement = useQuery({ queryKey: ["money", "statement", id], queryFn: () => money.statement(id) });
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  async function get(format: "csv" | "pdf") {
    setBusy(true);
    setError(null);
    try {
      save(await money.statementFile(id, format));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  }
  const d = statement.data as Doc | undefined;
  return (
    <Page
      title="Statement"
      testid="page-money-statement"
      actions={
        <>
          <button type="button" disabled={busy} onClick={() => void get("csv")} data-testid="statement-csv">
            Download CSV
          </button>
          <button type="button" disabled={busy} onClick={() => void get("pdf")} data-testid="statement-pdf">
            Download PDF
          </button>
        </>
      }
    >
      <MoneyTabs />
      {error ? <ErrorState error={error} /> : null}
      {statement.isPending ? (
        <Loading />
      ) : statement.isError ? (
        <ErrorState error={statement.error} onRetry={() => statement.refetch()} />
      ) : d ? (
        <>
          <Section
            title={`${d.payee.name || d.payee.email || "Payee"} · ${d.period}`}
            id="st-h"
            testid="statement-head"
          >
            <dl className="fields">
              <dt>account</dt>
              <dd>{d.account_name}</dd>
              <dt>status</dt>
              <dd>
                <Status value={d.status} /> <When at={d.approved_at} />
              </dd>
              <dt>opening balance</dt>
              <dd>
                <Amount value={d.opening_balance} currency={d.currency} />
              </dd>
              <dt>earnings</dt>
              <dd>
                <Amount value={d.totals.net} currency={d.currency} />
              </dd>
              <dt>adjustments</dt>
              <dd>
                <Amount value={d.adjustments_total} currency={d.currency} />
              </dd>
              <dt>payments</dt>
              <dd>
                <Amount value={d.payments_total} currency={d.currency} />
              </dd>
              <dt>closing balance</dt>
              <dd data-testid="statement-closing-balance">
                <strong>
                  <Amount value={d.closing_balance} currency={d.currency} />
                </strong>
              </dd>
              {d.rates.length > 0 ? (
                <>
                  <dt>rates</dt>
                  <dd>{d.rates.map((r) => `1 ${r.from} = ${r.rate} ${r.to}`).join("; ")}</dd>
                </>
              ) : null}
            </dl>
          </Section>
          <Section title="Earnings" id="st-e">
            <TableWrap label="Earnings">
              <table data-testid="statement-earnings">
                <thead>
                  <tr>
                    <th scope="col">Release · track</th>
                    <th scope="col">Store</th>
                    <th scope="col">Currency</th>
                    <th scope="col">Earned</th>
                    <th scope="col">Fees</th>
                    <th scope="col">Recouped</th>
                    <th scope="col">Net</th>
                  </tr>
                </thead>
                <tbody>
                  {d.earnings.map((e, i) => (
                    // biome-ignore lint/suspicious/noArrayIndexKey: the rows of a statement never change
                    <tr key={i}>
                      <th scope="row">
                        {e.release_title ?? "—"} · {e.track_title ?? "—"}{" "}
                        {e.isrc ? <code>{e.isrc}</code> : null}
                      </th>
                      <td>
                        {e.store ?? "—"} {e.territory ?? ""}
                      </td>
                      <td>
                        {e.original_currency}
                        {e.rate ? ` (× ${e.rate})` : ""}
                      </td>
                      <td>
                        <Amount value={e.earned} />
                      </td>
                      <td>
                        <Amount value={e.fees} />
                      </td>
                      <td>
                        <Amount value={e.recouped} />
                      </td>
                      <td>
                        <Amount value={e.net} />
                      </td>
                    </tr>
                  ))}
                </tbody>
                <tfoot>
                  <tr>
                    <th scope="row" colSpan={3}>
                      Total ({d.currency})
                    </th>
                    <td>
                      <Amount value={d.totals.earned} />
                    </td>
                    <td>
                      <Amount value={d.totals.fees} />
                    </td>
                    <td>
                      <Amount value={d.totals.recouped} />
                    </td>
                    <td>
                      <Amount value={d.totals.net} />
                    </td>
                  </tr>
                </tfoot>
              </table>
            </TableWrap>
          </Section>
          {d.payments.length > 0 ? (
            <Section title="Payments" id="st-p">
              <ul>
                {d.payments.map((p) => (
                  <li key={`${p.payout_id}-${p.status}`}>
                    {p.status}: <Amount value={p.amount} currency={d.currency} /> (withholding{" "}
                    <Amount value={p.withholding} />) <When at={p.at} />
                  </li>
                ))}
              </ul>
            </Section>
          ) : null}
          {d.recoupables.length > 0 ? (
            <Section title="Advances and expenses" id="st-r">
              <ul>
                {d.recoupables.map((r) => (
                  <li key={r.id}>
                    {r.kind} “{r.description}”: <Amount value={r.amount} currency={r.currency} />, unrecouped{" "}
                    <Amount value={r.unrecouped} currency={r.currency} />
                  </li>
                ))}
              </ul>
            </Section>
          ) : null}
          <p>
            <Link to={`/money/periods?period=${d.period}`}>All statements of {d.period}</Link>
          </p>
        </>
      ) : null}
    </Page>
  );
}
