import { useQuery } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import {
  lastTenantSlug,
  loadTenantConfig,
  sendSignInCode,
  signInWithPassword,
  verifyCode,
} from "../api/auth.ts";
import { describeError } from "../api/errors.ts";
import type { TenantConfig } from "../api/session.ts";
import { useLocation } from "../router.tsx";
import { Page } from "../ui/common.tsx";

/**
 * Sign-in on a tenant's /auth/v1: the installation's default tenant unless a slug is given
 * (`/console/?tenant=acme` or the field). A password, or a code mailed to the address.
 */
export function SignIn() {
  const { search } = useLocation();
  const [slug, setSlug] = useState(search.get("tenant") ?? lastTenantSlug() ?? "");
  const [mode, setMode] = useState<"password" | "code">("password");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [code, setCode] = useState("");
  const [codeType, setCodeType] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const ids = useId();

  const tenant = useQuery({
    queryKey: ["tenant-config", slug.trim()],
    queryFn: () => loadTenantConfig(slug.trim() || undefined),
    retry: false,
    staleTime: 300_000,
  });

  async function run(action: (t: TenantConfig) => Promise<void>) {
    setBusy(true);
    setError(null);
    try {
      const t = tenant.data ?? (await loadTenantConfig(slug.trim() || undefined));
      await action(t);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  }

  const onPassword = (event: FormEvent) => {
    event.preventDefault();
    void run((t) => signInWithPassword(t, email.trim(), password));
  };
  const onSend = (event: FormEvent) => {
    event.preventDefault();
    void run(async (t) => setCodeType(await sendSignInCode(t, email.trim())));
  };
  const onVerify = (event: FormEvent) => {
    event.preventDefault();
    void run((t) => verifyCode(t, email.trim(), code.trim(), codeType ?? "magiclink"));
  };

  const shownError = error ? describeError(error) : null;
  return (
    <div className="app">
      <main id="main" className="signin-main">
        <Page title="Sign in to Backline Console" testid="page-sign-in">
          <div className="card signin">
            <label htmlFor={`${ids}-tenant`}>Tenant</label>
            <input
              id={`${ids}-tenant`}
              value={slug}
              onChange={(e) => setSlug(e.target.value)}
              placeholder={tenant.data && !slug ? tenant.data.slug : "tenant slug"}
              autoComplete="organization"
              aria-describedby={`${ids}-tenant-help`}
              data-testid="signin-tenant"
            />
            <p id={`${ids}-tenant-help`} className="help" data-testid="signin-tenant-name">
              {tenant.isPending
                ? "Looking up the tenant…"
                : tenant.isError
                  ? describeError(tenant.error).detail
                  : `Signing in to ${tenant.data.name} (${tenant.data.slug}). Leave empty for the default tenant.`}
            </p>

            <fieldset className="tabs">
              <legend className="sr-only">How to sign in</legend>
              <button
                type="button"
                aria-pressed={mode === "password"}
                onClick={() => setMode("password")}
                data-testid="signin-mode-password"
              >
                Password
              </button>
              <button
                type="button"
                aria-pressed={mode === "code"}
                onClick={() => setMode("code")}
                data-testid="signin-mode-code"
              >
                E-mail me a code
              </button>
            </fieldset>

            {mode === "password" ? (
              <form onSubmit={onPassword} aria-label="Sign in with a password">
                <EmailField id={`${ids}-email`} value={email} onChange={setEmail} />
                <label htmlFor={`${ids}-password`}>Password</label>
                <input
                  id={`${ids}-password`}
                  type="password"
                  required
                  value={password}
                  onChange={(e) => setPassword(e.target.value)}
                  autoComplete="current-password"
                  data-testid="signin-password"
                />
                <button type="submit" className="primary" disabled={busy} data-testid="signin-submit">
                  {busy ? "Signing in…" : "Sign in"}
                </button>
              </form>
            ) : codeType === null ? (
              <form onSubmit={onSend} aria-label="E-mail me a sign-in code">
                <EmailField id={`${ids}-email2`} value={email} onChange={setEmail} />
                <button type="submit" className="primary" disabled={busy} data-testid="signin-send-code">
                  {busy ? "Sending…" : "Send me a code"}
                </button>
              </form>
            ) : (
              <form onSubmit={onVerify} aria-label="Enter the code">
                <p data-testid="signin-code-sent">
                  We sent a sign-in link and code to <strong>{email}</strong>. Open the link, or type the
                  code.
                </p>
                <p className="help" data-testid="signin-mailbox-hint">
                  No mail server configured? Backline keeps the mail in its local mailbox: run{" "}
                  <code>npx backline mail list --to {email || "you@example.com"}</code> on the server.
                </p>
                <label htmlFor={`${ids}-code`}>Code</label>
                <input
                  id={`${ids}-code`}
                  inputMode="numeric"
                  autoComplete="one-time-code"
                  required
                  value={code}
                  onChange={(e) => setCode(e.target.value)}
                  data-testid="signin-code"
                />
                <button type="submit" className="primary" disabled={busy} data-testid="signin-verify">
                  {busy ? "Checking…" : "Sign in"}
                </button>
                <button type="button" className="link" onClick={() => setCodeType(null)}>
                  Use another address
                </button>
              </form>
            )}
            {shownError ? (
              <div className="error-state" role="alert" data-testid="signin-error">
                <strong>{shownError.title}</strong>
                <p>{shownError.detail}</p>
              </div>
            ) : null}
          </div>
        </Page>
      </main>
    </div>
  );
}

/** The address field of both ways to sign in (the code form keeps what the password form had). */
function EmailField({ id, value, onChange }: { id: string; value: string; onChange: (v: string) => void }) {
  return (
    <>
      <label htmlFor={id}>E-mail</label>
      <input
        id={id}
        type="email"
        required
        value={value}
        onChange={(e) => onChange(e.target.value)}
        autoComplete="username"
        data-testid="signin-email"
      />
    </>
  );
}
