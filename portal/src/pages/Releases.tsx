import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { Empty, Loading, Pager, Status, TableWrap, When } from "../../../ui-shared/common.tsx";
import { Link, setSearch, useLocation } from "../../../ui-shared/router.tsx";
import { type Account, canEdit, PAGE_SIZE } from "../api/portal.ts";
import { ErrorState, Notice, Page } from "../ui.tsx";
import { releasesQuery } from "./release/queries.ts";

/**
 * The current account's releases, newest first, a page of 25 at a time (`?page=2`: the URL is
 * the state, Back works); the list is never counted. A viewer is offered no "New release".
 */
export function Releases({ account }: { account: Account | undefined }) {
  const { search } = useLocation();
  const page = Math.max(1, Number.parseInt(search.get("page") ?? "1", 10) || 1);
  const from = (page - 1) * PAGE_SIZE;
  const list = useQuery({
    ...releasesQuery(account?.id ?? "", from),
    enabled: Boolean(account),
    placeholderData: keepPreviousData,
  });
  const editable = canEdit(account?.role);
  const newButton =
    account && editable ? (
      <Link to="/releases/new" className="button" data-testid="release-new">
        New release
      </Link>
    ) : null;

  if (!account)
    return (
      <Page title="Releases" testid="page-releases">
        <Empty>
          <span data-testid="no-account">
            You are not a member of any account yet. When a label or artist invites you, their releases show
            here; ask them to send you an invitation.
          </span>
        </Empty>
      </Page>
    );

  return (
    <Page title="Releases" testid="page-releases" actions={newButton}>
      {search.get("welcome") ? (
        <Notice testid="password-saved">Your password is saved. Next time, sign in with it.</Notice>
      ) : null}
      <p className="muted" data-testid="releases-of">
        {account.name} · your role: {account.role}
      </p>
      {list.isPending ? (
        <Loading />
      ) : list.isError ? (
        <ErrorState error={list.error} onRetry={() => list.refetch()} />
      ) : list.data.rows.length === 0 && page === 1 ? (
        <Empty>
          <span data-testid="releases-empty">
            {editable
              ? "No releases yet. Start with “New release”: give it a title and the artist's name, and add the rest as you go."
              : `No releases yet. When someone at ${account.name} adds one, it shows here.`}
          </span>
        </Empty>
      ) : (
        <>
          <TableWrap label="Releases">
            <table data-testid="releases-table">
              <caption className="sr-only">Releases of {account.name}, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Title</th>
                  <th scope="col">Artist</th>
                  <th scope="col">Status</th>
                  <th scope="col">Release date</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {list.data.rows.map((r) => (
                  <tr key={r.id} data-testid="release-row" data-release-id={r.id}>
                    <td>
                      <Link to={`/releases/${r.id}`} data-testid="release-open">
                        {r.title}
                        {r.version ? ` (${r.version})` : ""}
                      </Link>
                    </td>
                    <td>{r.artist_profiles?.name ?? r.artist_name ?? "—"}</td>
                    <td>
                      <Status value={r.status} />
                    </td>
                    <td>{r.release_date ?? <span className="muted">not set</span>}</td>
                    <td>
                      <When at={r.created_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <Pager
            hasMore={list.data.hasMore}
            canGoBack={page > 1}
            busy={list.isFetching}
            onNext={() => setSearch({ page: String(page + 1), welcome: undefined })}
            onPrevious={() =>
              setSearch({ page: page > 2 ? String(page - 1) : undefined, welcome: undefined })
            }
          />
        </>
      )}
    </Page>
  );
}
