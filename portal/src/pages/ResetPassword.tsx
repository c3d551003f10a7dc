import { type FormEvent, useState } from "react";
import { Link } from "../../../ui-shared/router.tsx";
import { sendPasswordReset } from "../api/portal.ts";
import { errorFor, Field, FormError, Notice, Page } from "../ui.tsx";

/** Mails a link that signs in and asks for a new password. */
export function ResetPassword() {
  const [email, setEmail] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [sent, setSent] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await sendPasswordReset(email);
      setSent(true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Page title="Reset your password" testid="page-reset-password" narrow>
      {sent ? (
        <Notice testid="reset-sent">
          If {email} has an account here, we sent it a link. Open it to choose a new password.
        </Notice>
      ) : (
        <form onSubmit={submit} noValidate className="form" aria-label="Reset your password">
          <Field
            label="Email"
            type="email"
            autoComplete="email"
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            error={errorFor(error, "email")}
            testid="reset-email"
          />
          <FormError error={error} testid="reset-error" />
          <button type="submit" disabled={busy} data-testid="reset-submit">
            Email me a link
          </button>
        </form>
      )}
      <p className="alternatives">
        <Link to="/">Back to sign in</Link>
      </p>
    </Page>
  );
}
