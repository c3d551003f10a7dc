import { useId } from "react";
import { api } from "../api/admin.ts";
import type { TakedownRequest } from "../api/types.ts";
import { Link, setSearch, useLocation } from "../router.tsx";
import { Empty, ErrorState, Loading, Page, Pager, Status, TableWrap, When } from "../ui/common.tsx";
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
  const ids = useId();
  return (
    <Page title="Takedowns" testid="page-takedowns">
      <div className="filters">
        <div>
          <label htmlFor={`${ids}-s`}>Status</label>
          <select
            id={`${ids}-s`}
            value={status}
            onChange={(e) => setSearch({ status: e.target.value }, { replace: true })}
            data-testid="takedowns-filter-status"
          >
            <option value="">any</option>
            {["pending", "processing", "completed", "rejected", "cancelled"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
      </div>
      {page.isPending ? (
        <Loading />
      ) : page.isError ? (
        <ErrorState error={page.error} onRetry={() => page.refetch()} />
      ) : page.rows.length === 0 ? (
        <Empty>No takedown requests.</Empty>
      ) : (
        <>
          <TableWrap label="Takedowns">
            <table data-testid="takedowns-table">
              <thead>
                <tr>
                  <th scope="col">Release</th>
                  <th scope="col">Status</th>
                  <th scope="col">Reason</th>
                  <th scope="col">Requested</th>
                  <th scope="col">Per store</th>
                </tr>
              </thead>
              <tbody>
                {page.rows.map((t) => (
                  <tr key={t.id} data-testid="takedown-row">
                    <td>
                      {t.release ? (
                        <Link to={`/deliveries?release_id=${encodeURIComponent(t.release.id)}`}>
                          {t.release.title ?? t.release.id}
                        </Link>
                      ) : (
                        "—"
                      )}
                      {t.release?.artist_name ? <div className="muted">{t.release.artist_name}</div> : null}
                    </td>
                    <td>
                      <Status value={t.status} />
                    </td>
                    <td>
                      {t.reason ?? ""}
                      {t.status_reason ? <div className="muted">{t.status_reason}</div> : null}
                    </td>
                    <td>
                      <When at={t.created_at} />
                    </td>
                    <td>
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
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <Pager {...page.pager} />
        </>
      )}
    </Page>
  );
}
