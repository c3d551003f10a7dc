import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { type Invoice, invoices } from "../api/invoices.ts";
import { Empty, ErrorState, Loading, Page, Status, TableWrap } from "../ui/common.tsx";
import { Amount, FormError, formError, Section } from "./money/common.tsx";

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];
const monthLabel = (m: string) => `${MONTHS[Number(m.slice(5, 7)) - 1] ?? m} ${m.slice(0, 4)}`;

function save(file: { fileName: string; blob: Blob }): void {
  const url = URL.createObjectURL(file.blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = file.fileName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * What the installation bills this tenant (docs/operator.md, "Plans and invoices"): its plan and
 * its invoices, newest first, with what is still due, overdue ones marked, and each as PDF or CSV.
 * A tenant's admins only; platform staff issue invoices and record payments through the admin API
 * or `backline invoices`.
 */
export default function Invoices() {
  const billing = useQuery({ queryKey: ["invoices", "billing"], queryFn: invoices.billing });
  const list = useQuery({ queryKey: ["invoices", "list"], queryFn: () => invoices.list() });
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<string | null>(null);
  async function download(invoice: Invoice, format: "pdf" | "csv") {
    setBusy(`${invoice.id}-${format}`);
    setError(null);
    try {
      save(await invoices.file(invoice, format));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(null);
    }
  }
  const overdue = (list.data?.data ?? []).filter((i) => i.status === "overdue");
  const plan = billing.data?.plan;
  return (
    <Page title="Invoices" testid="page-invoices">
      <Section title="Your plan" id="plan-h" testid="invoices-plan">
        {billing.isPending ? (
          <Loading />
        ) : billing.isError ? (
          <ErrorState error={billing.error} onRetry={() => billing.refetch()} />
        ) : !plan ? (
          <Empty>No plan yet: the installation's staff give each tenant one.</Empty>
        ) : (
          <dl className="fields" data-testid="plan-details">
            <dt>Plan</dt>
            <dd data-testid="plan-name">{plan.name}</dd>
            <dt>Monthly fee</dt>
            <dd>
              <Amount value={plan.monthly_fee} currency={plan.currency} />
            </dd>
            <dt>Included each month</dt>
            <dd>
              {plan.included_accounts} accounts, {plan.included_releases} releases delivered,{" "}
              {plan.included_tracks.toLocaleString("en")} tracks, {plan.included_storage_gb} GB of storage,{" "}
              {plan.included_api_calls.toLocaleString("en")} API calls
            </dd>
            {billing.data?.customer ? (
              <>
                <dt>Billed to</dt>
                <dd>
                  {billing.data.customer.legal_name}, {billing.data.customer.country}
                  {billing.data.customer.vat_id ? ` (VAT ${billing.data.customer.vat_id})` : ""}
                </dd>
              </>
            ) : null}
          </dl>
        )}
      </Section>
      <Section title="Invoices" id="invoices-h" testid="invoices-list">
        {overdue.length > 0 ? (
          <p className="error-text" role="status" data-testid="invoices-overdue">
            {overdue.length === 1 ? "One invoice is" : `${overdue.length} invoices are`} past due:{" "}
            {overdue.map((i) => i.number).join(", ")}.
          </p>
        ) : null}
        <FormError message={formError(error, [])} />
        {list.isPending ? (
          <Loading />
        ) : list.isError ? (
          <ErrorState error={list.error} onRetry={() => list.refetch()} />
        ) : list.data.data.length === 0 ? (
          <Empty>No invoice yet. A month's invoice is issued after the month ends.</Empty>
        ) : (
          <TableWrap label="Invoices">
            <table className="cards" data-testid="invoices-table">
              <thead>
                <tr>
                  <th scope="col">Number</th>
                  <th scope="col">Month</th>
                  <th scope="col">Total</th>
                  <th scope="col">Still due</th>
                  <th scope="col">Due on</th>
                  <th scope="col">Status</th>
                  <th scope="col">Files</th>
                </tr>
              </thead>
              <tbody>
                {list.data.data.map((i) => (
                  <tr key={i.id} data-testid="invoice-row" data-invoice-number={i.number}>
                    <th scope="row">{i.number}</th>
                    <td data-label="Month">{monthLabel(i.month)}</td>
                    <td data-label="Total" data-testid="invoice-total">
                      <Amount value={i.total} currency={i.currency} />
                    </td>
                    <td data-label="Still due" data-testid="invoice-balance">
                      <Amount value={i.balance} currency={i.currency} />
                    </td>
                    <td data-label="Due on">{i.due_on}</td>
                    <td data-label="Status" data-testid="invoice-status">
                      <Status value={i.status} />
                    </td>
                    <td data-label="Files">
                      <button
                        type="button"
                        disabled={busy !== null}
                        onClick={() => void download(i, "pdf")}
                        aria-label={`Download ${i.number} as PDF`}
                        data-testid="invoice-pdf"
                      >
                        PDF
                      </button>{" "}
                      <button
                        type="button"
                        disabled={busy !== null}
                        onClick={() => void download(i, "csv")}
                        aria-label={`Download ${i.number} as CSV`}
                        data-testid="invoice-csv"
                      >
                        CSV
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
      </Section>
    </Page>
  );
}
