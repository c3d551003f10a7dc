import { type FormEvent, useState } from "react";
import { Link } from "../../../ui-shared/router.tsx";
import { type PortalTenant, signUp } from "../api/portal.ts";
import { errorFor, Field, FormError, Notice, Page } from "../ui.tsx";

/** A new account: e-mail and password; the tenant may mail a confirmation link first. */
export function SignUp({ tenant }: { tenant: PortalTenant }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [sent, setSent] = useState(false);

  if (!tenant.signup)
    return (
      <Page title="New accounts are by invitation" testid="page-sign-up" narrow>
        <p>
          {tenant.name} opens accounts by invitation only.{" "}
          {tenant.branding.support_email
            ? `Write to ${tenant.branding.support_email} to ask for one.`
            : "Ask the company you work with for an invitation."}
        </p>
        <Link to="/">Sign in</Link>
      </Page>
    );

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // Signed in at once when the tenant does not confirm addresses: the app follows the session.
      if ((await signUp(email, password)) === "confirm") setSent(true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page
      title={sent ? "Check your e-mail" : `Create your ${tenant.name} account`}
      testid="page-sign-up"
      narrow
    >
      {sent ? (
        <Notice testid="signup-check-mail">
          <p>
            We sent a link to <strong>{email}</strong>. Open it to confirm your address: it brings you back
            here, signed in.
          </p>
          <p>No e-mail after a few minutes? Look in your spam folder, or sign up again to get a new link.</p>
        </Notice>
      ) : (
        <form onSubmit={submit} noValidate className="form" aria-label="Create an account">
          <Field
            label="Email"
            type="email"
            autoComplete="email"
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            error={errorFor(error, "email")}
            testid="signup-email"
          />
          <Field
            label="Password"
            type="password"
            autoComplete="new-password"
            hint="At least 8 characters."
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            error={errorFor(error, "password")}
            testid="signup-password"
          />
          <FormError error={error} testid="signup-error" />
          <button type="submit" disabled={busy} data-testid="signup-submit">
            Create account
          </button>
        </form>
      )}
      <p className="alternatives">
        Have an account already? <Link to="/">Sign in</Link>
      </p>
    </Page>
  );
}
