import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId } from "react";
import { api } from "../api/admin.ts";
import type { Delivery } from "../api/types.ts";
import { Link, useLocation } from "../router.tsx";
import { ErrorState, Page, Status, When } from "../ui/common.tsx";
import { SearchSelect, SearchSelectInput, SearchText } from "../ui/filters.tsx";
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
        <SearchSelect
          label="Status"
          param="status"
          value={filters.status ?? ""}
          choices={[
            ["", "any (errors first)"],
            ...DELIVERY_STATUSES.map((s) => [s, s.replace(/_/g, " ")] as const),
          ]}
          testid="deliveries-filter-status"
        />
        <div>
          <label htmlFor={`${ids}-store`}>Store</label>
          {stores.data ? (
            <SearchSelectInput
              id={`${ids}-store`}
              param="store"
              value={filters.store ?? ""}
              choices={[["", "any"], ...stores.data.data.map((st) => [st.code, st.name ?? st.code] as const)]}
              testid="deliveries-filter-store"
            />
          ) : (
            <SearchText
              id={`${ids}-store`}
              param="store"
              value={filters.store ?? ""}
              placeholder="store code"
              testid="deliveries-filter-store"
            />
          )}
        </div>
        <div>
          <label htmlFor={`${ids}-release`}>Release id</label>
          <SearchText
            id={`${ids}-release`}
            param="release_id"
            value={filters.release_id ?? ""}
            testid="deliveries-filter-release"
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
        cards
        // The store's message beside the status: on a phone the two that say what is wrong come first.
        columns={["Release", "Status", "Message", "Store", "Action", "Attempts", "Updated", ACTIONS_COLUMN]}
        row={(d) => (
          <tr
            key={d.id}
            data-testid="delivery-row"
            data-delivery-id={d.id}
            data-release-id={d.release?.id}
            data-status={d.status}
          >
            <th scope="row">
              <Link to={`/deliveries/${d.id}`} data-testid="delivery-open">
                {d.release?.title ?? d.release?.id ?? d.id}
              </Link>
              {d.release?.artist_name ? <div className="muted">{d.release.artist_name}</div> : null}
            </th>
            <td data-label="Status">
              <Status value={d.status} />
            </td>
            <td data-label="Message" data-testid="delivery-message">
              {typeof d.message === "string" ? d.message : ""}
            </td>
            <td data-label="Store">{d.store}</td>
            <td data-label="Action">{d.action ?? "—"}</td>
            <td data-label="Attempts">{d.attempts ?? "—"}</td>
            <td data-label="Updated">
              <When at={d.updated_at ?? d.created_at} />
            </td>
            <td className="actions">
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
