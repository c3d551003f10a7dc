import type { Page } from "playwright-core";

/**
 * Driving the console's pages through the headings and data-testids console/TESTING.md lists
 * (h-console-app keeps them stable for these tests).
 */

export const tid = (id: string) => `[data-testid="${id}"]`;

/** The review queue is on screen and usable: a row to open. */
export const QUEUE_READY = tid("review-row");

/** Types the tenant's slug on the sign-in page and waits until the page names the tenant. */
export async function chooseTenant(page: Page, slug: string): Promise<void> {
  await page.locator(tid("page-sign-in")).waitFor();
  await page.locator(tid("signin-tenant")).fill(slug);
  await page
    .locator(tid("signin-tenant-name"))
    .filter({ hasText: `(${slug})` })
    .waitFor();
}

export async function signInWithPassword(
  page: Page,
  who: { slug?: string; email: string; password: string },
): Promise<void> {
  await page.locator(tid("page-sign-in")).waitFor();
  if (who.slug) await chooseTenant(page, who.slug);
  await page.locator(tid("signin-email")).fill(who.email);
  await page.locator(tid("signin-password")).fill(who.password);
  await page.locator(tid("signin-submit")).click();
}
