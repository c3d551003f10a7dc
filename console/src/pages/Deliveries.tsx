import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId } from "react";
import { api } from "../api/admin.ts";
import type { Delivery } from "../api/types.ts";
import { Link, setSearch, useLocation } from "../router.tsx";
import { ErrorState, Page, Status, When } from "../ui/common.tsx";
import { ACTIONS_COLUMN, PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

export const DELIVERY_STATUSES = [
  "error",
  "pending",
  "in_progress",
  "delivered",
  "live",
  "takedown_sent",
  "taken_down",
];

/** Every delivery of the tenant, `error` first; filter by status, store or release. */
export default function Deliveries() {
  const { search } = useLocation();
  const filters = {
    status: search.get("status") ?? undefined,
    store: search.get("store") ?? undefined,
    release_id: search.get("release_id") ?? undefined,
  };
  const page = useCursorPage<Delivery>("deliveries", api.deliveries, filters, 50);
  const client = useQueryClient();
  const retry = useMutation({
    mutationFn: (releaseId: string) => api.retryRelease(releaseId),
    onSuccess: () => client.invalidateQueries({ queryKey: ["deliveries"] }),
  });
  const ids = useId();
  const stores = useQuery({ queryKey: ["stores"], queryFn: api.stores, staleTime: 300_000, retry: false });
  return (
    <Page title="Deliveries" testid="page-deliveries">
      <form className="filters" aria-label="Filter deliveries" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label htmlFor={`${ids}-status`}>Status</label>
          <select
            id={`${ids}-status`}
            value={filters.status ?? ""}
            onChange={(e) => setSearch({ status: e.target.value }, { replace: true })}
            data-testid="deliveries-filter-status"
          >
            <option value="">any (errors first)</option>
            {DELIVERY_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s.replace(/_/g, " ")}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor={`${ids}-store`}>Store</label>
          {stores.data ? (
            <select
              id={`${ids}-store`}
              value={filters.store ?? ""}
              onChange={(e) => setSearch({ store: e.target.value }, { replace: true })}
              data-testid="deliveries-filter-store"
            >
              <option value="">any</option>
              {stores.data.data.map((st) => (
                <option key={st.code} value={st.code}>
                  {st.name ?? st.code}
                </option>
              ))}
            </select>
          ) : (
            <input
              id={`${ids}-store`}
              defaultValue={filters.store ?? ""}
              placeholder="store code"
              onBlur={(e) => setSearch({ store: e.target.value.trim() }, { replace: true })}
              onKeyDown={(e) => {
                if (e.key === "Enter") setSearch({ store: e.currentTarget.value.trim() }, { replace: true });
              }}
              data-testid="deliveries-filter-store"
            />
          )}
        </div>
        <div>
          <label htmlFor={`${ids}-release`}>Release id</label>
          <input
            id={`${ids}-release`}
            defaultValue={filters.release_id ?? ""}
            onBlur={(e) => setSearch({ release_id: e.target.value.trim() }, { replace: true })}
            onKeyDown={(e) => {
              if (e.key === "Enter")
                setSearch({ release_id: e.currentTarget.value.trim() }, { replace: true });
            }}
            data-testid="deliveries-filter-release"
          />
        </div>
      </form>
      {retry.isError ? <ErrorState error={retry.error} /> : null}
      {retry.isSuccess ? (
        <p role="status" data-testid="deliveries-retried">
          {retry.data.retried} deliver{retry.data.retried === 1 ? "y" : "ies"} queued again.
        </p>
      ) : null}
      <PagedTable
        page={page}
        label="Deliveries"
        testid="deliveries-table"
        empty="No deliveries match."
        columns={["Release", "Store", "Action", "Status", "Attempts", "Message", "Updated", ACTIONS_COLUMN]}
        row={(d) => (
          <tr
            key={d.id}
            data-testid="delivery-row"
            data-delivery-id={d.id}
            data-release-id={d.release?.id}
            data-status={d.status}
          >
            <td>
              <Link to={`/deliveries/${d.id}`} data-testid="delivery-open">
                {d.release?.title ?? d.release?.id ?? d.id}
              </Link>
              {d.release?.artist_name ? <div className="muted">{d.release.artist_name}</div> : null}
            </td>
            <td>{d.store}</td>
            <td>{d.action ?? "—"}</td>
            <td>
              <Status value={d.status} />
            </td>
            <td>{d.attempts ?? "—"}</td>
            <td>{typeof d.message === "string" ? d.message : ""}</td>
            <td>
              <When at={d.updated_at ?? d.created_at} />
            </td>
            <td>
              {d.status === "error" && d.release ? (
                <button
                  type="button"
                  onClick={() => retry.mutate((d.release as { id: string }).id)}
                  disabled={retry.isPending}
                  data-testid="delivery-retry"
                >
                  Retry
                </button>
              ) : null}
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
