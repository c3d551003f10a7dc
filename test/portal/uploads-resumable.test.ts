import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { tid } from "../support/console-ui.ts";
import { artworkJpeg, wav } from "../support/media-fixtures.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";

/**
 * The portal's large uploads (docs/storage.md, "Resumable uploads"; docs/portal.md): an audio file
 * over 6 MB goes from the page through /storage/v1/upload/resumable with tus-js-client (bundled
 * into the portal), in 6 MB chunks with its progress, and comes back judged by the media checks;
 * a small cover keeps the signed-slot path.
 */

const skip = portalSkip();
const ISRC = "QZ-TUS-26-00001";

describe("the portal in Chromium: a large audio master goes resumably", { skip }, () => {
  const stories = portalSuite({});

  test("a 7 MB WAV goes in TUS chunks and is judged like any upload", async () => {
    await stories.story("uploads-resumable", async ({ page }) => {
      const requests: string[] = [];
      page.on("request", (r) => {
        const url = new URL(r.url());
        if (url.pathname.startsWith("/storage/v1/upload/resumable")) requests.push(r.method());
      });
      await stories.signIn(page, stories.portal(), stories.world.artist.email, PASSWORD);
      await page.locator(tid("release-new")).click();
      await page.getByLabel("Title", { exact: true }).fill("Long Water");
      await page.getByLabel("Artist", { exact: true }).fill("Tidewater");
      await page.getByRole("button", { name: "Create draft" }).click();
      await page.getByRole("heading", { name: "Long Water" }).waitFor();
      await page.locator(tid("new-track-title")).fill("Long Water");
      await page.locator(tid("new-track-isrc")).fill(ISRC);
      await page.locator(tid("new-track-add")).click();
      await page.locator(tid("edit-track")).first().waitFor();

      await page.locator(tid("cover-input")).setInputFiles({
        name: "cover.jpg",
        mimeType: "image/jpeg",
        buffer: await artworkJpeg(),
      });
      await page.locator(`${tid("cover-verdict")}[data-status="valid"]`).waitFor({ timeout: 60_000 });
      assert.deepEqual(requests, [], "a small cover keeps the signed-slot path");

      const audio = wav({ seconds: 42 });
      assert.ok(audio.length > 7 * 1024 * 1024);
      await page
        .locator(tid("track-audio-0-input"))
        .setInputFiles({ name: "long-water.wav", mimeType: "audio/wav", buffer: audio });
      await page.locator(`${tid("track-audio-0-verdict")}[data-status="valid"]`).waitFor({ timeout: 90_000 });
      assert.equal(requests.filter((m) => m === "POST").length, 1, requests.join(","));
      assert.equal(requests.filter((m) => m === "PATCH").length, 2, `two 6 MB chunks: ${requests.join(",")}`);
    });
  });
});
