import { api } from "../api/admin.ts";
import type { QueuedRelease, ReviewPage } from "../api/types.ts";
import { Link } from "../router.tsx";
import { Empty, ErrorState, Loading, Page, Pager, Status, TableWrap, When } from "../ui/common.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** The releases waiting for review, oldest first, with the queue's counts. */
export function ReviewQueue() {
  const page = useCursorPage<QueuedRelease, ReviewPage>("reviews", api.reviews, {}, 50, 30_000);
  const counts = page.data?.counts;
  return (
    <Page title="Review queue" testid="page-review-queue">
      {counts ? (
        <ul className="counts" aria-label="Counts" data-testid="review-counts">
          {Object.entries(counts).map(([key, n]) => (
            <li key={key} data-testid={`review-count-${key}`}>
              <span className="count">{n.toLocaleString()}</span> {key.replace(/_/g, " ")}
            </li>
          ))}
        </ul>
      ) : null}
      {page.isPending ? (
        <Loading />
      ) : page.isError ? (
        <ErrorState error={page.error} onRetry={() => page.refetch()} />
      ) : page.rows.length === 0 ? (
        <Empty>Nothing waits for review.</Empty>
      ) : (
        <>
          <TableWrap label="Review queue">
            <table data-testid="review-queue-table">
              <caption className="sr-only">
                Releases waiting for review, oldest first (page {page.pageNumber})
              </caption>
              <thead>
                <tr>
                  <th scope="col">Release</th>
                  <th scope="col">Artist</th>
                  <th scope="col">Status</th>
                  <th scope="col">Submitted</th>
                  <th scope="col">Checks</th>
                </tr>
              </thead>
              <tbody>
                {page.rows.map((r) => (
                  <tr key={r.id} data-testid="review-row" data-release-id={r.id}>
                    <td>
                      <Link to={`/reviews/${r.id}`} data-testid="review-open">
                        {r.title || "(untitled)"}
                      </Link>
                    </td>
                    <td>{r.artist_name ?? "—"}</td>
                    <td>
                      <Status value={r.status} />
                    </td>
                    <td>
                      <When at={r.submitted_at} />
                    </td>
                    <td>
                      {r.problems && r.problems.length > 0 ? (
                        <span className="warn">{r.problems.length} problem(s)</span>
                      ) : (
                        <span className="ok">pass</span>
                      )}
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
