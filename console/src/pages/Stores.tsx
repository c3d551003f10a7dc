import { useQuery } from "@tanstack/react-query";
import { api } from "../api/admin.ts";
import { Link } from "../router.tsx";
import { Empty, ErrorState, Loading, Page, TableWrap } from "../ui/common.tsx";

/** The installation's stores, in display order (platform admins configure them; operators read them). */
export default function Stores() {
  const stores = useQuery({ queryKey: ["stores"], queryFn: api.stores });
  return (
    <Page title="Stores" testid="page-stores">
      {stores.isPending ? (
        <Loading />
      ) : stores.isError ? (
        <ErrorState error={stores.error} onRetry={() => stores.refetch()} />
      ) : stores.data.data.length === 0 ? (
        <Empty>No stores.</Empty>
      ) : (
        <TableWrap label="Stores">
          <table data-testid="stores-table">
            <thead>
              <tr>
                <th scope="col">Store</th>
                <th scope="col">Code</th>
                <th scope="col">Kind</th>
                <th scope="col">Adapter</th>
                <th scope="col">Enabled</th>
                <th scope="col">OAC</th>
              </tr>
            </thead>
            <tbody>
              {stores.data.data.map((s) => (
                <tr key={s.code} data-testid="store-row" data-store-code={s.code}>
                  <td>
                    <Link to={`/stores/${encodeURIComponent(s.code)}`} data-testid="store-open">
                      {s.name ?? s.code}
                    </Link>
                  </td>
                  <td>
                    <code>{s.code}</code>
                  </td>
                  <td>{s.kind ?? "—"}</td>
                  <td>{s.adapter ?? "—"}</td>
                  <td>{s.enabled === undefined ? "—" : s.enabled ? "yes" : "no"}</td>
                  <td>{s.offers_oac === undefined ? "—" : s.offers_oac ? "yes" : "no"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </Page>
  );
}
