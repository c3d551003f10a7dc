import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useEffect, useId, useState } from "react";
import { api } from "../api/admin.ts";
import { ApiError } from "../api/errors.ts";
import type { AdminMe } from "../api/types.ts";
import { isPlatformAdmin } from "../roles.ts";
import { Link } from "../router.tsx";
import { ErrorState, Fields, Loading, Page } from "../ui/common.tsx";

/**
 * A store and its adapter's settings. Platform admins edit them (PATCH /stores/{id}); secrets are
 * write-only: the server never sends them back, so a secret field is empty unless you replace it.
 */
export default function StorePage({ id }: { id: string }) {
  const client = useQueryClient();
  const me = useQuery<AdminMe>({ queryKey: ["me"], queryFn: api.me, staleTime: 60_000 });
  const store = useQuery({ queryKey: ["store", id], queryFn: () => api.store(id) });
  const canEdit = isPlatformAdmin(me.data);
  const [text, setText] = useState("");
  const [enabled, setEnabled] = useState(true);
  const [parseError, setParseError] = useState<string | null>(null);
  const ids = useId();
  useEffect(() => {
    if (store.data) {
      setText(JSON.stringify(store.data.settings ?? {}, null, 2));
      setEnabled(store.data.enabled !== false);
    }
  }, [store.data]);
  const save = useMutation({
    mutationFn: (body: Record<string, unknown>) => api.patchStore(id, body),
    onSuccess: (s) => {
      client.setQueryData(["store", id], s);
      void client.invalidateQueries({ queryKey: ["stores"] });
    },
  });
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
    save.mutate({ enabled, settings });
  }
  const s = store.data;
  return (
    <Page
      title={s ? `Store: ${s.name ?? s.code ?? s.id}` : "Store"}
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
            <Fields record={s} omit={["settings"]} />
          </section>
          <section className="card" aria-labelledby="set-h">
            <h2 id="set-h">Adapter settings</h2>
            {canEdit ? (
              <form onSubmit={submit} data-testid="store-settings-form">
                <label>
                  <input
                    type="checkbox"
                    checked={enabled}
                    onChange={(e) => setEnabled(e.target.checked)}
                    data-testid="store-enabled"
                  />{" "}
                  Enabled
                </label>
                <label htmlFor={`${ids}-json`}>Settings (JSON; secrets are write-only and shown empty)</label>
                <textarea
                  id={`${ids}-json`}
                  rows={12}
                  value={text}
                  onChange={(e) => setText(e.target.value)}
                  spellCheck={false}
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
                {save.isError ? (
                  <ErrorState
                    error={
                      save.error instanceof ApiError && save.error.errors.length > 0
                        ? new ApiError(
                            save.error.status,
                            save.error.code,
                            save.error.errors.map((e) => `${e.param}: ${e.message}`).join("; "),
                          )
                        : save.error
                    }
                  />
                ) : null}
              </form>
            ) : (
              <>
                <p className="help">Only platform admins change a store's settings.</p>
                <Fields record={(s.settings ?? {}) as Record<string, unknown>} />
              </>
            )}
          </section>
        </div>
      ) : null}
    </Page>
  );
}
