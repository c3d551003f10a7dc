import { useEffect, useState } from "react";
import { Loading } from "../../../ui-shared/common.tsx";
import { Link, navigate } from "../../../ui-shared/router.tsx";
import { sessionFromLink } from "../api/portal.ts";
import { ErrorState, Page } from "../ui.tsx";

// A link's fragment is read once, even when React runs the effect twice (StrictMode).
let reading: Promise<{ type: string }> | null = null;

/**
 * Where a mailed link lands (GET /auth/v1/verify sends the browser here with the session in the
 * fragment): a confirmed sign-up or a sign-in link opens the releases, an invitation asks for a
 * password on the same visit, a password reset asks for the new one.
 */
export function AuthCallback() {
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    reading ??= sessionFromLink(location.hash);
    reading.then(
      ({ type }) => {
        reading = null;
        if (type === "invite") navigate("/welcome", { replace: true });
        else if (type === "recovery") navigate("/set-password", { replace: true });
        else navigate("/releases", { replace: true });
      },
      (e: unknown) => {
        reading = null;
        setError(e);
      },
    );
  }, []);
  return (
    <Page title={error ? "This link did not work" : "Signing you in"} testid="page-auth-callback" narrow>
      {error ? (
        <>
          <ErrorState error={error} />
          <p>
            <Link to="/">Sign in</Link> · <Link to="/reset-password">Get a new link by e-mail</Link>
          </p>
        </>
      ) : (
        <Loading what="Signing you in" />
      )}
    </Page>
  );
}
