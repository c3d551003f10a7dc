import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  createPlan,
  issueInvoice,
  previousMonth,
  recordPayment,
  setIssuer,
  setTenantBilling,
} from "../../src/billing/invoices.ts";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import {
  assertAccessible,
  assertNoOffsite,
  newContext,
  screenshot,
  watchPageErrors,
} from "../support/browser.ts";
import { seedPasswordUser } from "../support/console.ts";
import { addStaff, PASSWORD } from "../support/console-seed.ts";
import { consoleSkip, consoleSuite, tid } from "../support/console-ui.ts";

/**
 * The console's Invoices page (docs/operator.md, "Plans and invoices") in Chromium against
 * `npm start` on the embedded database: a tenant's admin sees its plan and its own invoices
 * (September's past due and flagged, October's partly paid), downloads one as a PDF, and never
 * another tenant's; a reviewer is not offered the page and is refused it. Desktop and phone: a
 * screenshot each, and axe finds nothing serious.
 */

interface World {
  slug: string;
  admin: string;
  reviewer: string;
  numbers: { september: string; october: string; latest: string; other: string };
}

async function seedWorld(db: Db, config: Config): Promise<World> {
  const site = { auth: { email_confirmation: false, site_url: `${config.publicUrl}/console/` } };
  const { tenant } = await createTenant(db, {
    name: "Lantern Distribution",
    slug: "lantern",
    settings: site,
  });
  const { tenant: other } = await createTenant(db, {
    name: "Other Music",
    slug: "othermusic",
    settings: site,
  });
  await createAccount(db, { tenantId: tenant.id, name: "Lantern Records", kind: "label" });
  const admin = await seedPasswordUser(db, tenant.id, "admin@lantern.example", PASSWORD);
  const reviewer = await seedPasswordUser(db, tenant.id, "reviewer@lantern.example", PASSWORD);
  await addStaff(db, config, admin.email, tenant.slug, "admin");
  await addStaff(db, config, reviewer.email, tenant.slug, "reviewer");
  await setIssuer(db, {
    legal_name: "Backline Distribution GmbH",
    address: "Musterstrasse 1, 10115 Berlin",
    country: "DE",
    vat_id: "DE999999999",
    email: null,
    invoice_prefix: "BL-",
    payment_terms_days: 14,
    bank_details: "IBAN DE00 1234 5678 9012 3456 78",
  });
  const plan = await createPlan(db, {
    name: "Growth",
    currency: "EUR",
    monthly_fee: "1299.00",
    included_accounts: 50,
    included_releases: 100,
    included_tracks: 1000,
    included_storage_gb: 500,
    included_api_calls: 1_000_000,
    price_per_account: "4.99",
    price_per_release: "1.25",
    price_per_track: "0.10",
    price_per_storage_gb: "0.05",
    price_per_1000_api_calls: "0.02",
  });
  const billing = { plan_id: plan.id, address: "1 rue de la Paix, Paris", email: null };
  await setTenantBilling(db, tenant.id, {
    ...billing,
    legal_name: "Lantern SARL",
    country: "FR",
    vat_id: "FR12345678901",
  });
  await setTenantBilling(db, other.id, { ...billing, legal_name: "Other GmbH", country: "DE", vat_id: null });
  const september = await issueInvoice(db, tenant.id, "2026-09", {
    now: new Date(Date.now() - 40 * 86_400_000),
  });
  const other1 = await issueInvoice(db, other.id, "2026-10");
  const october = await issueInvoice(db, tenant.id, "2026-10");
  await recordPayment(db, october.id, { amount: "299.00", by: "test" });
  // Last month's too, as the worker's monthly run (which starts with the server) would issue them.
  const latest = await issueInvoice(db, tenant.id, previousMonth());
  await issueInvoice(db, other.id, previousMonth());
  return {
    slug: tenant.slug,
    admin: admin.email,
    reviewer: reviewer.email,
    numbers: {
      september: september.number,
      october: october.number,
      latest: latest.number,
      other: other1.number,
    },
  };
}

const skip = consoleSkip();

describe("the console in Chromium: a tenant's invoices", { skip }, () => {
  const ui = consoleSuite(seedWorld);

  test("an admin sees the plan and its own invoices, the overdue one flagged, and downloads a PDF", async () => {
    const { stack, world, browser, context: desktop, page, pageErrors } = ui;
    await ui.signIn("/console/invoices", { slug: world.slug, email: world.admin });
    await page.locator(tid("page-invoices")).waitFor();
    await page.locator(tid("invoice-row")).first().waitFor();
    assert.equal(await page.locator(tid("plan-name")).innerText(), "Growth");
    const numbers = await page
      .locator(tid("invoice-row"))
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-invoice-number")));
    assert.deepEqual(numbers, [world.numbers.latest, world.numbers.october, world.numbers.september]);
    assert.ok(!numbers.includes(world.numbers.other), "another tenant's invoice is not shown");
    const october = page.locator(`${tid("invoice-row")}[data-invoice-number="${world.numbers.october}"]`);
    assert.equal(
      await october.locator(`${tid("invoice-total")} .amount`).getAttribute("data-amount"),
      "1299.00",
    );
    assert.equal(
      await october.locator(`${tid("invoice-balance")} .amount`).getAttribute("data-amount"),
      "1000.00",
    );
    assert.equal((await october.locator(tid("invoice-status")).innerText()).trim(), "open");
    const september = page.locator(`${tid("invoice-row")}[data-invoice-number="${world.numbers.september}"]`);
    assert.equal((await september.locator(tid("invoice-status")).innerText()).trim(), "overdue");
    assert.match(
      await page.locator(tid("invoices-overdue")).innerText(),
      new RegExp(world.numbers.september),
    );
    assert.equal(await page.locator(tid("nav-invoices")).count(), 1);

    const [download] = await Promise.all([
      page.waitForEvent("download"),
      october.locator(tid("invoice-pdf")).click(),
    ]);
    assert.equal(download.suggestedFilename(), `invoice-${world.numbers.october}.pdf`);
    const path = await download.path();
    const bytes = (await import("node:fs")).readFileSync(path);
    assert.equal(bytes.subarray(0, 5).toString("latin1"), "%PDF-");

    await screenshot(page, "console-invoices", "desktop");
    await assertAccessible(page, "invoices (desktop)");
    const phone = await newContext(browser, "phone", stack.url, await desktop.storageState());
    try {
      const p = await phone.newPage();
      const phoneErrors = watchPageErrors(p);
      await p.goto(`${stack.url}/console/invoices`);
      await p.locator(tid("invoice-row")).first().waitFor();
      // The number and what is due stay in view on a phone.
      const row = p.locator(`${tid("invoice-row")}[data-invoice-number="${world.numbers.october}"]`);
      assert.ok(await row.locator("th").isVisible());
      assert.ok(await row.locator(tid("invoice-balance")).isVisible());
      await screenshot(p, "console-invoices", "phone");
      await assertAccessible(p, "invoices (phone)");
      assert.deepEqual(phoneErrors, []);
      assertNoOffsite(phone);
    } finally {
      await phone.close();
    }
    assertNoOffsite(desktop);
    assert.deepEqual(pageErrors, []);
  });

  test("a reviewer is not offered Invoices and is refused the page", async () => {
    const { stack, world } = ui;
    const context = await newContext(ui.browser, "desktop", stack.url);
    try {
      const p = await context.newPage();
      await ui.signIn("/console/", { slug: world.slug, email: world.reviewer }, p);
      await p.locator(tid("page-review-queue")).waitFor();
      assert.equal(await p.locator(tid("nav-invoices")).count(), 0);
      await p.goto(`${stack.url}/console/invoices`);
      const refused = p.locator(tid("page-forbidden"));
      await refused.waitFor();
      assert.match(await refused.innerText(), /needs the admin role; you are reviewer/);
    } finally {
      await context.close();
    }
  });
});
