import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { api } from "../api/admin.ts";
import type { AccountDetail } from "../api/types.ts";
import { Link, navigate } from "../router.tsx";
import { ErrorState, Page, When } from "../ui/common.tsx";
import { PagedTable } from "../ui/PagedTable.tsx";
import { useCursorPage } from "../ui/paging.ts";

/** The tenant's accounts (labels, artists' companies). */
export default function Accounts() {
  const page = useCursorPage<AccountDetail>("accounts", api.accounts, {}, 50);
  return (
    <Page title="Accounts" testid="page-accounts">
      <NewAccount />
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

/** Creates an account (POST /admin/v1/accounts) and opens it, to issue its keys. */
function NewAccount() {
  const ids = useId();
  const client = useQueryClient();
  const [name, setName] = useState("");
  const [kind, setKind] = useState<"label" | "artist">("label");
  const create = useMutation({
    mutationFn: () => api.createAccount({ name: name.trim(), kind }),
    onSuccess: (a) => {
      void client.invalidateQueries({ queryKey: ["accounts"] });
      navigate(`/accounts/${a.id}`);
    },
  });
  return (
    <details className="card" data-testid="account-new">
      <summary>New account</summary>
      <form
        className="filters"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          if (name.trim()) create.mutate();
        }}
      >
        <div>
          <label htmlFor={`${ids}-name`}>Name</label>
          <input
            id={`${ids}-name`}
            value={name}
            required
            maxLength={200}
            onChange={(e) => setName(e.target.value)}
            data-testid="account-new-name"
          />
        </div>
        <div>
          <label htmlFor={`${ids}-kind`}>Kind</label>
          <select
            id={`${ids}-kind`}
            value={kind}
            onChange={(e) => setKind(e.target.value as "label" | "artist")}
            data-testid="account-new-kind"
          >
            <option value="label">label</option>
            <option value="artist">artist</option>
          </select>
        </div>
        <div>
          <button
            type="submit"
            className="primary"
            disabled={!name.trim() || create.isPending}
            data-testid="account-new-submit"
          >
            Create
          </button>
        </div>
      </form>
      {create.isError ? <ErrorState error={create.error} /> : null}
    </details>
  );
}
