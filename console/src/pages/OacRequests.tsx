import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState } from "react";
import { api } from "../api/admin.ts";
import type { OacRequest } from "../api/types.ts";
import { useLocation } from "../router.tsx";
import { ErrorState, Page, Status, When } from "../ui/common.tsx";
import { SearchSelect } from "../ui/filters.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** Official Artist Channel requests: the open ones to decide, the decided ones by status. */
export default function OacRequests() {
  const { search } = useLocation();
  const status = search.get("status") ?? "";
  const page = useCursorPage<OacRequest>("oac", api.oacRequests, { status: status || undefined }, 50);
  return (
    <Page title="OAC requests" testid="page-oac">
      <div className="filters">
        <SearchSelect
          label="Show"
          param="status"
          value={status}
          choices={[
            ["", "waiting for a decision"],
            "requested",
            "processing",
            "approved",
            "rejected",
            "cancelled",
          ]}
          testid="oac-filter-status"
        />
      </div>
      <PagedTable
        page={page}
        label="OAC requests"
        testid="oac-table"
        empty="No requests."
        columns={["Artist", "Store", "Channel", "Status", "Asked", "Decision"]}
        row={(o) => <OacRow key={o.id} request={o} />}
      />
    </Page>
  );
}

function OacRow({ request }: { request: OacRequest }) {
  const client = useQueryClient();
  const [reason, setReason] = useState("");
  const ids = useId();
  const done = () => client.invalidateQueries({ queryKey: ["oac"] });
  const approve = useMutation({ mutationFn: () => api.approveOac(request.id), onSuccess: done });
  const reject = useMutation({ mutationFn: () => api.rejectOac(request.id, reason.trim()), onSuccess: done });
  const open = request.status === "requested";
  return (
    <tr data-testid="oac-row" data-oac-id={request.id}>
      <td>{request.artist_name ?? request.artist_id}</td>
      <td>{request.store}</td>
      <td>
        {request.channel_url ? (
          <a href={request.channel_url} rel="noreferrer noopener" target="_blank">
            {request.channel_url}
          </a>
        ) : (
          "—"
        )}
      </td>
      <td>
        <Status value={approve.data?.status ?? reject.data?.status ?? request.status} />
      </td>
      <td>
        <When at={request.created_at} />
      </td>
      <td>
        {open && !approve.isSuccess && !reject.isSuccess ? (
          <div className="page-actions">
            <button
              type="button"
              className="approve"
              onClick={() => approve.mutate()}
              disabled={approve.isPending}
              data-testid="oac-approve"
            >
              Approve
            </button>
            <label htmlFor={`${ids}-r`} className="sr-only">
              Reason for rejecting
            </label>
            <input
              id={`${ids}-r`}
              placeholder="reason to reject"
              value={reason}
              onChange={(e) => setReason(e.target.value)}
              data-testid="oac-reject-reason"
            />
            <button
              type="button"
              className="reject"
              onClick={() => reject.mutate()}
              disabled={!reason.trim() || reject.isPending}
              data-testid="oac-reject"
            >
              Reject
            </button>
          </div>
        ) : (
          <span>{String(request.status_reason ?? reject.data?.status_reason ?? "")}</span>
        )}
        {approve.isError ? <ErrorState error={approve.error} /> : null}
        {reject.isError ? <ErrorState error={reject.error} /> : null}
      </td>
    </tr>
  );
}
