import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";

/**
 * A release's add-ons in the portal (docs/operator.md "Add-ons") in headless Chromium against
 * `npm start`'s server: the tenant sells YouTube Content ID and an extra store (defined through
 * /admin/v1 with its service-role key); the owner of "Lantern Records" opens Night Drive, sees
 * both with their prices (the extra store named as the portal names stores, not by its code),
 * starts buying one and cancels, then buys Content ID after the page says what is charged to the
 * account. The desk's order list then has it at the price shown, and the page shows it added; a
 * second look buys nothing more. Axe and screenshots on desktop and phone.
 */

const skip = portalSkip();

describe("the portal in Chromium: add-ons", { skip }, () => {
  const stories = portalSuite();
  const portal = stories.portal;

  const desk = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${stories.stack.url}/admin/v1${path}`, {
      method,
      headers: {
        apikey: stories.world.tenant.serviceKey,
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
    return (await res.json()) as T;
  };

  test("the owner adds YouTube Content ID to a release after being told what it costs; the desk sees the order", async () => {
    await desk("POST", "/add-ons", {
      code: "youtube_content_id",
      name: "YouTube Content ID",
      description: "We register the release with Content ID and handle the claims.",
      price: "4.99",
      currency: "USD",
      billing: "per_year",
      effect: "informational",
    });
    await desk("POST", "/add-ons", {
      code: "apple_music",
      name: "Apple Music delivery",
      price: "2.00",
      currency: "USD",
      billing: "per_release",
      effect: "unlock_store",
      store_codes: ["apple_music"],
    });
    const { lantern } = stories.world;
    await stories.story("add-ons", async ({ page, record }) => {
      await stories.signIn(page, portal(), lantern.email, PASSWORD);
      await page.locator(tid("page-releases")).waitFor();
      await page.goto(`${portal()}/releases/${lantern.nightDrive}`);
      await page.locator(tid("release-add-ons")).waitFor();
      const item = (code: string) => page.locator(`${tid("add-on")}[data-code="${code}"]`);
      assert.equal(await page.locator(tid("add-on")).count(), 2);
      assert.equal(
        await item("youtube_content_id").locator(tid("add-on-price")).innerText(),
        "4.99 USD a year",
      );
      assert.equal(await item("apple_music").locator(tid("add-on-price")).innerText(), "2.00 USD once");
      // Without a description, what it does names the store as the portal's store list does (GET
      // /rules), never by its code.
      const unlocks = await item("apple_music").innerText();
      assert.match(unlocks, /Delivers this release to Apple Music\./);
      assert.doesNotMatch(unlocks, /apple_music/);
      await record("add-ons", "release-add-ons");

      // Started, then cancelled: nothing bought.
      await item("apple_music").locator(tid("add-on-buy")).click();
      await page.locator(tid("add-on-cancel")).click();
      await item("apple_music").locator(tid("add-on-buy")).waitFor();

      await item("youtube_content_id").getByRole("button", { name: "Add YouTube Content ID" }).click();
      const box = page.locator(tid("add-on-confirm-box"));
      await box.waitFor();
      assert.match(
        await box.innerText(),
        /Charge 4\.99 USD a year to Lantern Records for YouTube Content ID\?/,
      );
      await record("add-ons-confirm", "add-on-confirm-box");
      await page.locator(tid("add-on-confirm")).click();
      await page.locator(tid("add-on-bought-notice")).waitFor();
      await page.locator(`${tid("add-on")}[data-code="youtube_content_id"][data-bought="true"]`).waitFor();
      await item("youtube_content_id").locator(tid("add-on-active")).waitFor();
      assert.equal(await item("apple_music").getAttribute("data-bought"), "false");
      await record("add-ons-bought", "add-on-bought-notice");

      const orders = await desk<{ data: { release_title: string; account_name: string; price: string }[] }>(
        "GET",
        "/add-ons/youtube_content_id/orders",
      );
      assert.deepEqual(
        orders.data.map((o) => [o.release_title, o.account_name, o.price]),
        [["Night Drive", "Lantern Records", "4.99"]],
      );
      // Reloaded: still added, no button to buy it twice.
      await page.reload();
      await item("youtube_content_id").locator(tid("add-on-active")).waitFor();
      assert.equal(await item("youtube_content_id").locator(tid("add-on-buy")).count(), 0);
    });
  });
});
