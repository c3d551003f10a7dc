import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { type Download, money, type Payout, type PayoutBatch, save } from "../../api/money.ts";
import { Checkbox, Empty, ErrorState, Loading, Page, Status, TableWrap, When } from "../../ui/common.tsx";
import { ConfirmDialog } from "../../ui/Dialog.tsx";
import { fieldProblems } from "../../ui/field-errors.ts";
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
  useRole,
  useShowMore,
} from "./common.tsx";

const PROVIDER: Record<string, string> = { paypal: "PayPal", wise: "Wise" };
const providerName = (p: string | null | undefined) => (p ? (PROVIDER[p] ?? p) : "no payout method");
const who = (o: Payout) => o.payee_name || o.payee_email || o.payee_id.slice(0, 8);

/** Payouts: open requests by provider, approved as a batch, exported for the provider, settled. */
export default function Payouts() {
  const role = useRole();
  const open = useQuery({
    queryKey: ["money", "payouts", "requested"],
    queryFn: () => money.payouts({ status: "requested" }),
  });
  const batches = useQuery({ queryKey: ["money", "batches"], queryFn: money.batches });
  // Said here, not in the provider's group: the approved requests leave the open list (and their
  // group with them) as soon as it is read again.
  const [approved, setApproved] = useState<number | null>(null);
  const groups = new Map<string, Payout[]>();
  for (const o of open.data?.data ?? []) {
    const key = `${o.provider ?? ""}|${o.currency}`;
    groups.set(key, [...(groups.get(key) ?? []), o]);
  }
  return (
    <Page title="Money: payouts" testid="page-money-payouts">
      <MoneyTabs />
      <Section title="Open requests" id="open-h" testid="money-open-payouts">
        <p className="help">
          Payees ask for their available balance; the amount has left their balance already. A batch is one
          provider and one currency: its file is uploaded to the provider's dashboard, then the batch is
          settled.
        </p>
        {open.isPending ? (
          <Loading />
        ) : open.isError ? (
          <ErrorState error={open.error} onRetry={() => open.refetch()} />
        ) : groups.size === 0 ? (
          <Empty>No open payout request.</Empty>
        ) : (
          [...groups.entries()].map(([key, rows]) => (
            <ProviderGroup key={key} rows={rows} admin={isAdmin(role)} onApproved={setApproved} />
          ))
        )}
        {approved !== null ? (
          <p role="status" data-testid="batch-approved">
            Batch approved: {approved} payouts. Export its file below.
          </p>
        ) : null}
        {!isAdmin(role) ? <NeedsAdmin what="Approving, exporting and settling a batch" /> : null}
      </Section>
      <Section title="Batches" id="batches-h" testid="money-batches">
        {batches.isPending ? (
          <Loading />
        ) : batches.isError ? (
          <ErrorState error={batches.error} onRetry={() => batches.refetch()} />
        ) : batches.data.data.length === 0 ? (
          <Empty>No batch yet.</Empty>
        ) : (
          <Batches rows={batches.data.data} admin={isAdmin(role)} />
        )}
      </Section>
    </Page>
  );
}

function ProviderGroup({
  rows,
  admin,
  onApproved,
}: {
  rows: Payout[];
  admin: boolean;
  onApproved: (payouts: number) => void;
}) {
  const client = useQueryClient();
  const first = rows[0] as Payout;
  const list = useShowMore(rows);
  const approve = useMutation({
    mutationFn: () => money.approveBatch({ provider: first.provider ?? "", currency: first.currency }),
    onSuccess: (batch) => {
      onApproved(batch.payouts);
      void client.invalidateQueries({ queryKey: ["money"] });
    },
  });
  const label = `${providerName(first.provider)}, ${first.currency}`;
  const [asking, setAsking] = useState(false);
  return (
    <div className="group" data-testid="payout-group" data-provider={first.provider ?? ""}>
      <h3>
        {label}: {rows.length} {rows.length === 1 ? "request" : "requests"}
      </h3>
      <TableWrap label={`Open requests, ${label}`}>
        <table className="cards">
          <thead>
            <tr>
              <th scope="col">Payee</th>
              <th scope="col">Amount</th>
              <th scope="col">Withholding</th>
              <th scope="col">Sent</th>
              <th scope="col">Requested</th>
            </tr>
          </thead>
          <tbody>
            {list.rows.map((o) => (
              <tr key={o.id} data-testid="open-payout-row" data-payout-id={o.id}>
                <th scope="row">{who(o)}</th>
                <td data-label="Amount">
                  <Amount value={o.amount} currency={o.currency} />
                </td>
                <td data-label="Withholding">
                  <Amount value={o.withholding} />
                </td>
                <td data-label="Sent">
                  <Amount value={o.net_amount} />
                </td>
                <td data-label="Requested">
                  <When at={o.requested_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
      {list.more}
      {admin && first.provider ? (
        <button
          type="button"
          className="primary"
          disabled={approve.isPending}
          onClick={() => setAsking(true)}
          data-testid="batch-approve"
        >
          Approve a {providerName(first.provider)} batch of these
        </button>
      ) : null}
      <ConfirmDialog
        open={asking}
        onClose={() => setAsking(false)}
        onConfirm={() => {
          setAsking(false);
          approve.mutate();
        }}
        title={`Approve a ${providerName(first.provider)} batch?`}
        confirmLabel="Approve the batch"
        testid="batch-approve-dialog"
      >
        <p>
          The {first.currency} requests open for {providerName(first.provider)} now ({rows.length}{" "}
          {rows.length === 1 ? "request" : "requests"}) go into one batch to pay. Next, export the batch's
          file for {providerName(first.provider)}, pay it there, and settle it here with what was paid.
        </p>
      </ConfirmDialog>
      {approve.isError ? <ErrorState error={approve.error} /> : null}
    </div>
  );
}

function Batches({ rows, admin }: { rows: PayoutBatch[]; admin: boolean }) {
  const list = useShowMore(rows);
  const [settling, setSettling] = useState<string | null>(null);
  const [exported, setExported] = useState<{ id: string; file: Download; skipped: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const client = useQueryClient();
  async function exportIt(id: string) {
    setError(null);
    try {
      const file = await money.exportBatch(id);
      save(file);
      setExported({ id, file, skipped: file.headers.get("backline-skipped-lines") ?? "0" });
      void client.invalidateQueries({ queryKey: ["money", "batches"] });
    } catch (e) {
      setError(e);
    }
  }
  return (
    <>
      <TableWrap label="Batches">
        <table className="cards" data-testid="batches-table">
          <thead>
            <tr>
              <th scope="col">Batch</th>
              <th scope="col">Status</th>
              <th scope="col">Payouts</th>
              <th scope="col">Amounts</th>
              <th scope="col">Approved · exported · settled</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.rows.map((b) => (
              <tr key={b.id} data-testid="batch-row" data-batch-id={b.id}>
                <th scope="row">
                  {providerName(b.provider)} <ShortId id={b.id} />
                </th>
                <td data-label="Status">
                  <Status value={b.status} />
                </td>
                <td data-label="Payouts">{b.payouts}</td>
                <td data-label="Amounts">
                  {b.currencies.map((c) => (
                    <div key={c.currency}>
                      <Amount value={c.amount} currency={c.currency} /> (sent <Amount value={c.net_amount} />,
                      withheld <Amount value={c.withholding} />)
                    </div>
                  ))}
                </td>
                <td data-label="Approved · exported · settled">
                  <When at={b.approved_at} /> · <When at={b.exported_at} /> · <When at={b.settled_at} />
                </td>
                <td className="actions">
                  {admin ? (
                    <>
                      <button type="button" onClick={() => void exportIt(b.id)} data-testid="batch-export">
                        Export file
                      </button>{" "}
                      {b.status === "approved" ? (
                        <button
                          type="button"
                          aria-expanded={settling === b.id}
                          onClick={() => setSettling(settling === b.id ? null : b.id)}
                          data-testid="batch-settle-open"
                        >
                          Settle…
                        </button>
                      ) : null}
                    </>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
      {list.more}
      {error ? <ErrorState error={error} /> : null}
      {exported ? (
        <p role="status" data-testid="batch-exported">
          {exported.file.fileName} downloaded
          {exported.skipped !== "0"
            ? `; ${exported.skipped} lines left out (see the payee's payout method)`
            : ""}
          . Upload it to the provider, then settle the batch.
        </p>
      ) : null}
      {settling ? <SettleForm batchId={settling} onDone={() => setSettling(null)} /> : null}
    </>
  );
}

function SettleForm({ batchId, onDone }: { batchId: string; onDone: () => void }) {
  const ids = useId();
  const client = useQueryClient();
  const lines = useQuery({
    queryKey: ["money", "payouts", "batch", batchId],
    queryFn: () => money.payouts({ batch_id: batchId }),
  });
  const [failed, setFailed] = useState<Record<string, string | undefined>>({});
  const [reference, setReference] = useState("");
  const settle = useMutation({
    // The failed lines as sent: the API names a refused one by its place in this list (`failed[2].reason`).
    mutationFn: (sent: { payout_id: string; reason: string }[]) =>
      money.settleBatch(batchId, {
        failed: sent,
        ...(reference.trim() ? { reference: reference.trim() } : {}),
      }),
    onSuccess: () => {
      void client.invalidateQueries({ queryKey: ["money"] });
      onDone();
    },
  });
  const missingReason = Object.values(failed).some((r) => r !== undefined && r.trim() === "");
  /**
   * A refusal of one failed line, said under that line's reason: `failed[i]…` by its place in the
   * list sent, or the list's own refusal when it names the line's payout (not in this batch).
   */
  const lineError = (payoutId: string): string | undefined => {
    const at = settle.variables?.findIndex((f) => f.payout_id === payoutId) ?? -1;
    if (at < 0) return undefined;
    return (
      fieldError(settle.error, `failed[${at}]`) ??
      fieldProblems(settle.error).find((p) => p.param === "failed" && p.message.includes(payoutId))?.message
    );
  };
  const linesClaim = (settle.variables ?? []).some((f) => lineError(f.payout_id) !== undefined);
  return (
    <form
      className="card"
      aria-labelledby={`${ids}-h`}
      data-testid="settle-form"
      noValidate
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        if (!missingReason)
          settle.mutate(
            Object.entries(failed)
              .filter(([, reason]) => reason !== undefined)
              .map(([payout_id, reason]) => ({ payout_id, reason: (reason ?? "").trim() })),
          );
      }}
    >
      <h3 id={`${ids}-h`}>
        Settle batch <ShortId id={batchId} />
      </h3>
      <p className="help">
        Every line is marked paid except those you mark failed: a failed line's money returns to the payee's
        balance. Give the reason the provider reported.
      </p>
      {lines.isPending ? (
        <Loading />
      ) : lines.isError ? (
        <ErrorState error={lines.error} />
      ) : (
        <ul className="plain">
          {lines.data.data.map((o) => {
            const reason = failed[o.id];
            const error =
              reason !== undefined && reason.trim() === "" ? "Say why it failed." : lineError(o.id);
            return (
              <li key={o.id} data-testid="settle-line" data-payout-id={o.id}>
                <Checkbox
                  checked={reason !== undefined}
                  onChange={(on) => setFailed((f) => ({ ...f, [o.id]: on ? "" : undefined }))}
                  testid="settle-failed"
                >
                  {who(o)}: <Amount value={o.net_amount} currency={o.currency} /> failed
                </Checkbox>
                {reason !== undefined ? (
                  <>
                    <label htmlFor={`${ids}-${o.id}`}>Why {who(o)}'s payment failed</label>
                    <input
                      id={`${ids}-${o.id}`}
                      value={reason}
                      maxLength={1000}
                      onChange={(e) => setFailed((f) => ({ ...f, [o.id]: e.target.value }))}
                      aria-invalid={Boolean(error)}
                      aria-describedby={`${ids}-${o.id}-error`}
                      data-testid="settle-reason"
                    />
                    <FieldError id={`${ids}-${o.id}-error`} message={error} />
                  </>
                ) : null}
              </li>
            );
          })}
        </ul>
      )}
      <label htmlFor={`${ids}-ref`}>Provider's reference (optional)</label>
      <input
        id={`${ids}-ref`}
        value={reference}
        maxLength={200}
        onChange={(e) => setReference(e.target.value)}
        aria-invalid={Boolean(fieldError(settle.error, "reference"))}
        aria-describedby={`${ids}-ref-error`}
        data-testid="settle-reference"
      />
      <FieldError id={`${ids}-ref-error`} message={fieldError(settle.error, "reference")} />
      <button
        type="submit"
        className="primary"
        disabled={settle.isPending || missingReason}
        data-testid="settle-submit"
      >
        Settle the batch
      </button>
      <FormError message={linesClaim ? undefined : formError(settle.error, ["reference"])} />
    </form>
  );
}
