import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { Link } from "../router.tsx";
import { Empty, ErrorState, Fields, Loading, Page, Status, TableWrap, When } from "../ui/common.tsx";

/** One account: its members, its open invitations and its API keys (names and prefixes, never secrets). */
export default function AccountPage({ id }: { id: string }) {
  const account = useQuery({ queryKey: ["account", id], queryFn: () => api.account(id) });
  const keys = useQuery({ queryKey: ["api-keys", id], queryFn: () => api.apiKeys(id) });
  const a = account.data;
  return (
    <Page
      title={a?.name ? `Account: ${a.name}` : "Account"}
      testid="page-account"
      actions={
        <Link to="/accounts" className="button-link">
          All accounts
        </Link>
      }
    >
      {account.isPending ? (
        <Loading />
      ) : account.isError ? (
        <ErrorState error={account.error} onRetry={() => account.refetch()} />
      ) : a ? (
        <div className="grid">
          <section className="card" aria-labelledby="a-h">
            <h2 id="a-h">Details</h2>
            <Fields record={a} omit={["members", "invitations", "counts"]} />
            {a.counts ? (
              <ul className="counts" data-testid="account-counts">
                {Object.entries(a.counts).map(([k, n]) => (
                  <li key={k}>
                    <span className="count">{n.toLocaleString()}</span> {k.replace(/_/g, " ")}
                  </li>
                ))}
              </ul>
            ) : null}
          </section>
          <section className="card" aria-labelledby="m-h" data-testid="account-members">
            <h2 id="m-h">Members</h2>
            {(a.members ?? []).length === 0 ? (
              <Empty>No members.</Empty>
            ) : (
              <ul>
                {(a.members ?? []).map((m) => (
                  <li key={m.user_id ?? m.email} data-testid="account-member">
                    {m.email ?? m.user_id} <span className="muted">{m.role}</span>{" "}
                    <span className="muted">
                      (last signed in <When at={m.last_sign_in_at} />)
                    </span>
                  </li>
                ))}
              </ul>
            )}
            <AddMember accountId={id} />
            <h2>Invitations</h2>
            {(a.invitations ?? []).length === 0 ? (
              <Empty>No open invitations.</Empty>
            ) : (
              <ul>
                {(a.invitations ?? []).map((i) => (
                  <li key={i.id ?? i.email} data-testid="account-invitation">
                    {i.email} <span className="muted">{i.role}</span> <When at={i.created_at} />
                  </li>
                ))}
              </ul>
            )}
          </section>
        </div>
      ) : null}
      <section className="card" aria-labelledby="k-h" data-testid="account-api-keys">
        <h2 id="k-h">API keys</h2>
        <IssueKey accountId={id} />
        {keys.isPending ? (
          <Loading />
        ) : keys.isError ? (
          <ErrorState error={keys.error} onRetry={() => keys.refetch()} />
        ) : keys.data.data.length === 0 ? (
          <Empty>No API keys.</Empty>
        ) : (
          <TableWrap label="API keys">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Prefix</th>
                  <th scope="col">Mode</th>
                  <th scope="col">Status</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Revoked</th>
                </tr>
              </thead>
              <tbody>
                {keys.data.data.map((k) => (
                  <tr key={k.id} data-testid="api-key-row">
                    <td>{k.name ?? k.id}</td>
                    <td>
                      <code>{k.prefix ?? "—"}</code>
                    </td>
                    <td>{k.mode ?? "—"}</td>
                    <td>
                      <Status value={k.status ?? (k.revoked_at ? "revoked" : "active")} />
                    </td>
                    <td>
                      <When at={k.created_at} />
                    </td>
                    <td>
                      <When at={k.last_used_at} />
                    </td>
                    <td>
                      <When at={k.revoked_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        )}
      </section>
    </Page>
  );
}

/**
 * Issues a key (POST /admin/v1/accounts/{id}/api-keys): its secret is shown here once, to be
 * copied into the label's software; Backline keeps only its hash.
 */
function IssueKey({ accountId }: { accountId: string }) {
  const ids = useId();
  const client = useQueryClient();
  const [name, setName] = useState("");
  const [mode, setMode] = useState<"live" | "test">("live");
  const issue = useMutation({
    mutationFn: () => api.issueApiKey(accountId, { name: name.trim(), mode }),
    onSuccess: () => {
      setName("");
      void client.invalidateQueries({ queryKey: ["api-keys", accountId] });
      void client.invalidateQueries({ queryKey: ["account", accountId] });
    },
  });
  return (
    <>
      <form
        className="filters"
        aria-label="Issue an API key"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          if (name.trim()) issue.mutate();
        }}
      >
        <div>
          <label htmlFor={`${ids}-name`}>New key's name</label>
          <input
            id={`${ids}-name`}
            value={name}
            required
            maxLength={200}
            placeholder="what it is for"
            onChange={(e) => setName(e.target.value)}
            data-testid="api-key-new-name"
          />
        </div>
        <div>
          <label htmlFor={`${ids}-mode`}>Mode</label>
          <select
            id={`${ids}-mode`}
            value={mode}
            onChange={(e) => setMode(e.target.value as "live" | "test")}
            data-testid="api-key-new-mode"
          >
            <option value="live">live</option>
            <option value="test">test (the account's sandbox)</option>
          </select>
        </div>
        <div>
          <button
            type="submit"
            className="primary"
            disabled={!name.trim() || issue.isPending}
            data-testid="api-key-issue"
          >
            Issue key
          </button>
        </div>
      </form>
      {issue.isError ? <ErrorState error={issue.error} /> : null}
      {issue.isSuccess ? (
        <div className="card" role="status" data-testid="api-key-issued">
          <p>
            <strong>Copy this key now: it is not shown again.</strong> Backline keeps only its hash.
          </p>
          <label htmlFor={`${ids}-secret`}>The key “{issue.data.key.name}”</label>
          <input
            id={`${ids}-secret`}
            readOnly
            value={issue.data.secret}
            onFocus={(e) => e.currentTarget.select()}
            data-testid="api-key-secret"
          />
          {issue.data.account_id !== accountId ? (
            <p className="help">A test key: it acts as this account's sandbox twin.</p>
          ) : null}
        </div>
      ) : null}
    </>
  );
}

/** Adds a member (a user with a proven address) or mails an invitation (POST …/members). */
function AddMember({ accountId }: { accountId: string }) {
  const ids = useId();
  const client = useQueryClient();
  const [email, setEmail] = useState("");
  const [role, setRole] = useState("member");
  const add = useMutation({
    mutationFn: () => api.addMember(accountId, { email: email.trim(), role }),
    onSuccess: () => {
      setEmail("");
      void client.invalidateQueries({ queryKey: ["account", accountId] });
    },
  });
  return (
    <>
      <form
        className="filters"
        aria-label="Add a member"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          if (email.trim()) add.mutate();
        }}
      >
        <div>
          <label htmlFor={`${ids}-email`}>E-mail address</label>
          <input
            id={`${ids}-email`}
            type="email"
            value={email}
            required
            maxLength={320}
            onChange={(e) => setEmail(e.target.value)}
            data-testid="member-new-email"
          />
        </div>
        <div>
          <label htmlFor={`${ids}-role`}>Role</label>
          <select
            id={`${ids}-role`}
            value={role}
            onChange={(e) => setRole(e.target.value)}
            data-testid="member-new-role"
          >
            {["member", "admin", "owner", "viewer"].map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </div>
        <div>
          <button
            type="submit"
            className="primary"
            disabled={!email.trim() || add.isPending}
            data-testid="member-add"
          >
            Add or invite
          </button>
        </div>
      </form>
      {add.isError ? <ErrorState error={add.error} /> : null}
      {add.isSuccess ? (
        <p role="status" data-testid="member-added" data-status={add.data.status}>
          {add.data.status === "added"
            ? `Added as ${add.data.role}.`
            : `Invited: a link was mailed to ${add.data.email ?? "the address"}.`}
        </p>
      ) : null}
    </>
  );
}
