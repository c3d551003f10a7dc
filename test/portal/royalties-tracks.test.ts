import assert from "node:assert/strict";
import fs from "node:fs";
import { describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import type { Page } from "playwright-core";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";

/**
 * The royalties page per track (issue 38, item 6; docs/portal.md, "Royalties") in headless
 * Chromium: the table of tracks sorted by net with its one-line summary, as GET
 * /royalties?group_by=track sums them; the filters in the address narrow it; the CSV's track rows
 * are the table's, exactly, and add up to the API's totals.
 */

const skip = portalSkip();

/** Exact sums of decimal strings, by integers. */
function addDecimals(amounts: string[]): string {
  const places = Math.max(0, ...amounts.map((a) => a.split(".")[1]?.length ?? 0));
  let total = 0n;
  for (const a of amounts) {
    const [int = "0", dec = ""] = a.replace("-", "").split(".");
    const n = BigInt(int + dec.padEnd(places, "0"));
    total += a.startsWith("-") ? -n : n;
  }
  const digits = (total < 0n ? -total : total).toString().padStart(places + 1, "0");
  const text = places ? `${digits.slice(0, -places)}.${digits.slice(-places)}` : digits;
  return normal(`${total < 0n ? "-" : ""}${text}`);
}
const normal = (a: string) => (a.includes(".") ? a.replace(/0+$/, "").replace(/\.$/, "") : a);

/** RFC 4180 fields of one CSV text (quoted fields, doubled quotes). */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(field);
      field = "";
    } else if (c === "\n") {
      row.push(field.replace(/\r$/, ""));
      rows.push(row);
      row = [];
      field = "";
    } else field += c;
  }
  return rows;
}

/** Waits until the track table has `n` rows (the page refetches after a filter changes). */
async function rowsCount(page: Page, n: number): Promise<void> {
  const until = Date.now() + 30_000;
  while ((await page.locator(tid("table-tracks-row")).count()) !== n) {
    if (Date.now() > until) assert.fail(`the track table never had ${n} rows`);
    await page.waitForTimeout(100);
  }
}

interface Group {
  currency: string;
  release_id: string;
  release_title: string | null;
  track_id: string | null;
  track_title: string | null;
  isrc: string | null;
  streams: number;
  lines: number;
  net: string;
}

describe("the portal in Chromium: royalties per track", { skip }, () => {
  const stories = portalSuite();
  const portal = stories.portal;

  /** GET /api/public/v1/royalties as the member, for the account. */
  async function royaltiesApi(query: string) {
    const client = createClient(stories.stack.url, stories.world.tenant.anonKey, {
      auth: { persistSession: false },
    });
    const { data, error } = await client.auth.signInWithPassword({
      email: stories.world.lantern.email,
      password: PASSWORD,
    });
    assert.equal(error, null);
    const res = await fetch(`${stories.stack.url}/api/public/v1/royalties?limit=100&${query}`, {
      headers: {
        authorization: `Bearer ${data.session?.access_token}`,
        "backline-account": stories.world.lantern.accountId,
      },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as {
      data: Group[];
      has_more: boolean;
      totals: { currency: string; net: string; streams: number; lines: number }[];
    };
    assert.equal(body.has_more, false);
    return body;
  }

  test("a label reads its royalties per track, sorted by net, filtered in the address, and the CSV has the tracks as shown", async () => {
    await stories.story("royalties-tracks", async ({ page, record }) => {
      await stories.signIn(page, portal(), stories.world.lantern.email, PASSWORD);
      await page.getByRole("link", { name: "Royalties", exact: true }).click();
      await page.locator(tid("table-tracks-row")).first().waitFor();
      const api = await royaltiesApi("group_by=track");
      const main = [...api.totals].sort((a, b) => b.lines - a.lines)[0];
      assert.ok(main);
      const groups = api.data.filter((g) => g.currency === main.currency);
      assert.ok(groups.length >= 2, "several tracks earned");

      // One row per track (and per release-level sale) in the currency shown, highest net first.
      const rows = page.locator(tid("table-tracks-row"));
      assert.equal(await rows.count(), groups.length);
      const shown = await rows.evaluateAll((trs) =>
        trs.map((tr) =>
          Array.from(tr.children as ArrayLike<{ textContent: string | null }>, (c) =>
            (c.textContent ?? "").trim(),
          ),
        ),
      );
      const nets = shown.map((cells) => Number((cells.at(-1) ?? "").replace(/[^\d.-]/g, "")));
      assert.deepEqual(
        nets,
        [...nets].sort((a, b) => b - a),
        "sorted by net, highest first",
      );
      const byNet = [...groups].sort((a, b) => Number(b.net) - Number(a.net));
      assert.equal(shown[0]?.[1], byNet[0]?.isrc ?? "—", "the top row is the API's top track");
      for (const g of groups.filter((x) => x.track_id))
        assert.ok(
          shown.some(
            (cells) => cells[0] === g.track_title && cells[1] === g.isrc && cells[2] === g.release_title,
          ),
          `${g.isrc} is in the table with its title and release`,
        );
      // The data table: a row header per track, the summary said beside it (and read with it).
      assert.equal(await page.locator(`${tid("table-tracks")} th[scope="row"]`).count(), groups.length);
      assert.equal(
        await page.locator(tid("table-tracks")).getAttribute("aria-describedby"),
        "tracks-summary",
      );
      const summary = await page.locator(tid("tracks-summary")).innerText();
      assert.match(summary, /^Net revenue by track, highest first: \d+ tracks?/);
      assert.match(summary, /Most earned: .+, [\d,]+\.\d{2} [A-Z]{3}\.$/);
      await record("royalties-tracks", "table-tracks");

      // The CSV's track rows are the table's, with the API's exact figures, and add up to the totals.
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.locator(tid("royalties-csv")).click(),
      ]);
      const [head = [], ...lines] = parseCsv(fs.readFileSync((await download.path()) as string, "utf8"));
      assert.deepEqual(head.slice(-2), ["release", "isrc"]);
      const csv = lines.map((l) => Object.fromEntries(l.map((v, i) => [head[i], v])));
      const trackRows = csv.filter((r) => r.breakdown === "track");
      assert.deepEqual(
        trackRows.map((r) => [r.key, r.isrc, r.release]),
        shown.map((cells) => [cells[0], cells[1] === "—" ? "" : cells[1], cells[2]]),
        "the CSV's tracks are the table's, in its order",
      );
      for (const r of trackRows) {
        const g = groups.find((x) => (x.isrc ?? "") === r.isrc && x.release_title === r.release);
        assert.ok(g, `${r.key}: a group of the API`);
        assert.equal(r.net, g.net, `${r.key}: the API's exact net`);
        assert.equal(r.currency, main.currency);
      }
      assert.equal(addDecimals(trackRows.map((r) => r.net as string)), normal(main.net), "net adds up");
      assert.equal(
        trackRows.reduce((n, r) => n + Number(r.streams), 0),
        main.streams,
        "streams add up",
      );
      for (const breakdown of ["month", "store", "territory", "release"])
        assert.ok(
          csv.some((r) => r.breakdown === breakdown && r.release === "" && r.isrc === ""),
          breakdown,
        );

      // A filter in the address narrows the tracks as the API does, after a reload too.
      await page.locator(tid("filter-store")).selectOption("spotify");
      await page.waitForURL(/store=spotify/);
      await page.reload();
      await page.locator(tid("table-tracks-row")).first().waitFor();
      const spotify = (await royaltiesApi(`group_by=track&store=spotify&currency=${main.currency}`)).data;
      await rowsCount(page, spotify.length);
      assert.match(page.url(), /store=spotify/);

      // A track's release narrows the page to that release: its tracks only.
      const first = spotify.find((g) => g.track_id);
      assert.ok(first);
      await page
        .locator(tid("table-tracks"))
        .getByRole("link", { name: first.release_title ?? "" })
        .first()
        .click();
      await page.waitForURL(new RegExp(`release=${first.release_id}`));
      await page.locator(tid("filter-release")).waitFor();
      const ofRelease = (
        await royaltiesApi(
          `group_by=track&store=spotify&currency=${main.currency}&release_id=${first.release_id}`,
        )
      ).data;
      await rowsCount(page, ofRelease.length);
      const releases = await page
        .locator(`${tid("table-tracks-row")} td a`)
        .evaluateAll((as) => [...new Set(as.map((a) => (a.textContent ?? "").trim()))]);
      assert.deepEqual(releases, [first.release_title]);
    });
  });
});
