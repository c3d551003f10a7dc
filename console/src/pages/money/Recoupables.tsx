import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { money } from "../../api/money.ts";
import { Checkbox, Empty, ErrorState, Loading, Page, TableWrap, When } from "../../ui/common.tsx";
import {
  AccountField,
  Amount,
  FieldError,
  FormError,
  fieldError,
  formError,
  MoneyTabs,
  Section,
  ShortId,
  useAccountNames,
  useShowMore,
} from "./common.tsx";

const EMPTY = {
  account_id: "",
  release_id: "",
  kind: "expense" as "advance" | "expense",
  currency: "USD",
  amount: "",
  description: "",
  cross_recoup: false,
};

/** Advances and expenses: what is still unrecouped of each; record one against an account or a release. */
export default function Recoupables() {
  const client = useQueryClient();
  const ids = useId();
  const names = useAccountNames();
  const list = useQuery({ queryKey: ["money", "recoupables"], queryFn: () => money.recoupables() });
  const shown = useShowMore(list.data?.data ?? []);
  const [form, setForm] = useState(EMPTY);
  const add = useMutation({
    mutationFn: () =>
      money.addRecoupable({
        account_id: form.account_id.trim(),
        ...(form.release_id.trim() ? { release_id: form.release_id.trim() } : {}),
        kind: form.kind,
        currency: form.currency.trim().toUpperCase(),
        amount: form.amount.trim(),
        description: form.description.trim(),
        ...(form.release_id.trim() ? { cross_recoup: form.cross_recoup } : {}),
      }),
    onSuccess: () => {
      setForm((f) => ({ ...EMPTY, account_id: f.account_id }));
      void client.invalidateQueries({ queryKey: ["money"] });
    },
  });
  const err = (k: string) => fieldError(add.error, k);
  const text = (k: "release_id" | "currency" | "amount" | "description", label: string, mode?: "decimal") => (
    <div>
      <label htmlFor={`${ids}-${k}`}>{label}</label>
      <input
        id={`${ids}-${k}`}
        value={form[k]}
        inputMode={mode}
        onChange={(e) => setForm((f) => ({ ...f, [k]: e.target.value }))}
        aria-invalid={Boolean(err(k))}
        aria-describedby={`${ids}-${k}-error`}
        data-testid={`recoupable-${k.replace("_", "-")}`}
      />
      <FieldError id={`${ids}-${k}-error`} message={err(k)} />
    </div>
  );
  return (
    <Page title="Money: advances and expenses" testid="page-money-recoupables">
      <MoneyTabs />
      <Section title="Advances and expenses" id="rec-h" testid="money-recoupables">
        <p className="help">
          Recouped from the account's earnings after the distributor's fee and before the payees' shares:
          expenses first, then advances, oldest first. A release's reaches only that release's money unless it
          is cross-recouped.
        </p>
        {list.isPending ? (
          <Loading />
        ) : list.isError ? (
          <ErrorState error={list.error} onRetry={() => list.refetch()} />
        ) : list.data.data.length === 0 ? (
          <Empty>No advance or expense recorded.</Empty>
        ) : (
          <>
            <TableWrap label="Advances and expenses">
              <table className="cards" data-testid="recoupables-table">
                <thead>
                  <tr>
                    <th scope="col">Description</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Against</th>
                    <th scope="col">Amount</th>
                    <th scope="col">Unrecouped</th>
                    <th scope="col">Recorded</th>
                  </tr>
                </thead>
                <tbody>
                  {shown.rows.map((r) => (
                    <tr key={r.id} data-testid="recoupable-row" data-recoupable-id={r.id}>
                      <th scope="row">{r.description}</th>
                      <td data-label="Kind">{r.kind}</td>
                      <td data-label="Against">
                        {names.get(r.account_id) ?? <ShortId id={r.account_id} />}
                        {r.release_id ? (
                          <>
                            {" "}
                            · release <ShortId id={r.release_id} />
                            {r.cross_recoup ? " (cross-recouped)" : ""}
                          </>
                        ) : null}
                      </td>
                      <td data-label="Amount">
                        <Amount value={r.amount} currency={r.currency} />
                      </td>
                      <td data-label="Unrecouped" data-testid="recoupable-unrecouped">
                        <Amount value={r.unrecouped} currency={r.currency} />
                      </td>
                      <td data-label="Recorded">
                        <When at={r.created_at} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
            {shown.more}
          </>
        )}
      </Section>
      <form
        className="card"
        aria-labelledby="rec-add-h"
        data-testid="recoupable-form"
        noValidate
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <h2 id="rec-add-h">Record an advance or expense</h2>
        <div className="filters">
          <AccountField
            id={`${ids}-account`}
            value={form.account_id}
            onChange={(v) => setForm((f) => ({ ...f, account_id: v }))}
            error={err("account_id")}
            testid="recoupable-account"
          />
          {text("release_id", "Release id (optional: only that release recoups it)")}
          <div>
            <label htmlFor={`${ids}-kind`}>Kind</label>
            <select
              id={`${ids}-kind`}
              value={form.kind}
              onChange={(e) => setForm((f) => ({ ...f, kind: e.target.value as "advance" | "expense" }))}
              data-testid="recoupable-kind"
            >
              <option value="expense">expense</option>
              <option value="advance">advance</option>
            </select>
          </div>
          {text("currency", "Currency")}
          {text("amount", "Amount (e.g. 500.00)", "decimal")}
          {text("description", "Description")}
        </div>
        <Checkbox
          checked={form.cross_recoup}
          onChange={(v) => setForm((f) => ({ ...f, cross_recoup: v }))}
          testid="recoupable-cross"
        >
          Cross-recoup: a release's expense is recouped from the account's other releases too
        </Checkbox>
        <button type="submit" className="primary" disabled={add.isPending} data-testid="recoupable-save">
          Record
        </button>
        <FormError
          message={formError(add.error, ["account_id", "release_id", "currency", "amount", "description"])}
        />
        {add.isSuccess ? (
          <p role="status" data-testid="recoupable-saved">
            Recorded: {add.data.kind} “{add.data.description}”, {add.data.amount} {add.data.currency}.
          </p>
        ) : null}
      </form>
    </Page>
  );
}
