import { useEffect, useState } from "react";
import { checkSecondFactor, lastTenantSlug, loadTenantConfig, sessionFromFragment } from "../api/auth.ts";
import { describeError } from "../api/errors.ts";
import { Link, navigate } from "../router.tsx";
import { Loading, Page } from "../ui/common.tsx";

/** Where a mailed sign-in link lands: the session is in the URL fragment. */
export function AuthCallback() {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const hash = location.hash;
    const query = new URLSearchParams(location.search);
    const slug = query.get("tenant") ?? lastTenantSlug();
    const via = query.get("via");
    loadTenantConfig(slug)
      .then(async (tenant) => {
        const result = sessionFromFragment(tenant, hash);
        // A user with a verified factor confirms the link's session with a code first (App shows it).
        if (!("error" in result)) await checkSecondFactor();
        if ("error" in result) setError(result.error);
        // An invitation (or a password reset not asked for by the console's code sign-in): choose a password.
        else if (result.type === "invite" || (result.type === "recovery" && via !== "code"))
          navigate("/password", { replace: true });
        else {
          const here = location.pathname.replace(/^\/console/, "") || "/";
          navigate(here === "/auth/callback" || here === "/" ? "/reviews" : here, { replace: true });
        }
      })
      .catch((e: unknown) => setError(describeError(e).detail));
  }, []);
  return (
    <div className="app">
      <main id="main" className="signin-main">
        <Page title="Signing in" testid="page-auth-callback">
          {error ? (
            <div className="error-state" role="alert" data-testid="signin-error">
              <p>{error}</p>
              <Link to="/">Back to sign-in</Link>
            </div>
          ) : (
            <Loading what="Signing in" />
          )}
        </Page>
      </main>
    </div>
  );
}
