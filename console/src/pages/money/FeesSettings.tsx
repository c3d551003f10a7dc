import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { type Fee, type MoneySettings, money } from "../../api/money.ts";
import { Checkbox, Empty, ErrorState, Loading, Page, TableWrap, When } from "../../ui/common.tsx";
import {
  AccountField,
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
} from "./common.tsx";

/** Fees (the tenant's, an account's, a release's) and the money settings. */
export default function FeesSettings() {
  const role = useRole();
  return (
    <Page title="Money: fees and settings" testid="page-money-settings">
      <MoneyTabs />
      <SettingsForm admin={isAdmin(role)} />
      <Fees admin={isAdmin(role)} />
    </Page>
  );
}

function SettingsForm({ admin }: { admin: boolean }) {
  const ids = useId();
  const client = useQueryClient();
  const settings = useQuery({ queryKey: ["money", "settings"], queryFn: money.settings });
  const [form, setForm] = useState<MoneySettings | null>(null);
  useEffect(() => {
    if (settings.data) setForm(settings.data);
  }, [settings.data]);
  const saveIt = useMutation({
    mutationFn: (body: MoneySettings) =>
      money.patchSettings({
        default_currency: body.default_currency.trim().toUpperCase(),
        payout_threshold: body.payout_threshold.trim(),
        payout_requires_aal2: body.payout_requires_aal2,
      }),
    onSuccess: (s) => client.setQueryData(["money", "settings"], s),
  });
  const err = (k: string) => fieldError(saveIt.error, k);
  if (settings.isPending) return <Loading />;
  if (settings.isError) return <ErrorState error={settings.error} onRetry={() => settings.refetch()} />;
  if (!form) return null;
  return (
    <form
      className="card"
      aria-labelledby="ms-h"
      data-testid="money-settings-form"
      noValidate
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        saveIt.mutate(form);
      }}
    >
      <h2 id="ms-h">Settings</h2>
      <fieldset disabled={!admin} className="plain">
        <legend className="sr-only">Money settings</legend>
        <div className="filters">
          <div>
            <label htmlFor={`${ids}-cur`}>Statement currency (payees are stated and paid in it)</label>
            <input
              id={`${ids}-cur`}
              value={form.default_currency}
              onChange={(e) => setForm({ ...form, default_currency: e.target.value })}
              aria-invalid={Boolean(err("default_currency"))}
              aria-describedby={`${ids}-cur-error`}
              data-testid="money-currency"
            />
            <FieldError id={`${ids}-cur-error`} message={err("default_currency")} />
          </div>
          <div>
            <label htmlFor={`${ids}-thr`}>Payout threshold (the least a payee may ask for)</label>
            <input
              id={`${ids}-thr`}
              value={form.payout_threshold}
              inputMode="decimal"
              onChange={(e) => setForm({ ...form, payout_threshold: e.target.value })}
              aria-invalid={Boolean(err("payout_threshold"))}
              aria-describedby={`${ids}-thr-error`}
              data-testid="money-threshold"
            />
            <FieldError id={`${ids}-thr-error`} message={err("payout_threshold")} />
          </div>
        </div>
        <Checkbox
          checked={form.payout_requires_aal2}
          onChange={(v) => setForm({ ...form, payout_requires_aal2: v })}
          testid="money-aal2"
        >
          A payout request needs a second factor (aal2)
        </Checkbox>
        <button
          type="submit"
          className="primary"
          disabled={saveIt.isPending}
          data-testid="money-settings-save"
        >
          Save
        </button>
      </fieldset>
      {!admin ? <NeedsAdmin what="Changing the money settings" /> : null}
      <FormError
        message={formError(saveIt.error, ["default_currency", "payout_threshold", "payout_requires_aal2"])}
      />
      {saveIt.isSuccess ? (
        <p role="status" data-testid="money-settings-saved">
          Saved.
        </p>
      ) : null}
    </form>
  );
}

const scopeOf = (f: Fee) => (f.release_id ? "release" : f.account_id ? "account" : "tenant");

function Fees({ admin }: { admin: boolean }) {
  const ids = useId();
  const client = useQueryClient();
  const names = useAccountNames();
  const fees = useQuery({ queryKey: ["money", "fees"], queryFn: money.fees });
  const [form, setForm] = useState({ account_id: "", release_id: "", rate: "" });
  const set = useMutation({
    mutationFn: (body: { account_id?: string; release_id?: string; rate: string | null }) =>
      money.setFee(body),
    onSuccess: (r) => {
      client.setQueryData(["money", "fees"], r);
      setForm((f) => ({ ...f, rate: "" }));
    },
  });
  const err = (k: string) => fieldError(set.error, k);
  const scope = (f: { account_id: string | null; release_id: string | null }) => ({
    ...(f.account_id ? { account_id: f.account_id } : {}),
    ...(f.release_id ? { release_id: f.release_id } : {}),
  });
  return (
    <Section title="Distributor's fees" id="fees-h" testid="money-fees">
      <p className="help">
        A percentage of each store's net, taken before recoupment and the payees' shares: the release's rate,
        else its account's, else the tenant's, else none. A change applies to imports from now on.
      </p>
      {fees.isPending ? (
        <Loading />
      ) : fees.isError ? (
        <ErrorState error={fees.error} onRetry={() => fees.refetch()} />
      ) : fees.data.data.length === 0 ? (
        <Empty>No fee set: the distributor takes nothing.</Empty>
      ) : (
        <TableWrap label="Fees">
          <table className="cards" data-testid="fees-table">
            <thead>
              <tr>
                <th scope="col">Applies to</th>
                <th scope="col">Rate</th>
                <th scope="col">Changed</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {fees.data.data.map((f) => (
                <tr key={`${f.account_id}-${f.release_id}`} data-testid="fee-row" data-scope={scopeOf(f)}>
                  <th scope="row">
                    {scopeOf(f) === "tenant" ? (
                      "the tenant (every account)"
                    ) : (
                      <>
                        account {names.get(f.account_id ?? "") ?? <ShortId id={f.account_id} />}
                        {f.release_id ? (
                          <>
                            {" "}
                            · release <ShortId id={f.release_id} />
                          </>
                        ) : null}
                      </>
                    )}
                  </th>
                  <td data-label="Rate" data-testid="fee-rate">
                    {f.rate} %
                  </td>
                  <td data-label="Changed">
                    <When at={f.updated_at} />
                  </td>
                  <td className="actions">
                    {admin ? (
                      <button
                        type="button"
                        disabled={set.isPending}
                        onClick={() => set.mutate({ ...scope(f), rate: null })}
                        data-testid="fee-remove"
                      >
                        Remove
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {admin ? (
        <form
          className="inline-form"
          aria-labelledby="fee-set-h"
          data-testid="fee-form"
          noValidate
          onSubmit={(e: FormEvent) => {
            e.preventDefault();
            set.mutate({
              ...scope({ account_id: form.account_id.trim(), release_id: form.release_id.trim() }),
              rate: form.rate.trim(),
            });
          }}
        >
          <h3 id="fee-set-h">Set a fee</h3>
          <div className="filters">
            <AccountField
              id={`${ids}-acc`}
              value={form.account_id}
              onChange={(v) => setForm((f) => ({ ...f, account_id: v }))}
              error={err("account_id")}
              testid="fee-account"
              optional="none: the tenant's fee"
            />
            <div>
              <label htmlFor={`${ids}-rel`}>Release id (optional, of that account)</label>
              <input
                id={`${ids}-rel`}
                value={form.release_id}
                onChange={(e) => setForm((f) => ({ ...f, release_id: e.target.value }))}
                aria-invalid={Boolean(err("release_id"))}
                aria-describedby={`${ids}-rel-error`}
                data-testid="fee-release"
              />
              <FieldError id={`${ids}-rel-error`} message={err("release_id")} />
            </div>
            <div>
              <label htmlFor={`${ids}-rate`}>Rate, percent (0 to 100)</label>
              <input
                id={`${ids}-rate`}
                value={form.rate}
                inputMode="decimal"
                onChange={(e) => setForm((f) => ({ ...f, rate: e.target.value }))}
                aria-invalid={Boolean(err("rate"))}
                aria-describedby={`${ids}-rate-error`}
                data-testid="fee-rate-input"
              />
              <FieldError id={`${ids}-rate-error`} message={err("rate")} />
            </div>
          </div>
          <button type="submit" className="primary" disabled={set.isPending} data-testid="fee-save">
            Set the fee
          </button>
          <FormError message={formError(set.error, ["account_id", "release_id", "rate"])} />
          {set.isSuccess ? (
            <p role="status" data-testid="fee-saved">
              Fees saved.
            </p>
          ) : null}
        </form>
      ) : (
        <NeedsAdmin what="Setting a fee" />
      )}
    </Section>
  );
}
