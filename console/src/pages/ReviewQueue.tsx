import type { QueryClient } from "@tanstack/react-query";
import { api } from "../api/admin.ts";
import type { QueuedRelease, ReviewPage } from "../api/types.ts";
import { Link } from "../router.tsx";
import { Page, Status, When } from "../ui/common.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { firstPageQuery, prefetchFirstPage, useCursorPage } from "../ui/paging.ts";
import { SupportSummary } from "../ui/SupportSummary.tsx";

const KEY = "reviews";
const LIMIT = 50;

/** The queue's first page, asked for while the console still learns who is signed in. */
export function prefetchReviewQueue(client: QueryClient): void {
  prefetchFirstPage(client, KEY, api.reviews, LIMIT);
}

/** The queue's first page as a query of its own (the review page's j/k), the same cache entry as the list's. */
export const reviewQueueFirstPage = firstPageQuery(KEY, api.reviews, LIMIT);

/** The releases waiting for review, oldest first, with the queue's counts. */
export function ReviewQueue() {
  const page = useCursorPage<QueuedRelease, ReviewPage>(KEY, api.reviews, {}, LIMIT, 30_000);
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
      <SupportSummary />
      <PagedTable
        page={page}
        label="Review queue"
        testid="review-queue-table"
        empty="Nothing waits for review."
        caption={<>Releases waiting for review, oldest first (page {page.pageNumber})</>}
        columns={["Release", "Artist", "Status", "Submitted", "Checks"]}
        row={(r) => (
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
        )}
      />
    </Page>
  );
}
