import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { assertAccessible, assertNoOffsite, screenshot } from "../support/browser.ts";
import { seedDeskWorld } from "../support/console-seed.ts";
import { consoleSkip, consoleSuite, tid } from "../support/console-ui.ts";
import { publicApi } from "../support/public-api.ts";

/**
 * The console's Support pages (docs/operator.md, "Support desk") in Chromium against `npm start`
 * on the embedded database: an account files two tickets through the public API; a reviewer sees
 * the figures and the queue (oldest wait first), opens a ticket, adds an internal note, answers,
 * assigns it to themself; the account reads the answer and not the note, and the figures follow,
 * on the Support page and on the front page (the review queue).
 */

const skip = consoleSkip();

type Ticket = { id: string; status: string; replies: { author: string; body: string }[] };

describe("the console in Chromium: the support desk", { skip }, () => {
  const ui = consoleSuite(seedDeskWorld);
  const api = () => publicApi(ui.stack.url, ui.world.apiKey);

  test("a reviewer works the queue: figures, a note, an answer, an assignee", async () => {
    const { world, context, page, pageErrors } = ui;
    const first = await api()<Ticket>("POST", "/tickets", {
      subject: "Payout missing",
      body: "Where is it?",
    });
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const second = await api()<Ticket>("POST", "/tickets", {
      subject: "Cover question",
      body: "Is 3000px enough?",
    });
    assert.equal(second.status, 201);

    await ui.signIn("/console/support", { slug: world.tenant.slug, email: world.reviewer.email });
    await page.locator(tid("page-support")).waitFor();
    await page.locator(tid("ticket-row")).nth(1).waitFor();
    assert.equal(await page.locator(tid("stat-open")).innerText(), "2");
    assert.equal(await page.locator(tid("stat-median")).innerText(), "—");
    const subjects = await page.locator(`${tid("ticket-row")} th a`).allInnerTexts();
    assert.deepEqual(subjects, ["Payout missing", "Cover question"], "the longest wait first");
    await page.waitForLoadState("networkidle");
    await screenshot(page, "console-support-queue", "desktop");
    await assertAccessible(page, "support queue");

    await page.getByRole("link", { name: "Payout missing" }).click();
    await page.locator(tid("page-ticket")).waitFor();
    await page.locator(tid("ticket-reply-internal")).check();
    await page.locator(tid("ticket-reply-body")).fill("Batch 12 failed at the provider.");
    await page.locator(tid("ticket-reply-send")).click();
    await page.locator(`${tid("ticket-reply")}[data-internal="true"]`).waitFor();
    await page.locator(tid("ticket-reply-body")).fill("It goes out again on Friday.");
    await page.locator(tid("ticket-reply-send")).click();
    await page.locator(`${tid("ticket-reply")}[data-author="staff"][data-internal="false"]`).waitFor();
    await page.locator(tid("ticket-assign-me")).click();
    await page.locator(tid("ticket-assignee")).waitFor();
    assert.match(await page.locator(tid("ticket-assignee")).innerText(), /reviewer@nightowl\.example/);
    assert.equal(await page.locator(tid("ticket-status")).inputValue(), "waiting");
    await page.waitForLoadState("networkidle");
    await screenshot(page, "console-support-ticket", "desktop");
    await assertAccessible(page, "support ticket");

    // The account's side: the answer, not the note.
    const seen = await api()<Ticket>("GET", `/tickets/${first.body.id}`);
    assert.equal(seen.body.status, "waiting");
    assert.deepEqual(
      seen.body.replies.map((r) => [r.author, r.body]),
      [
        ["member", "Where is it?"],
        ["staff", "It goes out again on Friday."],
      ],
    );

    // Back on the queue: one open, one waiting, and a first reply measured.
    await page.getByRole("link", { name: "Back to the queue" }).click();
    await page.locator(tid("page-support")).waitFor();
    await page.locator(tid("stat-waiting")).filter({ hasText: /^1$/ }).waitFor();
    assert.equal(await page.locator(tid("stat-open")).innerText(), "1");
    assert.notEqual(await page.locator(tid("stat-median")).innerText(), "—");

    // The front page (the review queue) shows the desk's figures too.
    await page.getByRole("link", { name: "Review queue" }).click();
    await page.locator(tid("support-summary")).waitFor();
    assert.equal(await page.locator(tid("support-summary-open")).innerText(), "1");
    assert.notEqual(await page.locator(tid("support-summary-median")).innerText(), "—");
    await assertAccessible(page, "review queue with the support figures");
    assert.deepEqual(pageErrors, []);
    assertNoOffsite(context);
  });
});
