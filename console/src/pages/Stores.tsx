import { api } from "../api/admin.ts";
import type { Store } from "../api/types.ts";
import { Link } from "../router.tsx";
import { Empty, ErrorState, Loading, Page, Pager } from "../ui/common.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** The installation's stores (platform admins configure them; a tenant's operators read them). */
export default function Stores() {
  const page = useCursorPage<Store>("stores", api.stores, {}, 100);
  return (
    <Page title="Stores" testid="page-stores">
      {page.isPending ? (
        <Loading />
      ) : page.isError ? (
        <ErrorState error={page.error} onRetry={() => page.refetch()} />
      ) : page.rows.length === 0 ? (
        <Empty>No stores.</Empty>
      ) : (
        <>
          <div className="table-wrap">
            <table data-testid="stores-table">
              <thead>
                <tr>
                  <th scope="col">Store</th>
                  <th scope="col">Code</th>
                  <th scope="col">Adapter</th>
                  <th scope="col">Enabled</th>
                </tr>
              </thead>
              <tbody>
                {page.rows.map((s) => (
                  <tr key={s.id} data-testid="store-row" data-store-id={s.id}>
                    <td>
                      <Link to={`/stores/${s.id}`} data-testid="store-open">
                        {s.name ?? s.code ?? s.id}
                      </Link>
                    </td>
                    <td>
                      <code>{s.code ?? "—"}</code>
                    </td>
                    <td>{s.adapter ?? "—"}</td>
                    <td>{s.enabled === undefined ? "—" : s.enabled ? "yes" : "no"}</td>
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
