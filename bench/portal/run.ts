// The portal's first load, its catalogue page and a release's page at 1,000 releases and 12,000
// tracks, beside a small label's in the same run (issue 38, "Performance"):
//   npm run bench:portal     # BENCH_RELEASES=1000, BENCH_TRACKS=12, BENCH_ROUNDS=5, BENCH_ENGINE=pglite|postgres
// Figures and how to read them: bench/README.md, "bench/portal".
import fs from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import type { BrowserContext, Page } from "playwright-core";
import { browserMissing, launchBrowser, newContext, portalMissing } from "../../test/support/browser.ts";
import { startConsoleStack } from "../../test/support/console.ts";
import { ROOT } from "../support.ts";
import { PASSWORD, seedPortalBench } from "./seed.ts";

const RELEASES = Number(process.env.BENCH_RELEASES ?? 1000);
const TRACKS = Number(process.env.BENCH_TRACKS ?? 12);
const BASELINE = 10;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ENGINE = (process.env.BENCH_ENGINE ?? "pglite") as "pglite" | "postgres";
const DIST = path.join(ROOT, "portal", "dist");

const missing = browserMissing() || portalMissing();
if (missing) {
  console.error(missing);
  process.exit(1);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

/** Scripts and style sheets fetched from /portal/ while `action` ran, gzipped as the build's copies. */
async function loaded(page: Page, action: () => Promise<void>) {
  const seen = new Map<string, string>();
  page.on("requestfinished", (request) => {
    const url = new URL(request.url());
    const type = request.resourceType();
    if ((type === "script" || type === "stylesheet") && url.pathname.startsWith("/portal/assets/"))
      seen.set(url.pathname, type);
  });
  await action();
  await page.waitForLoadState("networkidle");
  const out = { js: 0, jsRaw: 0, css: 0, files: [] as string[] };
  for (const [p, type] of seen) {
    const body = fs.readFileSync(path.join(DIST, p.replace(/^\/portal\//, "")));
    const gz = gzipSync(body, { level: 9 }).length;
    if (type === "script") {
      out.js += gz;
      out.jsRaw += body.length;
    } else out.css += gz;
    out.files.push(path.basename(p));
  }
  return out;
}

/** Milliseconds from the navigation's start until every selector is in the page. */
async function readyAt(page: Page, selectors: string[]): Promise<number> {
  const handle = await page.waitForFunction(
    (all: string[]) => {
      const g = globalThis as unknown as {
        document: { querySelector(s: string): unknown };
        performance: { now(): number };
      };
      return all.every((s) => g.document.querySelector(s)) ? g.performance.now() : false;
    },
    selectors,
    { polling: "raf", timeout: 60_000 },
  );
  return Math.round((await handle.jsonValue()) as number);
}

const started = Date.now();
const { stack, seeded } = await startConsoleStack(
  ENGINE,
  (db, config) => seedPortalBench(db, config, { releases: RELEASES, tracksPer: TRACKS, baseline: BASELINE }),
  { WORKER: "off" },
);
console.log(
  `seeded ${RELEASES} releases × ${TRACKS} tracks (and a ${BASELINE}-release baseline); server up in ${Date.now() - started} ms`,
);
const portal = `${stack.url}/portal/t/${seeded.slug}`;
const browser = await launchBrowser();
try {
  const origin = new URL(stack.url).origin;
  // 1. The first page from nothing (sign-in), then signing in.
  const first = await newContext(browser, "desktop", origin);
  const page = await first.newPage();
  const signIn = await loaded(page, async () => {
    await page.goto(`${portal}/`);
    await page.getByRole("button", { name: "Sign in", exact: true }).waitFor();
  });
  await page.getByLabel("Email", { exact: true }).fill(seeded.email);
  await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await page.locator('[data-testid="release-row"]').first().waitFor({ timeout: 60_000 });
  // A signed-in browser per account: the account shown is the one remembered.
  const tenantId = (
    (await (await fetch(`${stack.url}/portal/tenant.json?slug=${seeded.slug}`)).json()) as { id: string }
  ).id;
  const stateFor = async (accountId: string) => {
    await page.evaluate(
      ([k, v]) => localStorage.setItem(k as string, v as string),
      [`backline-portal-account-${tenantId}`, accountId],
    );
    return first.storageState();
  };
  const states = { big: await stateFor(seeded.big.id), small: await stateFor(seeded.small.id) };
  await first.close();

  const LIST = ['[data-testid="release-row"]'];
  const RELEASE = [
    '[data-testid="release-details"]',
    '[data-testid="edit-track"]',
    '[data-testid="release-submit"] li, [data-testid="problems-none"]',
  ];
  const times: Record<string, number[]> = {
    list_big: [],
    list_small: [],
    release_big: [],
    release_small: [],
  };
  // 2. Cold cache each round (a new context), the large account and the baseline side by side.
  for (let i = 0; i < ROUNDS; i++)
    for (const which of ["small", "big"] as const) {
      const context: BrowserContext = await newContext(browser, "desktop", origin, states[which]);
      const p = await context.newPage();
      await p.goto(`${portal}/releases`, { waitUntil: "commit" });
      times[`list_${which}`]?.push(await readyAt(p, LIST));
      await context.close();
      const context2 = await newContext(browser, "desktop", origin, states[which]);
      const p2 = await context2.newPage();
      await p2.goto(`${portal}/releases/${seeded[which].releaseId}`, { waitUntil: "commit" });
      times[`release_${which}`]?.push(await readyAt(p2, RELEASE));
      if (process.env.BENCH_TRACE && which === "big" && i === ROUNDS - 1) console.log(await trace(p2));
      const tracks = await p2.locator('[data-testid="edit-track"]').count();
      if (tracks !== TRACKS) throw new Error(`the release page shows ${tracks} tracks, not ${TRACKS}`);
      await context2.close();
    }

  const results = {
    engine: ENGINE,
    releases: RELEASES,
    tracks: RELEASES * TRACKS,
    first_page: {
      js_gzip_bytes: signIn.js,
      js_raw_bytes: signIn.jsRaw,
      css_gzip_bytes: signIn.css,
      files: signIn.files,
    },
    catalogue_interactive_ms: {
      big_cold_median: median(times.list_big ?? []),
      baseline_cold_median: median(times.list_small ?? []),
      ...times,
    },
    release_interactive_ms: {
      big_cold_median: median(times.release_big ?? []),
      baseline_cold_median: median(times.release_small ?? []),
    },
  };
  console.log(JSON.stringify(results, null, 2));
  console.log(
    [
      "",
      `first page (sign-in): JS ${kb(signIn.js)} gzipped (${kb(signIn.jsRaw)} raw), CSS ${kb(signIn.css)}; goal < 250 KB JS`,
      `catalogue page interactive, cold: ${median(times.list_big ?? [])} ms at ${RELEASES} releases / ${RELEASES * TRACKS} tracks, ${median(times.list_small ?? [])} ms at ${BASELINE} (medians of ${ROUNDS}); goal < 1000 ms`,
      `release page (editor, ${TRACKS} tracks) interactive, cold: ${median(times.release_big ?? [])} ms in the large account, ${median(times.release_small ?? [])} ms in the baseline; goal < 500 ms`,
    ].join("\n"),
  );
} finally {
  await browser.close();
  await stack.stop();
}

/** Where a page's time went: each request's start and end (ms from the navigation's start). */
async function trace(page: Page): Promise<string> {
  const entries = await page.evaluate(() => {
    const g = globalThis as unknown as {
      performance: {
        getEntriesByType(t: string): { name: string; startTime: number; responseEnd: number }[];
      };
    };
    return [
      ...g.performance.getEntriesByType("navigation"),
      ...g.performance.getEntriesByType("resource"),
    ].map(
      (e) =>
        [
          new URL(e.name).pathname.replace(/^.*\/(portal|api|rest|auth)\//, "$1/"),
          Math.round(e.startTime),
          Math.round(e.responseEnd),
        ] as const,
    );
  });
  return entries.map(([n, a, b]) => `${String(a).padStart(5)} → ${String(b).padStart(5)}  ${n}`).join("\n");
}
