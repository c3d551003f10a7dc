import { keepPreviousData, type QueryClient, useQuery } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import type { Params } from "../api/admin.ts";
import type { Page } from "../api/types.ts";

function pageKey(key: string, filters: Params, after: string | undefined, limit: number) {
  return [key, filters, after ?? null, limit];
}

/** The query of a list's first page: the same cache entry useCursorPage reads for it. */
export function firstPageQuery<P>(key: string, fetchPage: (params: Params) => Promise<P>, limit = 50) {
  return { queryKey: pageKey(key, {}, undefined, limit), queryFn: () => fetchPage({ limit }) };
}

/**
 * Asks for the first page of a list before its page is drawn, so that it travels beside other
 * requests instead of after them.
 */
export function prefetchFirstPage<P>(
  client: QueryClient,
  key: string,
  fetchPage: (params: Params) => Promise<P>,
  limit = 50,
): void {
  void client.prefetchQuery(firstPageQuery(key, fetchPage, limit));
}

/**
 * One cursor page of an /admin/v1 list (`limit`, `starting_after`): Next follows the last row's
 * id, Previous goes back along the cursors seen. Filters reset it to the first page.
 */
export function useCursorPage<T extends { id: string }, P extends Page<T> = Page<T>>(
  key: string,
  fetchPage: (params: Params) => Promise<P>,
  filters: Params = {},
  limit = 50,
  refetchInterval: number | false = false,
) {
  const [cursors, setCursors] = useState<string[]>([]);
  const filterKey = JSON.stringify(filters);
  // biome-ignore lint/correctness/useExhaustiveDependencies: a new filter starts at the first page
  useEffect(() => setCursors([]), [filterKey]);
  const after = cursors[cursors.length - 1];
  const result = useQuery({
    queryKey: pageKey(key, filters, after, limit),
    queryFn: () => fetchPage({ ...filters, limit, starting_after: after }),
    placeholderData: keepPreviousData,
    refetchInterval,
  });
  const rows = result.data?.data ?? [];
  return {
    ...result,
    rows,
    pageNumber: cursors.length + 1,
    pager: {
      hasMore: Boolean(result.data?.has_more),
      canGoBack: cursors.length > 0,
      busy: result.isFetching,
      onNext: () => {
        const last = rows[rows.length - 1];
        if (last) setCursors((c) => [...c, last.id]);
      },
      onPrevious: () => setCursors((c) => c.slice(0, -1)),
    },
  };
}
