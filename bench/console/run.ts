// The console's first load and its review queue at 10,000 releases (issue 16, item 5):
//   npm run bench:console        # BENCH_RELEASES=10000, BENCH_ROUNDS=5, BENCH_ENGINE=pglite|postgres
// Figures and how to read them: bench/README.md, "bench/console".
import fs from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import type { Page } from "playwright-core";
import { browserMissing, consoleBuilt, launchBrowser, newContext } from "../../test/support/browser.ts";
import { startConsoleStack } from "../../test/support/console.ts";
import { QUEUE_READY, signInWithPassword } from "../../test/support/console-ui.ts";
import { ROOT } from "../support.ts";
import { seedReviewQueue } from "./seed.ts";

const RELEASES = Number(process.env.BENCH_RELEASES ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ENGINE = (process.env.BENCH_ENGINE ?? "pglite") as "pglite" | "postgres";
const DIST = path.join(ROOT, "console", "dist");

const missing = browserMissing();
if (missing) {
  console.error(missing);
  process.exit(1);
}
if (!consoleBuilt()) {
  console.error("console/dist is missing: run `npm run build:console` first.");
  process.exit(1);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

/** The gzipped size (level 9, as the build writes its .gz copies) of a file of console/dist. */
function gzipped(urlPath: string): { raw: number; gz: number } {
  const rel = decodeURIComponent(urlPath.replace(/^\/console\//, ""));
  const body = fs.readFileSync(path.join(DIST, rel));
  return { raw: body.length, gz: gzipSync(body, { level: 9 }).length };
}

interface Loaded {
  js: { raw: number; gz: number; wire: number; files: string[] };
  css: { raw: number; gz: number; wire: number; files: string[] };
}

/** Every script and style sheet `page` fetched from /console/ while `action` ran, with their sizes. */
async function loadedAssets(page: Page, action: () => Promise<void>): Promise<Loaded> {
  const seen = new Map<string, "script" | "stylesheet">();
  const wire = new Map<string, number>();
  page.on("requestfinished", async (request) => {
    const type = request.resourceType();
    const url = new URL(request.url());
    if ((type !== "script" && type !== "stylesheet") || !url.pathname.startsWith("/console/")) return;
    seen.set(url.pathname, type);
    const sizes = await request.sizes().catch(() => undefined);
    if (sizes) wire.set(url.pathname, sizes.responseBodySize);
  });
  await action();
  await page.waitForLoadState("networkidle");
  const out: Loaded = {
    js: { raw: 0, gz: 0, wire: 0, files: [] },
    css: { raw: 0, gz: 0, wire: 0, files: [] },
  };
  for (const [p, type] of seen) {
    const bucket = type === "script" ? out.js : out.css;
    const { raw, gz } = gzipped(p);
    bucket.raw += raw;
    bucket.gz += gz;
    bucket.wire += wire.get(p) ?? 0;
    bucket.files.push(path.basename(p));
  }
  return out;
}

const started = Date.now();
const { stack, seeded } = await startConsoleStack(
  ENGINE,
  (db, config) => seedReviewQueue(db, config, RELEASES),
  {
    // The measurement is the console and /admin/v1, not the worker.
    WORKER: "off",
  },
);
console.log(`seeded ${RELEASES} releases in review and started the server in ${Date.now() - started} ms`);
const browser = await launchBrowser();
try {
  const origin = new URL(stack.url).origin;

  // 1. The first page: what a browser fetches to show /console/ (the sign-in page) from nothing.
  const first = await newContext(browser, "desktop", origin);
  const firstPage = await first.newPage();
  const signInLoad = await loadedAssets(firstPage, async () => {
    await firstPage.goto(`${stack.url}/console/`);
    await firstPage.getByRole("heading", { level: 1 }).first().waitFor();
  });
  // 2. Signing in, then the review queue: what the staff member's first real page adds.
  const queueLoad = await loadedAssets(firstPage, async () => {
    await signInWithPassword(firstPage, {
      slug: seeded.slug,
      email: seeded.email,
      password: seeded.password,
    });
    await firstPage.locator(QUEUE_READY).first().waitFor();
  });
  const state = await first.storageState();
  await first.close();

  // 3. Time to an interactive review queue, signed in: navigation start to the first row shown
  // (with the queue's counts), measured inside the page; a cold cache each time, then reloads.
  const cold: number[] = [];
  const warm: number[] = [];
  const coldApi: number[] = [];
  const coldApiStart: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const context = await newContext(browser, "desktop", origin, state);
    const page = await context.newPage();
    await page.goto(`${stack.url}/console/reviews`, { waitUntil: "commit" });
    cold.push(await readyAt(page));
    const span = await apiSpan(page);
    coldApi.push(span.end);
    coldApiStart.push(span.start);
    for (let j = 0; j < 2; j++) {
      await page.reload({ waitUntil: "commit" });
      warm.push(await readyAt(page));
    }
    await context.close();
  }

  // 4. The API under it: the queue's first page and its counts at this size.
  const api: number[] = [];
  const token = await fetch(`${stack.url}/console/tenant.json?slug=${seeded.slug}`)
    .then((r) => r.json() as Promise<{ anon_key: string }>)
    .then(async ({ anon_key }) => {
      const r = await fetch(`${stack.url}/auth/v1/token?grant_type=password`, {
        method: "POST",
        headers: { apikey: anon_key, "content-type": "application/json" },
        body: JSON.stringify({ email: seeded.email, password: seeded.password }),
      });
      return { anon_key, access: ((await r.json()) as { access_token: string }).access_token };
    });
  for (let i = 0; i < ROUNDS * 2; i++) {
    const t0 = performance.now();
    const r = await fetch(`${stack.url}/admin/v1/reviews?limit=50`, {
      headers: {
        apikey: token.anon_key,
        authorization: `Bearer ${token.access}`,
        "backline-tenant": seeded.tenantId,
      },
    });
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`GET /admin/v1/reviews answered ${r.status}`);
    api.push(performance.now() - t0);
  }

  const results = {
    engine: ENGINE,
    releases_in_review: RELEASES,
    first_page: {
      js_gzip_bytes: signInLoad.js.gz,
      css_gzip_bytes: signInLoad.css.gz,
      js_raw_bytes: signInLoad.js.raw,
      css_raw_bytes: signInLoad.css.raw,
      wire_bytes: signInLoad.js.wire + signInLoad.css.wire,
      files: [...signInLoad.js.files, ...signInLoad.css.files],
    },
    review_queue_adds: {
      js_gzip_bytes: queueLoad.js.gz,
      css_gzip_bytes: queueLoad.css.gz,
      files: [...queueLoad.js.files, ...queueLoad.css.files],
    },
    queue_interactive_ms: { cold_median: median(cold), warm_median: median(warm), cold, warm },
    cold_api_ms: {
      first_request_median: median(coldApiStart),
      last_answer_median: median(coldApi),
      first_request: coldApiStart,
      last_answer: coldApi,
    },
    admin_reviews_first_page_ms: { median: median(api), all: api.map((x) => Math.round(x)) },
  };
  console.log(JSON.stringify(results, null, 2));
  console.log(
    [
      "",
      `first page (/console/, sign-in): JS ${kb(signInLoad.js.gz)} gzipped (${kb(signInLoad.js.raw)} raw), CSS ${kb(signInLoad.css.gz)} gzipped; goal < 250 KB JS`,
      `review queue adds: JS ${kb(queueLoad.js.gz)} gzipped, CSS ${kb(queueLoad.css.gz)} gzipped`,
      `review queue interactive at ${RELEASES} releases: cold ${median(cold).toFixed(0)} ms, warm ${median(warm).toFixed(0)} ms (median of ${cold.length} / ${warm.length}); goal < 1000 ms`,
      `  cold: the page's first /admin/v1 request left at ${median(coldApiStart).toFixed(0)} ms, its last answer was in at ${median(coldApi).toFixed(0)} ms (medians)`,
      `GET /admin/v1/reviews?limit=50: median ${median(api).toFixed(1)} ms`,
    ].join("\n"),
  );
} finally {
  await browser.close();
  await stack.stop();
}

/** Milliseconds from the navigation's start to the queue's first row and counts on screen. */
async function readyAt(page: Page): Promise<number> {
  const handle = await page.waitForFunction(
    (selector: string) => {
      const g = globalThis as unknown as {
        document: { querySelector(s: string): unknown };
        performance: { now(): number };
      };
      return g.document.querySelector(selector) ? g.performance.now() : false;
    },
    QUEUE_READY,
    { polling: "raf", timeout: 30_000 },
  );
  return Math.round((await handle.jsonValue()) as number);
}

/** When, from the navigation's start, the page's first /admin/v1 request left and its last answer arrived (ms). */
async function apiSpan(page: Page): Promise<{ start: number; end: number }> {
  return page.evaluate(() => {
    const g = globalThis as unknown as {
      performance: {
        getEntriesByType(t: string): { name: string; startTime: number; responseEnd: number }[];
      };
    };
    const api = g.performance.getEntriesByType("resource").filter((e) => e.name.includes("/admin/v1/"));
    return {
      start: Math.round(Math.min(...api.map((e) => e.startTime))),
      end: Math.round(Math.max(0, ...api.map((e) => e.responseEnd))),
    };
  });
}
