import { useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { navigate } from "../../../ui-shared/router.tsx";
import { type Account, choosePassword } from "../api/portal.ts";
import { errorFor, Field, FormError, Notice, Page } from "../ui.tsx";

/**
 * After an invitation link (`invited`): the invitation is accepted — using the link proved the
 * address — and the member chooses a password on the same page. After a reset link: the new
 * password.
 */
export function SetPassword({ invited, accounts }: { invited: boolean; accounts: Account[] }) {
  const client = useQueryClient();
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await choosePassword(password);
      await client.invalidateQueries({ queryKey: ["accounts"] });
      navigate("/releases?welcome=1", { replace: true });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const names = accounts.map((a) => a.name);
  return (
    <Page
      title={invited ? "Welcome: choose your password" : "Choose a new password"}
      testid="page-set-password"
      narrow
    >
      {invited ? (
        <Notice testid="invitation-accepted">
          Your e-mail address is confirmed
          {names.length > 0 ? (
            <>
              {" "}
              and you have joined <strong>{names.join(", ")}</strong>
            </>
          ) : null}
          . Choose a password to sign in with from now on.
        </Notice>
      ) : null}
      <form onSubmit={submit} noValidate className="form" aria-label="Choose a password">
        <Field
          label="Password"
          type="password"
          autoComplete="new-password"
          hint="At least 8 characters."
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          error={errorFor(error, "password")}
          testid="password-new"
        />
        <FormError error={error} testid="password-error" />
        <button type="submit" disabled={busy} data-testid="password-save">
          Save password
        </button>
      </form>
    </Page>
  );
}
