import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { ImportError, type ImportReport, importRoyalties } from "../src/royalties/import.ts";
import { reportText } from "../src/royalties/operator.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { DSR_FILES, dsrMissingFails, dsrPath, dsrSkip } from "./support/dsr.ts";
import { reportFile, seedDeliveredRelease } from "./support/royalties.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

/**
 * The four real DDEX DSR flat files of ../shared/ddex/dsr (issue 41, item 3), read from there at
 * test time and never copied into the repository: each imports without --store (the store is the
 * one whose ddex.recipient.dpid is the HEAD record's SenderPartyId), none is rejected, every line
 * is matched or listed as unmatched, and what the import read past (a UPC whose check digit is
 * wrong, a FOOT that disagrees with the body) is listed in `warnings`.
 */

// The senders in the files' HEAD records, each made a store's party id below.
const UNLIMITED_MUSIC = "PADPIDA0123456766K"; // UnlimitedMusicMonthly (its file NAME starts with the recipient's id)
const DSRF_TEST_COMPANY = "PADPIDA2015999999X"; // AdFunded
const YOUTUBE = "PADPIDA2013020802I"; // both UGC files
const MUSIC_LICENSOR = "PADPIDA00123456743"; // UnlimitedMusicMonthly's recipient, first in its file name

async function setPartyId(db: Db, store: string, dpid: string | null): Promise<void> {
  await db.asService((tx) =>
    tx.query(
      `update internal.stores set settings = case when $2::text is null then settings #- '{ddex,recipient}'
         else jsonb_set(settings, '{ddex}', coalesce(settings -> 'ddex', '{}') ||
           jsonb_build_object('recipient', jsonb_build_object('dpid', $2::text, 'name', 'Store ' || $1)))
         end
       where code = $1`,
      [store, dpid],
    ),
  );
}

const skip = dsrMissingFails ? false : dsrSkip;

describeEachEngine("royalties: the real DDEX DSR files, as they come", (t) => {
  if (dsrMissingFails) {
    test("the DSR files are there under CI", () => assert.fail(String(dsrSkip)));
    return;
  }
  let app: RunningApp | undefined;

  before(async () => {
    const db = t().db;
    await setPartyId(db, "amazon_music", UNLIMITED_MUSIC);
    await setPartyId(db, "deezer", DSRF_TEST_COMPANY);
    await setPartyId(db, "youtube_content_id", YOUTUBE);
    // The id first in UnlimitedMusicMonthly's file name belongs to another store: the name is not read.
    await setPartyId(db, "spotify", MUSIC_LICENSOR);
  });

  after(async () => {
    await app?.close();
  });

  /** A tenant of its own per import (the two UGC files hold the same lines: one tenant would call the second a duplicate). */
  async function tenantWith(isrcs: string[]): Promise<{ tenant: Tenant; account: Account }> {
    const tenant = await seedTenant(t().db);
    const account = await seedAccount(t().db, tenant, "Label");
    await seedDeliveredRelease(
      t().db,
      account.id,
      { title: "Ours" },
      isrcs.map((isrc, i) => ({ title: `Track ${i + 1}`, isrc, duration: 200, track_number: i + 1 })),
    );
    return { tenant, account };
  }

  async function imported(file: string, tenant: Tenant, store?: string): Promise<ImportReport> {
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "ddex-dsr", file, store });
    assert.equal(r.status, "completed", JSON.stringify(r));
    if (r.status !== "completed") throw new Error("not completed");
    return r.report;
  }

  /** lines_total = matched + unmatched, nothing malformed, and every unmatched line listed. */
  function accounted(r: ImportReport): void {
    assert.equal(r.lines_malformed, 0);
    assert.deepEqual(r.errors, []);
    assert.equal(r.lines_matched + r.lines_unmatched, r.lines_total);
    assert.equal(
      r.unmatched.reduce((n, u) => n + u.lines, 0),
      r.lines_unmatched,
    );
  }

  test("UnlimitedMusicMonthly: store by SenderPartyId (not the file name), 6 of 15 lines matched, the other 9 listed, no warning", {
    skip,
  }, async () => {
    const { tenant, account } = await tenantWith(["GBAHT0900445", "USSM16900677"]);
    const r = await imported(dsrPath("unlimited"), tenant);
    assert.equal(r.store, "amazon_music");
    assert.equal(r.status, "completed");
    assert.deepEqual([r.lines_total, r.lines_matched, r.lines_unmatched], [15, 6, 9]);
    accounted(r);
    assert.deepEqual(r.account_ids, [account.id]);
    assert.deepEqual(
      r.unmatched.map((u) => [u.isrc, u.upc, u.lines]),
      [
        ["USCA20001686", "724358271058", 3],
        ["USCA20100337", "724358271058", 3],
        ["USCA20100360", "724358271058", 2],
        ["USSM16900682", "696998776920", 1],
      ],
    );
    assert.deepEqual(r.warnings, []);
    assert.deepEqual(r.totals[0] && [r.totals[0].currency, r.totals[0].units], ["GBP", 3160]);
  });

  test("AdFunded: its ICPN 731453000000 fails its check digit — all 3 lines kept, matched by the block's ISRC, the UPC and FOOT's block count warned", {
    skip,
  }, async () => {
    const { tenant } = await tenantWith(["USRC11501628"]);
    const r = await imported(dsrPath("adFunded"), tenant);
    assert.equal(r.store, "deezer");
    assert.deepEqual([r.lines_total, r.lines_matched, r.lines_unmatched], [3, 1, 2]);
    accounted(r);
    assert.deepEqual(
      r.unmatched.map((u) => [u.isrc, u.upc, u.lines]),
      [
        ["GBF089601184", null, 1],
        ["GBUM70602587", null, 1],
      ],
    );
    assert.deepEqual(r.warnings, [
      {
        line: 11,
        message:
          'UPC "731453000000" is not a valid UPC or EAN (check digit): left off the line, which is matched by its ISRC',
        lines: 3,
      },
      { line: 18, message: "the FOOT record's NumberOfBlocksInReport is 94, the file has 3", lines: 1 },
    ]);
    // As `royalties import` and `royalties show` print them.
    assert.match(
      reportText(r),
      /\n {2}warning: line 11 \(and 2 more\): UPC "731453000000" is not a valid UPC or EAN .*\n {2}warning: line 18: the FOOT record's NumberOfBlocksInReport is 94, the file has 3/,
    );
    const lines = await t().db.asService((tx) =>
      tx.query<{ isrc: string; upc: string | null; track: boolean }>(
        `select isrc, upc, track_id is not null as track from internal.royalty_lines where import_id = $1 order by line_number`,
        [r.id],
      ),
    );
    assert.deepEqual(
      lines.rows.map((l) => [l.isrc, l.upc, l.track]),
      [
        ["USRC11501628", null, true],
        ["GBUM70602587", null, false],
        ["GBF089601184", null, false],
      ],
    );
  });

  test("YouTube UGC 1.0 (TEST): 6 SU03 lines, 1 matched, none rejected, its FOOT right", {
    skip,
  }, async () => {
    const { tenant } = await tenantWith(["USSM19803037"]);
    const r = await imported(dsrPath("ugc10"), tenant);
    assert.equal(r.store, "youtube_content_id");
    assert.deepEqual([r.lines_total, r.lines_matched, r.lines_unmatched], [6, 1, 5]);
    accounted(r);
    assert.deepEqual(r.warnings, []);
  });

  test("YouTube UGC 1.1 (TEST2): its FOOT counts 35 lines for 34 — a warning each for the file and the report", {
    skip,
  }, async () => {
    const { tenant } = await tenantWith(["USSM19803037"]);
    const r = await imported(dsrPath("ugc11"), tenant);
    assert.equal(r.store, "youtube_content_id");
    assert.deepEqual([r.lines_total, r.lines_matched, r.lines_unmatched], [6, 1, 5]);
    accounted(r);
    assert.deepEqual(r.warnings, [
      { line: 34, message: "the FOOT record's NumberOfLinesInFile is 35, the file has 34", lines: 1 },
      { line: 34, message: "the FOOT record's NumberOfLinesInReport is 35, the file has 34", lines: 1 },
    ]);
  });

  test("a sender no store has: refused before reading, the error naming the id it saw; --store then imports it", {
    skip,
  }, async () => {
    const { tenant } = await tenantWith([]);
    const text = fs.readFileSync(dsrPath("ugc10"), "utf8").replace(YOUTUBE, "PADPIDA9999999999Z");
    const file = reportFile(text, DSR_FILES.ugc10);
    await assert.rejects(
      importRoyalties(t().db, { tenantId: tenant.id, format: "ddex-dsr", file }),
      (e: unknown) =>
        e instanceof ImportError &&
        /no store has the DDEX party id PADPIDA9999999999Z, the sender in the file's HEAD record/.test(
          e.message,
        ) &&
        /say --store/.test(e.message),
    );
    const imports = await t().db.asService((tx) =>
      tx.query("select 1 from internal.royalty_imports where tenant_id = $1", [tenant.id]),
    );
    assert.equal(imports.rowCount, 0, "nothing is recorded");
    const r = await imported(file, tenant, "youtube_music");
    assert.equal(r.store, "youtube_music");
    assert.equal(r.lines_total, 6);
    // youtube_music has no party id: nothing to say about the sender.
    assert.deepEqual(r.warnings, []);
  });

  test("--store naming another store than the sender's: imported as --store says, with a warning", {
    skip,
  }, async () => {
    const { tenant } = await tenantWith([]);
    const r = await imported(dsrPath("ugc10"), tenant, "tiktok");
    assert.equal(r.store, "tiktok");
    assert.deepEqual(r.warnings, [
      {
        line: null,
        message: `the file's sender (SenderPartyId ${YOUTUBE}) is the DDEX party id of store youtube_content_id: imported as tiktok, as --store says`,
        lines: 1,
      },
    ]);
  });

  test("two stores with the sender's party id: refused, naming both", { skip }, async () => {
    const { tenant } = await tenantWith([]);
    await setPartyId(t().db, "tidal", YOUTUBE);
    try {
      await assert.rejects(
        importRoyalties(t().db, { tenantId: tenant.id, format: "ddex-dsr", file: dsrPath("ugc10") }),
        (e: unknown) =>
          e instanceof ImportError &&
          e.message ===
            `stores tidal, youtube_content_id all have the DDEX party id ${YOUTUBE}, the sender in the file's HEAD record: say --store (admin API: store=)`,
      );
    } finally {
      await setPartyId(t().db, "tidal", null);
    }
  });

  test("a tampered copy whose FOOT disagrees with the body: completed, every difference a warning", {
    skip,
  }, async () => {
    const { tenant } = await tenantWith(["USSM19803037"]);
    const text = fs.readFileSync(dsrPath("ugc10"), "utf8");
    assert.ok(text.includes("FOOT\t35\t35\t4\t3\t3"));
    const file = reportFile(text.replace("FOOT\t35\t35\t4\t3\t3", "FOOT\t40\t35\t7\t3\t2"), "tampered.tsv");
    const r = await imported(file, tenant);
    assert.deepEqual([r.lines_total, r.lines_matched, r.lines_unmatched], [6, 1, 5]);
    assert.deepEqual(
      r.warnings.map((w) => [w.line, w.message]),
      [
        [35, "the FOOT record's NumberOfLinesInFile is 40, the file has 35"],
        [35, "the FOOT record's NumberOfSummaryRecords is 7, the file has 4"],
        [35, "the FOOT record's NumberOfBlocksInReport is 2, the file has 3"],
      ],
    );
    // A copy cut short before its FOOT: still imported, the missing FOOT said.
    const cut = reportFile(text.slice(0, text.indexOf("SU03.01\t3\tU4")), "cut.tsv");
    const c = await imported(cut, (await tenantWith([])).tenant);
    assert.equal(c.lines_total, 5);
    assert.deepEqual(
      c.warnings.map((w) => w.message),
      ["the file has no FOOT record: its counts could not be checked (is the file complete?)"],
    );
  });

  test("the admin API: no store param needed; an unknown sender is 422 invalid_import naming the id", {
    skip,
  }, async () => {
    app = await startApp(t());
    const { tenant, keys } = await tenantWithKeys(t());
    const post = (body: Buffer, query = "") =>
      fetch(`${app?.url}/admin/v1/royalty-imports?format=ddex-dsr${query}`, {
        method: "POST",
        headers: { apikey: keys.service_role_key, "content-type": "text/tab-separated-values" },
        body: new Uint8Array(body),
      });
    const ok = await post(fs.readFileSync(dsrPath("adFunded")));
    const made = (await ok.json()) as { status: string; import: ImportReport };
    assert.equal(ok.status, 201, JSON.stringify(made));
    assert.equal(made.import.store, "deezer");
    assert.equal(made.import.tenant_id, tenant.id);
    assert.equal(made.import.warnings.length, 2);
    const unknown = await post(
      Buffer.from(fs.readFileSync(dsrPath("ugc11"), "utf8").replace(YOUTUBE, "PADPIDA9999999999Z")),
    );
    const problem = (await unknown.json()) as { code?: string; detail?: string };
    assert.equal(unknown.status, 422, JSON.stringify(problem));
    assert.equal(problem.code, "invalid_import");
    assert.match(String(problem.detail), /PADPIDA9999999999Z/);
  });
});

describeEachEngine("royalties: a DSR line matched by the store's own ids", (t) => {
  let tenant: Tenant;
  let account: Account;

  before(async () => {
    tenant = await seedTenant(t().db);
    account = await seedAccount(t().db, tenant, "Label");
  });

  test("an ICPN with a wrong check digit on a release of two resources: the release by its delivery's store_reference; a resource with no ISRC by a transferred track's store id", async () => {
    const db = t().db;
    const album = await seedDeliveredRelease(db, account.id, { title: "Album", upc: "012345000010" }, [
      { title: "One", isrc: "QZABC2600001", duration: 200, track_number: 1 },
      { title: "Two", isrc: "QZABC2600002", duration: 200, track_number: 2 },
    ]);
    await db.asService(async (tx) => {
      await tx.query(
        `insert into internal.release_deliveries (release_id, account_id, store, status, store_reference)
         values ($1, $2, 'deezer', 'live', 'DZ-ALBUM-1')`,
        [album.id, account.id],
      );
      await tx.query(
        `insert into internal.transferred_releases (release_id, account_id, source_key, store_ids, track_store_ids)
         values ($1, $2, 'upc:012345000010', '{}', '{"QZABC2600002": {"deezer": "DZ-TRACK-2"}}')`,
        [album.id, account.id],
      );
    });
    const head =
      "HEAD\tdsrf/1.1/1.4.1/1.3\tBasicAudioProfile\t1.3\tM1\t2026-04-03T00:00:00Z\t1\t1\t2026-03-01\t2026-03-31\tPADPIDA2026000009Z\tStore\tS\tPADPIDA2026000002Y\tUs\t\n";
    const body = [
      "SY01.02\tS1\tStore\t\tSubscriptionModel\tOnDemandStream\tDE\tP\t100\t10\tEUR\t10.00",
      // The ICPN 012345000011 fails its check digit; the block has two resources.
      "RE01.02\t1\tR1\tDZ-ALBUM-1\t\t\t012345000011",
      "AS02.03\t1\tA1\tDZ-TRACK-1\tQZABC2600001",
      "AS02.03\t1\tA2\tDZ-TRACK-2\t",
      "SU02.02\t1\tS1\tT1\tR1\t\tTRUE\t60",
      "SU02.02\t1\tS1\tT2\t\tA2\tTRUE\t40",
      "FOOT\t8\t8\t1\t1\t1",
    ].join("\n");
    await db.asService((tx) =>
      tx.query(
        `update internal.stores set settings = jsonb_set(settings, '{ddex}', coalesce(settings -> 'ddex', '{}') ||
           '{"recipient": {"dpid": "PADPIDA2026000009Z", "name": "Deezer"}}') where code = 'deezer'`,
      ),
    );
    const r = await importRoyalties(db, {
      tenantId: tenant.id,
      format: "ddex-dsr",
      file: reportFile(`${head}${body}\n`, "store-ids.tsv"),
    });
    assert.equal(r.status, "completed", JSON.stringify(r));
    if (r.status !== "completed") return;
    assert.equal(r.report.store, "deezer");
    assert.deepEqual([r.report.lines_total, r.report.lines_matched], [2, 2]);
    assert.deepEqual(r.report.warnings, [
      {
        line: 6,
        message: `UPC "012345000011" is not a valid UPC or EAN (check digit): left off the line, which is matched by the store's own id`,
        lines: 2,
      },
    ]);
    const lines = await db.asService((tx) =>
      tx.query<{ release_id: string; track_id: string | null; upc: string | null; isrc: string | null }>(
        "select release_id, track_id, upc, isrc from internal.royalty_lines where import_id = $1 order by line_number",
        [r.report.id],
      ),
    );
    const two = album.tracks.find((x) => x.isrc === "QZABC2600002");
    assert.deepEqual(
      lines.rows.map((l) => [l.release_id, l.track_id, l.upc, l.isrc]),
      [
        [album.id, null, null, null],
        [album.id, two?.id, null, null],
      ],
    );
  });
});
