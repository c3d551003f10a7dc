import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Browser } from "playwright-core";
import { putProvider } from "../../src/auth/oidc-operator.ts";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { launchBrowser } from "../support/browser.ts";
import { type ConsoleStack, startConsoleStack } from "../support/console.ts";
import { tid } from "../support/console-ui.ts";
import { type LoopbackProvider, startOidcProvider } from "../support/oidc-provider.ts";
import { portalSkip, portalStories } from "../support/portal-browser.ts";
import { type PortalWorld, seedPortalWorld } from "../support/portal-seed.ts";

/**
 * Sign-in providers on the portal (issue 42, item 6; docs/portal.md "Sign-in providers") in
 * headless Chromium: the tenant set up an OpenID Connect provider (a real one on loopback,
 * oidc-provider), so its sign-in page shows "Continue with <name>"; the member clicks it, signs in
 * at the provider (its development login and consent forms), and lands on their releases,
 * signed in as the user whose verified address the provider gave.
 */

const skip = portalSkip();

describe("the portal in Chromium: sign-in providers", { skip }, () => {
  const pageErrors: string[] = [];
  let stack: ConsoleStack;
  let world: PortalWorld;
  let browser: Browser;
  let idp: LoopbackProvider;
  const stories = portalStories(
    () => browser,
    () => stack.url,
    pageErrors,
    () => [idp.issuer],
  );
  const portal = () => `${stack.url}/portal/t/${world.tenant.slug}`;

  before(async () => {
    const seed = async (db: Db, config: Config) => {
      const seeded = await seedPortalWorld(db, config);
      idp = await startOidcProvider({ redirectUri: `${config.publicUrl}/auth/v1/callback` });
      await putProvider(
        db,
        seeded.tenant.id,
        "loopback",
        {
          display_name: "Loopback ID",
          issuer: idp.issuer,
          client_id: idp.clientId,
          client_secret: idp.clientSecret,
        },
        config.publicUrl,
      );
      return seeded;
    };
    const [started, launched] = await Promise.all([
      startConsoleStack("pglite", seed, { OIDC_ALLOW_PRIVATE: "true" }),
      launchBrowser(),
    ]);
    stack = started.stack;
    world = started.seeded;
    browser = launched;
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
    await idp?.close();
    assert.deepEqual(pageErrors, [], "the portal threw in the page");
  });

  test("Continue with the provider signs the member in at the provider and back", async () => {
    const sub = `portal-${randomUUID()}`;
    idp.accounts.set(sub, { email: world.artist.email, email_verified: true, name: "Tidewater" });
    await stories.story("sign-in-provider", async ({ page, record }) => {
      await page.goto(portal());
      await page.locator(tid("page-sign-in")).waitFor();
      const button = page.getByRole("button", { name: "Continue with Loopback ID" });
      await button.waitFor();
      await record("sign-in-providers", "signin-providers");
      await button.click();
      // The provider's own pages (oidc-provider's development login, then consent).
      await page.waitForURL((url) => url.origin === new URL(idp.issuer).origin);
      await page.locator('input[name="login"]').fill(sub);
      await page.locator('input[name="password"]').fill("any");
      await page.locator('button[type="submit"]').click();
      await page.locator('input[name="prompt"][value="consent"]').waitFor({ state: "attached" });
      await page.locator('button[type="submit"]').click();
      await page.locator(tid("page-releases")).waitFor();
      assert.equal(await page.locator(tid("user-email")).innerText(), world.artist.email);
    });
  });
});
