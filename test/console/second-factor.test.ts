import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Page } from "playwright-core";
import { totpCode, totpStep } from "../../src/auth/totp.ts";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import {
  assertAccessible,
  assertNoOffsite,
  newContext,
  screenshot,
  watchPageErrors,
} from "../support/browser.ts";
import { seedPasswordUser } from "../support/console.ts";
import { type DeskWorld, PASSWORD, seedDeskWorld } from "../support/console-seed.ts";
import { consoleSkip, consoleSuite, signInWithPassword, tid } from "../support/console-ui.ts";
import { tempDir } from "../support/process.ts";

/**
 * The console's two-step sign-in, in Chromium against `npm start` on the embedded database: an
 * installation admin adds an authenticator app on "Two-step sign-in" (QR code and key, a wrong
 * code refused next to the field, the right one makes the session aal2), after which the store
 * check — a platform act that needs aal2 — passes from the console; signing in again asks for the
 * code before anything else opens (a wrong code refused, nothing shown behind it), and removing the
 * app asks first. A user without a factor signs in as before. Screenshots and axe on each step.
 */

const skip = consoleSkip();

interface World extends DeskWorld {
  platform: { id: string; email: string };
  store: string;
}

async function seedWorld(db: Db, config: Config): Promise<World> {
  const world = await seedDeskWorld(db, config);
  const platform = await seedPasswordUser(db, world.tenant.id, "root@nightowl.example", PASSWORD);
  const dir = tempDir("backline-2fa-store-");
  await db.asService(async (tx) => {
    await tx.query("insert into internal.staff (user_id, tenant_id, role) values ($1, null, 'admin')", [
      platform.id,
    ]);
    await tx.query("insert into internal.staff (user_id, tenant_id, role) values ($1, $2, 'admin')", [
      platform.id,
      world.tenant.id,
    ]);
    await tx.query("insert into internal.stores (code, name, sort, settings) values ($1, $2, 1000, $3)", [
      "twofa_store",
      "Two-Factor Store",
      JSON.stringify({
        adapter: "ddex",
        ddex: {
          sender: { dpid: "PADPIDA2026112201B", name: "Backline Distribution" },
          recipient: { dpid: "PADPIDA2011072101T", name: "Example Store" },
          destination: { type: "directory", path: dir },
        },
      }),
    ]);
  });
  return { ...world, platform, store: "twofa_store" };
}

/** The review queue, choosing the tenant first where the console asks (platform staff work on any). */
async function openQueue(page: Page, slug: string): Promise<void> {
  const queue = page.locator(tid("page-review-queue"));
  await queue
    .or(page.locator(tid("tenant-list")))
    .first()
    .waitFor();
  if (!(await queue.isVisible())) await page.locator(tid(`tenant-choice-${slug}`)).click();
  await queue.waitFor();
}

/** The `aal` claim of the access token the console keeps. */
async function sessionAal(page: Page): Promise<string | undefined> {
  return page.evaluate(() => {
    const raw = localStorage.getItem("backline-console-session");
    if (!raw) return undefined;
    const token = (JSON.parse(raw) as { session: { access_token: string } }).session.access_token;
    const payload = token.split(".")[1] ?? "";
    return (JSON.parse(atob(payload.replace(/-/g, "+").replace(/_/g, "/"))) as { aal?: string }).aal;
  });
}

describe("the console's two-step sign-in in Chromium", { skip }, () => {
  const ui = consoleSuite(seedWorld);
  const errors = ui.pageErrors;
  let secret = "";
  let usedStep = 0;

  async function record(p: Page, name: string, device: "desktop" | "phone"): Promise<void> {
    await p.waitForLoadState("networkidle");
    await screenshot(p, `second-factor-${name}`, device);
    await assertAccessible(p, `${name} (${device})`);
  }

  test("without a factor, sign-in opens the console at aal1 and platform acts say what is missing", async () => {
    const { stack, world, page } = ui;
    await ui.signIn("/console/", { slug: world.tenant.slug, email: world.platform.email });
    await openQueue(page, world.tenant.slug);
    assert.equal(await sessionAal(page), "aal1");
    await page.goto(`${stack.url}/console/stores/${world.store}`);
    await page.locator(tid("store-check")).click();
    const refused = page.locator(`${tid("store-connection")} ${tid("error-state")}`);
    await refused.waitFor();
    assert.match(await refused.innerText(), /A second factor is needed/);
    assert.equal(await refused.locator('a[href$="/security"]').count(), 1);
  });

  test("adding an authenticator app: QR code and key, a wrong code refused by the field, the right one gives aal2", async () => {
    const { page } = ui;
    await page.locator(tid("security-link")).click();
    await page.locator(tid("page-security")).waitFor();
    await page.locator(tid("factor-name")).fill("Work phone");
    await page.locator(tid("factor-add")).click();
    await page.locator(tid("factor-qr")).waitFor();
    secret = (await page.locator(tid("factor-secret")).innerText()).trim();
    assert.match(secret, /^[A-Z2-7]{32}$/);
    assert.match((await page.locator(tid("factor-qr")).getAttribute("src")) ?? "", /^data:image\/svg\+xml/);
    await record(page, "01-enrol", "desktop");

    // A code of another secret: refused next to the field, nothing enrolled.
    await page.locator(tid("factor-code")).fill(totpCode("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", totpStep()));
    await page.locator(tid("factor-confirm")).click();
    const wrong = page.locator(tid("factor-code-error"));
    await wrong.waitFor();
    assert.match(await wrong.innerText(), /not right/);
    assert.equal(await page.locator(tid("factor-code")).getAttribute("aria-invalid"), "true");
    assert.equal(await sessionAal(page), "aal1");
    await record(page, "02-enrol-wrong-code", "desktop");

    usedStep = totpStep();
    await page.locator(tid("factor-code")).fill(totpCode(secret, usedStep));
    await page.locator(tid("factor-confirm")).click();
    await page.locator(tid("factor-added")).waitFor();
    await page.locator(tid("factor-row")).filter({ hasText: "Work phone" }).waitFor();
    assert.equal(await sessionAal(page), "aal2");
  });

  test("with the aal2 session the store check, a platform act, passes from the console", async () => {
    const { stack, world, page } = ui;
    await page.goto(`${stack.url}/console/stores/${world.store}`);
    await page.locator(tid("store-check")).click();
    await page.locator(`${tid("store-check-result")}[data-ok="true"]`).waitFor();
  });

  test("signing in again asks for the code first; a wrong code keeps everything closed", async () => {
    const { world, page } = ui;
    await page.locator(tid("sign-out")).click();
    await signInWithPassword(page, {
      slug: world.tenant.slug,
      email: world.platform.email,
      password: PASSWORD,
    });
    await page.locator(tid("page-second-factor")).waitFor();
    assert.equal(await page.locator(tid("page-review-queue")).count(), 0);
    assert.equal(await page.locator("nav#nav").count(), 0);
    await record(page, "03-step", "desktop");

    // The code already used at enrolment cannot be used again; neither can a made-up one.
    for (const code of [totpCode(secret, usedStep), "000000"]) {
      await page.locator(tid("second-factor-code")).fill(code);
      await page.locator(tid("second-factor-verify")).click();
      const error = page.locator(tid("second-factor-error"));
      await error.waitFor();
      assert.match(await error.innerText(), /not right|Too many/);
      assert.equal(await page.locator(tid("page-second-factor")).count(), 1);
    }
    await record(page, "04-step-wrong-code", "desktop");

    await page.locator(tid("second-factor-code")).fill(totpCode(secret, usedStep + 1));
    await page.locator(tid("second-factor-verify")).click();
    await openQueue(page, world.tenant.slug);
    assert.equal(await sessionAal(page), "aal2");
  });

  test("on a phone the step and the security page fit, and removing the app asks first", async () => {
    const { stack, world, browser, context, page } = ui;
    const phone = await newContext(browser, "phone", stack.url, await context.storageState());
    try {
      const p = await phone.newPage();
      watchPageErrors(p, errors);
      await p.goto(`${stack.url}/console/security`);
      await p.locator(tid("factor-row")).waitFor();
      await record(p, "05-security", "phone");
      await p.locator(tid("factor-remove")).click();
      await p.locator(tid("factor-remove-dialog-confirm")).waitFor();
      await record(p, "06-remove-dialog", "phone");
      await p.locator(tid("factor-remove-dialog-cancel")).click();
      assert.equal(await p.locator(tid("factor-row")).count(), 1);
      await p.locator(tid("factor-remove")).click();
      await p.locator(tid("factor-remove-dialog-confirm")).click();
      await p.locator(tid("factor-row")).waitFor({ state: "detached" });
      assertNoOffsite(phone);
    } finally {
      await phone.close();
    }
    // Without a factor, the next sign-in opens at once again.
    await page.locator(tid("sign-out")).click();
    await signInWithPassword(page, {
      slug: world.tenant.slug,
      email: world.platform.email,
      password: PASSWORD,
    });
    await openQueue(page, world.tenant.slug);
    assert.equal(await sessionAal(page), "aal1");
  });

  test("a staff user without a factor never sees the step; nothing was loaded from elsewhere", async () => {
    const { world, context, page } = ui;
    await page.locator(tid("sign-out")).click();
    await signInWithPassword(page, { slug: world.tenant.slug, email: world.desk.email, password: PASSWORD });
    await page.locator(tid("page-review-queue")).waitFor();
    assertNoOffsite(context);
    assert.deepEqual(errors, []);
  });
});
