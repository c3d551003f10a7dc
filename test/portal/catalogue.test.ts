import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import type { Page } from "playwright-core";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite, uploadCoverAndAudio } from "../support/portal-browser.ts";
import { PASSWORD, ROYALTY_MONTHS } from "../support/portal-seed.ts";

/**
 * The portal's release editor (docs/portal.md, "A release, from draft to live") in headless
 * Chromium against `npm start`'s server on the embedded database: an artist of a sandbox account
 * makes a release, reads the completeness list submit applies, follows its links to the fields,
 * fills them in (saved as typed), adds a track with splits whose total is said while typing,
 * uploads a generated cover and audio and sees each file's verdict, submits, and follows the
 * release to live on the sandbox store, which its notifications tell (the unread count in the
 * header, marked read); then corrects its details and takes it down, store by store. A broken file is refused beside its control in words.
 */

const skip = portalSkip();

/** A UPC-A with its check digit, and an ISRC no other release of the account has. */
const UPC = "012345678905";
const ISRC = "QZ-TDW-26-00001";

/** Exact sums of decimal strings ("4.200000" + "1.5" = "5.7"), by integers. */
function addDecimals(amounts: string[]): string {
  const places = Math.max(0, ...amounts.map((a) => a.split(".")[1]?.length ?? 0));
  let total = 0n;
  for (const a of amounts) {
    const [int = "0", dec = ""] = a.replace("-", "").split(".");
    const n = BigInt(int + dec.padEnd(places, "0"));
    total += a.startsWith("-") ? -n : n;
  }
  return normal(
    `${total < 0n ? "-" : ""}${(total < 0n ? -total : total)
      .toString()
      .padStart(places + 1, "0")
      .replace(new RegExp(`(\\d{${places}})$`), ".$1")}`,
  );
}
const normal = (a: string) => (a.includes(".") ? a.replace(/0+$/, "").replace(/\.$/, "") : a);

describe("the portal in Chromium: a release from draft to live; royalties", { skip, concurrency: 2 }, () => {
  const stories = portalSuite();
  const portal = stories.portal;

  const problems = async (page: Page) =>
    page
      .locator(tid("problem"))
      .evaluateAll((els) => els.map((e) => `${e.getAttribute("data-param")}:${e.getAttribute("data-code")}`));

  /** Waits until the form says it saved what was typed. */
  const saved = (page: Page) =>
    page.locator(tid("save-state")).filter({ hasText: "All changes saved" }).waitFor();

  test("an artist makes a release, fixes what the list says, uploads, submits and sees it live", async () => {
    await stories.story("release-to-live", async ({ page, record }) => {
      await stories.signIn(page, portal(), stories.world.artist.email, PASSWORD);
      await page.locator(tid("releases-empty")).waitFor();
      await page.locator(tid("release-new")).click();
      await page.getByLabel("Title", { exact: true }).fill("Tidal Pull");
      await page.getByLabel("Artist", { exact: true }).fill("Tidewater");
      await page.getByRole("button", { name: "Create draft" }).click();
      await page.getByRole("heading", { name: "Tidal Pull" }).waitFor();

      // The completeness list submit applies: every problem at once, and submit not offered yet.
      await page.locator(tid("problem")).first().waitFor();
      const first = await problems(page);
      for (const expected of [
        "release_date:required",
        "primary_genre:required",
        "licensed_territories_include:no_territories",
        "tracks:no_tracks",
        "artwork:artwork_missing",
      ])
        assert.ok(first.includes(expected), `${expected} is listed: ${first.join(", ")}`);
      assert.equal(await page.locator(tid("release-submit-button")).isDisabled(), true);
      assert.match(
        await page.locator(tid("problems")).innerText(),
        /Choose a genre\.[\s\S]*Add at least one track\./,
        "the list speaks in plain words, not field paths",
      );
      await record("release-editor", "release-details");

      // Each problem links to its field: the genre's puts the cursor in the genre control.
      await page.locator(tid("problem")).filter({ hasText: "Choose a genre" }).getByRole("link").click();
      assert.equal(
        await page.locator(tid("edit-primary_genre")).evaluate((el) => el === el.ownerDocument.activeElement),
        true,
      );

      // Details, saved as they are chosen or typed.
      const date = await page.locator(tid("edit-release_date")).getAttribute("min");
      assert.ok(date, "the date control starts at the earliest date the stores accept");
      const later = new Date(`${date}T12:00:00Z`);
      later.setUTCDate(later.getUTCDate() + 14);
      await page.locator(tid("edit-release_date")).fill(later.toISOString().slice(0, 10));
      await page.locator(tid("edit-release_date")).blur();
      await saved(page);
      await page.locator(tid("edit-primary_genre")).selectOption({ index: 1 });
      await saved(page);
      await page.locator(tid("edit-territory-choice")).selectOption("WW");
      await saved(page);
      // A wrong UPC is said beside the field, in words, and the other fields stay saved.
      await page.locator(tid("edit-upc")).fill("012345678901");
      await page.locator(tid("edit-upc")).blur();
      await page.locator(tid("edit-upc-error")).waitFor();
      assert.match(await page.locator(tid("edit-upc-error")).innerText(), /check digit/i);
      // Not the API's field path ("upc: …").
      assert.doesNotMatch(
        await page.locator(tid("edit-upc-error")).innerText(),
        /^[A-Za-z_]+(\[\d+\])?(\.[A-Za-z_]+)*: /,
      );
      assert.match(await page.locator(tid("save-state")).innerText(), /Not saved/);
      await page.locator(tid("edit-upc")).fill(UPC);
      await page.locator(tid("edit-upc")).blur();
      await saved(page);
      assert.equal(await page.locator(tid("edit-upc-error")).count(), 0);

      // A track, then its splits: the total is said while typing.
      await page.locator(tid("new-track-title")).fill("Tidal Pull");
      await page.locator(tid("new-track-isrc")).fill(ISRC);
      await page.locator(tid("new-track-add")).click();
      await page.locator(tid("edit-track")).first().waitFor();
      await page.locator(tid("edit-track")).getByText("Title, ISRC and splits").click();
      await page.locator(tid("track-splits-0-add")).click();
      await page.locator(tid("track-splits-0-name-0")).fill("Tidewater");
      await page.locator(tid("track-splits-0-share-0")).fill("60");
      assert.match(await page.locator(tid("track-splits-0-total")).innerText(), /60%.*40% missing/);
      await page.locator(tid("track-splits-0-add")).click();
      await page.locator(tid("track-splits-0-name-1")).fill("June Harbour");
      await page.locator(tid("track-splits-0-share-1")).fill("45");
      assert.match(await page.locator(tid("track-splits-0-total")).innerText(), /105%.*5% too much/);
      await page.locator(tid("track-save-0")).click();
      await page.locator(tid("track-splits-0-error")).waitFor();
      await page.locator(tid("track-splits-0-share-1")).fill("40");
      assert.equal(await page.locator(tid("track-splits-0-total")).innerText(), "Total: 100%.");
      await page.locator(tid("track-save-0")).click();
      await page.locator(tid("track-saved-0")).waitFor();

      // A file that is no image is refused beside the cover's control, in words.
      await page.locator(tid("cover-input")).setInputFiles({
        name: "cover.jpg",
        mimeType: "image/jpeg",
        buffer: Buffer.from("this is not a picture at all"),
      });
      await page.locator(`${tid("cover-verdict")}[data-status="invalid"]`).waitFor({ timeout: 60_000 });
      await record("release-cover-refused", "cover-verdict");

      // The cover and the audio, with their progress and their checks' verdicts.
      await uploadCoverAndAudio(page, "tidal-pull.wav");
      assert.match(await page.locator(tid("track-audio-0-verdict")).innerText(), /44\.1 kHz/);

      // Nothing missing: submit, then the progress per store until live on the sandbox store.
      await page.locator(tid("problems-none")).waitFor();
      assert.deepEqual(await problems(page), []);
      await record("release-ready", "problems-none");
      await page.locator(tid("release-submit-button")).click();
      await page.locator(tid("release-timeline")).waitFor();
      await page.locator(tid("store-step")).filter({ hasText: "Live" }).first().waitFor({ timeout: 60_000 });
      assert.equal(await page.locator(tid("review-state")).innerText(), "Approved");
      assert.equal(
        await page.locator(tid("release-submit-button")).count(),
        0,
        "a submitted release is not edited",
      );
      await record("release-live", "release-timeline");

      // What happened is told in the notifications: the unread count in the header, the list,
      // marked read one by one or all at once (the count follows).
      await page.reload();
      await page.locator(tid("nav-notifications")).click();
      await page.locator(tid("notification")).filter({ hasText: "“Tidal Pull” was approved" }).waitFor();
      const unread = await page.locator(`${tid("notification")}[data-read="false"]`).count();
      assert.ok(unread >= 2, `approved and at least one store live: ${unread} unread`);
      assert.equal(await page.locator(tid("unread-count")).getAttribute("data-count"), String(unread));
      assert.match(
        await page.locator(tid("nav-notifications")).innerText(),
        new RegExp(`Notifications[\\s\\S]*unread[\\s\\S]*${unread}`),
      );
      await record("notifications", "notifications");
      await page.locator(tid("mark-read")).first().click();
      await page.locator(`${tid("unread-count")}[data-count="${unread - 1}"]`).waitFor();
      await page.locator(tid("mark-all-read")).click();
      await page.locator(tid("unread-count")).waitFor({ state: "detached" });
      await page
        .locator(`${tid("notification")}[data-read="false"]`)
        .first()
        .waitFor({ state: "detached" });

      // Live: its details corrected (sent to the stores as an update), then taken down, each
      // store's removal followed on the page until every store confirmed it.
      page.on("dialog", (d) => void d.accept());
      await page.locator(tid("notification")).first().getByRole("link", { name: "Open the release" }).click();
      await page.locator(tid("release-correct")).waitFor();
      await page.locator(tid("correct-version")).fill("Radio Edit");
      await page.locator(tid("correct-send")).click();
      await page.locator(tid("correct-done")).waitFor();
      await page
        .locator(`${tid("store-delivery")}`)
        .filter({ hasText: /Correction being delivered|Live/ })
        .first()
        .waitFor();
      await page.locator(tid("takedown-reason")).fill("Re-releasing it on another label");
      await page.locator(tid("takedown-send")).click();
      await page.locator(`${tid("takedown-progress")}[data-status="completed"]`).waitFor({ timeout: 60_000 });
      assert.match(
        await page.locator(tid("takedown-progress")).innerText(),
        /(\d+) of \1 stores have removed it/,
      );
      await page.locator(tid("step-live")).filter({ hasText: "taken down" }).waitFor();
      await page.locator(tid("release-facts")).filter({ hasText: "taken down" }).waitFor();
      assert.equal(
        await page.locator(tid("release-takedown")).count(),
        0,
        "a release taken down is not taken down again",
      );
      await record("release-taken-down", "takedown-progress");
    });
  });

  /** GET /api/public/v1/royalties as the member, for the account (what the page must agree with). */
  async function royaltiesApi(query: string) {
    const client = createClient(stories.stack.url, stories.world.tenant.anonKey, {
      auth: { persistSession: false },
    });
    const { data, error } = await client.auth.signInWithPassword({
      email: stories.world.lantern.email,
      password: PASSWORD,
    });
    assert.equal(error, null);
    const res = await fetch(`${stories.stack.url}/api/public/v1/royalties?limit=1&${query}`, {
      headers: {
        authorization: `Bearer ${data.session?.access_token}`,
        "backline-account": stories.world.lantern.accountId,
      },
    });
    assert.equal(res.status, 200);
    return (await res.json()) as {
      totals: { currency: string; net: string; streams: number; lines: number }[];
    };
  }

  test("a label reads its royalties in charts, filters them in the address, and the CSV adds up to the API's totals", async () => {
    await stories.story("royalties", async ({ page, record }) => {
      await stories.signIn(page, portal(), stories.world.lantern.email, PASSWORD);
      await page.getByRole("link", { name: "Royalties", exact: true }).click();
      await page.locator(`${tid("chart-time")} canvas`).waitFor();
      await page.locator(`${tid("chart-map")} canvas`).waitFor();
      const api = await royaltiesApi("");
      assert.ok(api.totals.length >= 2, "the sample reports are in several currencies");
      // Every currency on its own, as the API sums it: never added across currencies.
      const shownTotals = await page
        .locator(tid("royalty-total"))
        .evaluateAll((els) => els.map((e) => [e.getAttribute("data-currency"), e.getAttribute("data-net")]));
      assert.deepEqual(
        shownTotals,
        api.totals.map((t) => [t.currency, t.net]),
      );
      // The currency shown is the one with the most lines; one row per month of sale.
      const main = [...api.totals].sort((a, b) => b.lines - a.lines)[0];
      assert.ok(main);
      assert.equal(await page.locator(tid("filter-currency")).inputValue(), main.currency);
      assert.equal(await page.locator(tid("table-time-row")).count(), ROYALTY_MONTHS.length);
      assert.match(
        (await page.locator(`${tid("chart-time")} canvas`).getAttribute("aria-label")) ?? "",
        /net from .* streams/,
      );
      await record("royalties", "chart-map");

      // The CSV is what is shown, exactly: its months add up to the API's totals in that currency.
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.locator(tid("royalties-csv")).click(),
      ]);
      const csv = fs
        .readFileSync((await download.path()) as string, "utf8")
        .trim()
        .split(/\r?\n/);
      const head = (csv[0] ?? "").split(",");
      const rows = csv.slice(1).map((l) => Object.fromEntries(l.split(",").map((v, i) => [head[i], v])));
      for (const breakdown of ["month", "store", "territory", "release"]) {
        const of = rows.filter((r) => r.breakdown === breakdown);
        assert.ok(of.length > 0, `${breakdown} rows`);
        assert.equal(
          addDecimals(of.map((r) => r.net as string)),
          normal(main.net),
          `${breakdown}: net adds up`,
        );
        assert.equal(
          of.reduce((n, r) => n + Number(r.streams), 0),
          main.streams,
          `${breakdown}: streams add up`,
        );
      }

      // One release: its link in the table filters the page to it.
      await page.locator(tid("table-releases")).getByRole("link", { name: "Night Drive" }).click();
      await page.locator(tid("filter-release")).filter({ hasText: "Only Night Drive" }).waitFor();
      await page.locator(tid("table-releases-row")).first().waitFor();
      assert.equal(await page.locator(tid("table-releases-row")).count(), 1);
      const nightDrive = await royaltiesApi(
        `release_id=${stories.world.lantern.nightDrive}&currency=${main.currency}`,
      );
      await page
        .locator(
          `${tid("royalty-total")}[data-currency="${main.currency}"][data-net="${nightDrive.totals[0]?.net}"]`,
        )
        .waitFor();
      await page.getByRole("link", { name: "All releases" }).click();
      await page.locator(tid("filter-release")).waitFor({ state: "detached" });

      // A filter is kept in the address: one store, reloaded, still one store, as the API sums it.
      await page.locator(tid("filter-store")).selectOption("spotify");
      await page.waitForURL(/store=spotify/);
      await page.reload();
      await page.locator(`${tid("chart-time")} canvas`).waitFor();
      assert.equal(await page.locator(tid("filter-store")).inputValue(), "spotify");
      assert.equal(await page.locator(tid("table-stores-row")).count(), 1);
      const spotify = await royaltiesApi(`store=spotify&currency=${main.currency}`);
      assert.equal(
        await page
          .locator(`${tid("royalty-total")}[data-currency="${main.currency}"]`)
          .getAttribute("data-net"),
        spotify.totals[0]?.net,
      );
      // A period with no sales says what to expect, not an empty chart.
      await page.locator(tid("filter-from")).fill("2030-01");
      await page.locator(tid("royalties-empty")).waitFor();
      await record("royalties-empty", "royalties-empty");
    });
  });
});
