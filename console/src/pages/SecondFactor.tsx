import { type FormEvent, useId, useState } from "react";
import { signOut, verifyFactor } from "../api/auth.ts";
import { ApiError, describeError } from "../api/errors.ts";
import type { SecondFactor as Pending } from "../api/session.ts";
import { Page } from "../ui/common.tsx";

/**
 * The second step of signing in, for a user with a verified TOTP factor: the six-digit code from
 * their authenticator app turns the new session into an aal2 one (the platform's own routes, and
 * any role the installation reserves to aal2, need it). Nothing else of the console opens before.
 */
export function SecondFactorStep({ pending, email }: { pending: Pending; email?: string | undefined }) {
  const [code, setCode] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const ids = useId();

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await verifyFactor(pending.factorId, code.replace(/\s+/g, ""));
    } catch (e) {
      setError(e);
      setCode("");
    } finally {
      setBusy(false);
    }
  }

  const message = codeMessage(error);
  return (
    <div className="app">
      <main id="main" className="signin-main">
        <Page title="Enter your sign-in code" testid="page-second-factor">
          <form className="card signin" onSubmit={submit} aria-label="Second factor" noValidate>
            <p>
              {email ? (
                <>
                  <strong>{email}</strong> has two-step sign-in.{" "}
                </>
              ) : null}
              Open your authenticator app{pending.name ? ` (“${pending.name}”)` : ""} and type the six-digit
              code it shows for Backline.
            </p>
            <label htmlFor={`${ids}-code`}>Code</label>
            <input
              id={`${ids}-code`}
              inputMode="numeric"
              autoComplete="one-time-code"
              pattern="[0-9 ]*"
              maxLength={8}
              required
              value={code}
              onChange={(e) => setCode(e.target.value)}
              aria-invalid={message ? true : undefined}
              aria-describedby={message ? `${ids}-error` : undefined}
              data-testid="second-factor-code"
            />
            {message ? (
              <p id={`${ids}-error`} className="error-text" role="alert" data-testid="second-factor-error">
                {message}
              </p>
            ) : null}
            <button type="submit" className="primary" disabled={busy} data-testid="second-factor-verify">
              {busy ? "Checking…" : "Verify"}
            </button>
            <button
              type="button"
              className="link"
              onClick={() => void signOut()}
              data-testid="second-factor-cancel"
            >
              Cancel and sign out
            </button>
          </form>
        </Page>
      </main>
    </div>
  );
}

/** A refused code in plain words, next to the field. */
export function codeMessage(error: unknown): string | undefined {
  if (!error) return undefined;
  if (error instanceof ApiError) {
    if (error.code === "mfa_verification_failed")
      return "That code is not right. Codes change every 30 seconds: type the one your app shows now.";
    if (error.code === "mfa_challenge_expired" || /expired|void/i.test(error.message))
      return "That attempt has ended: type the code your app shows now.";
    if (error.status === 429) return "Too many tries: wait a minute, then type the code your app shows now.";
  }
  return describeError(error).detail;
}
