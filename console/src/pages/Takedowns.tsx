import { api } from "../api/admin.ts";
import type { TakedownRequest } from "../api/types.ts";
import { Link } from "../router.tsx";
import { Empty, ErrorState, Loading, Page, Pager, Status, When } from "../ui/common.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** Takedown requests and where each store stands (they run by themselves; this page only shows). */
export default function Takedowns() {
  const page = useCursorPage<TakedownRequest>("takedowns", api.takedowns, {}, 50);
  return (
    <Page title="Takedowns" testid="page-takedowns">
      {page.isPending ? (
        <Loading />
      ) : page.isError ? (
        <ErrorState error={page.error} onRetry={() => page.refetch()} />
      ) : page.rows.length === 0 ? (
        <Empty>No takedown requests.</Empty>
      ) : (
        <>
          <div className="table-wrap">
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
                      {t.release_id ? (
                        <Link to={`/deliveries?release_id=${encodeURIComponent(t.release_id)}`}>
                          {t.release_title ?? t.release_id}
                        </Link>
                      ) : (
                        "—"
                      )}
                    </td>
                    <td>
                      <Status value={t.status} />
                    </td>
                    <td>{t.reason ?? ""}</td>
                    <td>
                      <When at={t.created_at} />
                    </td>
                    <td>
                      {(t.stores ?? []).map((s) => (
                        <div key={s.store}>
                          {s.store}: <Status value={s.status} />
                        </div>
                      ))}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager {...page.pager} />
        </>
      )}
    </Page>
  );
}
