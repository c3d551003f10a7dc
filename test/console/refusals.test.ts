import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import {
  assertAccessible,
  browserMissing,
  consoleMissing,
  launchBrowser,
  newContext,
  screenshot,
} from "../support/browser.ts";
import { type ConsoleStack, startConsoleStack } from "../support/console.ts";
import { type DeskWorld, PASSWORD, seedDeskWorld } from "../support/console-seed.ts";
import { signInWithPassword, tid } from "../support/console-ui.ts";
import { ENGINES } from "../support/db.ts";
import { completeRelease, expectStatus, publicApi } from "../support/public-api.ts";

/**
 * Who gets nothing from the console (issue 16, item 4): a user of the tenant who is not staff,
 * and another tenant's staff. The page refuses, and /admin/v1 — which the page calls, as any
 * third party may — answers 401 without a session, 403 to a signed-in non-staff user or to
 * staff of another tenant naming this one, and 404 for this tenant's release asked on their own
 * tenant. A reviewer is refused an operator's route (403 insufficient_role).
 */

const onceOnEmbedded = ENGINES.includes("pglite")
  ? false
  : "the browser tests run once, on the embedded database (the PGlite pass of the suite)";
const inBrowser = browserMissing() || consoleMissing();

describe("the console refuses who is not staff of the tenant", { skip: onceOnEmbedded }, () => {
  let stack: ConsoleStack;
  let world: DeskWorld;
  let browser: Browser;
  let releaseId: string;

  before(async () => {
    const started = await startConsoleStack("pglite", seedDeskWorld);
    stack = started.stack;
    world = started.seeded;
    const release = expectStatus(
      await publicApi(stack.url, world.apiKey)("POST", "/releases", completeRelease({ title: "Not Yours" })),
      201,
    ) as { id: string };
    releaseId = release.id;
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  async function token(anonKey: string, email: string): Promise<string> {
    const res = await fetch(`${stack.url}/auth/v1/token?grant_type=password`, {
      method: "POST",
      headers: { apikey: anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { access_token: string }).access_token;
  }

  async function admin(
    path: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${stack.url}/admin/v1${path}`, { headers });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  test("/admin/v1 without a session is 401; with the anon key alone it is refused too", async () => {
    assert.equal((await admin("/reviews", {})).status, 401);
    assert.equal((await admin("/me", {})).status, 401);
    // The anon key alone is a key, but no one's session: refused (401 or 403), never data.
    for (const p of ["/reviews", `/releases/${releaseId}`]) {
      const r = await admin(p, { apikey: world.tenant.anonKey });
      assert.ok([401, 403].includes(r.status), `${p}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.equal(r.body.data, undefined);
    }
  });

  test("a signed-in user who is not staff: 403 not_staff on every desk route", async () => {
    const headers = {
      apikey: world.tenant.anonKey,
      authorization: `Bearer ${await token(world.tenant.anonKey, world.outsider.email)}`,
    };
    for (const p of ["/reviews", `/releases/${releaseId}`, "/deliveries", "/accounts", "/settings"]) {
      const r = await admin(p, headers);
      assert.equal(r.status, 403, `${p}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, "not_staff", `${p}: ${JSON.stringify(r.body)}`);
    }
  });

  test("another tenant's staff: 403 naming this tenant, 404 for its release on their own", async () => {
    const access = await token(world.other.anonKey, world.otherAdmin.email);
    const own = { apikey: world.other.anonKey, authorization: `Bearer ${access}` };
    const here = { ...own, "backline-tenant": world.tenant.id };
    for (const p of ["/reviews", `/releases/${releaseId}`, "/deliveries", "/accounts"]) {
      const r = await admin(p, here);
      assert.equal(r.status, 403, `${p}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, "not_staff", `${p}: ${JSON.stringify(r.body)}`);
    }
    assert.equal((await admin("/reviews", own)).status, 200, "their own tenant answers");
    assert.equal((await admin(`/releases/${releaseId}`, own)).status, 404);
    // Their token with this tenant's anon key is no session of this tenant.
    const mixed = await admin("/reviews", { ...own, apikey: world.tenant.anonKey });
    assert.equal(mixed.status, 401, JSON.stringify(mixed.body));
  });

  test("a reviewer is refused an operator's route: 403 insufficient_role", async () => {
    const headers = {
      apikey: world.tenant.anonKey,
      authorization: `Bearer ${await token(world.tenant.anonKey, world.reviewer.email)}`,
    };
    assert.equal((await admin("/reviews", headers)).status, 200);
    const r = await admin("/deliveries", headers);
    assert.equal(r.status, 403, JSON.stringify(r.body));
    assert.equal(r.body.code, "insufficient_role");
  });

  describe("in the browser", { skip: inBrowser }, () => {
    before(async () => {
      browser = await launchBrowser();
    });

    async function settle(page: Page): Promise<void> {
      await page.waitForLoadState("networkidle");
    }

    async function signedIn(email: string, slug: string): Promise<{ page: Page; close(): Promise<void> }> {
      const context = await newContext(browser, "desktop", stack.url);
      const page = await context.newPage();
      await page.goto(`${stack.url}/console/`);
      await signInWithPassword(page, { slug, email, password: PASSWORD });
      return { page, close: () => context.close() };
    }

    test("the page: a non-staff user is told so, and nothing else is shown", async () => {
      const { page, close } = await signedIn(world.outsider.email, world.tenant.slug);
      try {
        await page.locator(tid("page-not-staff")).waitFor();
        assert.equal(await page.locator(tid("review-row")).count(), 0);
        assert.equal(await page.locator("nav").count(), 0);
        await screenshot(page, "90-not-staff", "desktop");
        await assertAccessible(page, "not staff");
        // A deep link changes nothing.
        await page.goto(`${stack.url}/console/reviews/${releaseId}`);
        await page.locator(tid("page-not-staff")).waitFor();
        assert.equal(await page.locator(tid("page-review")).count(), 0);
      } finally {
        await close();
      }
    });

    test("the page: another tenant's staff sees their own tenant only; this tenant's release is not found", async () => {
      const { page, close } = await signedIn(world.otherAdmin.email, world.other.slug);
      try {
        await page.locator(tid("page-review-queue")).waitFor();
        assert.match(await page.locator(tid("current-tenant")).innerText(), /Elsewhere Music/);
        await page.locator(tid("empty")).waitFor();
        assert.equal(await page.locator(tid("review-row")).count(), 0);
        // This tenant's release, by its id: not found (their tenant has no such release).
        await page.goto(`${stack.url}/console/reviews/${releaseId}`);
        await page.locator(tid("page-review")).waitFor();
        await page.locator(tid("error-state")).waitFor();
        assert.doesNotMatch(await page.locator("main").innerText(), /Not Yours/);
        await screenshot(page, "91-other-tenant-release", "desktop");
        await assertAccessible(page, "another tenant's release");
        // Acting on this tenant by editing what the browser stores: the server refuses.
        await page.evaluate((tenantId) => {
          const ls = (globalThis as unknown as { localStorage: Storage }).localStorage;
          const key = "backline-console-session";
          const stored = JSON.parse(ls.getItem(key) ?? "{}") as Record<string, unknown>;
          ls.setItem(key, JSON.stringify({ ...stored, actingTenantId: tenantId }));
        }, world.tenant.id);
        await page.goto(`${stack.url}/console/reviews`);
        // Refused, whichever way the page says it: the server's error, "not allowed", or the
        // tenant chooser with only their own tenant.
        const refusal = page
          .locator(
            [tid("error-state"), tid("page-forbidden"), tid("page-tenants"), tid("page-not-staff")].join(
              ", ",
            ),
          )
          .first();
        await refusal.waitFor();
        await settle(page);
        await screenshot(page, "92-forged-tenant", "desktop");
        assert.equal(await page.locator(tid("review-row")).count(), 0);
        assert.doesNotMatch(await page.locator("body").innerText(), /Not Yours/);
      } finally {
        await close();
      }
    });
  });
});

interface Storage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}
