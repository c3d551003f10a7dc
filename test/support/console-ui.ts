import { after, before } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import {
  browserMissing,
  consoleMissing,
  launchBrowser,
  newContext,
  portalMissing,
  watchPageErrors,
} from "./browser.ts";
import { type ConsoleStack, startConsoleStack } from "./console.ts";
import { PASSWORD } from "./console-seed.ts";
import { ENGINES } from "./db.ts";

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

/**
 * Why a console browser file does not run here, or false: once, on the embedded database (the
 * PGlite pass of the suite), with Chromium and the console's build (and the portal's, with
 * `portal`). Under CI a missing browser or build throws instead (test/support/browser.ts).
 */
export function consoleSkip(options: { portal?: boolean } = {}): string | false {
  return (
    browserMissing() ||
    (ENGINES.includes("pglite")
      ? false
      : "the browser tests run once, on the embedded database (the PGlite pass of the suite)") ||
    consoleMissing() ||
    (options.portal ? portalMissing() : false)
  );
}

/** What a describe block of console browser tests works with, once `before` has run. */
export interface ConsoleSuite<T> {
  /** `npm start`'s server on its own embedded database, seeded by the block's seed. */
  readonly stack: ConsoleStack;
  /** What the seed returned. */
  readonly world: T;
  readonly browser: Browser;
  /** A desktop context that refuses anything outside the server (`assertNoOffsite`). */
  readonly context: BrowserContext & { offsite: string[] };
  /** The context's page. */
  readonly page: Page;
  /** What `page` threw (`watchPageErrors`); the tests assert it empty where they mean to. */
  readonly pageErrors: string[];
  /** Opens `path` of the server on `page` and signs in there with the tests' PASSWORD. */
  signIn(path: string, who: { slug: string; email: string }, page?: Page): Promise<void>;
}

/**
 * A describe block's console: `npm start`'s server on the embedded database seeded by `seed`
 * (test/support/console.ts), a Chromium, and one desktop context and page watched for errors,
 * started before the block's tests and stopped after them. Call it in the describe's body.
 */
export function consoleSuite<T>(seed: (db: Db, config: Config) => Promise<T>): ConsoleSuite<T> {
  const pageErrors: string[] = [];
  let started:
    | {
        stack: ConsoleStack;
        world: T;
        browser?: Browser;
        context?: BrowserContext & { offsite: string[] };
        page?: Page;
      }
    | undefined;
  const need = <K extends "stack" | "world" | "browser" | "context" | "page">(
    key: K,
  ): NonNullable<NonNullable<typeof started>[K]> => {
    const value = started?.[key];
    if (value === undefined) throw new Error(`consoleSuite: ${key} is there once the block's before has run`);
    return value as NonNullable<NonNullable<typeof started>[K]>;
  };
  before(async () => {
    const { stack, seeded } = await startConsoleStack("pglite", seed);
    started = { stack, world: seeded };
    started.browser = await launchBrowser();
    started.context = await newContext(started.browser, "desktop", stack.url);
    started.page = await started.context.newPage();
    watchPageErrors(started.page, pageErrors);
  });
  after(async () => {
    await started?.browser?.close();
    await started?.stack.stop();
  });
  return {
    get stack() {
      return need("stack");
    },
    get world() {
      return need("world");
    },
    get browser() {
      return need("browser");
    },
    get context() {
      return need("context");
    },
    get page() {
      return need("page");
    },
    pageErrors,
    async signIn(path, who, page = need("page")) {
      await page.goto(`${need("stack").url}${path}`);
      await signInWithPassword(page, { ...who, password: PASSWORD });
    },
  };
}
