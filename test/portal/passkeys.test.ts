import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { createTenant } from "../../src/tenancy/tenants.ts";
import { launchBrowser } from "../support/browser.ts";
import { type ConsoleStack, startConsoleStack } from "../support/console.ts";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalStories } from "../support/portal-browser.ts";
import { PASSWORD, type PortalWorld, seedPortalWorld } from "../support/portal-seed.ts";

/**
 * Passkeys on the portal (issue 42, item 5; docs/portal.md "Passkeys") in headless Chromium with
 * its virtual authenticator (CDP WebAuthn: CTAP2, internal transport, resident keys, user
 * verification): a member signed in with a password adds a passkey on their profile page, signs
 * out, and signs in again with the sign-in page's passkey button, which shows only where the
 * tenant turned passkeys on. WebAuthn needs a secure context: the browser opens the portal at
 * http://localhost (the server answers there as at 127.0.0.1), an address the tenant lists among
 * its redirect URLs, so the relying party is `localhost`.
 */

const skip = portalSkip();

describe("the portal in Chromium: passkeys", { skip }, () => {
  const pageErrors: string[] = [];
  let stack: ConsoleStack;
  let world: PortalWorld;
  let browser: Browser;
  // The same server by the name a browser treats as secure.
  const localUrl = () => stack.url.replace("127.0.0.1", "localhost");
  const stories = portalStories(
    () => browser,
    localUrl,
    pageErrors,
    () => [stack.url],
  );
  const portal = () => `${localUrl()}/portal/t/${world.tenant.slug}`;

  before(async () => {
    const seed = async (db: Db, config: Config) => {
      const seeded = await seedPortalWorld(db, config);
      const local = config.publicUrl.replace("127.0.0.1", "localhost");
      // The tenant turns passkeys on, and names the address its portal is opened at here.
      await db.asService((tx) =>
        tx.query(
          `update internal.tenants set settings = jsonb_set(settings, '{auth}',
             coalesce(settings -> 'auth', '{}'::jsonb) || jsonb_build_object('passkeys', true,
               'redirect_urls', jsonb_build_array($2::text)), true)
           where id = $1`,
          [seeded.tenant.id, `${local}/*`],
        ),
      );
      // A second tenant, passkeys left off (the default).
      await createTenant(db, { name: "Quiet", slug: "quiet" });
      return seeded;
    };
    const [started, launched] = await Promise.all([startConsoleStack("pglite", seed), launchBrowser()]);
    stack = started.stack;
    world = started.seeded;
    browser = launched;
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
    assert.deepEqual(pageErrors, [], "the portal threw in the page");
  });

  /** Chromium's virtual authenticator for this page: a platform authenticator with a screen lock. */
  async function virtualAuthenticator(page: Page) {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("WebAuthn.enable", { enableUI: false });
    const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "internal",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    const credentials = async () =>
      (await cdp.send("WebAuthn.getCredentials", { authenticatorId })).credentials;
    return { credentials };
  }

  test("a member adds a passkey on their profile, signs out, and signs in with it", async () => {
    await stories.story("passkeys", async ({ page, record }) => {
      const authenticator = await virtualAuthenticator(page);
      await stories.signIn(page, portal(), world.artist.email, PASSWORD);
      await page.locator(tid("page-releases")).waitFor();

      // The profile, through the address in the header.
      await page.locator(tid("user-email")).click();
      await page.locator(tid("page-profile")).waitFor();
      assert.equal(await page.locator(tid("profile-email")).innerText(), world.artist.email);
      await page.locator(tid("passkeys-empty")).waitFor();
      await record("profile-passkeys-empty", "passkeys");

      await page.getByLabel("Name (optional)").fill("This laptop");
      await page.getByRole("button", { name: "Add a passkey" }).click();
      await page.locator(tid("passkey-added")).waitFor();
      await page.locator(tid("passkey")).first().waitFor();
      assert.equal(await page.locator(tid("passkey-name")).innerText(), "This laptop");
      assert.match(await page.locator(tid("passkey")).innerText(), /not used yet/);
      const stored = await authenticator.credentials();
      assert.equal(stored.length, 1, "the authenticator holds one credential");
      assert.equal(stored[0]?.rpId, "localhost");
      assert.equal(stored[0]?.isResidentCredential, true);
      await record("profile-passkeys", "passkey-list");

      // Signed out: the sign-in page offers the passkey, and it signs the member in.
      await page.locator(tid("sign-out")).click();
      await page.locator(tid("page-sign-in")).waitFor();
      const button = page.getByRole("button", { name: "Sign in with a passkey" });
      await button.waitFor();
      await record("sign-in-passkey", "signin-passkey");
      await button.click();
      // Signed in where the member signed out (the profile's address), as after a password.
      await page.locator(tid("user-email")).waitFor();
      assert.equal(await page.locator(tid("user-email")).innerText(), world.artist.email);
      const [used] = await authenticator.credentials();
      assert.ok((used?.signCount ?? 0) >= 1, "the authenticator signed once more");

      // The profile says when it was last used; removed, it is gone from the list.
      await page.locator(tid("user-email")).click();
      await page.locator(tid("page-profile")).waitFor();
      await page.getByText(/last used/).waitFor();
      await page.getByRole("button", { name: "Remove passkey This laptop" }).click();
      await page.locator(tid("passkeys-empty")).waitFor();

      // With it removed, the passkey signs nobody in: the page says so in plain words.
      await page.locator(tid("sign-out")).click();
      await page.getByRole("button", { name: "Sign in with a passkey" }).click();
      await page.locator(tid("signin-error")).waitFor();
      assert.match(await page.locator(tid("signin-error")).innerText(), /passkey was not accepted/);
    });
  });

  test("a tenant without passkeys shows no passkey button", async () => {
    await stories.story("passkeys-off", async ({ page }) => {
      await page.goto(`${localUrl()}/portal/t/quiet/`);
      await page.locator(tid("page-sign-in")).waitFor();
      await page.waitForLoadState("networkidle");
      assert.equal(await page.locator(tid("signin-passkey")).count(), 0);
    });
  });
});
