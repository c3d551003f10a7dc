import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { waitForMail } from "../support/console.ts";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * The portal's developers' corner (docs/portal.md, "Developers") in headless Chromium against
 * `npm start`'s server on the embedded database: a label's owner makes an API key, reveals it
 * with the code mailed to the owners (a wrong code said beside the field), sees the secret once,
 * uses it, freezes and revokes it (the API refuses it each time); adds a webhook endpoint on a
 * real receiver that verifies with `standardwebhooks`, sees its secret once, sends a test event
 * that arrives signed and shows in the delivery log, and rotates the secret.
 */

const skip = portalSkip();

describe("the portal in Chromium: API keys and webhooks; artists", { skip, concurrency: 2 }, () => {
  let receiver: WebhookReceiver;
  before(async () => {
    receiver = await WebhookReceiver.start();
  });
  after(async () => {
    await receiver?.close();
  });
  // The receiver listens on 127.0.0.1 over http, as only development allows.
  const stories = portalSuite({ WEBHOOK_ALLOW_PRIVATE: "true" });
  const portal = stories.portal;
  const withKey = (secret: string) =>
    fetch(`${stories.stack.url}/api/public/v1/releases?limit=1`, {
      headers: { authorization: `Bearer ${secret}` },
    });

  test("an owner makes a key, reveals it once with the mailed code, freezes and revokes it; a webhook endpoint gets a signed test event", async () => {
    await stories.story("developers", async ({ page, record }) => {
      page.on("dialog", (d) => void d.accept());
      await stories.signIn(page, portal(), stories.world.lantern.email, PASSWORD);
      await page.getByRole("link", { name: "Developers", exact: true }).click();
      await page.locator(tid("keys-empty")).waitFor();
      await page.locator(tid("endpoints-empty")).waitFor();
      await record("developers", "developers-keys");

      // A key: made, its code mailed to the owners, a wrong code refused beside the field.
      const mailsBefore = stories.stack.smtp.received.length;
      await page.locator(tid("key-name")).fill("Shop sync");
      await page.locator(tid("key-scope-webhooks:manage")).uncheck();
      await page.locator(tid("key-create")).click();
      await page.locator(tid("key-pending")).waitFor();
      const { match } = await waitForMail(stories.stack.smtp, stories.world.lantern.email, /\b(\d{6})\b/, {
        after: mailsBefore,
      });
      const code = match[1] as string;
      await page.locator(tid("key-code")).fill(code === "000000" ? "111111" : "000000");
      await page.locator(tid("key-reveal")).click();
      await page.locator(tid("key-code-error")).waitFor();
      await page.locator(tid("key-code")).fill(code);
      await page.locator(tid("key-reveal")).click();
      const secret = await page.locator(tid("key-secret-value")).innerText();
      assert.match(secret, /^bk_live_/);
      await record("developers-key-secret", "key-secret");
      // The key works, and the page shows it with its scopes, never its secret again.
      assert.equal((await withKey(secret)).status, 200);
      await page.locator(tid("key-secret-done")).click();
      await page.locator(`${tid("key-row")}[data-status="active"]`).waitFor();
      assert.match(await page.locator(tid("key-row")).innerText(), /Shop sync[\s\S]*catalog:read/);
      assert.doesNotMatch(await page.locator(tid("keys")).innerText(), /webhooks:manage/);
      assert.equal(await page.getByText(secret).count(), 0, "the secret is shown once only");

      // Frozen: refused at once; unfrozen: works; revoked: refused for good.
      await page.locator(tid("key-freeze")).click();
      await page.locator(`${tid("key-row")}[data-status="frozen"]`).waitFor();
      assert.equal(((await (await withKey(secret)).json()) as { code: string }).code, "api_key_frozen");
      await page.locator(tid("key-unfreeze")).click();
      await page.locator(`${tid("key-row")}[data-status="active"]`).waitFor();
      assert.equal((await withKey(secret)).status, 200);
      await page.locator(tid("key-revoke")).click();
      await page.locator(tid("key-row")).waitFor({ state: "detached" });
      assert.equal(((await (await withKey(secret)).json()) as { code: string }).code, "api_key_revoked");

      // A webhook endpoint: a wrong address said beside the field, then its secret shown once.
      await page.locator(tid("endpoint-url")).fill("not an address");
      await page.locator(tid("endpoint-create")).click();
      await page.locator(tid("endpoint-url-error")).waitFor();
      const route = receiver.route("portal");
      await page.locator(tid("endpoint-url")).fill(route.url);
      await page.locator(tid("endpoint-create")).click();
      const signing = await page.locator(tid("endpoint-secret-value")).innerText();
      assert.match(signing, /^whsec_/);
      route.secrets.push(signing);
      await page.locator(tid("endpoint-secret-done")).click();
      await page.locator(tid("deliveries-empty")).waitFor();

      // A test event arrives signed (standardwebhooks verifies it) and shows in the log.
      await page.locator(tid("endpoint-test")).click();
      await page
        .locator(`${tid("delivery-row")}[data-event="webhook.test"][data-status="succeeded"]`)
        .waitFor();
      assert.equal(route.received.length, 1);
      assert.deepEqual(route.received[0]?.verifiedBy, [true]);
      assert.equal((JSON.parse(route.received[0]?.body ?? "{}") as { type?: string }).type, "webhook.test");
      await record("developers-webhooks", "deliveries");

      // A new secret: shown once, and the next event is signed with it.
      await page.locator(tid("endpoint-rotate")).click();
      const rotated = await page.locator(tid("endpoint-secret-value")).innerText();
      assert.notEqual(rotated, signing);
      route.secrets.splice(0, 1, rotated);
      await page.locator(tid("endpoint-secret-done")).click();
      await page.locator(tid("endpoint-test")).click();
      await page
        .locator(`${tid("delivery-row")}[data-status="succeeded"]`)
        .nth(1)
        .waitFor();
      assert.equal(route.received[1]?.verifiedBy[0], true, "signed with the new secret");
    });
  });

  test("an artist's ids at the stores are saved, and an official channel is asked for in words", async () => {
    await stories.story("artist", async ({ page, record }) => {
      await stories.signIn(page, portal(), stories.world.lantern.email, PASSWORD);
      await page.getByRole("link", { name: "Artists", exact: true }).click();
      await page.locator(tid("artist-row")).first().getByRole("link").click();
      await page.locator(tid("artist-store-ids")).waitFor();
      await page.locator(tid("artist-id-spotify")).fill("4Z8W4fKeB5YxbusRsdQVPb");
      await page.locator(tid("artist-ids-save")).click();
      await page.locator(tid("artist-ids-saved")).waitFor();
      await page.reload();
      assert.equal(await page.locator(tid("artist-id-spotify")).inputValue(), "4Z8W4fKeB5YxbusRsdQVPb");

      // The channel's address must be https: said beside the field; then the request is made.
      await page.locator(tid("oac-channel")).fill("http://www.youtube.com/@lunavale");
      await page.locator(tid("oac-request")).click();
      assert.match(await page.locator(tid("oac-channel-error")).innerText(), /https:\/\//);
      await page.locator(tid("oac-channel")).fill("https://www.youtube.com/@lunavale");
      await page.locator(tid("oac-request")).click();
      // Requested, and soon with the store (the worker sends it on).
      await page.locator(tid("oac-status")).waitFor();
      assert.match(
        (await page.locator(tid("oac-status")).getAttribute("data-status")) ?? "",
        /^(requested|processing)$/,
      );
      assert.equal(await page.locator(tid("oac-request")).count(), 0, "one open request per artist");
      await record("artist", "artist-oac");
    });
  });
});
