import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Browser, BrowserContext, Download, Page } from "playwright-core";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import {
  assertAccessible,
  assertNoOffsite,
  browserMissing,
  consoleMissing,
  launchBrowser,
  newContext,
  screenshot,
  watchPageErrors,
} from "../support/browser.ts";
import { type ConsoleStack, seedPasswordUser, startConsoleStack } from "../support/console.ts";
import { addStaff, PASSWORD } from "../support/console-seed.ts";
import { signInWithPassword, tid } from "../support/console-ui.ts";
import { ENGINES } from "../support/db.ts";
import { publicApi } from "../support/public-api.ts";
import { seedDeliveredRelease } from "../support/royalties.ts";

/**
 * Issue 39, item 5: the console's money pages, in a real Chromium against `npm start` on the
 * embedded database. docs/payouts.md's worked example, driven by an operator (an admin of the
 * tenant) through the console: a 10% fee and a 1.00 USD expense are set; a royalty report is
 * imported; the month is refused approval for the missing EUR rate (in words), the rate is set, the
 * month approved and its statements read and downloaded; the payees (people who sign in, by the
 * public API) file tax forms the operator verifies, and ask for payouts the operator approves as a
 * PayPal batch, exports (the provider's CSV, the right amounts) and settles with one line failed;
 * the ledger shows every currency at zero. A reviewer is not offered the pages and is refused them.
 * Every page is opened on a desktop and a phone: a screenshot each, and axe finds nothing serious.
 */

/** The API's field path a refusal starts with (`payout_threshold: …`, `rate is …`): never shown. */
const FIELD_PATH = /^[a-z_]+(\[\d+\])?(\.[a-z_]+)*(: | (is|are|must) )/;

const REPORT = [
  "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
  "2026-11,2026-10,spotify,US,012345000010,QZABC2600001,stream,1000,5.00,1.50,3.50,USD",
  "2026-11,2026-10,apple_music,GB,012345000010,QZABC2600001,download,3,2.97,0.89,2.08,USD",
  "2026-11,2026-10,spotify,US,012345000010,QZABC2600002,stream,500,2.00,0.60,1.40,USD",
  "2026-11,2026-10,deezer,FR,012345000010,QZABC2600001,stream,100,0.33,0.1,0.123456789012,EUR",
  "",
].join("\n");

interface MoneyWorld {
  tenant: { id: string; slug: string; anonKey: string; serviceKey: string };
  accountId: string;
  releaseId: string;
  operator: { email: string };
  reviewer: { email: string };
  /** An operator: reads the money pages, decides nothing an admin decides. */
  clerk: { email: string };
  ana: { email: string };
  june: { email: string };
}

/** Lantern Distribution: its label's delivered "Night Drive", whose first track is split June 60, Ana 40. */
async function seedMoneyWorld(db: Db, config: Config): Promise<MoneyWorld> {
  const { tenant, keys } = await createTenant(db, {
    name: "Lantern Distribution",
    slug: "lantern",
    settings: {
      auto_review: false,
      gs1_company_prefix: "2000000",
      auth: { email_confirmation: false, site_url: `${config.publicUrl}/console/` },
    },
  });
  const account = await createAccount(db, { tenantId: tenant.id, name: "Lantern Records", kind: "label" });
  const release = await seedDeliveredRelease(db, account.id, { title: "Night Drive", upc: "012345000010" }, [
    { title: "Night Drive", isrc: "QZABC2600001", duration: 200, track_number: 1 },
    { title: "Neon", isrc: "QZABC2600002", duration: 180, track_number: 2 },
  ]);
  await db.asService((tx) =>
    tx.query("update public.tracks set splits = $2 where id = $1", [
      release.tracks[0]?.id,
      JSON.stringify([
        { name: "June Park", email: "june@lantern.test", share: 60 },
        { name: "Ana Lima", email: "ana@example.org", share: "40.00" },
      ]),
    ]),
  );
  const operator = await seedPasswordUser(db, tenant.id, "money@lantern.example", PASSWORD);
  const reviewer = await seedPasswordUser(db, tenant.id, "reviewer@lantern.example", PASSWORD);
  const clerk = await seedPasswordUser(db, tenant.id, "clerk@lantern.example", PASSWORD);
  const ana = await seedPasswordUser(db, tenant.id, "ana@example.org", PASSWORD);
  const june = await seedPasswordUser(db, tenant.id, "june@lantern.test", PASSWORD);
  await addStaff(db, config, operator.email, tenant.slug, "admin");
  await addStaff(db, config, reviewer.email, tenant.slug, "reviewer");
  await addStaff(db, config, clerk.email, tenant.slug, "operator");
  return {
    tenant: { id: tenant.id, slug: tenant.slug, anonKey: keys.anon_key, serviceKey: keys.service_role_key },
    accountId: account.id,
    releaseId: release.id,
    operator,
    reviewer,
    clerk,
    ana,
    june,
  };
}

const skip =
  browserMissing() ||
  (ENGINES.includes("pglite")
    ? false
    : "the browser tests run once, on the embedded database (the PGlite pass of the suite)") ||
  consoleMissing();

type Obj = Record<string, unknown>;

describe("the console's money pages in Chromium: fees, a period, tax forms, a payout batch, the ledger", {
  skip,
}, () => {
  let stack: ConsoleStack;
  let world: MoneyWorld;
  let browser: Browser;
  let desktop: BrowserContext & { offsite: string[] };
  let page: Page;
  let pageErrors: string[];
  let phone: (BrowserContext & { offsite: string[] }) | undefined;
  let phonePage: Page | undefined;
  let phoneState = "";
  const phoneErrors: string[] = [];
  let shot = 0;
  // The month the import is posted in: the current one (the first open period from now on).
  const period = new Date().toISOString().slice(0, 7);
  const payees: Record<string, string> = {};
  let junePayoutId = "";

  before(async () => {
    const started = await startConsoleStack("pglite", seedMoneyWorld);
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

  const done = new Set<string>();
  function step(name: string, order: { needs: string[]; gives?: string }, fn: () => Promise<void>) {
    test(name, async (t) => {
      const missing = order.needs.filter((n) => !done.has(n));
      if (missing.length > 0) {
        t.skip(`an earlier step failed: ${missing.join(", ")}`);
        return;
      }
      try {
        await fn();
      } catch (e) {
        await screenshot(
          page,
          `FAILED-money-${name.replace(/[^a-z0-9]+/gi, "-").slice(0, 50)}`,
          "desktop",
        ).catch(() => undefined);
        throw e;
      }
      if (order.gives) done.add(order.gives);
    });
  }

  async function settle(p: Page): Promise<void> {
    await p.waitForLoadState("networkidle");
    await p
      .locator(tid("loading"))
      .first()
      .waitFor({ state: "detached", timeout: 15_000 })
      .catch(() => undefined);
  }

  /** The desktop's page: screenshot and axe; then the same address on a phone, the same. */
  async function record(name: string, testid: string): Promise<void> {
    const label = `money-${String(++shot).padStart(2, "0")}-${name}`;
    await page.locator(tid(testid)).waitFor();
    await settle(page);
    await screenshot(page, label, "desktop");
    await assertAccessible(page, `${name} (desktop)`);
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
    await p.locator(tid(testid)).waitFor();
    await settle(p);
    await screenshot(p, label, "phone");
    await assertAccessible(p, `${name} (phone)`);
  }

  /** What a click saves: the file's name and text. */
  async function downloaded(click: () => Promise<void>): Promise<{ name: string; body: Buffer }> {
    const waiting = page.waitForEvent("download");
    await click();
    const download: Download = await waiting;
    const file = await download.path();
    return { name: download.suggestedFilename(), body: fs.readFileSync(file) };
  }

  /** A person's access token from the tenant's /auth/v1 (as the portal signs in). */
  async function signInAs(email: string): Promise<string> {
    const res = await fetch(`${stack.url}/auth/v1/token?grant_type=password`, {
      method: "POST",
      headers: { apikey: world.tenant.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { access_token: string }).access_token;
  }
  async function asPerson(email: string) {
    const call = publicApi(stack.url, await signInAs(email));
    return (method: string, path: string, body?: unknown) =>
      call(method, path, body, { apikey: world.tenant.anonKey });
  }
  async function payeeOf(email: string): Promise<string> {
    const me = await asPerson(email);
    const res = await me("GET", "/me/payees");
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const found = (res.body.data as Obj[]).find((p) => p.email === email);
    assert.ok(found, `a payee for ${email}`);
    return found.id as string;
  }

  async function openMoneyTab(tab: string, testid: string): Promise<void> {
    await page
      .locator(tid(`money-tab-${tab}`))
      .first()
      .click();
    await page.locator(tid(testid)).waitFor();
    await settle(page);
  }

  step(
    "the operator signs in and opens Money: fees and settings",
    { needs: [], gives: "signed-in" },
    async () => {
      await page.goto(`${stack.url}/console/`);
      await signInWithPassword(page, {
        slug: world.tenant.slug,
        email: world.operator.email,
        password: PASSWORD,
      });
      await page.locator(tid("page-review-queue")).waitFor();
      await page.locator(tid("nav-money")).click();
      await page.locator(tid("page-money-periods")).waitFor();
      await page.getByText("No money yet").waitFor();
      await openMoneyTab("settings", "page-money-settings");
      // A wrong threshold is refused next to its field, in words.
      await page.locator(tid("money-threshold")).fill("ten");
      await page.locator(tid("money-settings-save")).click();
      const fieldErr = page.locator(`${tid("money-settings-form")} ${tid("field-error")}`);
      await fieldErr.waitFor();
      assert.match(await fieldErr.innerText(), /amount/);
      // In plain words: not the API's field path ("payout_threshold: …").
      assert.doesNotMatch(await fieldErr.innerText(), FIELD_PATH);
      // The payees of the example ask for a little; no second factor in this test's world.
      await page.locator(tid("money-threshold")).fill("1.00");
      await page.locator(tid("money-aal2")).uncheck();
      await page.locator(tid("money-settings-save")).click();
      await page.locator(tid("money-settings-saved")).waitFor();
      // A fee above 100 is refused at the field; 10 % for the tenant is set.
      await page.locator(tid("fee-rate-input")).fill("150");
      await page.locator(tid("fee-save")).click();
      await page.locator(`${tid("fee-form")} ${tid("field-error")}`).waitFor();
      assert.match(
        await page.locator(`${tid("fee-form")} ${tid("field-error")}`).innerText(),
        /at most 100/i,
      );
      assert.doesNotMatch(
        await page.locator(`${tid("fee-form")} ${tid("field-error")}`).innerText(),
        FIELD_PATH,
      );
      await page.locator(tid("fee-rate-input")).fill("10");
      await page.locator(tid("fee-save")).click();
      await page.locator(`${tid("fee-row")}[data-scope="tenant"]`).waitFor();
      assert.equal(await page.locator(`${tid("fee-row")} ${tid("fee-rate")}`).innerText(), "10 %");
      await record("fees-settings", "page-money-settings");
    },
  );

  step("an expense is recorded against the release", { needs: ["signed-in"], gives: "expense" }, async () => {
    await openMoneyTab("recoupables", "page-money-recoupables");
    await page.locator(tid("recoupable-account")).selectOption(world.accountId);
    // A release of no account is refused at the release field.
    await page.locator(tid("recoupable-release-id")).fill("00000000-0000-4000-8000-000000000000");
    await page.locator(tid("recoupable-amount")).fill("1.00");
    await page.locator(tid("recoupable-description")).fill("Mastering");
    await page.locator(tid("recoupable-save")).click();
    const err = page.locator(`${tid("recoupable-form")} ${tid("field-error")}`);
    await err.waitFor();
    assert.match(await err.innerText(), /no release/i);
    await page.locator(tid("recoupable-release-id")).fill(world.releaseId);
    await page.locator(tid("recoupable-save")).click();
    await page.locator(tid("recoupable-saved")).waitFor();
    await page.locator(tid("recoupable-row")).waitFor();
    assert.match(await page.locator(tid("recoupable-unrecouped")).innerText(), /^1(\.00)? USD$/);
  });

  step(
    "a royalty report is imported; the period shows its payees and exact totals per currency",
    { needs: ["expense"], gives: "imported" },
    async () => {
      const res = await fetch(`${stack.url}/admin/v1/royalty-imports?format=backline&file_name=report.csv`, {
        method: "POST",
        headers: { apikey: world.tenant.serviceKey, "content-type": "text/csv" },
        body: REPORT,
      });
      assert.equal(res.status, 201, await res.clone().text());
      // The expense was recouped by the import.
      await page.reload();
      await page.locator(tid("recoupable-row")).waitFor();
      assert.equal(await page.locator(tid("recoupable-unrecouped")).innerText(), "0 USD");
      await record("recoupables", "page-money-recoupables");
      await openMoneyTab("periods", "page-money-periods");
      const row = page.locator(`${tid("period-row")}[data-period="${period}"]`);
      await row.waitFor();
      assert.match(await row.innerText(), /open/);
      // June, Ana and the account itself (Neon has no splits).
      assert.equal(await row.locator(tid("period-payees")).innerText(), "3");
      const totals = await row.locator(tid("period-totals")).innerText();
      assert.match(totals, /USD: received 6\.98, fees 0\.698, payees 5\.282/);
      assert.match(totals, /EUR: received 0\.123456789012, fees 0\.0123456789012, payees 0\.1111111101108/);
    },
  );

  step(
    "approval is refused for the missing EUR rate, in words; the rate is set and the month approved",
    { needs: ["imported"], gives: "approved" },
    async () => {
      await page.locator(`${tid("period-row")}[data-period="${period}"] ${tid("period-approve")}`).click();
      await page.locator(tid("period-approve-dialog-confirm")).click();
      const refusal = page.locator(tid("approve-rate-missing"));
      await refusal.waitFor();
      const words = await refusal.innerText();
      assert.match(words, /exchange rate is missing/);
      assert.match(words, /EUR to USD/);
      // The refusal is this page's state, not an address: the desktop's screenshot and axe check only.
      await settle(page);
      await screenshot(page, `money-${String(++shot).padStart(2, "0")}-period-rate-missing`, "desktop");
      await assertAccessible(page, "period rate missing");
      // The rate form is filled in for what is missing; a bad rate is refused at its field.
      assert.equal(await page.locator(tid("rate-from")).inputValue(), "EUR");
      assert.equal(await page.locator(tid("rate-to")).inputValue(), "USD");
      assert.equal(await page.locator(tid("rate-period")).inputValue(), period);
      await page.locator(tid("rate-rate")).fill("1,1");
      await page.locator(tid("rate-save")).click();
      await page.locator(`${tid("rate-form")} ${tid("field-error")}`).waitFor();
      assert.doesNotMatch(
        await page.locator(`${tid("rate-form")} ${tid("field-error")}`).innerText(),
        FIELD_PATH,
      );
      await page.locator(tid("rate-rate")).fill("1.1");
      await page.locator(tid("rate-save")).click();
      await page.locator(tid("rate-saved")).waitFor();
      await page.locator(`${tid("period-row")}[data-period="${period}"] ${tid("period-approve")}`).click();
      await page.locator(tid("period-approve-dialog-confirm")).click();
      await page.locator(tid("approve-done")).waitFor();
      assert.match(await page.locator(tid("approve-done")).innerText(), /3 statements/);
      const row = page.locator(`${tid("period-row")}[data-period="${period}"]`);
      await row.filter({ hasText: "approved" }).waitFor();
      await page.locator(tid("statement-row")).nth(2).waitFor();
      assert.equal(await page.locator(tid("statement-row")).count(), 3);
      const ana = page.locator(tid("statement-row")).filter({ hasText: "Ana Lima" });
      assert.equal(await ana.locator(tid("statement-closing")).innerText(), "1.66 USD");
      const june = page.locator(tid("statement-row")).filter({ hasText: "June Park" });
      assert.equal(await june.locator(tid("statement-closing")).innerText(), "2.49 USD");
      await record("periods", "page-money-periods");
    },
  );

  step("a statement is viewed and downloaded as CSV and PDF", { needs: ["approved"] }, async () => {
    const ana = page.locator(tid("statement-row")).filter({ hasText: "Ana Lima" });
    const csv = await downloaded(() => ana.locator(tid("statement-csv")).click());
    assert.match(csv.name, /\.csv$/);
    assert.match(csv.body.toString("utf8"), /deezer/);
    assert.match(csv.body.toString("utf8"), /1\.66/);
    const pdf = await downloaded(() => ana.locator(tid("statement-pdf")).click());
    assert.match(pdf.name, /\.pdf$/);
    assert.equal(pdf.body.subarray(0, 5).toString("latin1"), "%PDF-");
    await ana.locator(tid("statement-view")).click();
    await page.locator(tid("page-money-statement")).waitFor();
    await page.locator(tid("statement-closing-balance")).waitFor();
    assert.equal(await page.locator(tid("statement-closing-balance")).innerText(), "1.66 USD");
    assert.match(await page.locator(tid("statement-earnings")).innerText(), /deezer FR\s+EUR \(× 1\.1\)/);
    await record("statement", "page-money-statement");
  });

  step(
    "the payees file tax forms; the operator verifies them with their withholding",
    { needs: ["approved"], gives: "verified" },
    async () => {
      for (const [email, form] of [
        [world.ana.email, { form: "W-8BEN", name: "Ana Lima", country: "BR", tax_id: "123.456.789-09" }],
        [world.june.email, { form: "W-9", name: "June Park", country: "US", tax_id: "123-45-6789" }],
      ] as const) {
        payees[email] = await payeeOf(email);
        const me = await asPerson(email);
        const res = await me("POST", `/me/payees/${payees[email]}/tax-form`, form);
        assert.equal(res.status, 200, JSON.stringify(res.body));
      }
      await openMoneyTab("tax-forms", "page-money-tax-forms");
      const ana = page.locator(`${tid("payee-row")}[data-payee-id="${payees[world.ana.email]}"]`);
      await ana.waitFor();
      assert.match(await ana.innerText(), /W-8BEN · BR · …8909/);
      assert.match(await ana.locator(tid("payee-tax-status")).innerText(), /pending/);
      await record("tax-forms", "page-money-tax-forms");
      // A withholding rate above 100 is refused next to the field.
      await ana.locator(tid("tax-withholding")).fill("150");
      await ana.locator(tid("tax-verify")).click();
      await ana.locator(tid("field-error")).waitFor();
      assert.doesNotMatch(await ana.locator(tid("field-error")).innerText(), FIELD_PATH);
      await ana.locator(tid("tax-withholding")).fill("15");
      await ana.locator(tid("tax-verify")).click();
      // Verified: it leaves the forms waiting for review.
      await ana.waitFor({ state: "detached" });
      const june = page.locator(`${tid("payee-row")}[data-payee-id="${payees[world.june.email]}"]`);
      assert.equal(await june.locator(tid("tax-withholding")).inputValue(), "0");
      await june.locator(tid("tax-verify")).click();
      await june.waitFor({ state: "detached" });
      await page.locator(tid("tax-show-all")).click();
      const verified = page.locator(`${tid("payee-row")}[data-payee-id="${payees[world.ana.email]}"]`);
      assert.match(await verified.innerText(), /verified/);
      assert.match(await verified.innerText(), /15 %/);
    },
  );

  step(
    "the payees ask to be paid; the operator approves a PayPal batch, exports its CSV and settles it with June's line failed",
    { needs: ["verified"], gives: "paid" },
    async () => {
      for (const email of [world.ana.email, world.june.email]) {
        const me = await asPerson(email);
        const method = await me("POST", `/me/payees/${payees[email]}/payout-method`, {
          method: { provider: "paypal", receiver: email },
        });
        assert.equal(method.status, 200, JSON.stringify(method.body));
        const payout = await me("POST", `/me/payees/${payees[email]}/payouts`, {});
        assert.equal(payout.status, 201, JSON.stringify(payout.body));
        if (email === world.june.email) junePayoutId = payout.body.id as string;
      }
      await openMoneyTab("payouts", "page-money-payouts");
      const group = page.locator(`${tid("payout-group")}[data-provider="paypal"]`);
      await group.waitFor();
      assert.equal(await group.locator(tid("open-payout-row")).count(), 2);
      assert.match(await group.innerText(), /PayPal, USD: 2 requests/);
      assert.match(await group.innerText(), /Ana Lima\s+1\.65 USD\s+0\.25\s+1\.40/);
      // The open requests are this moment's: the desktop's screenshot and axe check (the phone sees the batches).
      await settle(page);
      await screenshot(page, `money-${String(++shot).padStart(2, "0")}-payouts-open`, "desktop");
      await assertAccessible(page, "payouts, open requests");
      await group.locator(tid("batch-approve")).click();
      // Approving a batch asks first, naming what goes into it.
      const ask = page.locator(tid("batch-approve-dialog"));
      assert.match(await ask.innerText(), /PayPal batch\?[\s\S]*2 requests/);
      await settle(page);
      await screenshot(page, `money-${String(++shot).padStart(2, "0")}-batch-approve-ask`, "desktop");
      await assertAccessible(page, "approve a batch: the dialog");
      await page.locator(tid("batch-approve-dialog-confirm")).click();
      await page.locator(tid("batch-approved")).waitFor();
      const batch = page.locator(tid("batch-row")).first();
      await batch.filter({ hasText: "approved" }).waitFor();
      const file = await downloaded(() => batch.locator(tid("batch-export")).click());
      assert.match(file.name, /\.csv$/);
      const csv = file.body.toString("utf8");
      // PayPal's Payouts CSV: no header; receiver, amount, currency, …
      assert.match(csv, /^ana@example\.org,1\.40,USD,/m);
      assert.match(csv, /^june@lantern\.test,2\.48,USD,/m);
      assert.equal(csv.trim().split(/\r?\n/).length, 2);
      await page.locator(tid("batch-exported")).waitFor();
      await batch.locator(tid("batch-settle-open")).click();
      const form = page.locator(tid("settle-form"));
      await form.waitFor();
      const line = form.locator(`${tid("settle-line")}[data-payout-id="${junePayoutId}"]`);
      await line.locator(tid("settle-failed")).check();
      // No reason yet: said at the field, and nothing is sent.
      await line.locator(tid("field-error")).waitFor();
      assert.match(await line.locator(tid("field-error")).innerText(), /why it failed/);
      await line.locator(tid("settle-reason")).fill("receiver unconfirmed");
      await settle(page);
      await screenshot(page, `money-${String(++shot).padStart(2, "0")}-settle-form`, "desktop");
      await assertAccessible(page, "settle form");
      await form.locator(tid("settle-submit")).click();
      await form.waitFor({ state: "detached" });
      await batch.filter({ hasText: "partially paid" }).waitFor();
      await record("payouts-batches", "page-money-payouts");
    },
  );

  step("the ledger shows each currency summing to zero", { needs: ["paid"] }, async () => {
    await openMoneyTab("ledger", "page-money-ledger");
    for (const c of ["EUR", "USD"]) {
      const block = page.locator(`${tid("ledger-currency")}[data-currency="${c}"]`);
      await block.waitFor();
      const total = block.locator(tid("ledger-total"));
      assert.equal(await total.getAttribute("data-zero"), "true");
      assert.match(await total.innerText(), new RegExp(`^0 ${c} ✓ balanced`));
    }
    const usd = await page.locator(`${tid("ledger-currency")}[data-currency="USD"]`).innerText();
    // docs/payouts.md: cash 2.40 (the expense 1.00 and Ana's 1.40), tax withheld 0.25, nothing pending.
    assert.match(usd, /paid out \(advances, payouts\)\s+2\.4 USD/);
    assert.match(usd, /tax withheld\s+0\.25 USD/);
    assert.match(usd, /payouts requested, not paid yet\s+0 USD/);
    await record("ledger", "page-money-ledger");
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(phoneErrors, []);
    assertNoOffsite(desktop);
    if (phone) assertNoOffsite(phone);
  });

  step(
    "an operator reads the money pages but is not offered an admin's decisions",
    { needs: ["paid"] },
    async () => {
      const context = await newContext(browser, "desktop", stack.url);
      try {
        const p = await context.newPage();
        await p.goto(`${stack.url}/console/`);
        await signInWithPassword(p, {
          slug: world.tenant.slug,
          email: world.clerk.email,
          password: PASSWORD,
        });
        await p.locator(tid("page-review-queue")).waitFor();
        await p.locator(tid("nav-money")).click();
        await p.locator(`${tid("period-row")}[data-period="${period}"]`).waitFor();
        assert.equal(await p.locator(tid("period-approve")).count(), 0);
        await p.locator(tid("money-tab-payouts")).click();
        await p.locator(tid("batch-row")).waitFor();
        await p.locator(tid("needs-admin")).waitFor();
        assert.equal(await p.locator(tid("batch-export")).count(), 0);
        // The admin API refuses the operator the export, whatever a page offers.
        const token = await signInAs(world.clerk.email);
        const batches = await fetch(`${stack.url}/admin/v1/money/payout-batches`, {
          headers: { apikey: world.tenant.anonKey, authorization: `Bearer ${token}` },
        });
        assert.equal(batches.status, 200);
        const id = ((await batches.json()) as { data: Obj[] }).data[0]?.id as string;
        const exported = await fetch(`${stack.url}/admin/v1/money/payout-batches/${id}/export`, {
          headers: { apikey: world.tenant.anonKey, authorization: `Bearer ${token}` },
        });
        assert.equal(exported.status, 403);
        assert.equal(((await exported.json()) as Obj).code, "insufficient_role");
      } finally {
        await context.close();
      }
    },
  );

  step(
    "a reviewer is not offered Money, is refused its pages, and the admin API refuses them",
    { needs: [] },
    async () => {
      const context = await newContext(browser, "desktop", stack.url);
      try {
        const p = await context.newPage();
        await p.goto(`${stack.url}/console/`);
        await signInWithPassword(p, {
          slug: world.tenant.slug,
          email: world.reviewer.email,
          password: PASSWORD,
        });
        await p.locator(tid("page-review-queue")).waitFor();
        assert.equal(await p.locator(tid("nav-money")).count(), 0);
        await p.goto(`${stack.url}/console/money/payouts`);
        const refused = p.locator(tid("page-forbidden"));
        await refused.waitFor();
        assert.match(await refused.innerText(), /needs the operator role; you are reviewer/);
        const token = await signInAs(world.reviewer.email);
        const res = await fetch(`${stack.url}/admin/v1/money/ledger`, {
          headers: { apikey: world.tenant.anonKey, authorization: `Bearer ${token}` },
        });
        assert.equal(res.status, 403);
        assert.equal(((await res.json()) as Obj).code, "insufficient_role");
      } finally {
        await context.close();
      }
    },
  );
});
