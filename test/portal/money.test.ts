import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import type { Page } from "playwright-core";
import { totpCode, totpStep } from "../../src/auth/totp.ts";
import { tid } from "../support/console-ui.ts";
import { moneySuite } from "../support/money-seed.ts";
import { portalSkip } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";

/**
 * The portal's money pages (docs/portal.md, "Money") in headless Chromium against `npm start`'s
 * server on the embedded database (test/support/money-seed.ts): a store report pays Ana by a
 * split that names her e-mail; she signs in (a member of no account), sees her balance and a
 * draft statement; the operator approves the month; she downloads the statement as PDF and CSV
 * (the CSV's closing balance is the page's); asking to be paid needs her authenticator's code,
 * then is refused in words beside the button until her tax form is filed and verified and she
 * says where to be paid; then it is requested. A payee without an authenticator app sets one up
 * where the payout asks for it. An owner sees whom the account owes; a viewer, an
 * owner of another account and the same address on another tenant see nothing of it.
 */

const skip = portalSkip();

describe("the portal in Chromium: money", { skip, concurrency: 2 }, () => {
  const s = moneySuite();
  const period = new Date().toISOString().slice(0, 7);
  const noCodes = async (page: Page) =>
    assert.doesNotMatch(
      await page.locator(tid("page-money")).innerText(),
      /_required|below_threshold|payout_open|aal2/,
      "refusals are words, never codes",
    );

  test("a payee sees her balance and statements, downloads them, and asks to be paid", async () => {
    // Ana adds an authenticator app through supabase-js, as any app of hers would: payouts ask aal2.
    const supabase = createClient(s.stack.url, s.world.harbour.anonKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    assert.equal(
      (await supabase.auth.signInWithPassword({ email: s.world.ana, password: PASSWORD })).error,
      null,
    );
    const enrolled = await supabase.auth.mfa.enroll({ factorType: "totp", friendlyName: "phone" });
    assert.equal(enrolled.error, null);
    const { id: factorId, totp } = enrolled.data as { id: string; totp: { secret: string } };
    const verified = await supabase.auth.mfa.challengeAndVerify({
      factorId,
      code: totpCode(totp.secret, totpStep() - 1),
    });
    assert.equal(verified.error, null);

    await s.story("money-payee", async ({ page, record }) => {
      await s.signIn(page, s.portal(), s.world.ana, PASSWORD);
      await page.locator(tid("nav-money")).click();
      const balance = page.locator(`${tid("money-balance")}[data-currency="USD"]`);
      // Exact in the ledger, rounded only on the page.
      assert.equal(await balance.getAttribute("data-balance"), "11.5488");
      assert.equal(await balance.locator(tid("balance-amount")).innerText(), "11.55 USD");
      assert.equal(await page.locator(tid("payout-available")).innerText(), "11.54 USD");
      // Who pays her is named though she is no member of it (from the statement).
      await page.locator(tid("payee-payer")).filter({ hasText: "From Lantern Records" }).waitFor();
      await page.locator(`${tid("statement-row")}[data-status="draft"]`).waitFor();
      await record("money", "payee");

      // The draft statement of the open month.
      await page.locator(`${tid("statement-row")}[data-status="draft"] ${tid("statement-open")}`).click();
      await page.locator(`${tid("statement-status")}[data-status="draft"]`).waitFor();
      assert.equal(await page.locator(tid("statement-closing")).innerText(), "11.55 USD");
      assert.equal(await page.locator(tid("statement-earning")).count(), 2);

      // The operator approves the month; the statement is approved, and downloaded as PDF and CSV.
      await s.admin("POST", `/money/periods/${period}/approve`, {});
      await page.getByRole("link", { name: "Back to Money" }).click();
      await page.reload();
      await page.locator(`${tid("statement-row")}[data-status="approved"] ${tid("statement-open")}`).click();
      await page.locator(`${tid("statement-status")}[data-status="approved"]`).waitFor();
      const closing = page.locator(tid("statement-closing"));
      assert.equal(await closing.getAttribute("data-amount"), "11.55");
      const shown = await closing.innerText();
      assert.equal(shown, "11.55 USD");
      const [pdf] = await Promise.all([
        page.waitForEvent("download"),
        page.locator(tid("statement-pdf")).click(),
      ]);
      assert.match(pdf.suggestedFilename(), /^statement-\d{4}-\d{2}-[0-9a-f]{8}\.pdf$/);
      assert.equal(
        fs
          .readFileSync((await pdf.path()) as string)
          .subarray(0, 5)
          .toString(),
        "%PDF-",
      );
      const [csv] = await Promise.all([
        page.waitForEvent("download"),
        page.locator(tid("statement-csv")).click(),
      ]);
      assert.match(csv.suggestedFilename(), /\.csv$/);
      const lines = fs
        .readFileSync((await csv.path()) as string, "utf8")
        .trim()
        .split(/\r?\n/);
      const header = (lines[0] ?? "").split(",");
      // (No field of this statement holds a comma: a plain split reads it.)
      const closingRow =
        lines.map((l) => l.split(",")).find((r) => r[header.indexOf("row_type")] === "closing_balance") ?? [];
      const net = closingRow[header.indexOf("net")];
      assert.equal(`${net} USD`, shown, "the CSV's closing balance is the page's");
      await record("money-statement", "statement-summary");

      // Asking to be paid: first the authenticator's code, then each missing step, in words.
      await page.getByRole("link", { name: "Back to Money" }).click();
      await page.locator(tid("statement-row")).first().waitFor();
      assert.equal(await page.locator(`${tid("statement-row")}[data-status="draft"]`).count(), 0);
      await page.locator(tid("payout-request")).click();
      assert.match(await page.locator(tid("payout-request-error")).innerText(), /authenticator/);
      await page.getByLabel("Code from your authenticator app").fill(totpCode(totp.secret, totpStep()));
      await page.locator(tid("payout-mfa-verify")).click();
      await page.locator(tid("payout-request-error")).filter({ hasText: "tax form" }).waitFor();
      assert.match(await page.locator(tid("payout-request-error")).innerText(), /File your tax form first/);
      await noCodes(page);
      await record("money-refused", "payout-request-error");

      // The tax form: its id is never shown back but its last four.
      await page.locator(tid("tax-kind")).selectOption("W-8BEN");
      await page.getByLabel("Name on the form").fill("Ana Lima");
      await page.getByLabel("Country", { exact: true }).fill("BR");
      await page.getByLabel("Tax id", { exact: true }).fill("123.456.789-09");
      await page.locator(tid("tax-submit")).click();
      await page.locator(`${tid("tax-status")}[data-status="pending"]`).waitFor();
      assert.equal(await page.locator(tid("tax-last4")).innerText(), "8909");
      assert.doesNotMatch(await page.locator(tid("page-money")).innerText(), /123\.456/);
      await page.locator(tid("payout-request")).click();
      await page.locator(tid("payout-request-error")).filter({ hasText: "being checked" }).waitFor();

      // The operator verifies it; a payout method is still missing, then a wrong address is said.
      const payeeId = (await page.locator(tid("payee")).getAttribute("data-payee-id")) as string;
      await s.admin("POST", `/money/payees/${payeeId}/tax-review`, {
        status: "verified",
        withholding_rate: "15",
      });
      await page.reload();
      await page.locator(`${tid("tax-status")}[data-status="verified"]`).waitFor();
      await page.locator(tid("payout-request")).click();
      await page
        .locator(tid("payout-request-error"))
        .filter({ hasText: "where to send the money" })
        .waitFor();
      await page.getByLabel("PayPal e-mail address").fill("not an address");
      await page.locator(tid("method-save")).click();
      await page.locator(tid("method-receiver-error")).waitFor();
      // In plain words, not with the API's field path ("receiver: …").
      assert.doesNotMatch(
        await page.locator(tid("method-receiver-error")).innerText(),
        /^[A-Za-z_]+(\[\d+\])?(\.[A-Za-z_]+)*: /,
      );
      await page.getByLabel("PayPal e-mail address").fill("ana@example.org");
      await page.locator(tid("method-save")).click();
      await page.locator(tid("method-saved")).waitFor();
      assert.equal(await page.locator(tid("payout-method-current")).innerText(), "PayPal: ana@example.org");

      // Requested: the available balance (rounded down), 15% withheld; a second request is refused.
      await page.locator(tid("payout-request")).click();
      await page.locator(tid("payout-requested")).waitFor();
      assert.match(
        await page.locator(tid("payout-requested")).innerText(),
        /11\.54 USD \(1\.73 USD withheld/,
      );
      await page.locator(`${tid("payout-row")}[data-status="requested"]`).waitFor();
      assert.equal(await page.locator(tid("payout-available")).innerText(), "0.00 USD");
      await page.locator(tid("payout-request")).click();
      await page.locator(tid("payout-request-error")).filter({ hasText: "already asked" }).waitFor();
      await noCodes(page);
      await record("money-requested", "payouts");
    });
  });

  test("an owner sees whom the account owes; its viewer sees no money", async () => {
    await s.story("money-owner", async ({ page, record }) => {
      await s.signIn(page, s.portal(), s.world.owner, PASSWORD);
      await page.locator(tid("nav-money")).click();
      await page.locator(`${tid("account-payee-row")}[data-email="ana@example.org"]`).waitFor();
      assert.equal(await page.locator(tid("account-payee-row")).count(), 3, "Ana, June and the account");
      assert.match(
        await page.locator(`${tid("account-payee-row")}[data-email="ana@example.org"]`).innerText(),
        /Ana Lima[\s\S]*USD/,
      );
      // The owner is owed nothing personally: nothing to ask for.
      await page.locator(tid("money-empty")).waitFor();
      assert.equal(await page.locator(tid("payout-request")).count(), 0);
      await record("money-account", "account-payees");
    });
    await s.story("money-viewer", async ({ page, record }) => {
      await s.signIn(page, s.portal(), s.world.viewer, PASSWORD);
      await page.locator(tid("page-releases")).waitFor();
      await page.locator(tid("nav-releases")).waitFor();
      await page.waitForLoadState("networkidle");
      assert.equal(await page.locator(tid("nav-money")).count(), 0, "no way to money for a viewer");
      await page.goto(`${s.portal()}/money`);
      await page.locator(tid("money-empty")).waitFor();
      assert.equal(await page.locator(tid("account-money")).count(), 0);
      assert.equal(await page.locator(tid("money-balance")).count(), 0);
      await record("money-empty", "money-empty");
    });
    // And the API refuses the viewer the account's payees (the page does not ask).
    const supabase = createClient(s.stack.url, s.world.harbour.anonKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const signedIn = await supabase.auth.signInWithPassword({ email: s.world.viewer, password: PASSWORD });
    const res = await fetch(`${s.stack.url}/api/public/v1/payees`, {
      headers: {
        authorization: `Bearer ${signedIn.data.session?.access_token}`,
        "backline-account": s.world.lantern.id,
      },
    });
    assert.equal(res.status, 403);
  });

  test("a payee without an authenticator app sets one up where her payout asks for it", async () => {
    await s.story("money-authenticator", async ({ page, record }) => {
      await s.signIn(page, s.portal(), s.world.june, PASSWORD);
      await page.locator(tid("nav-money")).click();
      await page.locator(tid("payout-request")).click();
      assert.match(await page.locator(tid("payout-request-error")).innerText(), /authenticator app/);
      await page.locator(tid("mfa-setup-start")).click();
      const secret = await page.locator(tid("mfa-setup-secret")).innerText();
      assert.ok(
        await page
          .locator(tid("mfa-setup-qr"))
          .evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth > 0),
        "the QR code is drawn",
      );
      await record("money-authenticator", "mfa-setup");
      await page.getByLabel("Code from your authenticator app").fill(totpCode(secret, totpStep()));
      await page.locator(tid("payout-mfa-verify")).click();
      // Now at aal2: the request goes on to what is missing next.
      await page
        .locator(tid("payout-request-error"))
        .filter({ hasText: "File your tax form first" })
        .waitFor();
      assert.equal(await page.locator(tid("mfa-setup")).count(), 0);
      await noCodes(page);
    });
  });

  test("another account's owner and the same address on another tenant see nothing of it", async () => {
    await s.story("money-other-account", async ({ page }) => {
      await s.signIn(page, s.portal(), s.world.other, PASSWORD);
      await page.locator(tid("nav-money")).click();
      await page.locator(tid("account-payees-empty")).waitFor();
      await page.locator(tid("money-empty")).waitFor();
      assert.doesNotMatch(await page.locator(tid("page-money")).innerText(), /Ana|Lantern|USD/);
    });
    await s.story("money-other-tenant", async ({ page }) => {
      await s.signIn(page, s.portal(s.world.elsewhere.slug), s.world.ana, PASSWORD);
      await page.locator(tid("page-releases")).waitFor();
      await page.waitForLoadState("networkidle");
      assert.equal(await page.locator(tid("nav-money")).count(), 0);
      await page.goto(`${s.portal(s.world.elsewhere.slug)}/money`);
      await page.locator(tid("money-empty")).waitFor();
      assert.equal(await page.locator(tid("payee")).count(), 0);
    });
  });
});
