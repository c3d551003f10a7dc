import type { ReactNode } from "react";
import { Empty, ErrorState, Loading, Pager, TableWrap } from "./common.tsx";
import type { useCursorPage } from "./paging.ts";

type CursorPage<T extends { id: string }> = Pick<
  ReturnType<typeof useCursorPage<T>>,
  "isPending" | "isError" | "error" | "refetch" | "rows" | "pager"
>;

/**
 * One cursor page of a list as a table: loading, the error with a retry, the empty text, or the
 * table (in a keyboard-scrollable region) and its Previous/Next pager.
 */
export function PagedTable<T extends { id: string }>({
  page,
  label,
  testid,
  empty,
  caption,
  columns,
  row,
  cards = false,
}: {
  page: CursorPage<T>;
  /** The scrollable region's accessible name. */
  label: string;
  /** The table's data-testid. */
  testid: string;
  /** What the page says when there is no row. */
  empty: ReactNode;
  caption?: ReactNode;
  /** The column headings, in order. */
  columns: ReactNode[];
  row: (item: T) => ReactNode;
  /**
   * On a phone, one card per row (table.cards in styles.css): every cell on its own line, named by
   * its `data-label`, so no column is off-screen. The rows' cells must carry data-label.
   */
  cards?: boolean;
}) {
  if (page.isPending) return <Loading />;
  if (page.isError) return <ErrorState error={page.error} onRetry={() => page.refetch()} />;
  if (page.rows.length === 0) return <Empty>{empty}</Empty>;
  return (
    <>
      <TableWrap label={label}>
        <table data-testid={testid} className={cards ? "cards" : undefined}>
          {caption ? <caption className="sr-only">{caption}</caption> : null}
          <thead>
            <tr>
              {columns.map((c, i) => (
                // biome-ignore lint/suspicious/noArrayIndexKey: a fixed list of headings
                <th key={i} scope="col">
                  {c}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>{page.rows.map(row)}</tbody>
        </table>
      </TableWrap>
      <Pager {...page.pager} />
    </>
  );
}

/** The heading of a column of buttons: read by screen readers, not shown. */
export const ACTIONS_COLUMN = <span className="sr-only">Actions</span>;
