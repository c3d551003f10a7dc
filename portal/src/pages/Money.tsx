/**
 * Money (docs/portal.md, "Money"): what a person is owed, across every account that pays them
 * (the /me routes: a payee need not be a member), with getting paid; and, for an account's owners
 * and admins, whom the account owes. Loaded as a chunk of its own (App.tsx, lazy).
 */
import { useQuery } from "@tanstack/react-query";
import { Empty, Loading, Status, TableWrap, When } from "../../../ui-shared/common.tsx";
import { Link } from "../../../ui-shared/router.tsx";
import {
  accountBalances,
  accountPayees,
  type Balance,
  myBalances,
  myDraftStatement,
  myPayees,
  myPayouts,
  myStatement,
  myStatements,
  type Payee,
  type Payout,
  type StatementSummary,
} from "../api/money.ts";
import type { Account } from "../api/portal.ts";
import { ErrorState, Page } from "../ui.tsx";
import { canManage } from "./Developers.tsx";
import { amount, PAYOUT_STATUS_WORDS, periodName, TAX_STATUS_WORDS } from "./money/format.ts";
import { GettingPaid } from "./money/GettingPaid.tsx";

export { StatementPage } from "./money/StatementPage.tsx";

/** The balances of one payee, per currency: the exact balance shown rounded, what can be paid out. */
function Balances({ payee, balances }: { payee: Payee; balances: Balance[] }) {
  if (balances.length === 0)
    return (
      <Empty>
        <span data-testid="balance-empty">
          Nothing yet: earnings show here once the stores' reports for your music come in.
        </span>
      </Empty>
    );
  return (
    <ul className="balances" data-testid="balances">
      {balances.map((b) => (
        <li
          key={b.currency}
          className="balance"
          data-testid="money-balance"
          data-currency={b.currency}
          data-balance={b.balance}
        >
          <span className="balance-label">
            Balance{b.currency !== payee.currency ? " (converted when the month is approved)" : ""}
          </span>
          <strong className="balance-figure" data-testid="balance-amount">
            {amount(b.balance, b.currency)}
          </strong>
          {b.currency === payee.currency ? (
            <span className="muted">
              {amount(b.available, b.currency)} available to pay out
              {b.pending_payouts !== "0" ? ` · ${amount(b.pending_payouts, b.currency)} being paid` : ""}
            </span>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

function Statements({ payee, statements }: { payee: Payee; statements: StatementSummary[] }) {
  const draft = useQuery({
    queryKey: ["money", "draft", payee.id],
    queryFn: () => myDraftStatement(payee.id),
  });
  const rows = [
    ...(draft.data
      ? [
          {
            key: "draft",
            to: `/money/payees/${payee.id}/draft`,
            period: draft.data.period,
            status: "draft",
            closing: draft.data.closing_balance,
            currency: draft.data.currency,
          },
        ]
      : []),
    ...statements.map((s) => ({
      key: s.id,
      to: `/money/statements/${s.id}`,
      period: s.period,
      status: s.status,
      closing: s.closing_balance,
      currency: s.currency,
    })),
  ];
  return (
    <section className="money-step" aria-labelledby={`statements-${payee.id}-heading`}>
      <h3 id={`statements-${payee.id}-heading`}>Statements</h3>
      {draft.isPending ? <Loading /> : null}
      {draft.isError ? <ErrorState error={draft.error} onRetry={() => draft.refetch()} /> : null}
      {!draft.isPending && rows.length === 0 ? (
        <Empty>
          <span data-testid="statements-empty">
            No statement yet. Each month's statement shows here: a draft while the month is open, then the
            approved one.
          </span>
        </Empty>
      ) : null}
      {rows.length > 0 ? (
        <TableWrap label="Statements">
          <table data-testid="statements">
            <thead>
              <tr>
                <th scope="col">Month</th>
                <th scope="col">Status</th>
                <th scope="col" className="num">
                  Closing balance
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.key} data-testid="statement-row" data-status={r.status}>
                  <th scope="row">
                    <Link to={r.to} data-testid="statement-open">
                      {periodName(r.period)}
                      {r.status === "draft" ? " (draft)" : ""}
                    </Link>
                  </th>
                  <td>
                    <Status value={r.status} />
                  </td>
                  <td className="num">{amount(r.closing, r.currency)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </section>
  );
}

function Payouts({ payouts }: { payouts: Payout[] }) {
  if (payouts.length === 0) return null;
  return (
    <section className="money-step" aria-label="Payouts">
      <h3>Payouts</h3>
      <TableWrap label="Payouts">
        <table data-testid="payouts">
          <thead>
            <tr>
              <th scope="col">Asked</th>
              <th scope="col">Status</th>
              <th scope="col" className="num">
                Amount
              </th>
              <th scope="col" className="num">
                Withheld
              </th>
              <th scope="col" className="num">
                Sent
              </th>
            </tr>
          </thead>
          <tbody>
            {payouts.map((p) => (
              <tr key={p.id} data-testid="payout-row" data-status={p.status}>
                <th scope="row">
                  <When at={p.requested_at} />
                </th>
                <td>
                  <Status value={p.status} />
                  <span className="sr-only">: {PAYOUT_STATUS_WORDS[p.status]}</span>
                  {p.status === "failed" && p.failure_reason ? (
                    <span className="muted"> ({p.failure_reason})</span>
                  ) : null}
                </td>
                <td className="num">{amount(p.amount, p.currency)}</td>
                <td className="num">{amount(p.withholding, p.currency)}</td>
                <td className="num">{amount(p.net_amount, p.currency)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </section>
  );
}

/** One payee the person is: who pays, the balance, getting paid, statements and payouts. */
function PayeeCard({
  payee,
  accounts,
  balances,
  statements,
  payouts,
}: {
  payee: Payee;
  accounts: Account[];
  balances: Balance[];
  statements: StatementSummary[];
  payouts: Payout[];
}) {
  const member = accounts.find((a) => a.id === payee.account_id)?.name;
  // A payee need not be a member of the account that pays them: its name is on its statements.
  const draft = useQuery({
    queryKey: ["money", "draft", payee.id],
    queryFn: () => myDraftStatement(payee.id),
    enabled: !member,
  });
  const latest = statements[0]?.id;
  const approved = useQuery({
    queryKey: ["money", "statement", latest],
    queryFn: () => myStatement(latest as string),
    enabled: !member && !draft.isPending && !draft.data && !!latest,
  });
  const waiting = !member && (draft.isPending || approved.isFetching);
  const payer =
    member ??
    draft.data?.account_name ??
    approved.data?.account_name ??
    (waiting ? "…" : "an account that pays you");
  const id = `payee-${payee.id}`;
  return (
    <section
      className="card payee"
      aria-labelledby={`${id}-heading`}
      data-testid="payee"
      data-payee-id={payee.id}
    >
      <h2 id={`${id}-heading`} data-testid="payee-payer">
        From {payer}
      </h2>
      <p className="muted">
        {payee.kind === "account"
          ? "The account's own share (tracks without splits, shares without an e-mail)."
          : `As ${payee.name ?? payee.email}${payee.email && payee.name ? ` (${payee.email})` : ""}`}{" "}
        · paid in {payee.currency}
      </p>
      <Balances payee={payee} balances={balances} />
      <GettingPaid payee={payee} balance={balances.find((b) => b.currency === payee.currency)} />
      <Statements payee={payee} statements={statements} />
      <Payouts payouts={payouts} />
    </section>
  );
}

/** The person's own money, across every account that pays them. */
function Mine({ accounts, email }: { accounts: Account[]; email: string }) {
  const payees = useQuery({ queryKey: ["money", "payees"], queryFn: myPayees });
  const balances = useQuery({ queryKey: ["money", "balances"], queryFn: myBalances });
  const statements = useQuery({ queryKey: ["money", "statements"], queryFn: myStatements });
  const payouts = useQuery({ queryKey: ["money", "payouts"], queryFn: myPayouts });
  const failed = [payees, balances, statements, payouts].find((q) => q.isError);
  if (failed) return <ErrorState error={failed.error} onRetry={() => failed.refetch()} />;
  if (!payees.data || !balances.data || !statements.data || !payouts.data) return <Loading />;
  const [ps, bs, ss, os] = [payees.data, balances.data, statements.data, payouts.data];
  if (ps.length === 0)
    return (
      <Empty>
        <span data-testid="money-empty">
          Nothing is owed to you here yet. When a track's splits name your e-mail address ({email}) and the
          stores' reports for it come in, your share shows here, with your statements and a way to be paid. If
          you expect money, ask the label or artist to put {email} in the track's splits.
        </span>
      </Empty>
    );
  return (
    <>
      {ps.map((p) => (
        <PayeeCard
          key={p.id}
          payee={p}
          accounts={accounts}
          balances={bs.filter((b) => b.payee_id === p.id)}
          statements={ss.filter((s) => s.payee_id === p.id)}
          payouts={os.filter((o) => o.payee_id === p.id)}
        />
      ))}
    </>
  );
}

/** For an account's owners and admins: whom the account owes, read only. */
function AccountMoney({ account }: { account: Account }) {
  const payees = useQuery({
    queryKey: ["money", "account-payees", account.id],
    queryFn: () => accountPayees(account.id),
  });
  const balances = useQuery({
    queryKey: ["money", "account-balances", account.id],
    queryFn: () => accountBalances(account.id),
  });
  return (
    <section className="card" aria-labelledby="account-money-heading" data-testid="account-money">
      <h2 id="account-money-heading">Whom {account.name} pays</h2>
      <p className="hint">
        Everyone the account's releases pay: the people its tracks' splits name by e-mail, and the account
        itself. Their statements and payouts are theirs; the platform's team approves each month and pays.
      </p>
      {payees.isError ? <ErrorState error={payees.error} onRetry={() => payees.refetch()} /> : null}
      {balances.isError ? <ErrorState error={balances.error} onRetry={() => balances.refetch()} /> : null}
      {payees.isPending || balances.isPending ? <Loading /> : null}
      {payees.data && payees.data.length === 0 ? (
        <Empty>
          <span data-testid="account-payees-empty">
            No one yet. A payee appears when a track's splits name them by e-mail, or when a report pays the
            account itself.
          </span>
        </Empty>
      ) : null}
      {payees.data && payees.data.length > 0 && balances.data ? (
        <TableWrap label={`Whom ${account.name} pays`}>
          <table data-testid="account-payees">
            <thead>
              <tr>
                <th scope="col">Payee</th>
                <th scope="col">Tax form</th>
                <th scope="col">Paid through</th>
                <th scope="col" className="num">
                  Balance
                </th>
              </tr>
            </thead>
            <tbody>
              {payees.data.map((p) => {
                const bs = balances.data.filter((b) => b.payee_id === p.id);
                return (
                  <tr key={p.id} data-testid="account-payee-row" data-email={p.email ?? ""}>
                    <th scope="row">
                      {p.kind === "account" ? `${account.name} (the account)` : (p.name ?? p.email)}
                      {p.kind === "person" && p.email && p.name ? (
                        <span className="muted"> {p.email}</span>
                      ) : null}
                    </th>
                    <td>{TAX_STATUS_WORDS[p.tax.status] ?? p.tax.status}</td>
                    <td>
                      {p.payout_method === null
                        ? "Not said yet"
                        : p.payout_method.provider === "paypal"
                          ? "PayPal"
                          : "Bank (Wise)"}
                    </td>
                    <td className="num" data-testid="account-payee-balance">
                      {bs.length === 0 ? "—" : bs.map((b) => amount(b.balance, b.currency)).join(" · ")}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </section>
  );
}

export function Money({
  account,
  accounts,
  email,
}: {
  account: Account | undefined;
  accounts: Account[];
  email: string;
}) {
  return (
    <Page title="Money" testid="page-money">
      <p className="lede">
        What you are owed for your music, from every account that pays you, and how to be paid.
      </p>
      <Mine accounts={accounts} email={email} />
      {account && canManage(account) ? <AccountMoney account={account} /> : null}
    </Page>
  );
}
