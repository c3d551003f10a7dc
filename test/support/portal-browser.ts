import type { Browser, Page } from "playwright-core";
import { assertAccessible, assertNoOffsite, newContext, screenshot, watchPageErrors } from "./browser.ts";
import { tid } from "./console-ui.ts";

/**
 * The portal's browser stories (test/portal/): each in its own desktop context on `browser`,
 * with `record` for a page's axe check and screenshots on a desktop and a phone
 * (artifacts/console/portal-*), and a check at its end that nothing was loaded from elsewhere.
 */
export function portalStories(browser: () => Browser, url: () => string, pageErrors: string[]) {
  async function open(name: string) {
    const context = await newContext(browser(), "desktop", url());
    // Two cores shared with other work: a step may wait longer than the harness's 15 s.
    context.setDefaultTimeout(45_000);
    const page = await context.newPage();
    watchPageErrors(page, pageErrors);
    return {
      page,
      /** The page now: axe and a screenshot on the desktop, then at a phone's size. */
      async record(shot: string, testid: string) {
        await page.locator(tid(testid)).first().waitFor();
        await page.waitForLoadState("networkidle");
        await screenshot(page, `portal-${shot}`, "desktop");
        await assertAccessible(page, `${shot} (desktop)`);
        await page.setViewportSize({ width: 390, height: 844 });
        try {
          await page.locator(tid(testid)).first().waitFor();
          await screenshot(page, `portal-${shot}`, "phone");
          await assertAccessible(page, `${shot} (phone)`);
        } finally {
          await page.setViewportSize({ width: 1280, height: 800 });
        }
      },
      async done(failed?: unknown) {
        if (failed) await screenshot(page, `portal-FAILED-${name}`, "desktop").catch(() => undefined);
        assertNoOffsite(context);
        await context.close();
      },
    };
  }
  type Story = Awaited<ReturnType<typeof open>>;

  return {
    async story(name: string, fn: (s: Story) => Promise<void>): Promise<void> {
      const s = await open(name);
      try {
        await fn(s);
      } catch (e) {
        await s.done(e);
        throw e;
      }
      await s.done();
    },
    async signIn(page: Page, portal: string, email: string, password: string): Promise<void> {
      await page.goto(`${portal}/`);
      await page.getByLabel("Email", { exact: true }).fill(email);
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByRole("button", { name: "Sign in", exact: true }).click();
    },
  };
}
