import assert from "node:assert/strict";
import { after, before } from "node:test";
import type { Browser, Page } from "playwright-core";
import { artworkJpeg, wav } from "../../src/storage/samples.ts";
import {
  assertAccessible,
  assertNoOffsite,
  browserMissing,
  launchBrowser,
  newContext,
  portalMissing,
  screenshot,
  watchPageErrors,
} from "./browser.ts";
import { type ConsoleStack, startConsoleStack } from "./console.ts";
import { tid } from "./console-ui.ts";
import { ENGINES } from "./db.ts";
import { type PortalWorld, seedPortalWorld } from "./portal-seed.ts";

/**
 * The portal's browser stories (test/portal/): each in its own desktop context on `browser`,
 * with `record` for a page's axe check and screenshots on a desktop and a phone
 * (artifacts/console/portal-*), and a check at its end that nothing was loaded from elsewhere.
 */
export function portalStories(
  browser: () => Browser,
  url: () => string,
  pageErrors: string[],
  otherOrigins: () => string[] = () => [],
) {
  async function open(name: string) {
    const context = await newContext(browser(), "desktop", [url(), ...otherOrigins()]);
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

/**
 * A describe block's portal: `npm start`'s server on the embedded database with the portal's
 * world (test/support/portal-seed.ts) and a Chromium (with `launchArgs` besides the usual, e.g.
 * `--host-resolver-rules` to reach the tenant's own domain on loopback), started before its tests
 * and stopped after (a page that threw fails the block). `stack` and `world` are set once `before`
 * has run.
 */
export function portalSuite(
  env: Record<string, string> = {},
  options: { otherOrigins?: () => string[]; launchArgs?: string[] } = {},
) {
  const pageErrors: string[] = [];
  const started: { stack: ConsoleStack; world: PortalWorld; browser: Browser } = {
    stack: undefined as unknown as ConsoleStack,
    world: undefined as unknown as PortalWorld,
    browser: undefined as unknown as Browser,
  };
  const stories = portalStories(
    () => started.browser,
    () => started.stack.url,
    pageErrors,
    options.otherOrigins,
  );
  const suite = {
    get stack(): ConsoleStack {
      return started.stack;
    },
    get world(): PortalWorld {
      return started.world;
    },
    /** The tenant's portal: `/portal/t/<slug>`. */
    portal: (): string => `${started.stack.url}/portal/t/${started.world.tenant.slug}`,
    story: stories.story,
    signIn: stories.signIn,
  };
  before(async () => {
    const [stack, launched] = await Promise.all([
      startConsoleStack("pglite", seedPortalWorld, env),
      launchBrowser(options.launchArgs),
    ]);
    started.stack = stack.stack;
    started.world = stack.seeded;
    started.browser = launched;
  });
  after(async () => {
    await started.browser?.close();
    await started.stack?.stop();
    assert.deepEqual(pageErrors, [], "the portal threw in the page");
  });
  return suite;
}

/** Why a portal browser file does not run here, or false: once, on the embedded database, with Chromium and the build. */
export const portalSkip = (): string | false =>
  (ENGINES.includes("pglite")
    ? false
    : "the browser tests run once, on the embedded database (the PGlite pass of the suite)") ||
  browserMissing() ||
  portalMissing();

/**
 * In the release editor: a generated cover and the first track's audio chosen in their controls,
 * then both waited for until their checks judge them valid (the cover's verdict names its size)
 * and the completeness list no longer asks for a cover.
 * Returns the audio's bytes.
 */
export async function uploadCoverAndAudio(page: Page, audioName: string): Promise<Buffer> {
  await page.locator(tid("cover-input")).setInputFiles({
    name: "cover.jpg",
    mimeType: "image/jpeg",
    buffer: await artworkJpeg(),
  });
  await page.locator(`${tid("cover-verdict")}[data-status="valid"]`).waitFor({ timeout: 60_000 });
  assert.match(await page.locator(tid("cover-verdict")).innerText(), /3000 × 3000/);
  // The completeness list beside it stops asking for a cover at once, not at the next change.
  await page
    .locator(`${tid("problem")}[data-code="artwork_missing"]`)
    .waitFor({ state: "detached", timeout: 10_000 });
  const audio = wav({ seconds: 2 });
  await page
    .locator(tid("track-audio-0-input"))
    .setInputFiles({ name: audioName, mimeType: "audio/wav", buffer: audio });
  await page.locator(`${tid("track-audio-0-verdict")}[data-status="valid"]`).waitFor({ timeout: 60_000 });
  return audio;
}
