import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { sampleCatalogue, writeSampleCsv } from "../../src/transfer/sample.ts";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";
import { tempDir } from "../support/process.ts";
import { ALBUM, archiveSamplesSkip, ernDeliveryZip, zipSlipArchive } from "../support/transfer-archive.ts";

/**
 * The portal's catalogue transfer (docs/catalogue.md, "Public API") in headless Chromium against
 * `npm start`'s server on the embedded database: the owner of an account with no releases uploads
 * a CSV of the template, reads the dry run's report (what would be created, nothing written), starts
 * the import and sees what it did; the same file again has nothing to import; a broken file's
 * problems are listed with their rows. A zip of an ERN delivery with its media (DDEX's ERN 4.3
 * single and ERN 3.8.2 album, docs/catalogue.md "An archive of ERN messages") gets its dry run's
 * report the same way, and an archive with an entry outside its folder is refused with its code.
 */

const skip = portalSkip();

describe("the portal in Chromium: bringing a catalogue", { skip }, () => {
  const stories = portalSuite();
  const portal = stories.portal;

  test("an owner checks a CSV, imports it, and the same file again changes nothing", async () => {
    const file = path.join(tempDir("backline-portal-transfer-"), "catalogue.csv");
    await writeSampleCsv(file, sampleCatalogue(12, 7));
    const csv = fs.readFileSync(file);
    await stories.story("transfer", async ({ page, record }) => {
      await stories.signIn(page, portal(), stories.world.artist.email, PASSWORD);
      await page.locator(tid("releases-empty")).waitFor();
      await page.locator(tid("nav-transfer")).click();
      await page.getByRole("heading", { name: "Bring your catalogue" }).waitFor();

      await page.locator(tid("transfer-input")).setInputFiles({
        name: "catalogue.csv",
        mimeType: "text/csv",
        buffer: csv,
      });
      await page.locator(tid("transfer-dry-report")).waitFor();
      assert.equal(await page.locator(tid("tracks-created")).innerText(), "12");
      const releases = Number(await page.locator(tid("releases-created")).innerText());
      assert.ok(releases > 0);
      assert.equal(await page.locator(tid("releases-existing")).innerText(), "0");
      assert.match(
        await page.locator(tid("transfer-start")).innerText(),
        /Import \d+ releases? and 12 tracks/,
      );
      await record("transfer-dry-run", "transfer-dry-report");

      // Nothing was written by the check: the releases page is still empty.
      await page.locator(tid("nav-releases")).click();
      await page.locator(tid("releases-empty")).waitFor();
      await page.locator(tid("nav-transfer")).click();
      await page.locator(tid("transfer-input")).setInputFiles({
        name: "catalogue.csv",
        mimeType: "text/csv",
        buffer: csv,
      });
      await page.locator(tid("transfer-start")).click();
      await page.locator(tid("transfer-report")).waitFor();
      assert.equal(await page.locator(tid("transfer-report")).getAttribute("data-status"), "completed");
      assert.equal(await page.locator(tid("tracks-created")).innerText(), "12");
      assert.equal(Number(await page.locator(tid("releases-created")).innerText()), releases);
      await record("transfer-imported", "transfer-report");

      // The same file again: everything is already there, nothing to import.
      await page.locator(tid("transfer-input")).setInputFiles({
        name: "catalogue.csv",
        mimeType: "text/csv",
        buffer: csv,
      });
      await page.locator(tid("transfer-dry-report")).waitFor();
      assert.equal(await page.locator(tid("tracks-existing")).innerText(), "12");
      assert.equal(await page.locator(tid("tracks-created")).innerText(), "0");
      await page.locator(tid("transfer-nothing")).waitFor();
      assert.equal(await page.locator(tid("transfer-start")).count(), 0);

      // A broken file: its problems, each with its row.
      await page.locator(tid("transfer-input")).setInputFiles({
        name: "broken.csv",
        mimeType: "text/csv",
        buffer: Buffer.from(
          "release_ref,release_title,release_artist,isrc,track_number,track_title\n" +
            "B,Broken,Nova Vale,NOT-AN-ISRC,1,One\n",
        ),
      });
      await page.locator(tid("transfer-problems")).waitFor();
      const problems = await page.locator(tid("transfer-problem")).allInnerTexts();
      assert.ok(
        problems.some((p) => /row 2/.test(p)),
        problems.join("\n"),
      );
      assert.equal(await page.locator(tid("releases-problems")).innerText(), "1");

      // The releases page now lists the imported drafts.
      await page.locator(tid("nav-releases")).click();
      await page.getByText("Draft").first().waitFor();
    });
  });

  test("an owner checks a zip of an ERN delivery and reads the dry run's report; a zip-slip archive is refused", {
    skip: archiveSamplesSkip,
  }, async () => {
    const zip = await ernDeliveryZip();
    await stories.story("transfer-archive", async ({ page, record }) => {
      await stories.signIn(page, portal(), stories.world.artist.email, PASSWORD);
      await page.locator(tid("nav-transfer")).click();
      await page.getByRole("heading", { name: "Bring your catalogue" }).waitFor();
      await page.locator(tid("transfer-input")).setInputFiles({
        name: "previous-distributor.zip",
        mimeType: "application/zip",
        buffer: zip,
      });
      await page.locator(tid("transfer-dry-report")).waitFor();
      assert.equal(await page.locator(tid("transfer-dry-report")).getAttribute("data-status"), "completed");
      assert.equal(await page.locator(tid("releases-created")).innerText(), "2");
      assert.equal(await page.locator(tid("tracks-created")).innerText(), String(ALBUM.isrcs.length + 1));
      assert.match(await page.locator(tid("transfer-start")).innerText(), /Import 2 releases and 7 tracks/);
      await record("transfer-archive-dry-run", "transfer-dry-report");

      await page.locator(tid("transfer-input")).setInputFiles({
        name: "escaping.zip",
        mimeType: "application/zip",
        buffer: zipSlipArchive(),
      });
      await page.locator(tid("transfer-failed")).waitFor();
      const problem = page.locator(tid("transfer-problem")).first();
      assert.equal(await problem.getAttribute("data-code"), "archive_unsafe_path");
      assert.match(await problem.innerText(), /outside the archive's folder/);
    });
  });
});
