import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef } from "react";
import { Loading, TableWrap, When } from "../../../../ui-shared/common.tsx";
import { getReleaseStatus, type StoreDelivery } from "../../api/public.ts";
import { ErrorState } from "../../ui.tsx";
import { rulesQuery } from "./queries.ts";

/** Statuses after which nothing moves without someone acting: the page stops asking. */
const SETTLED = new Set(["draft", "pending", "rejected", "live", "taken_down"]);

const REVIEW: Record<string, string> = {
  not_submitted: "Not submitted yet",
  in_review: "In review",
  approved: "Approved",
  rejected: "Rejected",
};

const TAKEDOWN: Record<string, string> = {
  pending: "asked for",
  processing: "being removed from the stores",
  completed: "done",
  rejected: "refused by the platform",
  cancelled: "cancelled",
};

function storeStep(d: StoreDelivery): string {
  if (d.action === "takedown")
    return d.status === "taken_down"
      ? "Taken down"
      : d.status === "error"
        ? "Takedown failed: the platform retries"
        : "Being taken down";
  if (d.status === "live") return "Live";
  if (d.status === "delivered") return "Delivered, waiting for the store";
  if (d.status === "error") return "Delivery failed: the platform retries";
  return d.action === "update" ? "Correction being delivered" : "Being delivered";
}

/**
 * Where the release stands: submitted, review (approved, or rejected with the reason), then per
 * store delivered and live, with dates. Asked again every 5 seconds while something is moving.
 */
export function Timeline({ accountId, releaseId }: { accountId: string; releaseId: string }) {
  const client = useQueryClient();
  // The stores' names; their codes until the rules arrive (or if they cannot be read).
  const rules = useQuery(rulesQuery(accountId));
  const status = useQuery({
    queryKey: ["release-status", releaseId],
    queryFn: () => getReleaseStatus(accountId, releaseId),
    refetchInterval: (q) => (q.state.data && SETTLED.has(q.state.data.status) ? false : 5000),
  });
  // The rest of the page (its status, what may be done) follows when the status moves.
  const now = status.data?.status;
  const seen = useRef(now);
  useEffect(() => {
    // Only a change: the status first read is the one the page was drawn from.
    if (seen.current !== undefined && now !== seen.current)
      void client.invalidateQueries({ queryKey: ["release", releaseId] });
    seen.current = now;
  }, [now, client, releaseId]);
  if (status.isPending) return <Loading what="Loading the release's progress" />;
  if (status.isError) return <ErrorState error={status.error} onRetry={() => status.refetch()} />;
  const s = status.data;
  const storeName = (code: string) => rules.data?.stores.find((x) => x.code === code)?.name ?? code;
  const steps = new Map<string, number>();
  for (const d of s.stores) steps.set(storeStep(d), (steps.get(storeStep(d)) ?? 0) + 1);
  const summary = [...steps].map(([step, n]) => `${step.toLowerCase()}: ${n}`).join("; ");
  return (
    <section className="card" aria-labelledby="timeline-heading" data-testid="release-timeline">
      <h2 id="timeline-heading">Progress</h2>
      <ol className="timeline">
        <li className={s.submitted_at ? "done" : ""} data-testid="step-submitted">
          <strong>Submitted</strong> <When at={s.submitted_at} />
        </li>
        <li
          className={s.approval === "approved" ? "done" : s.approval === "rejected" ? "failed" : ""}
          data-testid="step-review"
        >
          <strong>Review:</strong> <span data-testid="review-state">{REVIEW[s.approval] ?? s.approval}</span>
          {s.rejection_reason ? (
            <p className="reason" data-testid="rejection-reason">
              The reviewer wrote: “{s.rejection_reason}” Fix it above, then submit again.
            </p>
          ) : null}
        </li>
        <li className={s.live || s.status === "taken_down" ? "done" : ""} data-testid="step-live">
          <strong>In the stores:</strong>{" "}
          {s.status === "taken_down"
            ? "taken down"
            : s.status === "takedown_requested"
              ? "being taken down"
              : s.live
                ? "live"
                : s.stores.length > 0
                  ? "on the way"
                  : "after approval"}
        </li>
      </ol>
      {s.takedown ? (
        <div className="takedown" data-testid="takedown-progress" data-status={s.takedown.status}>
          <h3>Takedown: {TAKEDOWN[s.takedown.status] ?? s.takedown.status}</h3>
          <p>
            Asked <When at={s.takedown.created_at} />
            {s.takedown.completed_at ? (
              <>
                ; every store confirmed by <When at={s.takedown.completed_at} />
              </>
            ) : null}
            . {s.takedown.stores.filter((x) => x.status === "taken_down").length} of{" "}
            {s.takedown.stores.length} stores have removed it.
          </p>
          {s.takedown.status_reason ? <p className="reason">{s.takedown.status_reason}</p> : null}
        </div>
      ) : null}
      {s.stores.length > 0 ? (
        <p data-testid="stores-summary">
          {s.stores.length} store{s.stores.length === 1 ? "" : "s"}.{" "}
          {summary.charAt(0).toUpperCase() + summary.slice(1)}.
        </p>
      ) : null}
      {s.stores.length > 0 ? (
        <TableWrap label="Stores">
          <table data-testid="store-deliveries">
            <thead>
              <tr>
                <th scope="col">Store</th>
                <th scope="col">Where it stands</th>
                <th scope="col">Delivered</th>
                <th scope="col">Live</th>
              </tr>
            </thead>
            <tbody>
              {s.stores.map((d) => (
                <tr key={d.store} data-testid="store-delivery" data-store={d.store}>
                  <td>{storeName(d.store)}</td>
                  <td>
                    <span data-testid="store-step">{storeStep(d)}</span>
                    {d.message && d.status === "error" ? <p className="reason">{d.message}</p> : null}
                  </td>
                  <td>
                    <When at={d.delivered_at} />
                  </td>
                  <td>
                    <When at={d.live_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </section>
  );
}
