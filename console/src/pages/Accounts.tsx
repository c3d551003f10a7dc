import { api } from "../api/admin.ts";
import type { AccountDetail } from "../api/types.ts";
import { Link } from "../router.tsx";
import { Empty, ErrorState, Loading, Page, Pager, TableWrap, When } from "../ui/common.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** The tenant's accounts (labels, artists' companies). */
export default function Accounts() {
  const page = useCursorPage<AccountDetail>("accounts", api.accounts, {}, 50);
  return (
    <Page title="Accounts" testid="page-accounts">
      {page.isPending ? (
        <Loading />
      ) : page.isError ? (
        <ErrorState error={page.error} onRetry={() => page.refetch()} />
      ) : page.rows.length === 0 ? (
        <Empty>No accounts yet.</Empty>
      ) : (
        <>
          <TableWrap label="Accounts">
            <table data-testid="accounts-table">
              <thead>
                <tr>
                  <th scope="col">Account</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Id</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {page.rows.map((a) => (
                  <tr key={a.id} data-testid="account-row" data-account-id={a.id}>
                    <td>
                      <Link to={`/accounts/${a.id}`} data-testid="account-open">
                        {a.name ?? a.id}
                      </Link>
                    </td>
                    <td>
                      {a.kind ?? "—"}
                      {a.is_sandbox ? <span className="muted"> (sandbox)</span> : null}
                    </td>
                    <td>
                      <code>{a.id}</code>
                    </td>
                    <td>
                      <When at={a.created_at} />
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
