import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { ApiError } from "../../api/errors.ts";
import { type MoneyPeriod, money, save } from "../../api/money.ts";
import { Link, setSearch, useLocation } from "../../router.tsx";
import { Empty, ErrorState, Loading, Page, Status, TableWrap, When } from "../../ui/common.tsx";
import { ConfirmDialog } from "../../ui/Dialog.tsx";
import {
  Amount,
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

/** "no exchange rate from EUR, GBP to USD for 2026-11": which currencies need a rate, into which. */
export function missingRates(error: unknown): { from: string[]; to: string; period: string } | null {
  if (!(error instanceof ApiError) || error.code !== "rate_missing") return null;
  const m = /from ([A-Z]{3}(?:, [A-Z]{3})*) to ([A-Z]{3}) for (\d{4}-\d{2})/.exec(error.message);
  if (!m) return null;
  return { from: (m[1] as string).split(", "), to: m[2] as string, period: m[3] as string };
}

/** Periods: each month with its status, payees and totals per currency; approve it; set rates; its statements. */
export default function Periods() {
  const client = useQueryClient();
  const role = useRole();
  const { search } = useLocation();
  const periods = useQuery({ queryKey: ["money", "periods"], queryFn: money.periods });
  const list = useShowMore(periods.data?.data ?? [], 12);
  const chosen =
    search.get("period") ?? periods.data?.data.find((p) => p.status === "approved")?.period ?? "";
  const [rateFor, setRateFor] = useState<{ period: string; from: string; to: string } | null>(null);
  const [asking, setAsking] = useState<MoneyPeriod | null>(null);
  const approve = useMutation({
    mutationFn: (period: string) => money.approvePeriod(period),
    onSuccess: (r) => {
      void client.invalidateQueries({ queryKey: ["money"] });
      setSearch({ period: r.period }, { replace: true });
    },
    onError: (e) => {
      const missing = missingRates(e);
      if (missing) setRateFor({ period: missing.period, from: missing.from[0] as string, to: missing.to });
    },
  });
  const missing = missingRates(approve.error);

  return (
    <Page title="Money: periods" testid="page-money-periods">
      <MoneyTabs />
      <Section title="Periods" id="periods-h" testid="money-periods">
        <p className="help">
          A month's entries are open until it is approved; approving writes each payee's statement, which
          never changes (later entries land in the next open month). Totals are exact: what the stores paid,
          the distributor's fees, and what the payees earned, per currency.
        </p>
        {periods.isPending ? (
          <Loading />
        ) : periods.isError ? (
          <ErrorState error={periods.error} onRetry={() => periods.refetch()} />
        ) : periods.data.data.length === 0 ? (
          <Empty>No money yet: a royalty import opens the month it is posted in.</Empty>
        ) : (
          <>
            <TableWrap label="Periods">
              <table className="cards" data-testid="periods-table">
                <thead>
                  <tr>
                    <th scope="col">Month</th>
                    <th scope="col">Status</th>
                    <th scope="col">Payees</th>
                    <th scope="col">Totals per currency</th>
                    <th scope="col">Statements</th>
                    <th scope="col">
                      <span className="sr-only">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {list.rows.map((p) => (
                    <PeriodRow
                      key={p.period}
                      p={p}
                      admin={isAdmin(role)}
                      busy={approve.isPending}
                      onApprove={() => setAsking(p)}
                    />
                  ))}
                </tbody>
              </table>
            </TableWrap>
            {list.more}
          </>
        )}
        <ConfirmDialog
          open={asking !== null}
          onClose={() => setAsking(null)}
          onConfirm={() => {
            if (asking) approve.mutate(asking.period);
            setAsking(null);
          }}
          title={`Approve ${asking?.period ?? ""}?`}
          confirmLabel={`Approve ${asking?.period ?? ""}`}
          testid="period-approve-dialog"
        >
          <p>
            This writes the statement of each of the month's {asking?.payees ?? 0} payees. Approved statements
            never change: entries that arrive later are stated in the next open month.
          </p>
        </ConfirmDialog>
        {approve.isPending ? <p role="status">Approving {approve.variables}…</p> : null}
        {missing ? (
          <div className="error-state" role="alert" data-testid="approve-rate-missing">
            <strong>{missing.period} cannot be approved yet: an exchange rate is missing.</strong>
            <p>
              Payees are stated in {missing.to}, and money of {missing.period} was earned in{" "}
              {missing.from.join(" and ")}. Set the rate from{" "}
              {missing.from.map((c) => `${c} to ${missing.to}`).join(", ")} for {missing.period} below, then
              approve again.
            </p>
          </div>
        ) : approve.isError ? (
          <div className="error-state" role="alert" data-testid="approve-error">
            <strong>Not approved.</strong>
            <p>{formError(approve.error, [])}</p>
          </div>
        ) : approve.isSuccess ? (
          <p role="status" data-testid="approve-done">
            {approve.data.period} is approved: {approve.data.statements.length} statements written.
          </p>
        ) : null}
        {!isAdmin(role) ? <NeedsAdmin what="Approving a period" /> : null}
      </Section>
      <RateForm preset={rateFor} />
      {chosen ? <Statements period={chosen} periods={periods.data?.data ?? []} /> : null}
    </Page>
  );
}

function PeriodRow({
  p,
  admin,
  busy,
  onApprove,
}: {
  p: MoneyPeriod;
  admin: boolean;
  busy: boolean;
  onApprove: () => void;
}) {
  return (
    <tr data-testid="period-row" data-period={p.period}>
      <th scope="row" className="nowrap">
        {p.period}
      </th>
      <td data-label="Status">
        <Status value={p.status} />
        {p.approved_at ? (
          <>
            {" "}
            <When at={p.approved_at} />
          </>
        ) : null}
      </td>
      <td data-label="Payees" data-testid="period-payees">
        {p.payees}
      </td>
      <td data-label="Totals" data-testid="period-totals">
        {(p.totals ?? []).length === 0 ? (
          <span className="muted">—</span>
        ) : (
          <ul className="plain">
            {(p.totals ?? []).map((t) => (
              <li key={t.currency} data-currency={t.currency}>
                <strong>{t.currency}</strong>: received <Amount value={t.received} />, fees{" "}
                <Amount value={t.fees} />, payees <Amount value={t.payees} />
              </li>
            ))}
          </ul>
        )}
      </td>
      <td data-label="Statements">
        {p.statements > 0 ? (
          <Link to={`/money/periods?period=${p.period}`} data-testid="period-statements">
            {p.statements} statements
          </Link>
        ) : (
          <span className="muted">none</span>
        )}
      </td>
      <td className="actions">
        {p.status === "open" && admin ? (
          <button
            type="button"
            className="primary"
            disabled={busy}
            onClick={onApprove}
            data-testid="period-approve"
            aria-label={`Approve ${p.period}`}
          >
            Approve
          </button>
        ) : null}
      </td>
    </tr>
  );
}

const thisMonth = () => new Date().toISOString().slice(0, 7);

function RateForm({ preset }: { preset: { period: string; from: string; to: string } | null }) {
  const ids = useId();
  const client = useQueryClient();
  const [form, setForm] = useState({ period: thisMonth(), from: "", to: "", rate: "" });
  useEffect(() => {
    if (preset) setForm((f) => ({ ...f, ...preset, rate: "" }));
  }, [preset]);
  const set = useMutation({
    mutationFn: () =>
      money.setRate({
        period: form.period.trim(),
        from: form.from.trim().toUpperCase(),
        to: form.to.trim().toUpperCase(),
        rate: form.rate.trim(),
      }),
    onSuccess: () => void client.invalidateQueries({ queryKey: ["money"] }),
  });
  const fields = ["period", "from", "to", "rate"] as const;
  const labels = {
    period: "Month (YYYY-MM)",
    from: "From currency (e.g. EUR)",
    to: "Into currency (e.g. USD)",
    rate: "Rate (1 of the first is this many of the second)",
  };
  return (
    <form
      className="card"
      aria-labelledby="rate-h"
      data-testid="rate-form"
      noValidate
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        set.mutate();
      }}
    >
      <h2 id="rate-h">Exchange rate</h2>
      <p className="help">
        Statements convert other currencies into the payee's at the rate set for the month. A month's rates
        are final once it is approved.
      </p>
      <div className="filters">
        {fields.map((k) => {
          const error = fieldError(set.error, k);
          return (
            <div key={k}>
              <label htmlFor={`${ids}-${k}`}>{labels[k]}</label>
              <input
                id={`${ids}-${k}`}
                value={form[k]}
                inputMode={k === "rate" ? "decimal" : undefined}
                onChange={(e) => setForm((f) => ({ ...f, [k]: e.target.value }))}
                aria-invalid={Boolean(error)}
                aria-describedby={`${ids}-${k}-error`}
                data-testid={`rate-${k}`}
              />
              <FieldError id={`${ids}-${k}-error`} message={error} />
            </div>
          );
        })}
      </div>
      <button type="submit" disabled={set.isPending} data-testid="rate-save">
        Set the rate
      </button>
      <FormError message={formError(set.error, [...fields])} />
      {set.isSuccess ? (
        <p role="status" data-testid="rate-saved">
          Rate set: 1 {form.from.toUpperCase()} = {form.rate} {form.to.toUpperCase()} for {form.period}.
        </p>
      ) : null}
    </form>
  );
}

function Statements({ period, periods }: { period: string; periods: MoneyPeriod[] }) {
  const statements = useQuery({
    queryKey: ["money", "statements", period],
    queryFn: () => money.statements({ period }),
  });
  const payees = useQuery({ queryKey: ["money", "payees"], queryFn: () => money.payees() });
  const names = new Map((payees.data?.data ?? []).map((p) => [p.id, p.name ?? p.email ?? p.kind]));
  const accounts = useAccountNames();
  const list = useShowMore(statements.data?.data ?? []);
  const [busy, setBusy] = useState("");
  const [error, setError] = useState<unknown>(null);
  async function get(id: string, format: "csv" | "pdf") {
    setBusy(`${id}-${format}`);
    setError(null);
    try {
      save(await money.statementFile(id, format));
    } catch (e) {
      setError(e);
    } finally {
      setBusy("");
    }
  }
  return (
    <Section title={`Statements of ${period}`} id="statements-h" testid="money-statements">
      <div className="filters">
        <div>
          <label htmlFor="statements-period">Month</label>
          <select
            id="statements-period"
            value={period}
            onChange={(e) => setSearch({ period: e.target.value }, { replace: true })}
            data-testid="statements-period"
          >
            {periods.map((p) => (
              <option key={p.period} value={p.period}>
                {p.period} ({p.status})
              </option>
            ))}
          </select>
        </div>
      </div>
      {statements.isPending ? (
        <Loading />
      ) : statements.isError ? (
        <ErrorState error={statements.error} onRetry={() => statements.refetch()} />
      ) : statements.data.data.length === 0 ? (
        <Empty>No statement for {period}: statements are written when the month is approved.</Empty>
      ) : (
        <>
          <TableWrap label={`Statements of ${period}`}>
            <table className="cards" data-testid="statements-table">
              <thead>
                <tr>
                  <th scope="col">Payee</th>
                  <th scope="col">Opening</th>
                  <th scope="col">Earnings</th>
                  <th scope="col">Payments</th>
                  <th scope="col">Closing</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.rows.map((s) => (
                  <tr key={s.id} data-testid="statement-row" data-statement-id={s.id}>
                    <th scope="row">
                      {names.get(s.payee_id) ?? <ShortId id={s.payee_id} />}
                      <div className="muted">
                        {accounts.get(s.account_id) ?? <ShortId id={s.account_id} />}
                      </div>
                    </th>
                    <td data-label="Opening">
                      <Amount value={s.opening_balance} currency={s.currency} />
                    </td>
                    <td data-label="Earnings">
                      <Amount value={s.earnings_total} currency={s.currency} />
                    </td>
                    <td data-label="Payments">
                      <Amount value={s.payments_total} currency={s.currency} />
                    </td>
                    <td data-label="Closing" data-testid="statement-closing">
                      <Amount value={s.closing_balance} currency={s.currency} />
                    </td>
                    <td className="actions">
                      <Link
                        to={`/money/statements/${s.id}`}
                        className="button-link"
                        data-testid="statement-view"
                      >
                        View
                      </Link>{" "}
                      <button
                        type="button"
                        disabled={busy !== ""}
                        onClick={() => void get(s.id, "csv")}
                        data-testid="statement-csv"
                      >
                        CSV
                      </button>{" "}
                      <button
                        type="button"
                        disabled={busy !== ""}
                        onClick={() => void get(s.id, "pdf")}
                        data-testid="statement-pdf"
                      >
                        PDF
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          {list.more}
        </>
      )}
      {error ? <ErrorState error={error} /> : null}
    </Section>
  );
}
