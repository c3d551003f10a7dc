import { api } from "../api/admin.ts";
import type { TakedownRequest } from "../api/types.ts";
import { Link, useLocation } from "../router.tsx";
import { Page, Status, When } from "../ui/common.tsx";
import { SearchSelect } from "../ui/filters.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** Takedown requests and where each store stands (they run by themselves; this page only shows). */
export default function Takedowns() {
  const { search } = useLocation();
  const status = search.get("status") ?? "";
  const page = useCursorPage<TakedownRequest>(
    "takedowns",
    api.takedowns,
    { status: status || undefined },
    50,
  );
  return (
    <Page title="Takedowns" testid="page-takedowns">
      <div className="filters">
        <SearchSelect
          label="Status"
          param="status"
          value={status}
          choices={[["", "any"], "pending", "processing", "completed", "rejected", "cancelled"]}
          testid="takedowns-filter-status"
        />
      </div>
      <PagedTable
        page={page}
        label="Takedowns"
        testid="takedowns-table"
        empty="No takedown requests."
        cards
        // Where each store stands is what this page is for: beside the release, not last.
        columns={["Release", "Per store", "Status", "Reason", "Requested"]}
        row={(t) => (
          <tr key={t.id} data-testid="takedown-row">
            <th scope="row">
              {t.release ? (
                <Link to={`/deliveries?release_id=${encodeURIComponent(t.release.id)}`}>
                  {t.release.title ?? t.release.id}
                </Link>
              ) : (
                "—"
              )}
              {t.release?.artist_name ? <div className="muted">{t.release.artist_name}</div> : null}
            </th>
            <td data-label="Per store">
              {(t.stores ?? []).map((s) => (
                <div key={s.store} data-testid="takedown-store">
                  {s.store}: <Status value={s.status} />{" "}
                  {s.taken_down_at ? (
                    <span className="muted">
                      <When at={s.taken_down_at} />
                    </span>
                  ) : null}
                </div>
              ))}
            </td>
            <td data-label="Status">
              <Status value={t.status} />
            </td>
            <td data-label="Reason">
              {t.reason ?? ""}
              {t.status_reason ? <div className="muted">{t.status_reason}</div> : null}
            </td>
            <td data-label="Requested">
              <When at={t.created_at} />
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
