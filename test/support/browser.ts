import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { AxeBuilder } from "@axe-core/playwright";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { ROOT } from "./process.ts";

/**
 * The browser tests' Chromium: Debian's `chromium` package (/usr/bin/chromium, or CHROMIUM_PATH),
 * driven by playwright-core, which downloads no browser of its own. Each launch gets a fresh
 * profile (a temporary --user-data-dir that Playwright makes and removes), and the flags keep it
 * off the network: nothing but the server under test is ever contacted.
 *
 * Without the browser, `npm test` skips these suites with a message saying how to install it;
 * with CI=true (.ci/run, which installs it) a missing browser is a failure.
 */

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

/** Where screenshots go: git-ignored, kept by CI as artefacts. */
export const ARTIFACTS = path.join(ROOT, "artifacts", "console");

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--no-default-browser-check",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-extensions",
  "--disable-default-apps",
  "--disable-domain-reliability",
  "--metrics-recording-only",
  "--mute-audio",
  "--autoplay-policy=no-user-gesture-required",
];

export const CI = process.env.CI === "true" || process.env.CI === "1";

/**
 * `false` when the browser is there; else the reason to skip, except under CI where the missing
 * browser throws (the suite fails rather than passing without running).
 */
export function browserMissing(): string | false {
  if (fs.existsSync(CHROMIUM_PATH)) return false;
  const message = `Chromium not found at ${CHROMIUM_PATH}: the browser tests need Debian's chromium package (apt-get install -y chromium; .ci/run installs it), or CHROMIUM_PATH`;
  if (CI) throw new Error(`${message}. CI=true: browser tests may not be skipped.`);
  return message;
}

/**
 * `false` when the console is built (`npm run build:console`, which npm install runs through
 * `prepare`); else the reason to skip, except under CI, where it throws.
 */
export function consoleMissing(): string | false {
  if (fs.existsSync(path.join(ROOT, "console", "dist", "index.html"))) return false;
  const message = "console/dist is missing: run `npm run build:console` (npm install runs it)";
  if (CI) throw new Error(`${message}. CI=true: browser tests may not be skipped.`);
  return message;
}

export const consoleBuilt = (): boolean => consoleMissing() === false;

/** The same for the portal's build (portal/dist, made by the same `npm run build:console`). */
export function portalMissing(): string | false {
  if (fs.existsSync(path.join(ROOT, "portal", "dist", "index.html"))) return false;
  const message = "portal/dist is missing: run `npm run build:console` (npm install runs it)";
  if (CI) throw new Error(`${message}. CI=true: browser tests may not be skipped.`);
  return message;
}

export async function launchBrowser(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    // Playwright adds its own --headless and --user-data-dir (a fresh temporary profile) too.
    headless: true,
    args: [...CHROMIUM_FLAGS, ...extraArgs],
    // A hung browser fails the test instead of hanging the suite.
    timeout: 30_000,
  });
}

export type Device = "desktop" | "phone";

export const DEVICES: Record<Device, Parameters<Browser["newContext"]>[0]> = {
  desktop: { viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 },
  phone: {
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 1,
    isMobile: true,
    hasTouch: true,
    userAgent:
      "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Mobile Safari/537.36",
  },
};

/**
 * A context for one device, every request outside `allowOrigin` refused (the console must load
 * nothing from the internet: a refused request is recorded in `offsite`, and `assertNoOffsite`
 * fails on it). Several origins where the page rightly talks to more than its server (an S3
 * bucket on loopback that uploads go to).
 */
export async function newContext(
  browser: Browser,
  device: Device,
  allowOrigin: string | string[],
  storageState?: Awaited<ReturnType<BrowserContext["storageState"]>>,
): Promise<BrowserContext & { offsite: string[] }> {
  const context = (await browser.newContext({
    ...DEVICES[device],
    ...(storageState ? { storageState } : {}),
    locale: "en-GB",
    timezoneId: "UTC",
    colorScheme: "light",
    reducedMotion: "reduce",
  })) as BrowserContext & { offsite: string[] };
  context.offsite = [];
  context.setDefaultTimeout(15_000);
  context.setDefaultNavigationTimeout(30_000);
  const allowed = new Set(
    (Array.isArray(allowOrigin) ? allowOrigin : [allowOrigin]).map((o) => new URL(o).origin),
  );
  await context.route(
    (url) => !allowed.has(url.origin) && url.protocol !== "data:" && url.protocol !== "blob:",
    (route) => {
      context.offsite.push(route.request().url());
      return route.abort("blockedbyclient");
    },
  );
  return context;
}

export function assertNoOffsite(context: BrowserContext & { offsite: string[] }): void {
  assert.deepEqual(context.offsite, [], "the console requested something outside the server");
}

/** The serious and critical accessibility violations axe finds (WCAG 2.x A/AA rules and best practices). */
export async function axeViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map(
      (v) =>
        `${v.impact} ${v.id}: ${v.help} (${v.helpUrl.replace(/\?.*$/, "")}) at ${v.nodes
          .slice(0, 5)
          .map((n) => n.target.join(" "))
          .join(", ")}${v.nodes.length > 5 ? ` and ${v.nodes.length - 5} more` : ""}`,
    );
}

/** Fails on any serious or critical axe violation, naming each. */
export async function assertAccessible(page: Page, name: string): Promise<void> {
  const violations = await axeViolations(page);
  assert.deepEqual(violations, [], `axe on ${name} (${page.url()}):\n${violations.join("\n")}`);
}

/**
 * Fails when the page itself scrolls sideways (a wide table must scroll inside its own region),
 * naming the outermost elements that stick out of the viewport.
 */
export async function assertNoSidewaysScroll(page: Page, name: string): Promise<void> {
  const found = await page.evaluate(() => {
    // Runs in the page; the tests are compiled without the DOM's types, so the little used is typed here.
    type Box = { right: number; width: number };
    type El = { getBoundingClientRect(): Box; parentElement: El | null; tagName: string; className: unknown };
    const document = (
      globalThis as unknown as {
        document: {
          documentElement: { clientWidth: number; scrollWidth: number };
          body: { querySelectorAll(s: string): Iterable<El> };
        };
      }
    ).document;
    const width = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth <= width + 1) return [];
    const out: string[] = [];
    for (const el of document.body.querySelectorAll("*")) {
      const box = el.getBoundingClientRect();
      if (box.right <= width + 1 || box.width === 0) continue;
      const parent = el.parentElement?.getBoundingClientRect();
      if (parent && parent.right > width + 1) continue;
      out.push(
        `${el.tagName.toLowerCase()}${el.className ? `.${String(el.className).split(" ").join(".")}` : ""} (right ${Math.round(box.right)} px)`,
      );
    }
    return [
      `page ${document.documentElement.scrollWidth} px wide in a ${width} px viewport`,
      ...out.slice(0, 5),
    ];
  });
  assert.deepEqual(found, [], `${name} scrolls sideways: ${found.join("; ")}`);
}

/** A full-page screenshot into artifacts/console/<name>-<device>.png; returns its path. */
export async function screenshot(page: Page, name: string, device: Device): Promise<string> {
  await assertNoSidewaysScroll(page, `${name} (${device})`);
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}-${device}.png`);
  await page.screenshot({ path: file, fullPage: true, animations: "disabled", caret: "hide" });
  return file;
}

/**
 * Records errors the page throws or logs, so a test can assert that a page worked cleanly
 * (a failed fetch the page shows as an error is the page's business; an uncaught exception is a bug).
 */
export function watchPageErrors(page: Page, errors: string[] = []): string[] {
  page.on("pageerror", (e) => errors.push(`${page.url()}: ${e.message}`));
  return errors;
}
