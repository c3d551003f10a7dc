import type { QueryClient } from "@tanstack/react-query";
import { getRelease, listReleases } from "../../api/portal.ts";
import { getApiRelease, getProblems, getRules } from "../../api/public.ts";

/**
 * The queries of the releases' pages, one definition each, so that the shell can start them all
 * at once (prefetchPage) instead of each page asking only once the one before it has answered.
 */
export const releaseQuery = (id: string) => ({ queryKey: ["release", id], queryFn: () => getRelease(id) });
export const rulesQuery = (accountId: string) => ({
  queryKey: ["rules", accountId],
  queryFn: () => getRules(accountId),
  staleTime: 600_000,
});
export const apiReleaseQuery = (accountId: string, id: string) => ({
  queryKey: ["api-release", id],
  queryFn: () => getApiRelease(accountId, id),
});
export const problemsQuery = (accountId: string, id: string) => ({
  queryKey: ["problems", id],
  queryFn: () => getProblems(accountId, id),
});
export const releasesQuery = (accountId: string, from: number) => ({
  queryKey: ["releases", accountId, from],
  queryFn: () => listReleases(accountId, from),
});

/**
 * Starts what the page at `path` will ask for, beside the member's accounts: a release's row,
 * and — for the account the browser remembers, the one the page will most likely show — the
 * rules, the release through the public API and its completeness list; or the first page of
 * releases. A guess that turns out wrong (another account) costs one request, nothing shown.
 */
export function prefetchPage(client: QueryClient, path: string, accountId: string | null): void {
  const release = /^\/releases\/([0-9a-f-]{36})$/i.exec(path)?.[1];
  if (release) {
    void client.prefetchQuery(releaseQuery(release));
    if (accountId) {
      void client.prefetchQuery(rulesQuery(accountId));
      void client.prefetchQuery(apiReleaseQuery(accountId, release));
      void client.prefetchQuery(problemsQuery(accountId, release));
    }
  } else if ((path === "/releases" || path === "/") && accountId) {
    void client.prefetchQuery(releasesQuery(accountId, 0));
  }
}
