import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { accents } from "../../ui-shared/brand-colours.ts";
import {
  assertAccessible,
  assertNoOffsite,
  browserMissing,
  consoleMissing,
  type Device,
  launchBrowser,
  newContext,
  screenshot,
  watchPageErrors,
} from "../support/browser.ts";
import { type ConsoleStack, startConsoleStack, waitForMail } from "../support/console.ts";
import { type DeskWorld, PASSWORD, seedDeskWorld } from "../support/console-seed.ts";
import { chooseTenant, signInWithPassword, tid } from "../support/console-ui.ts";
import { ENGINES } from "../support/db.ts";
import { artworkJpeg, wav } from "../support/media-fixtures.ts";
import { ROOT } from "../support/process.ts";
import { completeRelease, expectStatus, isrcs, publicApi } from "../support/public-api.ts";
import { artworkUrl, audioUrl, judged } from "../support/uploads.ts";

/**
 * Issue 16, item 4, in a real Chromium against `npm start` on the embedded database: a staff
 * member signs in, reviews a release an account submitted through the public API (cover, audio
 * that really plays, metadata), rejects it with a reason; the account fixes and resubmits; the
 * reviewer approves and the deliveries go live on the simulated store; a royalty report from
 * docs/formats/ is imported through the upload control. Every page the console has is opened on a
 * desktop and on a phone: a screenshot of each into artifacts/console/, and axe finds no serious
 * or critical violation on any.
 */

type Obj = Record<string, unknown>;

const SAMPLE = path.join(ROOT, "docs/formats/backline.csv");

const skip =
  browserMissing() ||
  (ENGINES.includes("pglite")
    ? false
    : "the browser tests run once, on the embedded database (the PGlite pass of the suite)") ||
  consoleMissing();

describe("the console in Chromium: a review, a delivery and a royalty import", { skip }, () => {
  let stack: ConsoleStack;
  let world: DeskWorld;
  let browser: Browser;
  let desktop: BrowserContext & { offsite: string[] };
  let page: Page;
  let pageErrors: string[];
  let phone: (BrowserContext & { offsite: string[] }) | undefined;
  let phonePage: Page | undefined;
  let phoneState = "";
  const phoneErrors: string[] = [];
  let releaseId: string;
  const nextIsrc = isrcs("QZCON");
  const api = () => publicApi(stack.url, world.apiKey);
  let shot = 0;

  before(async () => {
    const started = await startConsoleStack("pglite", seedDeskWorld);
    stack = started.stack;
    world = started.seeded;
    browser = await launchBrowser();
    desktop = await newContext(browser, "desktop", stack.url);
    page = await desktop.newPage();
    pageErrors = watchPageErrors(page);
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  /**
   * A test that needs earlier ones: skipped, saying which, when one of them failed (the failure is
   * reported once, where it happened).
   */
  const done = new Set<string>();
  function step(
    name: string,
    order: { needs: string[]; gives?: string | undefined },
    fn: () => Promise<void>,
  ) {
    test(name, async (t) => {
      const missing = order.needs.filter((n) => !done.has(n));
      if (missing.length > 0) {
        t.skip(`an earlier step failed: ${missing.join(", ")}`);
        return;
      }
      try {
        await fn();
      } catch (e) {
        // What the desktop showed when the step failed, beside the other screenshots.
        await screenshot(page, `FAILED-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}`, "desktop").catch(
          () => undefined,
        );
        throw e;
      }
      if (order.gives) done.add(order.gives);
    });
  }

  /**
   * The page now on the desktop: its screenshot and axe check; then the same address on a phone
   * (signed in as the same user), its screenshot and axe check.
   */
  async function record(name: string, testid: string): Promise<void> {
    const label = `${String(++shot).padStart(2, "0")}-${name}`;
    await page.locator(tid(testid)).waitFor();
    await settle(page);
    await screenshot(page, label, "desktop");
    await assertAccessible(page, `${name} (desktop)`);
    // The phone is signed in as the desktop is: a new phone context whenever that changes.
    const state = await desktop.storageState();
    if (!phone || JSON.stringify(state) !== phoneState) {
      if (phone) {
        assertNoOffsite(phone);
        await phone.close();
      }
      phone = await newContext(browser, "phone", stack.url, state);
      phoneState = JSON.stringify(state);
      phonePage = await phone.newPage();
      watchPageErrors(phonePage, phoneErrors);
    }
    const p = phonePage as Page;
    await p.goto(page.url());
    await p
      .locator(tid(testid))
      .waitFor()
      .catch(async (e: unknown) => {
        await screenshot(p, `${label}-FAILED`, "phone");
        throw e;
      });
    await settle(p);
    await screenshot(p, label, "phone" satisfies Device);
    await assertAccessible(p, `${name} (phone)`);
  }

  /** No loading indicator left, and the network quiet. */
  async function settle(p: Page): Promise<void> {
    await p.waitForLoadState("networkidle");
    await p
      .locator(tid("loading"))
      .first()
      .waitFor({ state: "detached", timeout: 15_000 })
      .catch(() => undefined);
  }

  async function releaseStatus(): Promise<Obj> {
    return expectStatus(await api()("GET", `/releases/${releaseId}/status`), 200) as Obj;
  }

  async function waitForStatus(want: string | ((s: Obj) => boolean), timeoutMs = 30_000): Promise<Obj> {
    const ok = typeof want === "string" ? (s: Obj) => s.status === want : want;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await releaseStatus();
      if (ok(s)) return s;
      if (Date.now() > deadline) assert.fail(`release still ${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  step(
    "an account submits a release with a cover and audio through the public API; it waits for review",
    { needs: [], gives: "submitted" },
    async () => {
      const a = api();
      const release = expectStatus(
        await a("POST", "/releases", completeRelease({ title: "Night Drive", artist_name: "Luna Vale" })),
        201,
      ) as Obj & { id: string };
      releaseId = release.id;
      const track = expectStatus(
        await a("POST", `/releases/${releaseId}/tracks`, {
          title: "Night Drive",
          isrc: nextIsrc(),
          track_number: 1,
        }),
        201,
      ) as Obj & { id: string };
      const cover = await artworkUrl(a, releaseId, { filename: "cover.jpg" });
      assert.equal(
        (await fetch(cover.upload_url, { method: "PUT", headers: cover.headers, body: await artworkJpeg() }))
          .status,
        200,
      );
      const audio = await audioUrl(a, releaseId, track.id, { filename: "night-drive.wav" });
      assert.equal(
        (await fetch(audio.upload_url, { method: "PUT", headers: audio.headers, body: wav({ seconds: 2 }) }))
          .status,
        200,
      );
      assert.equal((await judged(a, cover.asset_id)).status, "valid");
      assert.equal((await judged(a, audio.asset_id)).status, "valid");
      expectStatus(await a("POST", `/releases/${releaseId}/submit`), 200);
      const s = await waitForStatus("in_review");
      assert.equal(s.approval, "in_review");
    },
  );

  step(
    "a staff member signs in with a password and sees the release in the queue, with counts",
    { needs: ["submitted"], gives: "signed-in" },
    async () => {
      await page.goto(`${stack.url}/console/`);
      await record("sign-in", "page-sign-in");
      await signInWithPassword(page, {
        slug: world.tenant.slug,
        email: world.desk.email,
        password: PASSWORD,
      });
      await page.locator(tid("page-review-queue")).waitFor();
      const row = page.locator(`${tid("review-row")}[data-release-id="${releaseId}"]`);
      await row.waitFor();
      assert.match(await row.innerText(), /Night Drive/);
      await page.locator(tid("review-counts")).waitFor();
      assert.match(await page.locator(tid("user-email")).innerText(), /desk@nightowl\.example/);
      await record("review-queue", "page-review-queue");
    },
  );

  step(
    "the reviewer opens it: cover, metadata, checks, and the audio plays",
    { needs: ["signed-in"], gives: "opened" },
    async () => {
      await page
        .locator(`${tid("review-row")}[data-release-id="${releaseId}"] ${tid("review-open")}`)
        .click();
      await page.locator(tid("page-review")).waitFor();
      // The heading names the release once it has loaded.
      await page.getByRole("heading", { level: 1, name: /Night Drive/ }).waitFor();
      // The cover is a real image that loaded from its signed URL.
      const cover = page.locator(tid("review-cover-image"));
      await cover.waitFor();
      await page.waitForFunction(
        (el) => {
          const img = el as unknown as { complete: boolean; naturalWidth: number };
          return img.complete && img.naturalWidth > 0;
        },
        await cover.elementHandle(),
      );
      // The audio: a signed URL to the WAV; playing it loads it with no media error and time advances.
      const audio = page.locator(tid("review-audio")).first();
      await audio.waitFor();
      await audio.evaluate(async (el) => {
        const media = el as unknown as { play(): Promise<void>; muted: boolean };
        media.muted = true;
        await media.play();
      });
      await page.waitForFunction(
        (el) => {
          const m = el as unknown as { readyState: number; currentTime: number; error: unknown };
          return m.error === null && m.readyState >= 2 && m.currentTime > 0;
        },
        await audio.elementHandle(),
        { timeout: 15_000 },
      );
      const media = await audio.evaluate((el) => {
        const m = el as unknown as { readyState: number; duration: number; error: unknown; paused: boolean };
        return { readyState: m.readyState, duration: m.duration, error: m.error, paused: m.paused };
      });
      assert.equal(media.error, null);
      assert.ok(media.readyState >= 2, `readyState ${media.readyState}`);
      assert.ok(Math.abs(media.duration - 2) < 0.1, `the 2-second WAV, got ${media.duration}`);
      await audio.evaluate((el) => (el as unknown as { pause(): void }).pause());
      assert.match(await page.locator(tid("review-metadata")).innerText(), /Luna Vale/);
      await page.locator(tid("review-checks")).waitFor();
      await record("review", "page-review");
    },
  );

  step(
    "the reviewer rejects it with a written reason; the account sees the reason",
    { needs: ["opened"], gives: "rejected" },
    async () => {
      // The keyboard shortcut opens the dialog.
      await page.locator("body").press("r");
      const dialog = page.locator(tid("reject-dialog"));
      await dialog.waitFor();
      await settle(page);
      await screenshot(page, `${String(++shot).padStart(2, "0")}-reject-dialog`, "desktop");
      await assertAccessible(page, "reject dialog");
      await page.locator(tid("reject-reason-text")).fill("The cover shows a web address; remove it.");
      await page.locator(tid("reject-confirm")).click();
      await page.locator(tid("review-done")).waitFor();
      const s = await waitForStatus("rejected");
      assert.equal(s.approval, "rejected");
      assert.equal(s.rejection_reason, "The cover shows a web address; remove it.");
    },
  );

  step(
    "the account fixes it and resubmits; the reviewer approves it and its deliveries go live",
    { needs: ["rejected"], gives: "live" },
    async () => {
      const a = api();
      expectStatus(await a("PATCH", `/releases/${releaseId}`, { title: "Night Drive (Clean)" }), 200);
      expectStatus(await a("POST", `/releases/${releaseId}/submit`), 200);
      await waitForStatus("in_review");

      // The reviewer opens the queue anew (the page shows the list it loaded seconds ago until
      // that is stale).
      await page.goto(`${stack.url}/console/reviews`);
      await page.locator(tid("page-review-queue")).waitFor();
      const row = page.locator(`${tid("review-row")}[data-release-id="${releaseId}"]`);
      await row.waitFor();
      assert.match(await row.innerText(), /Night Drive \(Clean\)/);
      await row.locator(tid("review-open")).click();
      await page.locator(tid("page-review")).waitFor();
      // `a` asks first: Escape leaves the release undecided, Enter approves it.
      await page.locator("body").press("a");
      const confirm = page.locator(tid("approve-dialog"));
      await confirm.waitFor();
      await assertAccessible(page, "approve dialog");
      await page.keyboard.press("Escape");
      await confirm.waitFor({ state: "hidden" });
      assert.equal((await releaseStatus()).status, "in_review", "Escape approved nothing");
      await page.locator("body").press("a");
      await page.locator(tid("approve-confirm")).waitFor();
      await page.keyboard.press("Enter");
      await page.locator(tid("review-done")).waitFor();
      assert.match(await page.locator(tid("review-done")).innerText(), /Approved/);

      const live = await waitForStatus("live", 60_000);
      const stores = live.stores as Obj[];
      assert.ok(stores.length >= 1);
      for (const s of stores) assert.equal(s.status, "live", JSON.stringify(s));
    },
  );

  step(
    "deliveries: the release's deliveries are live, each with its history",
    { needs: ["live"], gives: undefined },
    async () => {
      await page.locator(tid("nav-deliveries")).click();
      await page.locator(tid("page-deliveries")).waitFor();
      await settle(page);
      await record("deliveries", "page-deliveries");
      // Filtered to the release: one delivery per store, each live.
      await page.locator(tid("deliveries-filter-release")).fill(releaseId);
      await page.locator(tid("deliveries-filter-release")).press("Enter");
      await page.waitForURL((u) => u.searchParams.get("release_id") === releaseId);
      await settle(page);
      const rows = page.locator(tid("delivery-row"));
      await rows.first().waitFor();
      const statuses = await rows.evaluateAll((els) =>
        els.map((el) => (el as unknown as { dataset: { status?: string } }).dataset.status),
      );
      const live = (await releaseStatus()).stores as Obj[];
      assert.equal(statuses.length, live.length, `one row per store: ${JSON.stringify(statuses)}`);
      for (const status of statuses) assert.equal(status, "live");
      await rows.first().locator(tid("delivery-open")).click();
      await page.locator(tid("page-delivery")).waitFor();
      await page.locator(tid("delivery-history")).waitFor();
      assert.ok((await page.locator(tid("delivery-history-row")).count()) >= 1, "the delivery's history");
      await record("delivery", "page-delivery");
    },
  );

  step(
    "a royalty report from docs/formats/ imported through the upload control shows its report",
    { needs: ["signed-in"], gives: undefined },
    async () => {
      await page.locator(tid("nav-royalties")).click();
      await page.locator(tid("page-royalty-imports")).waitFor();
      await record("royalty-imports", "page-royalty-imports");
      // Every format the server reads is offered, and the stores are a list to choose from.
      const formats = await page
        .locator(`${tid("import-format")} option`)
        .evaluateAll((els) => els.map((el) => (el as unknown as { value: string }).value));
      assert.ok(formats.includes("ddex-dsr"), formats.join(", "));
      const stores = await page.locator(`${tid("import-store")} option`).count();
      assert.ok(stores > 1, "the tenant's stores are listed beside 'From the file'");
      await page.locator(tid("import-format")).selectOption("backline");
      await page.locator(tid("import-file")).setInputFiles(SAMPLE);
      await page.locator(tid("import-submit")).click();
      const result = page.locator(tid("import-result"));
      await result.waitFor({ timeout: 60_000 });
      assert.equal(await result.getAttribute("data-status"), "completed", await result.innerText());
      // The list says which months the import covered (its lines' sale periods), not "—".
      await page
        .locator(tid("import-row-period"))
        .filter({ hasText: /^\d{4}-\d{2}/ })
        .first()
        .waitFor({ timeout: 10_000 });
      await result.locator(tid("import-result-open")).click();
      await page.locator(tid("page-royalty-import")).waitFor();
      await page.locator(tid("import-counts")).waitFor();
      // The sample's lines name UPCs and ISRCs no release of this tenant has: unmatched, each with
      // its reason; the totals are per currency.
      const lines = fs.readFileSync(SAMPLE, "utf8").trim().split("\n").length - 1;
      assert.match(await page.locator(tid("import-lines-total")).innerText(), new RegExp(`\\b${lines}\\b`));
      assert.match(await page.locator(tid("import-lines-matched")).innerText(), /\b0\b/);
      assert.ok((await page.locator(tid("import-unmatched-row")).count()) >= 1);
      const totals = await page.locator(tid("import-totals")).innerText();
      for (const currency of ["USD", "EUR", "GBP"]) assert.match(totals, new RegExp(currency));
      await record("royalty-import", "page-royalty-import");
    },
  );

  const pages: [string, string, string][] = [
    ["takedowns", "nav-takedowns", "page-takedowns"],
    ["oac-requests", "nav-oac", "page-oac"],
    ["jobs", "nav-jobs", "page-jobs"],
    ["stores", "nav-stores", "page-stores"],
    ["accounts", "nav-accounts", "page-accounts"],
    ["settings", "nav-settings", "page-settings"],
  ];
  for (const [name, nav, testid] of pages) {
    step(
      `the ${name} page opens from the menu, on a desktop and a phone`,
      { needs: ["signed-in"] },
      async () => {
        await page.locator(tid(nav)).click();
        await page.locator(tid(testid)).waitFor();
        await settle(page);
        assert.equal(
          await page.locator(tid("error-state")).count(),
          0,
          await page.locator("main").innerText(),
        );
        await record(name, testid);
      },
    );
  }

  step(
    "branding saved in Settings shows in the header and colours; a bad colour is said once, at its field",
    { needs: ["signed-in"] },
    async () => {
      await page.locator(tid("nav-settings")).click();
      await page.locator(tid("settings-form")).waitFor();
      const tenantName = async () =>
        (
          (await (await fetch(`${stack.url}/console/tenant.json?slug=${world.tenant.slug}`)).json()) as {
            name: string;
          }
        ).name;
      const name = await tenantName();
      const displayName = await page.locator(tid("settings-display-name")).inputValue();
      await page.locator(tid("settings-primary-color")).fill("#zzzzzz");
      await page.locator(tid("settings-save")).click();
      await page.locator(tid("settings-fields-error")).waitFor();
      assert.equal(
        await page.locator(tid("error-state")).count(),
        0,
        "the field's error is not repeated below",
      );
      assert.equal(await page.locator(tid("settings-primary-color")).getAttribute("aria-invalid"), "true");
      // Beside the colour, in plain words: not the API's field path ("branding.primary_color: …").
      const colourError = await page.locator(tid("settings-primary-color-error")).innerText();
      assert.notEqual(colourError.trim(), "");
      assert.doesNotMatch(colourError, /^[a-z_]+(\.[a-z_]+)*(: | (is|are|must) )/);
      await page.locator(tid("settings-display-name")).fill("Northwind Records");
      await page.locator(tid("settings-primary-color")).fill("#0a7d32");
      await page.locator(tid("settings-save")).click();
      await page.locator(tid("settings-saved")).waitFor();
      await page.locator(tid("console-brand")).filter({ hasText: "Northwind Records" }).waitFor();
      const accent = await page.evaluate(
        "getComputedStyle(document.documentElement).getPropertyValue('--brand-light').trim()",
      );
      assert.equal(accent, accents("#0a7d32").light);
      await record("settings-branded", "page-settings");
      // Put the branding back, and wait until the public tenant answer (cached a few seconds) has
      // it again, for the steps after this one.
      await page.locator(tid("settings-display-name")).fill(displayName);
      await page.locator(tid("settings-primary-color")).fill("");
      await page.locator(tid("settings-save")).click();
      await page.locator(tid("console-brand")).filter({ hasNotText: "Northwind Records" }).waitFor();
      for (let i = 0; i < 60 && (await tenantName()) !== name; i++)
        await new Promise((r) => setTimeout(r, 250));
      assert.equal(await tenantName(), name);
    },
  );

  step(
    "an account's page shows its members and keys (never a secret)",
    { needs: ["signed-in"], gives: undefined },
    async () => {
      await page.locator(tid("nav-accounts")).click();
      await page.locator(tid("page-accounts")).waitFor();
      const row = page.locator(`${tid("account-row")}[data-account-id="${world.accountId}"]`);
      await row.waitFor();
      await row.locator(tid("account-open")).click();
      await page.locator(tid("page-account")).waitFor();
      await settle(page);
      const text = await page.locator("main").innerText();
      assert.ok(!text.includes(world.apiKey), "the key's secret is never shown");
      assert.match(text, /console e2e/);
      await record("account", "page-account");
    },
  );

  test("signing in with a code from the mailbox works on a phone, and signing out forgets the session", async () => {
    const context = await newContext(browser, "phone", stack.url);
    const p = await context.newPage();
    try {
      await p.goto(`${stack.url}/console/`);
      await chooseTenant(p, world.tenant.slug);
      await p.locator(tid("signin-mode-code")).click();
      const before = stack.smtp.received.length;
      await p.locator(tid("signin-email")).fill(world.reviewer.email);
      await p.locator(tid("signin-send-code")).click();
      await p.locator(tid("signin-code-sent")).waitFor();
      const { match } = await waitForMail(stack.smtp, world.reviewer.email, /\b(\d{6})\b/, { after: before });
      await p.locator(tid("signin-code")).fill(match[1] as string);
      await p.locator(tid("signin-verify")).click();
      await p.locator(tid("page-review-queue")).waitFor();
      assert.match(await p.locator(tid("current-tenant")).innerText(), /reviewer/);
      // A reviewer's menu has no operator pages, and an operator page refuses.
      await p.locator(tid("menu-toggle")).click();
      assert.equal(await p.locator(tid("nav-deliveries")).count(), 0);
      await p.goto(`${stack.url}/console/deliveries`);
      await p.locator(tid("page-forbidden")).waitFor();
      await p.locator(tid("sign-out")).click();
      await p.locator(tid("page-sign-in")).waitFor();
      const stored = await p.evaluate(() =>
        (
          globalThis as unknown as { localStorage: { getItem(k: string): string | null } }
        ).localStorage.getItem("backline-console-session"),
      );
      assert.equal(stored, null, "nothing of the session is left in the browser");
    } finally {
      await context.close();
    }
  });

  test("a mailed sign-in link opens the console signed in", async () => {
    const context = await newContext(browser, "desktop", stack.url);
    const p = await context.newPage();
    try {
      await p.goto(`${stack.url}/console/`);
      await chooseTenant(p, world.tenant.slug);
      await p.locator(tid("signin-mode-code")).click();
      const before = stack.smtp.received.length;
      await p.locator(tid("signin-email")).fill(world.desk.email);
      await p.locator(tid("signin-send-code")).click();
      await p.locator(tid("signin-code-sent")).waitFor();
      const { match } = await waitForMail(
        stack.smtp,
        world.desk.email,
        /(http:\/\/127\.0\.0\.1:\d+\/auth\/v1\/verify\?[^\s"<>]+)/,
        {
          after: before,
        },
      );
      await p.goto((match[1] as string).replace(/&amp;/g, "&"));
      // The link signs in; a recovery link (the mail the console sends while the server has no
      // /auth/v1/otp) first offers to choose a password, which can be skipped.
      const landed = p.locator(`${tid("page-set-password")}, ${tid("page-review-queue")}`).first();
      await landed.waitFor();
      if ((await landed.getAttribute("data-testid")) === "page-set-password") {
        await screenshot(p, "30-set-password", "desktop");
        await assertAccessible(p, "set password");
        await p.locator(tid("password-skip")).click();
      }
      await p.locator(tid("page-review-queue")).waitFor();
      assert.match(await p.locator(tid("user-email")).innerText(), /desk@nightowl\.example/);
    } finally {
      await context.close();
    }
  });

  test("a link to /console/?tenant=<slug> names that tenant on the sign-in page", async () => {
    const context = await newContext(browser, "desktop", stack.url);
    const p = await context.newPage();
    try {
      await p.goto(`${stack.url}/console/?tenant=${world.tenant.slug}`);
      assert.equal(await p.locator(tid("signin-tenant")).inputValue(), world.tenant.slug);
      await p.locator(tid("signin-tenant-name")).filter({ hasText: "Night Owl Distribution" }).waitFor();
    } finally {
      await context.close();
    }
  });

  test("nothing was loaded from outside the server, and no page threw", async () => {
    assertNoOffsite(desktop);
    if (phone) assertNoOffsite(phone);
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(phoneErrors, []);
  });
});
