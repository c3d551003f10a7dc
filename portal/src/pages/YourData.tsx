import { useState } from "react";
import { Link } from "../../../ui-shared/router.tsx";
import { type Account, accessToken, PlainError } from "../api/portal.ts";
import { failure } from "../api/public.ts";
import { FormError, Page } from "../ui.tsx";

/**
 * Downloads one of the public API's JSON archives with the member's own token (an address alone
 * would not carry it), saved under the name the server gives it (docs/portal.md, "Your data").
 */
async function downloadArchive(path: string, accountId: string | null, fallbackName: string): Promise<void> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${await accessToken()}`,
    accept: "application/json",
  };
  if (accountId !== null) headers["backline-account"] = accountId;
  let response: Response;
  try {
    response = await fetch(`/api/public/v1${path}`, { headers });
  } catch {
    throw new PlainError("The server could not be reached. Check your connection and try again.", {
      code: "network",
    });
  }
  if (!response.ok) {
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      body = undefined;
    }
    throw failure(response.status, body);
  }
  const blob = await response.blob();
  const disposition = response.headers.get("content-disposition") ?? "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] ?? fallbackName;
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function Download({
  label,
  busyLabel,
  get,
  testid,
}: {
  label: string;
  busyLabel: string;
  get: () => Promise<void>;
  testid: string;
}) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(false);
  const run = async () => {
    setError(null);
    setDone(false);
    setBusy(true);
    try {
      await get();
      setDone(true);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div>
      <div className="buttons">
        <button type="button" disabled={busy} onClick={() => void run()} data-testid={testid}>
          {busy ? busyLabel : label}
        </button>
      </div>
      <p role="status" className="hint" data-testid={`${testid}-status`}>
        {done ? "Downloaded: look in your downloads folder." : ""}
      </p>
      <FormError error={error} testid={`${testid}-error`} />
    </div>
  );
}

/**
 * The member's own data (GDPR articles 15 and 20): everything Backline holds about them as one
 * JSON file (GET /me/export), and for an account's owners and admins the account's catalogue
 * (GET /catalogue/export).
 */
export function YourData({ account }: { account: Account | undefined }) {
  const managesAccount = account?.role === "owner" || account?.role === "admin";
  return (
    <Page title="Your data" testid="page-your-data" narrow>
      <section aria-labelledby="my-data-heading">
        <h2 id="my-data-heading">Everything we hold about you</h2>
        <p>
          One JSON file with your sign-in details, your memberships, invitations, notifications, support
          tickets, the API keys you created (never the keys themselves), what you are paid, the mail sent to
          you and the audit log&apos;s entries about you.
        </p>
        <Download
          label="Download my data"
          busyLabel="Preparing your file…"
          get={() => downloadArchive("/me/export", null, "my-data.json")}
          testid="download-my-data"
        />
      </section>
      {account && managesAccount ? (
        <section aria-labelledby="catalogue-heading">
          <h2 id="catalogue-heading">The catalogue of {account.name}</h2>
          <p>
            One JSON file with every artist and release of the account, their tracks, and where each cover and
            audio file is kept. You can also <Link to="/transfer">bring a catalogue in</Link>.
          </p>
          <Download
            label="Export catalogue"
            busyLabel="Preparing the catalogue…"
            get={() => downloadArchive("/catalogue/export", account.id, "catalogue.json")}
            testid="export-catalogue"
          />
        </section>
      ) : null}
      <p>
        To change your password, <Link to="/set-password">choose a new one</Link>.
      </p>
    </Page>
  );
}
