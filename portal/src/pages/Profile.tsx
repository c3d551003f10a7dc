import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { Empty, Loading } from "../../../ui-shared/common.tsx";
import {
  addPasskey,
  browserHasPasskeys,
  listPasskeys,
  type PortalTenant,
  removePasskey,
} from "../api/portal.ts";
import { ErrorState, Field, FormError, Notice, Page } from "../ui.tsx";

const passkeysQuery = ["passkeys"] as const;

const day = (iso: string) =>
  new Date(iso).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });

/**
 * The signed-in person's profile: their e-mail address and, where the tenant turned passkeys on,
 * their passkeys (docs/portal.md, "Passkeys"): added with this device's prompt, listed with when
 * each was last used, removed.
 */
export function Profile({ tenant, email }: { tenant: PortalTenant; email: string }) {
  return (
    <Page title="Your profile" testid="page-profile" narrow>
      <dl className="facts">
        <dt>E-mail address</dt>
        <dd data-testid="profile-email">{email}</dd>
      </dl>
      {tenant.passkeys ? <Passkeys /> : null}
    </Page>
  );
}

function Passkeys() {
  const client = useQueryClient();
  const list = useQuery({ queryKey: passkeysQuery, queryFn: listPasskeys });
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [added, setAdded] = useState(false);
  const supported = browserHasPasskeys();

  const run = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    setAdded(false);
    try {
      await work();
      await client.invalidateQueries({ queryKey: passkeysQuery });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const add = (event: FormEvent) => {
    event.preventDefault();
    void run(async () => {
      await addPasskey(name);
      setName("");
      setAdded(true);
    });
  };

  const rows = list.data ?? [];
  return (
    <section aria-labelledby="passkeys-heading" data-testid="passkeys">
      <h2 id="passkeys-heading">Passkeys</h2>
      <p>
        A passkey signs you in with this device's screen lock (fingerprint, face or PIN) instead of a
        password.
      </p>
      {list.isPending ? <Loading /> : null}
      {list.isError ? <ErrorState error={list.error} onRetry={() => list.refetch()} /> : null}
      {list.data && rows.length === 0 ? (
        <Empty>
          <span data-testid="passkeys-empty">You have no passkeys yet.</span>
        </Empty>
      ) : null}
      {rows.length > 0 ? (
        <ul className="passkeys" data-testid="passkey-list">
          {rows.map((p) => (
            <li key={p.id} data-testid="passkey">
              <span data-testid="passkey-name">{p.friendly_name || "Passkey"}</span>{" "}
              <span className="muted">
                added {day(p.created_at)}
                {p.last_used_at ? `, last used ${day(p.last_used_at)}` : ", not used yet"}
              </span>{" "}
              <button
                type="button"
                className="secondary"
                disabled={busy}
                onClick={() => void run(() => removePasskey(p.id))}
                aria-label={`Remove passkey ${p.friendly_name || "Passkey"}`}
                data-testid="passkey-remove"
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      {added ? <Notice testid="passkey-added">Passkey added. Next time, sign in with it.</Notice> : null}
      <FormError error={error} testid="passkey-error" />
      {supported ? (
        <form onSubmit={add} className="form" aria-label="Add a passkey">
          <Field
            label="Name (optional)"
            name="passkey-name"
            value={name}
            maxLength={120}
            onChange={(e) => setName(e.target.value)}
            testid="passkey-name-input"
          />
          <button type="submit" disabled={busy} data-testid="passkey-add">
            Add a passkey
          </button>
        </form>
      ) : (
        <p data-testid="passkeys-unsupported">This browser cannot use passkeys.</p>
      )}
    </section>
  );
}
