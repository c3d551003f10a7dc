import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { Checkbox, Empty, Loading, Status, TableWrap, When } from "../../../../ui-shared/common.tsx";
import { PlainError } from "../../api/portal.ts";
import {
  type ApiKey,
  createKey,
  freezeKey,
  listKeys,
  resendKeyCode,
  revealKey,
  revokeKey,
} from "../../api/public.ts";
import { ErrorState, errorFor, Field, FormError } from "../../ui.tsx";
import { SecretOnce } from "./Secret.tsx";

/** The scopes a new key may have (docs/public-api.md, "Scopes"), in words. */
const SCOPES: [string, string][] = [
  ["catalog:read", "Read the catalogue"],
  ["catalog:write", "Change, submit and take down releases"],
  ["royalties:read", "Read royalties"],
  ["webhooks:manage", "Manage webhooks"],
  ["keys:manage", "Manage API keys (a key that makes keys: only if you need it)"],
];

/** The reveal of a pending key: the code the owners were mailed, then its secret once. */
function Reveal({
  accountId,
  k,
  onRevealed,
}: {
  accountId: string;
  k: ApiKey;
  onRevealed: (secret: string) => void;
}) {
  const [code, setCode] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [note, setNote] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const reveal = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const revealed = await revealKey(accountId, k.id, code.replace(/\s+/g, ""));
      onRevealed(revealed.secret);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const resend = async () => {
    setError(null);
    try {
      const sent = await resendKeyCode(accountId, k.id);
      setNote(`A new code went to ${sent.sent_to.join(", ")}.`);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="inline-form" onSubmit={reveal} noValidate aria-label={`Reveal ${k.name || k.prefix}`}>
      <Field
        label="Code from the e-mail"
        hint={
          k.verification ? `Sent to ${k.verification.sent_to.join(", ")}.` : "Sent to the account's owners."
        }
        inputMode="numeric"
        autoComplete="one-time-code"
        value={code}
        onChange={(e) => setCode(e.target.value)}
        error={errorFor(error, "code")}
        testid="key-code"
      />
      <FormError error={error} testid="key-reveal-error" />
      {note ? <p role="status">{note}</p> : null}
      <div className="buttons">
        <button type="submit" disabled={busy} data-testid="key-reveal">
          Show the key
        </button>
        <button type="button" className="secondary" onClick={resend}>
          Send a new code
        </button>
      </div>
    </form>
  );
}

/** The account's API keys: make one (revealed with the mailed code, once), freeze, revoke. */
export function Keys({ accountId }: { accountId: string }) {
  const client = useQueryClient();
  const keys = useQuery({ queryKey: ["api-keys", accountId], queryFn: () => listKeys(accountId) });
  const [name, setName] = useState("");
  const [scopes, setScopes] = useState<string[]>([
    "catalog:read",
    "catalog:write",
    "royalties:read",
    "webhooks:manage",
  ]);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [pending, setPending] = useState<ApiKey | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const refresh = () => client.invalidateQueries({ queryKey: ["api-keys", accountId] });
  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      await fn();
      await refresh();
    } catch (e) {
      setError(e);
    }
  };
  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    if (scopes.length === 0) {
      setError(new PlainError("Choose at least one thing the key may do.", { field: "scopes" }));
      return;
    }
    setBusy(true);
    try {
      const made = await createKey(accountId, { name: name.trim(), scopes });
      setPending(made);
      setName("");
      await refresh();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const rows = (keys.data?.data ?? []).filter((k) => k.status !== "revoked");
  return (
    <section className="card" aria-labelledby="keys-heading" data-testid="developers-keys">
      <h2 id="keys-heading">API keys</h2>
      <p className="hint">
        A key lets your own software use the public API for this account. Each new key is shown once, after
        the code we e-mail to the account's owners.
      </p>
      {secret ? (
        <SecretOnce
          label="Your new key:"
          secret={secret}
          testid="key-secret"
          onDone={() => setSecret(null)}
        />
      ) : null}
      {pending ? (
        <div className="notice" data-testid="key-pending">
          <p>
            We e-mailed a six-digit code to{" "}
            {pending.verification?.sent_to.join(", ") ?? "the account's owners"}. Enter it to see the key “
            {pending.name || pending.prefix}”.
          </p>
          <Reveal
            accountId={accountId}
            k={pending}
            onRevealed={(s) => {
              setPending(null);
              setSecret(s);
              void refresh();
            }}
          />
        </div>
      ) : null}
      <FormError error={error} testid="keys-error" />
      {keys.isPending ? <Loading /> : null}
      {keys.isError ? <ErrorState error={keys.error} onRetry={() => keys.refetch()} /> : null}
      {keys.data && rows.length === 0 ? (
        <Empty>
          <span data-testid="keys-empty">
            No keys yet. Make one below when your software needs to reach the API.
          </span>
        </Empty>
      ) : null}
      {rows.length > 0 ? (
        <TableWrap label="API keys">
          <table data-testid="keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Status</th>
                <th scope="col">Last used</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((k) => (
                <tr key={k.id} data-testid="key-row" data-status={k.status}>
                  <th scope="row">{k.name || "—"}</th>
                  <td>
                    <code>{k.prefix}…</code> <span className="muted">{k.scopes.join(", ")}</span>
                  </td>
                  <td>
                    <Status value={k.status} />
                  </td>
                  <td>
                    <When at={k.last_used_at} />
                  </td>
                  <td className="actions">
                    {k.status === "pending_reveal" && !k.reveal_locked_at && pending?.id !== k.id ? (
                      <button type="button" className="secondary" onClick={() => setPending(k)}>
                        Enter the code
                      </button>
                    ) : null}
                    {k.status === "active" || k.status === "frozen" ? (
                      <button
                        type="button"
                        className="secondary"
                        onClick={() => act(() => freezeKey(accountId, k.id, k.status === "active"))}
                        data-testid={k.status === "active" ? "key-freeze" : "key-unfreeze"}
                      >
                        {k.status === "active" ? "Freeze" : "Unfreeze"}
                      </button>
                    ) : null}
                    <button
                      type="button"
                      className="secondary danger"
                      onClick={() => {
                        if (
                          confirm(
                            `Revoke “${k.name || k.prefix}” for good? Software using it stops working at once.`,
                          )
                        )
                          void act(() => revokeKey(accountId, k.id));
                      }}
                      data-testid="key-revoke"
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <form className="form" onSubmit={create} noValidate aria-label="New API key">
        <h3>Make a key</h3>
        <Field
          label="Name"
          hint="What it is for, such as “Shop sync”."
          value={name}
          onChange={(e) => setName(e.target.value)}
          error={errorFor(error, "name")}
          testid="key-name"
        />
        <fieldset className="checks" data-testid="key-scopes">
          <legend>It may</legend>
          {SCOPES.map(([scope, words]) => (
            <Checkbox
              key={scope}
              checked={scopes.includes(scope)}
              onChange={(on) => setScopes((s) => (on ? [...s, scope] : s.filter((x) => x !== scope)))}
              testid={`key-scope-${scope}`}
            >
              {words}
            </Checkbox>
          ))}
          {errorFor(error, "scopes") ? (
            <p className="field-error" role="alert">
              {errorFor(error, "scopes")}
            </p>
          ) : null}
        </fieldset>
        <div className="buttons">
          <button type="submit" disabled={busy} data-testid="key-create">
            Make the key
          </button>
        </div>
      </form>
    </section>
  );
}
