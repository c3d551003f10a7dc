import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";

/**
 * The portal's "Your data" page (docs/portal.md, "Your data") in headless Chromium against
 * `npm start`'s server: the owner of "Lantern Records" downloads everything Backline holds about
 * them (GET /me/export) and the account's catalogue (GET /catalogue/export), and each file is
 * theirs; a viewer of an account gets their own data but is offered no catalogue export.
 */

const skip = portalSkip();

/** Clicks `testid` and answers the file the browser saved: its name and parsed JSON. */
async function download(
  page: Page,
  testid: string,
): Promise<{ name: string; json: Record<string, unknown> }> {
  const [saved] = await Promise.all([page.waitForEvent("download"), page.locator(tid(testid)).click()]);
  const file = await saved.path();
  return { name: saved.suggestedFilename(), json: JSON.parse(await readFile(file, "utf8")) };
}

describe("the portal in Chromium: your data", { skip }, () => {
  const stories = portalSuite();
  const portal = stories.portal;

  test("an owner downloads their own data and the account's catalogue, each file theirs", async () => {
    await stories.story("your-data", async ({ page, record }) => {
      const { lantern } = stories.world;
      await stories.signIn(page, portal(), lantern.email, PASSWORD);
      await page.locator(tid("nav-your-data")).click();
      await page.locator(tid("page-your-data")).waitFor();
      await record("your-data", "export-catalogue");

      const mine = await download(page, "download-my-data");
      assert.match(mine.name, /^backline-my-data-\d{4}-\d{2}-\d{2}\.json$/);
      assert.equal(mine.json.format, "backline.person-export");
      assert.equal((mine.json.user as { email: string }).email, lantern.email);
      const memberships = mine.json.memberships as { account_id: string; role: string }[];
      assert.ok(
        memberships.some((m) => m.account_id === lantern.accountId && m.role === "owner"),
        JSON.stringify(memberships),
      );
      await page.locator(`${tid("download-my-data-status")}:has-text("Downloaded")`).waitFor();

      const catalogue = await download(page, "export-catalogue");
      assert.match(catalogue.name, /\.json$/);
      assert.equal(catalogue.json.format, "backline.catalogue-export");
      assert.equal(catalogue.json.account_id, lantern.accountId);
      const releases = (catalogue.json.releases as { id: string }[]).map((r) => r.id).sort();
      assert.deepEqual(releases, [lantern.nightDrive, lantern.daybreak].sort());
    });
  });

  test("a plain member of an account is offered no catalogue export there; as owner elsewhere, only that account's", async () => {
    await stories.story("your-data-member", async ({ page }) => {
      const { far } = stories.world;
      await stories.signIn(page, portal(), far.email, PASSWORD);
      const account = page.getByLabel("Account", { exact: true });
      await account.selectOption({ label: "Second Label" });
      await page.locator(tid("release-row")).filter({ hasText: "Second Song" }).waitFor();
      await page.locator(tid("nav-your-data")).click();
      await page.locator(tid("download-my-data")).waitFor();
      assert.equal(await page.locator(tid("export-catalogue")).count(), 0, "a member of Second Label");
      const mine = await download(page, "download-my-data");
      assert.equal((mine.json.user as { email: string }).email, far.email);

      await account.selectOption({ label: "Far Away Label" });
      await page.locator(tid("nav-your-data")).click();
      const catalogue = await download(page, "export-catalogue");
      assert.deepEqual(
        (catalogue.json.releases as { id: string }[]).map((r) => r.id),
        [far.releaseId],
        "Far Away Label's release only",
      );
    });
  });
});
