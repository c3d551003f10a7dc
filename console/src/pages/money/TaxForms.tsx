import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { money, type Payee } from "../../api/money.ts";
import { Empty, ErrorState, Loading, Page, Status, TableWrap } from "../../ui/common.tsx";
import {
  FieldError,
  FormError,
  fieldError,
  formError,
  isAdmin,
  MoneyTabs,
  NeedsAdmin,
  Section,
  ShortId,
  useAccountNames,
  useRole,
  useShowMore,
} from "./common.tsx";

const SHOW = [
  ["review", "Waiting for review"],
  ["all", "All payees"],
] as const;

/** Tax forms: payees with their form's status; verify one (with the withholding rate) or reject it. */
export default function TaxForms() {
  const role = useRole();
  const names = useAccountNames();
  const payees = useQuery({ queryKey: ["money", "payees"], queryFn: () => money.payees() });
  const [show, setShow] = useState<"review" | "all">("review");
  const rows = (payees.data?.data ?? []).filter((p) => show === "all" || p.tax.status === "pending");
  const list = useShowMore(rows);
  return (
    <Page title="Money: tax forms" testid="page-money-tax-forms">
      <MoneyTabs />
      <Section title="Payees and their tax forms" id="tax-h" testid="money-tax-forms">
        <p className="help">
          A payee files a W-9, W-8BEN or W-8BEN-E; only the last four characters of the tax id are ever shown.
          A payout needs a verified form; its withholding rate applies to every payout (0 for a W-9 without
          backup withholding; a W-8's treaty rate, else 30).
        </p>
        <fieldset className="tabs">
          <legend className="sr-only">Show</legend>
          {SHOW.map(([v, label]) => (
            <button
              key={v}
              type="button"
              aria-pressed={show === v}
              onClick={() => setShow(v)}
              data-testid={`tax-show-${v}`}
            >
              {label}
            </button>
          ))}
        </fieldset>
        {payees.isPending ? (
          <Loading />
        ) : payees.isError ? (
          <ErrorState error={payees.error} onRetry={() => payees.refetch()} />
        ) : rows.length === 0 ? (
          <Empty>{show === "review" ? "No tax form is waiting for review." : "No payee yet."}</Empty>
        ) : (
          <>
            <TableWrap label="Payees">
              <table className="cards" data-testid="payees-table">
                <thead>
                  <tr>
                    <th scope="col">Payee</th>
                    <th scope="col">Account</th>
                    <th scope="col">Form</th>
                    <th scope="col">Status</th>
                    <th scope="col">Withholding</th>
                    <th scope="col">Review</th>
                  </tr>
                </thead>
                <tbody>
                  {list.rows.map((p) => (
                    <PayeeRow key={p.id} p={p} account={names.get(p.account_id)} admin={isAdmin(role)} />
                  ))}
                </tbody>
              </table>
            </TableWrap>
            {list.more}
          </>
        )}
        {!isAdmin(role) ? <NeedsAdmin what="Reviewing a tax form" /> : null}
      </Section>
    </Page>
  );
}

function PayeeRow({ p, account, admin }: { p: Payee; account: string | undefined; admin: boolean }) {
  const ids = useId();
  const client = useQueryClient();
  const [rate, setRate] = useState(p.tax.form === "W-9" ? "0" : "30");
  const review = useMutation({
    mutationFn: (status: "verified" | "rejected") =>
      money.taxReview(p.id, status === "verified" ? { status, withholding_rate: rate.trim() } : { status }),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["money", "payees"] }),
  });
  const error = fieldError(review.error, "withholding_rate");
  const name = p.name || p.email || (p.kind === "account" ? "the account itself" : p.id);
  return (
    <tr data-testid="payee-row" data-payee-id={p.id}>
      <th scope="row">
        {name}
        {p.email && p.name ? <div className="muted">{p.email}</div> : null}
      </th>
      <td data-label="Account">{account ?? <ShortId id={p.account_id} />}</td>
      <td data-label="Form">
        {p.tax.form ?? <span className="muted">none filed</span>}
        {p.tax.country ? ` · ${p.tax.country}` : ""}
        {p.tax.tax_id_last4 ? ` · …${p.tax.tax_id_last4}` : ""}
      </td>
      <td data-label="Status" data-testid="payee-tax-status">
        <Status value={p.tax.status} />
      </td>
      <td data-label="Withholding">{p.tax.status === "verified" ? `${p.tax.withholding_rate} %` : "—"}</td>
      <td className="actions">
        {admin && p.tax.form && p.tax.status !== "missing" ? (
          <form
            className="review-form"
            aria-label={`Review ${name}'s tax form`}
            noValidate
            onSubmit={(e: FormEvent) => {
              e.preventDefault();
              review.mutate("verified");
            }}
          >
            <label htmlFor={`${ids}-rate`}>Withholding, percent</label>
            <input
              id={`${ids}-rate`}
              value={rate}
              inputMode="decimal"
              size={6}
              onChange={(e) => setRate(e.target.value)}
              aria-invalid={Boolean(error)}
              aria-describedby={`${ids}-rate-error`}
              data-testid="tax-withholding"
            />
            <FieldError id={`${ids}-rate-error`} message={error} />
            <button type="submit" className="primary" disabled={review.isPending} data-testid="tax-verify">
              Verify
            </button>{" "}
            <button
              type="button"
              className="reject"
              disabled={review.isPending}
              onClick={() => review.mutate("rejected")}
              data-testid="tax-reject"
            >
              Reject
            </button>
            <FormError message={formError(review.error, ["withholding_rate"])} />
          </form>
        ) : (
          <span className="muted">{p.tax.form ? "" : "nothing to review"}</span>
        )}
      </td>
    </tr>
  );
}
