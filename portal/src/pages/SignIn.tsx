import { type FormEvent, useEffect, useState } from "react";
import { Link } from "../../../ui-shared/router.tsx";
import {
  browserHasPasskeys,
  type PortalTenant,
  type SignInProvider,
  sendSignInCode,
  signInProviders,
  signInWithPasskey,
  signInWithPassword,
  signInWithProvider,
  verifySignInCode,
} from "../api/portal.ts";
import { errorFor, Field, FormError, Notice, Page } from "../ui.tsx";

/**
 * Sign in by password, or by a code mailed to the address (its link signs in too), or with one of
 * the tenant's OpenID Connect providers ("Continue with …") or a passkey when the tenant has them.
 */
export function SignIn({ tenant }: { tenant: PortalTenant }) {
  const [mode, setMode] = useState<"password" | "code">("password");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [code, setCode] = useState("");
  const [codeSent, setCodeSent] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [providers, setProviders] = useState<SignInProvider[]>([]);
  useEffect(() => {
    void signInProviders().then(setProviders);
  }, []);

  const run = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (mode === "password") void run(() => signInWithPassword(email, password));
    else if (!codeSent)
      void run(async () => {
        await sendSignInCode(email);
        setCodeSent(true);
      });
    else void run(() => verifySignInCode(email, code));
  };

  return (
    <Page title={`Sign in to ${tenant.name}`} testid="page-sign-in" narrow>
      <form onSubmit={submit} noValidate className="form" aria-label="Sign in">
        <Field
          label="Email"
          type="email"
          name="email"
          autoComplete="email"
          value={email}
          onChange={(e) => setEmail(e.target.value)}
          error={errorFor(error, "email")}
          testid="signin-email"
          disabled={mode === "code" && codeSent}
        />
        {mode === "password" ? (
          <Field
            label="Password"
            type="password"
            name="password"
            autoComplete="current-password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            error={errorFor(error, "password")}
            testid="signin-password"
          />
        ) : codeSent ? (
          <>
            <Notice testid="signin-code-sent">
              We sent a six-digit code and a sign-in link to {email}. Type the code below, or open the link.
            </Notice>
            <Field
              label="Code"
              inputMode="numeric"
              autoComplete="one-time-code"
              value={code}
              onChange={(e) => setCode(e.target.value)}
              error={errorFor(error, "code")}
              testid="signin-code"
            />
          </>
        ) : null}
        <FormError error={error} testid="signin-error" />
        <button type="submit" disabled={busy} data-testid="signin-submit">
          {mode === "password" ? "Sign in" : codeSent ? "Sign in with the code" : "Email me a code"}
        </button>
      </form>
      {providers.length > 0 ? (
        <div className="alternatives" data-testid="signin-providers">
          {providers.map((p) => (
            <button
              key={p.name}
              type="button"
              className="secondary"
              disabled={busy}
              onClick={() => void run(() => signInWithProvider(p.name))}
              data-testid={`signin-provider-${p.name}`}
            >
              Continue with {p.label}
            </button>
          ))}
        </div>
      ) : null}
      {tenant.passkeys && browserHasPasskeys() ? (
        <div className="alternatives">
          <button
            type="button"
            className="secondary"
            disabled={busy}
            onClick={() => void run(signInWithPasskey)}
            data-testid="signin-passkey"
          >
            Sign in with a passkey
          </button>
        </div>
      ) : null}
      <div className="alternatives">
        <button
          type="button"
          className="link"
          onClick={() => {
            setMode(mode === "password" ? "code" : "password");
            setCodeSent(false);
            setError(null);
          }}
          data-testid="signin-switch-mode"
        >
          {mode === "password" ? "Sign in with a code by e-mail instead" : "Sign in with a password instead"}
        </button>
        <Link to="/reset-password" data-testid="link-reset-password">
          Forgot your password?
        </Link>
        {tenant.signup ? (
          <p>
            New here?{" "}
            <Link to="/sign-up" data-testid="link-sign-up">
              Create an account
            </Link>
          </p>
        ) : null}
      </div>
    </Page>
  );
}
