import type { Account } from "../api/portal.ts";
import { Page } from "../ui.tsx";
import { Keys } from "./developers/Keys.tsx";
import { Webhooks } from "./developers/Webhooks.tsx";

/** Who manages an account's keys and webhooks: its owners and admins (the database decides too). */
export const canManage = (account: Account | undefined): boolean =>
  account?.role === "owner" || account?.role === "admin";

/** The developers' corner: the account's API keys and webhook endpoints, for its owners and admins. */
export function Developers({ account }: { account: Account }) {
  if (!canManage(account))
    return (
      <Page title="Developers" testid="page-developers">
        <p data-testid="developers-refused">
          API keys and webhooks of {account.name} are managed by its owners and admins. Ask one of them if
          your software needs to reach the API.
        </p>
      </Page>
    );
  return (
    <Page title="Developers" testid="page-developers">
      <p>
        For software of your own that works with {account.name}: the{" "}
        <a href="/api/public/v1/docs">public API's reference</a> says what each call does.
      </p>
      <Keys accountId={account.id} />
      <Webhooks accountId={account.id} />
    </Page>
  );
}
