import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { enrolTotp, type Factor, listFactors, removeFactor, verifyFactor } from "../api/auth.ts";
import { Empty, ErrorState, Loading, Page } from "../ui/common.tsx";
import { ConfirmDialog } from "../ui/Dialog.tsx";
import { codeMessage } from "./SecondFactor.tsx";

/**
 * Two-step sign-in for the signed-in staff user (/security): their TOTP factors, adding one with an
 * authenticator app (QR code or the key typed in), and removing one. Confirming a new factor makes
 * this session aal2 at once; from then on every sign-in asks for a code.
 */
export default function Security() {
  const client = useQueryClient();
  const factors = useQuery({ queryKey: ["factors"], queryFn: listFactors });
  const [removing, setRemoving] = useState<Factor | null>(null);
  const remove = useMutation({
    mutationFn: (id: string) => removeFactor(id),
    onSuccess: () => {
      setRemoving(null);
      void client.invalidateQueries({ queryKey: ["factors"] });
    },
  });
  const verified = (factors.data ?? []).filter((f) => f.status === "verified");

  return (
    <Page title="Two-step sign-in" testid="page-security">
      <p>
        With an authenticator app (any app that shows time-based codes), signing in asks for a six-digit code
        after your password or mailed link. The installation's own pages (stores, platform settings) need it.
      </p>
      {factors.isPending ? (
        <Loading what="Your authenticator apps" />
      ) : factors.isError ? (
        <ErrorState error={factors.error} onRetry={() => factors.refetch()} />
      ) : verified.length === 0 ? (
        <Empty>No authenticator app yet: add one below.</Empty>
      ) : (
        <ul className="card" data-testid="factor-list">
          {verified.map((f) => (
            <li key={f.id} data-testid="factor-row">
              <strong>{f.friendly_name || "Authenticator app"}</strong>
              {f.created_at ? (
                <span className="muted"> · added {new Date(f.created_at).toLocaleDateString()}</span>
              ) : null}{" "}
              <button
                type="button"
                className="reject"
                onClick={() => setRemoving(f)}
                data-testid="factor-remove"
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      {factors.isSuccess ? (
        <AddFactor onAdded={() => void client.invalidateQueries({ queryKey: ["factors"] })} />
      ) : null}
      <ConfirmDialog
        open={removing !== null}
        onClose={() => {
          setRemoving(null);
          remove.reset();
        }}
        onConfirm={() => removing && remove.mutate(removing.id)}
        title="Remove this authenticator app?"
        confirmLabel="Remove it"
        busy={remove.isPending}
        testid="factor-remove-dialog"
      >
        <p>
          Codes from “{removing?.friendly_name || "Authenticator app"}” will no longer sign you in.
          {verified.length === 1
            ? " It is your only one: signing in will ask for your password or a mailed link alone, and the installation's own pages will be closed to you until you add another."
            : ""}
        </p>
        {remove.isError ? <ErrorState error={remove.error} /> : null}
      </ConfirmDialog>
    </Page>
  );
}

/** Adding a factor: a name, then the QR code (or key) and the first code from the app. */
function AddFactor({ onAdded }: { onAdded: () => void }) {
  const ids = useId();
  const [name, setName] = useState("");
  const [code, setCode] = useState("");
  const enrol = useMutation({ mutationFn: (friendly: string) => enrolTotp(friendly) });
  const confirm = useMutation({
    mutationFn: ({ id, code }: { id: string; code: string }) => verifyFactor(id, code),
    onSuccess: () => {
      enrol.reset();
      setName("");
      setCode("");
      onAdded();
    },
    onError: () => setCode(""),
  });

  if (!enrol.data) {
    const start = (event: FormEvent) => {
      event.preventDefault();
      confirm.reset();
      enrol.mutate(name.trim() || "Authenticator app");
    };
    return (
      <form className="card" onSubmit={start} aria-label="Add an authenticator app">
        {confirm.isSuccess ? (
          <p role="status" data-testid="factor-added">
            Added. This session is now verified with a second factor.
          </p>
        ) : null}
        <label htmlFor={`${ids}-name`}>Name of the app or device</label>
        <input
          id={`${ids}-name`}
          value={name}
          maxLength={100}
          placeholder="Phone"
          onChange={(e) => setName(e.target.value)}
          data-testid="factor-name"
        />
        {enrol.isError ? <ErrorState error={enrol.error} /> : null}
        <button type="submit" className="primary" disabled={enrol.isPending} data-testid="factor-add">
          {enrol.isPending ? "Preparing…" : "Add an authenticator app"}
        </button>
      </form>
    );
  }

  const { id, totp } = enrol.data;
  const message = codeMessage(confirm.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    confirm.mutate({ id, code: code.replace(/\s+/g, "") });
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Confirm the authenticator app" noValidate>
      <p>Scan this code with the app, or type the key below into it.</p>
      <img
        className="qr"
        width={200}
        height={200}
        alt="QR code holding the key for your authenticator app"
        src={`data:image/svg+xml;utf8,${encodeURIComponent(totp.qr_code)}`}
        data-testid="factor-qr"
      />
      <p>
        Key: <code data-testid="factor-secret">{totp.secret}</code>
      </p>
      <label htmlFor={`${ids}-code`}>The six-digit code the app shows</label>
      <input
        id={`${ids}-code`}
        inputMode="numeric"
        autoComplete="one-time-code"
        maxLength={8}
        required
        value={code}
        onChange={(e) => setCode(e.target.value)}
        aria-invalid={message ? true : undefined}
        aria-describedby={message ? `${ids}-error` : undefined}
        data-testid="factor-code"
      />
      {message ? (
        <p id={`${ids}-error`} className="error-text" role="alert" data-testid="factor-code-error">
          {message}
        </p>
      ) : null}
      <div className="page-actions">
        <button type="submit" className="primary" disabled={confirm.isPending} data-testid="factor-confirm">
          {confirm.isPending ? "Checking…" : "Confirm"}
        </button>
        <button type="button" className="link" onClick={() => enrol.reset()} data-testid="factor-cancel">
          Cancel
        </button>
      </div>
    </form>
  );
}
