import { type FormEvent, useState } from "react";
import { type Account, verifySecondFactor } from "../api/portal.ts";
import { errorFor, Field, FormError, Page } from "../ui.tsx";

/** An account that requires a second factor (aal2) while the session has one factor: the code. */
export function SecondFactor({ account, onDone }: { account: Account; onDone: () => void }) {
  const [code, setCode] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await verifySecondFactor(code);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Page title="Enter your authenticator code" testid="page-mfa" narrow>
      <p>
        {account.name} asks for a second step when you sign in. Open your authenticator app and type the
        six-digit code it shows for this portal.
      </p>
      <form onSubmit={submit} noValidate className="form" aria-label="Second factor">
        <Field
          label="Code"
          inputMode="numeric"
          autoComplete="one-time-code"
          value={code}
          onChange={(e) => setCode(e.target.value)}
          error={errorFor(error, "code")}
          testid="mfa-code"
        />
        <FormError error={error} testid="mfa-error" />
        <button type="submit" disabled={busy} data-testid="mfa-verify">
          Verify
        </button>
      </form>
    </Page>
  );
}
