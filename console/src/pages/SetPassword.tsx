import { type FormEvent, useId, useState } from "react";
import { setPassword } from "../api/auth.ts";
import { describeError } from "../api/errors.ts";
import { navigate } from "../router.tsx";
import { Page } from "../ui/common.tsx";

/** After an invitation or recovery link: choose a password (PUT /auth/v1/user), or skip. */
export function SetPassword() {
  const [password, setValue] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const ids = useId();
  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await setPassword(password);
      setDone(true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  }
  return (
    <Page title="Choose a password" testid="page-set-password">
      {done ? (
        <p role="status" data-testid="password-saved">
          Your password is saved.{" "}
          <button type="button" className="link" onClick={() => navigate("/reviews")}>
            Continue
          </button>
        </p>
      ) : (
        <form className="card" onSubmit={submit}>
          <p>You signed in with a mailed link. Choose a password to sign in with next time.</p>
          <label htmlFor={`${ids}-pw`}>New password</label>
          <input
            id={`${ids}-pw`}
            type="password"
            autoComplete="new-password"
            minLength={6}
            required
            value={password}
            onChange={(e) => setValue(e.target.value)}
            data-testid="password-new"
          />
          <div className="page-actions">
            <button type="submit" className="primary" disabled={busy} data-testid="password-save">
              Save password
            </button>
            <button
              type="button"
              className="link"
              onClick={() => navigate("/reviews")}
              data-testid="password-skip"
            >
              Not now
            </button>
          </div>
          {error ? (
            <div className="error-state" role="alert">
              <strong>{describeError(error).title}</strong>
              <p>{describeError(error).detail}</p>
            </div>
          ) : null}
        </form>
      )}
    </Page>
  );
}
