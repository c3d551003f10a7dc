import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { When } from "../../../../ui-shared/common.tsx";
import {
  type AddOn,
  buyAddOn,
  effectWords,
  listAddOns,
  listReleaseAddOns,
  priceWords,
} from "../../api/add-ons.ts";
import { FormError, Notice } from "../../ui.tsx";
import { rulesQuery } from "./queries.ts";

/**
 * A release's add-ons (docs/operator.md "Add-ons"): what the tenant sells for it, what it has, and
 * — for those who may change the release — buying one, after saying what it costs and that it is
 * charged to the account (recouped from the release's earnings before its payees are paid).
 */
export function AddOns({
  accountId,
  accountName,
  releaseId,
  canBuy,
}: {
  accountId: string;
  accountName: string;
  releaseId: string;
  canBuy: boolean;
}) {
  const client = useQueryClient();
  const offered = useQuery({ queryKey: ["add-ons", accountId], queryFn: () => listAddOns(accountId) });
  const orders = useQuery({
    queryKey: ["release-add-ons", releaseId],
    queryFn: () => listReleaseAddOns(accountId, releaseId),
  });
  // The stores' names (GET /rules, which the release's page has asked for already).
  const rules = useQuery(rulesQuery(accountId));
  const [asking, setAsking] = useState<AddOn | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [bought, setBought] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  if (offered.isPending || orders.isPending || rules.isPending || offered.isError || orders.isError)
    return null;
  const storeName = (code: string) => rules.data?.stores.find((s) => s.code === code)?.name;
  const active = new Map(orders.data.filter((o) => o.active).map((o) => [o.add_on, o]));
  // Bought ones stay listed after they went off sale.
  const gone = orders.data.filter((o) => o.active && !offered.data.some((a) => a.code === o.add_on));
  if (offered.data.length === 0 && gone.length === 0) return null;

  const buy = async (a: AddOn) => {
    setBusy(true);
    setError(null);
    try {
      await buyAddOn(accountId, releaseId, a.code);
      setBought(`${a.name} is added to this release. ${priceWords(a)} is charged to ${accountName}.`);
      setAsking(null);
      await client.invalidateQueries({ queryKey: ["release-add-ons", releaseId] });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="card" aria-labelledby="add-ons-heading" data-testid="release-add-ons">
      <h2 id="add-ons-heading">Add-ons</h2>
      <p className="hint">
        Extras for this release. What you buy is charged to {accountName} and taken from this release's
        earnings before anyone is paid.
      </p>
      {bought ? <Notice testid="add-on-bought-notice">{bought}</Notice> : null}
      <ul className="add-ons" data-testid="add-ons">
        {offered.data.map((a) => {
          const order = active.get(a.code);
          return (
            <li key={a.code} data-testid="add-on" data-code={a.code} data-bought={order ? "true" : "false"}>
              <div className="add-on-text">
                <strong>{a.name}</strong> <span data-testid="add-on-price">{priceWords(a)}</span>
                <p>{a.description || effectWords(a, storeName)}</p>
              </div>
              {order ? (
                <p className="add-on-state" data-testid="add-on-active">
                  Added <When at={order.created_at} />
                  {order.expires_at ? (
                    <>
                      {" "}
                      · until <When at={order.expires_at} />
                    </>
                  ) : null}
                </p>
              ) : canBuy ? (
                asking?.code === a.code ? (
                  <div className="add-on-confirm" data-testid="add-on-confirm-box">
                    <p>
                      Charge {priceWords(a)} to {accountName} for {a.name}?
                    </p>
                    <div className="buttons">
                      <button
                        type="button"
                        onClick={() => void buy(a)}
                        disabled={busy}
                        data-testid="add-on-confirm"
                      >
                        Buy for {a.price} {a.currency}
                      </button>
                      <button
                        type="button"
                        className="secondary"
                        onClick={() => setAsking(null)}
                        disabled={busy}
                        data-testid="add-on-cancel"
                      >
                        Cancel
                      </button>
                    </div>
                  </div>
                ) : (
                  <button
                    type="button"
                    className="secondary"
                    onClick={() => {
                      setError(null);
                      setBought(null);
                      setAsking(a);
                    }}
                    data-testid="add-on-buy"
                    aria-label={`Add ${a.name}`}
                  >
                    Add
                  </button>
                )
              ) : null}
            </li>
          );
        })}
        {gone.map((o) => (
          <li key={o.id} data-testid="add-on" data-code={o.add_on} data-bought="true">
            <div className="add-on-text">
              <strong>{o.name}</strong> <span>{priceWords(o)}</span>
            </div>
            <p className="add-on-state" data-testid="add-on-active">
              Added <When at={o.created_at} />
            </p>
          </li>
        ))}
      </ul>
      {canBuy ? null : (
        <p className="hint" data-testid="add-ons-read-only">
          An owner, admin or member of {accountName} can add these.
        </p>
      )}
      <FormError error={error} testid="add-ons-error" />
    </section>
  );
}
