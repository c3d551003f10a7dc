import { api } from "../api/admin.ts";
import type { AccountDetail } from "../api/types.ts";
import { Link } from "../router.tsx";
import { Page, When } from "../ui/common.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** The tenant's accounts (labels, artists' companies). */
export default function Accounts() {
  const page = useCursorPage<AccountDetail>("accounts", api.accounts, {}, 50);
  return (
    <Page title="Accounts" testid="page-accounts">
      <PagedTable
        page={page}
        label="Accounts"
        testid="accounts-table"
        empty="No accounts yet."
        columns={["Account", "Kind", "Id", "Created"]}
        row={(a) => (
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
        )}
      />
    </Page>
  );
}
