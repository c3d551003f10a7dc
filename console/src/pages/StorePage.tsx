import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { ApiError } from "../api/errors.ts";
import type { AdminMe } from "../api/types.ts";
import { isPlatformAdmin } from "../roles.ts";
import { Link } from "../router.tsx";
import { Checkbox, ErrorState, Fields, Loading, Page } from "../ui/common.tsx";
import { StoreDictionarySection } from "./StoreDictionary.tsx";

/**
 * A store and its adapter's settings. Platform admins edit them (PATCH /stores/{code}).
 * Credentials are write-only: the server lists where they are set, never their values; a
 * credential left out of the JSON keeps its stored value, one set to null is removed.
 */
export default function StorePage({ id: code }: { id: string }) {
  const client = useQueryClient();
  const me = useQuery<AdminMe>({ queryKey: ["me"], queryFn: api.me, staleTime: 60_000 });
  const store = useQuery({ queryKey: ["store", code], queryFn: () => api.store(code) });
  const canEdit = isPlatformAdmin(me.data);
  const [name, setName] = useState("");
  const [enabled, setEnabled] = useState(true);
  const [offersOac, setOffersOac] = useState(false);
  const [text, setText] = useState("");
  const [parseError, setParseError] = useState<string | null>(null);
  const ids = useId();
  useEffect(() => {
    if (!store.data) return;
    setName(store.data.name ?? "");
    setEnabled(store.data.enabled !== false);
    setOffersOac(Boolean(store.data.offers_oac));
    setText(JSON.stringify(store.data.settings ?? {}, null, 2));
  }, [store.data]);
  const save = useMutation({
    mutationFn: (body: Record<string, unknown>) => api.patchStore(code, body),
    onSuccess: (s) => {
      client.setQueryData(["store", code], s);
      void client.invalidateQueries({ queryKey: ["stores"] });
    },
  });
  // The connection check changes nothing: it reaches the destination with the stored settings.
  const check = useMutation({ mutationFn: () => api.checkStore(code) });
  function submit(event: FormEvent) {
    event.preventDefault();
    setParseError(null);
    let settings: unknown;
    try {
      settings = JSON.parse(text || "{}");
    } catch (e) {
      setParseError(`The settings are not valid JSON: ${(e as Error).message}`);
      return;
    }
    save.mutate({ name: name.trim(), enabled, offers_oac: offersOac, settings });
  }
  const s = store.data;
  return (
    <Page
      title={s ? `Store: ${s.name ?? s.code}` : "Store"}
      testid="page-store"
      actions={
        <Link to="/stores" className="button-link">
          All stores
        </Link>
      }
    >
      {store.isPending ? (
        <Loading />
      ) : store.isError ? (
        <ErrorState error={store.error} onRetry={() => store.refetch()} />
      ) : s ? (
        <div className="grid">
          <section className="card" aria-labelledby="s-h">
            <h2 id="s-h">Store</h2>
            <Fields record={s} omit={["settings", "credentials"]} />
            {s.credentials ? (
              <>
                <h2>Credentials set</h2>
                {s.credentials.length === 0 ? (
                  <p className="muted">none</p>
                ) : (
                  <ul data-testid="store-credentials">
                    {s.credentials.map((c) => (
                      <li key={c}>
                        <code>{c}</code> <span className="muted">(write-only)</span>
                      </li>
                    ))}
                  </ul>
                )}
              </>
            ) : null}
          </section>
          <section className="card" aria-labelledby="conn-h" data-testid="store-connection">
            <h2 id="conn-h">Connection</h2>
            <p className="help">
              Reaches the store's destination with its saved settings, as{" "}
              <code>backline stores configure --check</code> does: its SFTP server (host key, sign-in,
              folder), its S3 bucket or its directory. Nothing is sent or changed.
            </p>
            {canEdit ? (
              <>
                <button
                  type="button"
                  onClick={() => check.mutate()}
                  disabled={check.isPending}
                  data-testid="store-check"
                >
                  {check.isPending ? "Checking…" : "Check connection"}
                </button>
                {check.isSuccess ? (
                  <p
                    role="status"
                    className={check.data.ok ? "ok" : "warn"}
                    data-testid="store-check-result"
                    data-ok={String(check.data.ok)}
                  >
                    {check.data.ok ? "Connected: " : "Failed: "}
                    {check.data.message}
                  </p>
                ) : null}
                {check.isError ? <StoreError error={check.error} code={code} /> : null}
              </>
            ) : (
              <p className="muted">Only platform admins check a store's connection.</p>
            )}
          </section>
          <section className="card" aria-labelledby="set-h">
            <h2 id="set-h">Adapter settings</h2>
            {canEdit ? (
              <form onSubmit={submit} data-testid="store-settings-form">
                <label htmlFor={`${ids}-name`}>Name</label>
                <input
                  id={`${ids}-name`}
                  value={name}
                  onChange={(e) => setName(e.target.value)}
                  data-testid="store-name"
                />
                <Checkbox checked={enabled} onChange={setEnabled} testid="store-enabled">
                  Enabled
                </Checkbox>
                <Checkbox checked={offersOac} onChange={setOffersOac} testid="store-offers-oac">
                  Offers Official Artist Channels
                </Checkbox>
                <label htmlFor={`${ids}-json`}>Settings (JSON)</label>
                <p className="help" id={`${ids}-json-help`}>
                  {'{"adapter": "sandbox" | "ddex", "sandbox": {…}, "ddex": {…}}'}. Credentials are
                  write-only: leave one out to keep it, set it to null to remove it, give a value to replace
                  it.
                </p>
                <textarea
                  id={`${ids}-json`}
                  rows={12}
                  value={text}
                  onChange={(e) => setText(e.target.value)}
                  spellCheck={false}
                  aria-describedby={`${ids}-json-help`}
                  data-testid="store-settings"
                />
                {parseError ? (
                  <p role="alert" className="error-text">
                    {parseError}
                  </p>
                ) : null}
                <button type="submit" className="primary" disabled={save.isPending} data-testid="store-save">
                  Save
                </button>
                {save.isSuccess ? (
                  <p role="status" data-testid="store-saved">
                    Saved.
                  </p>
                ) : null}
                {save.isError ? <StoreError error={save.error} code={code} /> : null}
              </form>
            ) : (
              <>
                <p className="help">Only platform admins change a store's settings.</p>
                {s.settings ? <Fields record={s.settings} /> : null}
              </>
            )}
          </section>
          <StoreDictionarySection code={code} canEdit={canEdit} />
        </div>
      ) : null}
    </Page>
  );
}

/**
 * A refusal of a store's change or check. The installation's stores need a session verified with a
 * second factor: that refusal says so in words, with the way there and the way round.
 */
function StoreError({ error, code }: { error: unknown; code: string }) {
  if (error instanceof ApiError && error.code === "aal2_required")
    return (
      <div className="error-state" role="alert" data-testid="error-state">
        <strong>A second factor is needed</strong>
        <p>
          The installation's stores are changed and checked only from a session verified with a second factor.{" "}
          <Link to="/security">Add an authenticator app under Two-step sign-in</Link>, or sign in again with
          the one you have. On the server, <code>backline stores configure {code} --settings … --check</code>{" "}
          saves the settings and checks them.
        </p>
      </div>
    );
  return <ErrorState error={error} />;
}
