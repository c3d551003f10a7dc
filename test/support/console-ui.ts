import type { Page } from "playwright-core";

/**
 * Driving the console's pages through the headings and data-testids console/TESTING.md lists
 * (h-console-app keeps them stable for these tests).
 */

export const tid = (id: string) => `[data-testid="${id}"]`;

/** The review queue is on screen and usable: a row to open. */
export const QUEUE_READY = tid("review-row");

export async function signInWithPassword(
  page: Page,
  who: { slug?: string; email: string; password: string },
): Promise<void> {
  await page.locator(tid("page-sign-in")).waitFor();
  if (who.slug) await page.locator(tid("signin-tenant")).fill(who.slug);
  // The tenant is looked up as the slug is typed: wait for its name before signing in.
  if (who.slug)
    await page
      .locator(tid("signin-tenant-name"))
      .filter({ hasText: `(${who.slug})` })
      .waitFor();
  await page.locator(tid("signin-email")).fill(who.email);
  await page.locator(tid("signin-password")).fill(who.password);
  await page.locator(tid("signin-submit")).click();
}
