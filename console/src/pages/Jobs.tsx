import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../api/admin.ts";
import type { Job } from "../api/types.ts";
import { useLocation } from "../router.tsx";
import { ErrorState, Page, Status, When } from "../ui/common.tsx";
import { SearchSelect } from "../ui/filters.tsx";
import { ACTIONS_COLUMN, PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** Background jobs: the dead ones with their last error (retry them), queued, running. */
export default function Jobs() {
  const { search } = useLocation();
  const state = search.get("state") ?? "dead";
  const page = useCursorPage<Job>("jobs", api.jobs, { state }, 50);
  const client = useQueryClient();
  const retry = useMutation({
    mutationFn: (id: string) => api.retryJob(id),
    onSuccess: () => client.invalidateQueries({ queryKey: ["jobs"] }),
  });
  return (
    <Page title="Jobs" testid="page-jobs">
      <div className="filters">
        <SearchSelect
          label="State"
          param="state"
          value={state}
          choices={["dead", "queued", "running", "succeeded"]}
          testid="jobs-filter-state"
        />
      </div>
      {retry.isError ? <ErrorState error={retry.error} /> : null}
      <PagedTable
        page={page}
        label="Jobs"
        testid="jobs-table"
        empty={<>No {state} jobs.</>}
        cards
        columns={["Job", "State", "Attempts", "Last error", "Updated", ACTIONS_COLUMN]}
        row={(j) => (
          <tr key={j.id} data-testid="job-row" data-job-id={j.id}>
            <th scope="row">
              <strong>{j.kind ?? "job"}</strong>
              <div className="muted">
                <code>{j.id}</code>
              </div>
            </th>
            <td data-label="State">
              <Status value={j.status} />
            </td>
            <td data-label="Attempts">
              {j.attempts ?? "—"}
              {j.max_attempts ? ` / ${j.max_attempts}` : ""}
            </td>
            <td data-label="Last error">
              <code className="pre-wrap">{j.last_error ?? ""}</code>
              {j.payload ? (
                <details>
                  <summary>Payload</summary>
                  <pre>{JSON.stringify(j.payload, null, 2)}</pre>
                </details>
              ) : null}
            </td>
            <td data-label="Updated">
              <When at={j.updated_at ?? j.created_at} />
            </td>
            <td className="actions">
              {j.status === "dead" ? (
                <button
                  type="button"
                  onClick={() => retry.mutate(j.id)}
                  disabled={retry.isPending}
                  data-testid="job-retry"
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
