import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { describe, test } from "node:test";
import type { Config } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { setPortalDomains } from "../../src/portal/domains.ts";
import { assertAccessible, assertNoOffsite, screenshot } from "../support/browser.ts";
import { type DeskWorld, seedDeskWorld } from "../support/console-seed.ts";
import { consoleSkip, consoleSuite, tid } from "../support/console-ui.ts";

/**
 * Settings' "Scripts on the portal" (docs/operator.md, "Custom scripts on the portal") in Chromium
 * against `npm start` on the embedded database: the tenant's admin is refused an http address at
 * its field (nothing added), adds an https one, turns it on — the tenant's portal page on its own
 * domain then loads it and its CSP names its origin, while the page on PUBLIC_URL's shared host
 * (the console's origin) never does — and removes it after confirming.
 */

/** The tenant's own portal domain (scripts run only there: docs/operator.md). */
const OWN_HOST = "music.nightowl.test";

async function seedWithDomain(db: Db, config: Config): Promise<DeskWorld> {
  const world = await seedDeskWorld(db, config);
  await setPortalDomains(db, world.tenant.id, [OWN_HOST], "http:");
  return world;
}

const skip = consoleSkip({ portal: true });

describe("the console in Chromium: scripts on the portal", { skip }, () => {
  const ui = consoleSuite(seedWithDomain);

  /** The tenant's portal page at its own domain (node:http sends the Host asked for), or on PUBLIC_URL. */
  const portalPage = (where: "own" | "shared" = "own"): Promise<{ html: string; csp: string }> => {
    const url = new URL(where === "own" ? "/portal/" : `/portal/t/${ui.world.tenant.slug}/`, ui.stack.url);
    const headers = where === "own" ? { host: `${OWN_HOST}:${url.port}` } : {};
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            html: Buffer.concat(chunks).toString("utf8"),
            csp: String(res.headers["content-security-policy"] ?? ""),
          }),
        );
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
  };

  test("an admin adds a script (an http address refused at its field), turns it on, and removes it", async () => {
    const { world, context, page, pageErrors } = ui;
    await ui.signIn("/console/settings", { slug: world.tenant.slug, email: world.desk.email });
    await page.locator(tid("custom-scripts")).waitFor();
    await page.locator(`${tid("custom-scripts")} >> text=No scripts`).waitFor();

    await page.locator(tid("custom-script-name")).fill("Analytics");
    await page.locator(tid("custom-script-src")).fill("http://stats.example.com/script.js");
    await page
      .locator(tid("custom-script-connect-origins"))
      .fill("https://collect.example.com\nhttps://*.example.com");
    await page.locator(tid("custom-script-add")).click();
    await page.locator(tid("custom-script-fields-error")).waitFor();
    assert.equal(await page.locator(tid("custom-script-src")).getAttribute("aria-invalid"), "true");
    assert.equal(
      await page.locator(tid("custom-script-connect-origins")).getAttribute("aria-invalid"),
      "true",
    );
    // Said in plain words beside the address and tied to it, without the API's field path (`src: …`).
    const srcError = await page.locator(tid("custom-script-src")).getAttribute("aria-describedby");
    assert.equal(
      await page.locator(`[id="${srcError}"]`).innerText(),
      "Only https addresses are accepted (http only on loopback, for development).",
    );
    assert.match(
      await page.locator(tid("custom-script-connect-origins-error")).innerText(),
      /^https:\/\/\*\.example\.com: wildcards are not accepted/,
    );
    assert.doesNotMatch(await page.locator(tid("custom-scripts")).innerText(), /\bsrc\b|connect_origins/);
    assert.equal(await page.locator(tid("custom-script-row")).count(), 0, "nothing added");
    await screenshot(page, "console-custom-scripts-refused", "desktop");
    await assertAccessible(page, "custom scripts refused");

    await page.locator(tid("custom-script-src")).fill("https://stats.example.com/script.js");
    await page.locator(tid("custom-script-connect-origins")).fill("https://collect.example.com");
    await page.locator(tid("custom-script-add")).click();
    await page.locator(tid("custom-script-row")).waitFor();
    assert.equal(
      await page.locator(tid("custom-script-row")).getAttribute("data-enabled"),
      "false",
      "off unless said",
    );
    assert.equal((await portalPage()).html.includes("stats.example.com"), false);

    await page.locator(tid("custom-script-enabled")).click();
    await page.locator(`${tid("custom-script-row")}[data-enabled="true"]`).waitFor();
    const on = await portalPage();
    assert.match(on.html, /<script src="https:\/\/stats\.example\.com\/script\.js" async><\/script>/);
    assert.match(on.csp, /script-src 'self' https:\/\/stats\.example\.com;/);
    assert.match(on.csp, /connect-src [^;]*https:\/\/collect\.example\.com/);
    // PUBLIC_URL's host is the console's origin: no tenant's script is ever loaded there.
    const shared = await portalPage("shared");
    assert.equal(shared.html.includes("stats.example.com"), false);
    assert.match(shared.csp, /script-src 'self';/);
    await screenshot(page, "console-custom-scripts", "desktop");
    await assertAccessible(page, "custom scripts");

    await page.locator(tid("custom-script-remove")).click();
    await page.locator(tid("custom-script-remove-dialog")).waitFor();
    await assertAccessible(page, "custom script remove dialog");
    await page.locator(tid("custom-script-remove-dialog-confirm")).click();
    await page.locator(`${tid("custom-scripts")} >> text=No scripts`).waitFor();
    const off = await portalPage();
    assert.equal(off.html.includes("stats.example.com"), false);
    assert.match(off.csp, /script-src 'self';/);

    assertNoOffsite(context);
    assert.deepEqual(pageErrors, []);
  });
});
