import { useQuery } from "@tanstack/react-query";
import { money } from "../../api/money.ts";
import { Empty, ErrorState, Loading, Page, TableWrap } from "../../ui/common.tsx";
import { Amount, MoneyTabs, Section } from "./common.tsx";

const HOLDERS: Record<string, string> = {
  payee: "payees (owed to them)",
  store: "stores (money received, negative)",
  fees: "distributor's fees",
  recoupable: "advances and expenses still to recoup (negative)",
  cash: "paid out (advances, payouts)",
  payouts_pending: "payouts requested, not paid yet",
  tax_withheld: "tax withheld",
  fx: "currency conversions",
};

const isZero = (v: string) => /^-?0*(\.0*)?$/.test(v);

/** The ledger's trial balance: each holder's balance per currency, and each currency's total, zero. */
export default function Ledger() {
  const ledger = useQuery({ queryKey: ["money", "ledger"], queryFn: money.ledger });
  const rows = ledger.data?.data ?? [];
  const currencies = [...new Set(rows.map((r) => r.currency))];
  return (
    <Page title="Money: ledger" testid="page-money-ledger">
      <MoneyTabs />
      <Section title="Trial balance" id="ledger-h" testid="money-ledger">
        <p className="help">
          Every movement of money is a balanced transaction of the append-only ledger, so every currency sums
          to zero — the database refuses anything else. Amounts are exact, to the last digit a store reported.
        </p>
        {ledger.isPending ? (
          <Loading />
        ) : ledger.isError ? (
          <ErrorState error={ledger.error} onRetry={() => ledger.refetch()} />
        ) : currencies.length === 0 ? (
          <Empty>The ledger is empty.</Empty>
        ) : (
          currencies.map((c) => {
            const total = rows.find((r) => r.currency === c && r.holder === null);
            const zero = total ? isZero(total.balance) : false;
            return (
              <div key={c} className="group" data-testid="ledger-currency" data-currency={c}>
                <h3>{c}</h3>
                <TableWrap label={`Trial balance, ${c}`}>
                  <table>
                    <thead>
                      <tr>
                        <th scope="col">Holder</th>
                        <th scope="col">Balance</th>
                        <th scope="col">Entries</th>
                      </tr>
                    </thead>
                    <tbody>
                      {rows
                        .filter((r) => r.currency === c && r.holder !== null)
                        .map((r) => (
                          <tr key={r.holder} data-holder={r.holder}>
                            <th scope="row">{HOLDERS[r.holder as string] ?? r.holder}</th>
                            <td>
                              <Amount value={r.balance} currency={c} />
                            </td>
                            <td>{r.entries.toLocaleString()}</td>
                          </tr>
                        ))}
                    </tbody>
                    <tfoot>
                      <tr>
                        <th scope="row">Total</th>
                        <td data-testid="ledger-total" data-zero={zero}>
                          <strong>
                            <Amount value={total?.balance ?? "?"} currency={c} />
                          </strong>{" "}
                          <span className={zero ? "ok" : "status-failed"}>
                            {zero ? "✓ balanced" : "✗ does not balance"}
                          </span>
                        </td>
                        <td>{total?.entries.toLocaleString() ?? ""}</td>
                      </tr>
                    </tfoot>
                  </table>
                </TableWrap>
              </div>
            );
          })
        )}
      </Section>
    </Page>
  );
}
