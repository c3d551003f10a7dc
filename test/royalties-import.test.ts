import assert from "node:assert/strict";
import fs from "node:fs";
import { before, test } from "node:test";
import { ImportError, importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { WEBHOOK_EVENTS } from "../src/webhooks/events.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedRelease } from "./support/ddex.ts";
import {
  countLines,
  reportFile,
  SAMPLES,
  type SampleCatalog,
  seedDeliveredRelease,
  seedSampleCatalog,
} from "./support/royalties.ts";
import { seedAccount, seedTenant, seedUser } from "./support/seed.ts";

/**
 * Royalty report import (docs/royalties.md): the three formats with their quirks, matching by
 * ISRC and UPC, unmatched lines kept and listed, idempotent re-import, the malformed-line policy
 * (the report is refused whole, with line numbers), the analytics rollups, and royalties.imported
 * as an event (fanned out to webhooks) and a notification.
 */

type LineRow = Record<string, string | null>;

describeEachEngine("royalties: import", (t) => {
  let tenant: Tenant;
  let account: Account;
  let catalog: SampleCatalog;
  let memberId: string;

  const lines = async (importId: string) =>
    (
      await t().db.asService((tx) =>
        tx.query<LineRow>(
          `select line_number::text, account_id, release_id, track_id, store, territory, upc, isrc, usage_type,
             units::text, gross::text, fees::text, net::text, currency, period_start::text, period_end::text,
             to_char(reporting_period, 'YYYY-MM') as reporting_period
           from internal.royalty_lines where import_id = $1 order by line_number`,
          [importId],
        ),
      )
    ).rows;

  before(async () => {
    tenant = await seedTenant(t().db);
    account = await seedAccount(t().db, tenant, "Night Owl");
    catalog = await seedSampleCatalog(t().db, account);
    memberId = (await seedUser(t().db, tenant, [{ account, role: "member" }])).id;
    // A webhook endpoint of the account that wants royalties.imported.
    await t().db.asService((tx) =>
      tx.query(
        `insert into internal.webhook_endpoints (tenant_id, account_id, url, events, secret_ciphertext)
         values ($1, $2, 'https://hooks.example.com/royalties', '{royalties.imported}', 'x')`,
        [tenant.id, account.id],
      ),
    );
  });

  test("backline: quoted fields, empty territory, hyphenated ISRC; matching; totals per currency", async () => {
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: SAMPLES.backline,
    });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    const rep = r.report;
    assert.deepEqual(
      [rep.lines_total, rep.lines_matched, rep.lines_unmatched, rep.lines_malformed],
      [7, 6, 1, 0],
    );
    assert.deepEqual(rep.totals, [
      { currency: "EUR", lines: 3, units: 970, gross: "3.64", fees: "1.088", net: "2.552" },
      { currency: "GBP", lines: 1, units: 3, gross: "20.97", fees: "6.29", net: "14.68" },
      { currency: "USD", lines: 3, units: 1910, gross: "21.7", fees: "6.51", net: "15.19" },
    ]);
    assert.deepEqual(rep.unmatched, [
      { isrc: "GBXYZ2600099", upc: "190000000015", reason: "no_match", lines: 1, units: 50 },
    ]);
    assert.deepEqual(rep.account_ids, [account.id]);
    assert.equal(rep.period_from, "2026-02-01");
    assert.equal(rep.period_to, "2026-02-28");

    const rows = await lines(rep.id);
    assert.equal(rows.length, 7);
    const byLine = new Map(rows.map((l) => [l.line_number, l]));
    // Line 2: ISRC on its own release.
    assert.equal(byLine.get("2")?.track_id, catalog.tracks.QZABC2600001);
    assert.equal(byLine.get("2")?.release_id, catalog.nightDrive);
    assert.equal(byLine.get("2")?.reporting_period, "2026-03");
    assert.equal(byLine.get("2")?.period_end, "2026-02-28");
    assert.equal(byLine.get("2")?.net, "4.200000000000");
    // Line 5: no ISRC, a release-level download matched by UPC.
    assert.equal(byLine.get("5")?.track_id, null);
    assert.equal(byLine.get("5")?.release_id, catalog.nightDrive);
    assert.equal(byLine.get("5")?.usage_type, "download");
    // Line 7: unmatched, kept without an account.
    assert.equal(byLine.get("7")?.account_id, null);
    assert.equal(byLine.get("7")?.isrc, "GBXYZ2600099");
    // Line 8: every field quoted, territory empty, ISRC with hyphens.
    assert.equal(byLine.get("8")?.territory, null);
    assert.equal(byLine.get("8")?.isrc, "QZABC2600003");
    assert.equal(byLine.get("8")?.track_id, catalog.tracks.QZABC2600003);
    assert.equal(byLine.get("8")?.store, "deezer");
  });

  test("the import updates release and track analytics and the account's totals", async () => {
    const ra = await t().db.asService((tx) =>
      tx.query<LineRow>(
        `select store, currency, streams::text, downloads::text, revenue::text, gross_revenue::text, fees::text,
           royalty_lines::text from public.release_analytics where release_id = $1 order by store, currency`,
        [catalog.nightDrive],
      ),
    );
    assert.deepEqual(
      ra.rows.map((r) => [r.store, r.currency, r.streams, r.downloads, r.revenue, r.royalty_lines]),
      [
        ["apple_music", "USD", "400", "0", "1.960000000000", "1"],
        ["itunes", "GBP", "0", "3", "14.680000000000", "1"],
        ["spotify", "EUR", "800", "0", "2.072000000000", "1"],
        ["spotify", "USD", "1500", "0", "4.200000000000", "1"],
      ],
    );
    const ta = await t().db.asService((tx) =>
      tx.query<LineRow>(
        "select store, currency, streams::text, revenue::text from public.track_analytics where track_id = $1 order by store, currency",
        [catalog.tracks.QZABC2600001],
      ),
    );
    assert.deepEqual(
      ta.rows.map((r) => [r.store, r.currency, r.streams, r.revenue]),
      [
        ["spotify", "EUR", "800", "2.072000000000"],
        ["spotify", "USD", "1500", "4.200000000000"],
      ],
    );
    const totals = await t().db.asService((tx) =>
      tx.query<LineRow>(
        "select currency, sum(lines)::text as lines, trim_scale(sum(net))::text as net from internal.royalty_totals where account_id = $1 group by currency order by currency",
        [account.id],
      ),
    );
    assert.deepEqual(
      totals.rows.map((r) => [r.currency, r.lines, r.net]),
      [
        ["EUR", "2", "2.412"],
        ["GBP", "1", "14.68"],
        ["USD", "3", "15.19"],
      ],
    );
  });

  test("royalties.imported: an event per affected account (fanned out to its webhook) and a notification", async () => {
    const events = await t().db.asService((tx) =>
      tx.query<{ id: string; data: { object: Record<string, unknown> }; account_id: string }>(
        "select id, account_id, data from internal.events where type = 'royalties.imported' and tenant_id = $1",
        [tenant.id],
      ),
    );
    assert.equal(events.rows.length, 1);
    const event = events.rows[0];
    assert.ok(event);
    assert.equal(event.account_id, account.id);
    assert.equal(event.data.object.object, "royalty_import");
    assert.equal(event.data.object.lines, 6);
    assert.deepEqual(event.data.object.totals, [
      { currency: "EUR", lines: 2, units: 920, gross: "3.44", fees: "1.028", net: "2.412" },
      { currency: "GBP", lines: 1, units: 3, gross: "20.97", fees: "6.29", net: "14.68" },
      { currency: "USD", lines: 3, units: 1910, gross: "21.7", fees: "6.51", net: "15.19" },
    ]);
    // The payload is what the documented webhook schema says.
    const schema = WEBHOOK_EVENTS.find((e) => e.type === "royalties.imported")?.schema;
    assert.ok(schema);
    schema.parse({
      id: event.id,
      type: "royalties.imported",
      created: new Date().toISOString(),
      sequence: 1,
      account_id: account.id,
      data: event.data,
    });
    const deliveries = await t().db.asService((tx) =>
      tx.query("select 1 from internal.webhook_deliveries where event_id = $1", [event.id]),
    );
    assert.equal(deliveries.rowCount, 1);
    const notes = await t().db.asService((tx) =>
      tx.query<{ kind: string; body: string; data: Record<string, unknown> }>(
        "select kind, body, data from public.notifications where user_id = $1 and kind = 'royalties.imported'",
        [memberId],
      ),
    );
    assert.equal(notes.rows.length, 1);
    assert.match(notes.rows[0]?.body ?? "", /6 royalty lines for 2026-02/);
    assert.equal(notes.rows[0]?.data.import_id, event.data.object.id);
  });

  test("importing the same report again counts nothing, and says so — also when only the bytes differ", async () => {
    const before = await countLines(t().db, tenant.id);
    const again = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: SAMPLES.backline,
    });
    assert.equal(again.status, "duplicate");
    if (again.status === "duplicate") assert.equal(again.reason, "same_file");
    // The same lines with CRLF line ends, a BOM and other quoting: other bytes, the same report.
    const text = fs.readFileSync(SAMPLES.backline, "utf8").replaceAll('"', "").replace(/\n/g, "\r\n");
    const resaved = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(`\uFEFF${text}`),
    });
    assert.equal(resaved.status, "duplicate");
    if (resaved.status === "duplicate") assert.equal(resaved.reason, "same_lines");
    assert.equal(await countLines(t().db, tenant.id), before);
    const events = await t().db.asService((tx) =>
      tx.query("select 1 from internal.events where type = 'royalties.imported' and tenant_id = $1", [
        tenant.id,
      ]),
    );
    assert.equal(events.rowCount, 1);
  });

  test("streaming-monthly: BOM, semicolons, decimal commas, YYYYMM, UK, lost leading zeros, TOTAL line", async () => {
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "streaming-monthly",
      file: SAMPLES["streaming-monthly"],
    });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    assert.equal(r.report.store, "spotify");
    assert.deepEqual([r.report.lines_total, r.report.lines_matched], [4, 4]);
    assert.deepEqual(r.report.totals, [
      { currency: "EUR", lines: 3, units: 1253, gross: "13.97", fees: "4.191", net: "9.779" },
      { currency: "GBP", lines: 1, units: 2000, gross: "1.2", fees: "0.36", net: "0.84" },
    ]);
    const rows = await lines(r.report.id);
    assert.deepEqual(
      rows.map((l) => [
        l.line_number,
        l.territory,
        l.upc,
        l.units,
        l.usage_type,
        l.reporting_period,
        l.store,
      ]),
      [
        ["2", "DE", "012345000010", "1250", "stream", "2026-03", "spotify"],
        ["3", "GB", "012345000010", "2000", "stream", "2026-03", "spotify"],
        ["4", "FR", "012345000027", "2", "download", "2026-03", "spotify"],
        ["5", "SE", "012345000027", "1", "download", "2026-03", "spotify"],
      ],
    );
    assert.equal(rows[3]?.track_id, null);
    assert.equal(rows[3]?.release_id, catalog.daybreak);
    assert.equal(rows[0]?.gross, "5.000000000000");
  });

  test("video-ugc: preamble, missing territories, multi-line quoted titles, no fees", async () => {
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "video-ugc",
      file: SAMPLES["video-ugc"],
      store: "youtube_content_id",
    });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    assert.deepEqual(r.report.totals, [
      {
        currency: "USD",
        lines: 4,
        units: 12840,
        gross: "1.578567891234",
        fees: "0",
        net: "1.578567891234",
      },
    ]);
    assert.deepEqual(r.report.unmatched, [
      { isrc: "GBXYZ2600099", upc: null, reason: "no_match", lines: 1, units: 40 },
    ]);
    const rows = await lines(r.report.id);
    assert.deepEqual(
      rows.map((l) => [l.line_number, l.territory, l.usage_type, l.net, l.period_start]),
      [
        ["5", "US", "ugc", "1.234567891234", "2026-02-01"],
        ["6", null, "ugc", "0.250000000000", "2026-02-01"],
        ["7", null, "stream", "0.090000000000", "2026-02-01"],
        ["9", null, "ugc", "0.004000000000", "2026-02-01"],
      ],
    );
    assert.equal(rows[2]?.track_id, catalog.tracks.QZABC2600002);
  });

  test("an ISRC on delivered releases of two accounts: the line's UPC decides, else the line is ambiguous and credits nobody", async () => {
    const other = await seedAccount(t().db, tenant, "Other");
    // Account Other's compilation, delivered, carries Night Owl's track (a licensed compilation).
    const compilation = await seedDeliveredRelease(
      t().db,
      other.id,
      { title: "Compilation", upc: "085100000037" },
      [{ title: "Night Drive", isrc: "QZABC2600001", duration: 200, track_number: 1 }],
    );
    const file = reportFile(
      [
        "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
        // 2: the compilation's UPC decides: Other.
        "2026-05,2026-04,tidal,NO,085100000037,QZABC2600001,stream,10,0.1,0,0.1,NOK",
        // 3: Night Drive's UPC decides: Night Owl.
        "2026-05,2026-04,tidal,NO,012345000010,QZABC2600001,stream,30,0.3,0,0.3,NOK",
        // 4, 5: no UPC, or one that is nobody's: the ISRC leads to two accounts: ambiguous.
        "2026-05,2026-04,tidal,NO,,QZABC2600001,stream,20,0.2,0,0.2,NOK",
        "2026-05,2026-04,tidal,NO,190000000015,QZABC2600001,stream,5,0.05,0,0.05,NOK",
        // 6: Daybreak's UPC, whose release lacks the ISRC: the UPC's owner decides: Night Owl.
        "2026-05,2026-04,tidal,NO,012345000027,QZABC2600001,stream,1,0.01,0,0.01,NOK",
      ].join("\n"),
    );
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    const rows = await lines(r.report.id);
    assert.deepEqual(
      rows.map((l) => [l.line_number, l.account_id, l.release_id, l.track_id]),
      [
        ["2", other.id, compilation.id, compilation.tracks[0]?.id],
        ["3", account.id, catalog.nightDrive, catalog.tracks.QZABC2600001],
        ["4", null, null, null],
        ["5", null, null, null],
        ["6", account.id, catalog.nightDrive, catalog.tracks.QZABC2600001],
      ],
    );
    assert.deepEqual([r.report.lines_matched, r.report.lines_unmatched], [3, 2]);
    assert.deepEqual(r.report.unmatched, [
      { isrc: "QZABC2600001", upc: "190000000015", reason: "ambiguous", lines: 1, units: 5 },
      { isrc: "QZABC2600001", upc: null, reason: "ambiguous", lines: 1, units: 20 },
    ]);
    assert.deepEqual(new Set(r.report.account_ids), new Set([account.id, other.id]));
    // One event per account, each with its own lines.
    const events = await t().db.asService((tx) =>
      tx.query<{ account_id: string; lines: number }>(
        `select account_id, (data -> 'object' ->> 'lines')::int as lines from internal.events
         where type = 'royalties.imported' and data -> 'object' ->> 'id' = $1 order by account_id`,
        [r.report.id],
      ),
    );
    assert.deepEqual(
      events.rows.map((e) => [e.account_id, e.lines]).sort(),
      [
        [account.id, 2],
        [other.id, 1],
      ].sort(),
    );
  });

  test("capture attack: another account's copied ISRC and UPC on releases it never delivered get nothing", async () => {
    const thief = await seedAccount(t().db, tenant, "Thief");
    const copy = (status: string | undefined, title: string) =>
      status === undefined
        ? seedRelease(t().db, thief.id, { title, upc: "012345000027" }, [
            { title: "Sunrise", isrc: "QZABC2600003", duration: 200, track_number: 1 },
          ])
        : seedDeliveredRelease(
            t().db,
            thief.id,
            { title, upc: "012345000027" },
            [{ title: "Sunrise", isrc: "QZABC2600003", duration: 200, track_number: 1 }],
            status,
          );
    // Older than nothing of Daybreak's (it is newer), but in every status before delivery.
    for (const status of [
      undefined,
      "pending",
      "submitted",
      "in_review",
      "approved",
      "rejected",
      "delivering",
    ]) {
      await copy(status, `Copy (${status ?? "draft"})`);
    }
    const report = (n: number) =>
      reportFile(
        [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          `2026-09,2026-08,deezer,FR,012345000027,QZABC2600003,stream,${n},1,0,1,EUR`,
          `2026-09,2026-08,deezer,FR,,QZABC2600003,stream,${n},1,0,1,EUR`,
          `2026-09,2026-08,deezer,FR,012345000027,,download,${n},1,0,1,EUR`,
        ].join("\n"),
      );
    const first = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file: report(7) });
    assert.equal(first.status, "completed");
    if (first.status !== "completed") return;
    assert.deepEqual(first.report.account_ids, [account.id]);
    assert.equal(first.report.lines_matched, 3);
    assert.ok((await lines(first.report.id)).every((l) => l.release_id === catalog.daybreak));

    // A delivered copy in the thief's account: the identifiers now lead to two accounts, so the
    // lines are unmatched as ambiguous — nobody is paid until the operator fixes the catalog.
    const delivered = await copy("live", "Copy (live)");
    const second = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: report(8),
    });
    assert.equal(second.status, "completed");
    if (second.status !== "completed") return;
    assert.deepEqual([second.report.lines_matched, second.report.lines_unmatched], [0, 3]);
    assert.deepEqual(second.report.account_ids, []);
    assert.deepEqual(
      second.report.unmatched.map((u) => [u.isrc, u.upc, u.reason]),
      [
        ["QZABC2600003", "012345000027", "ambiguous"],
        ["QZABC2600003", null, "ambiguous"],
        [null, "012345000027", "ambiguous"],
      ],
    );
    const thiefLines = await t().db.asService((tx) =>
      tx.query("select 1 from internal.royalty_lines where account_id = $1 or release_id = $2", [
        thief.id,
        delivered.id,
      ]),
    );
    assert.equal(thiefLines.rowCount, 0);
    const thiefEvents = await t().db.asService((tx) =>
      tx.query("select 1 from internal.events where account_id = $1 and type = 'royalties.imported'", [
        thief.id,
      ]),
    );
    assert.equal(thiefEvents.rowCount, 0);
  });

  test("unmatched codes: every one counted, the 100 with the most lines listed (ties by ISRC), none dropped from lines_unmatched", async () => {
    // 250 ISRCs nobody has: QZNON2600010 has 4 lines, QZNON2600200 3, the rest 1 each.
    const isrc = (i: number) => `QZNON26${String(i).padStart(5, "0")}`;
    const rows = [
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
    ];
    const line = (i: number, units: number) =>
      `2026-08,2026-07,deezer,FR,,${isrc(i)},stream,${units},0.01,0,0.01,EUR`;
    for (let i = 250; i >= 1; i--) rows.push(line(i, 1));
    for (let k = 0; k < 3; k++) rows.push(line(10, 5));
    for (let k = 0; k < 2; k++) rows.push(line(200, 7));
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(rows.join("\n")),
    });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    assert.deepEqual([r.report.lines_total, r.report.lines_matched, r.report.lines_unmatched], [255, 0, 255]);
    assert.equal(r.report.unmatched.length, 100);
    assert.deepEqual(r.report.unmatched.slice(0, 3), [
      { isrc: isrc(10), upc: null, reason: "no_match", lines: 4, units: 16 },
      { isrc: isrc(200), upc: null, reason: "no_match", lines: 3, units: 15 },
      { isrc: isrc(1), upc: null, reason: "no_match", lines: 1, units: 1 },
    ]);
    const rest = r.report.unmatched.slice(2).map((u) => u.isrc);
    assert.deepEqual(
      rest,
      Array.from({ length: 250 }, (_, i) => isrc(i + 1))
        .filter((c) => c !== isrc(10) && c !== isrc(200))
        .slice(0, 98),
    );
  });

  test("within one account, several delivered releases with the ISRC: the line's UPC, else the oldest release", async () => {
    const solo = await seedAccount(t().db, tenant, "Solo");
    const track = [{ title: "Echo", isrc: "QZSOL2600001", duration: 180, track_number: 1 }];
    const older = await seedDeliveredRelease(
      t().db,
      solo.id,
      { title: "Single", upc: "085100000044" },
      track,
    );
    const newer = await seedDeliveredRelease(t().db, solo.id, { title: "Album", upc: "085100000051" }, track);
    // A draft of the same account is never a candidate, even when its UPC is on the line.
    await seedRelease(t().db, solo.id, { title: "Deluxe (draft)", upc: "085100000068" }, track);
    const file = reportFile(
      [
        "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
        "2026-05,2026-04,tidal,NO,085100000051,QZSOL2600001,stream,1,0.1,0,0.1,NOK",
        "2026-05,2026-04,tidal,NO,,QZSOL2600001,stream,1,0.1,0,0.1,NOK",
        "2026-05,2026-04,tidal,NO,085100000068,QZSOL2600001,stream,1,0.1,0,0.1,NOK",
        "2026-05,2026-04,tidal,NO,085100000068,,download,1,0.1,0,0.1,NOK",
      ].join("\n"),
    );
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    assert.deepEqual(
      (await lines(r.report.id)).map((l) => [l.line_number, l.release_id]),
      [
        ["2", newer.id],
        ["3", older.id],
        ["4", older.id],
        ["5", null],
      ],
    );
    assert.deepEqual(r.report.unmatched, [
      { isrc: null, upc: "085100000068", reason: "no_match", lines: 1, units: 1 },
    ]);
  });

  test("a malformed line refuses the whole report, listing every bad line with its number", async () => {
    const before = await countLines(t().db, tenant.id);
    const file = reportFile(
      [
        "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
        "2026-06,2026-05,spotify,US,012345000010,QZABC2600001,stream,10,0.04,0.01,0.03,USD",
        "2026-06,2026-05,spotify,US,012345000010,QZABC2600001,stream,ten,0.04,0.01,0.03,USD",
        "2026-06,2026-05,spotify,XX,012345000010,QZABC2600001,stream,10,0.04,0.01,0.03,USD",
        '2026-06,2026-05,nostore,US,012345000010,QZABC2600001,stream,10,"0,04",0.01,0.03,USD',
        "2026-06,2026-05,spotify,US,012345000011,,stream,10,0.04,0.01,0.03,USD",
        "2026-06,2026-05,spotify,US,012345000010,QZABC2600001,stream,10,0.04,0.01,0.03,USD",
      ].join("\n"),
    );
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file });
    assert.equal(r.status, "rejected");
    if (r.status !== "rejected") return;
    assert.deepEqual(
      r.report.errors.map((e) => e.line),
      [3, 4, 5, 6],
    );
    assert.match(r.report.errors[0]?.message ?? "", /units "ten"/);
    assert.match(r.report.errors[1]?.message ?? "", /territory "XX"/);
    assert.match(r.report.errors[2]?.message ?? "", /unknown store "nostore"/);
    assert.match(r.report.errors[3]?.message ?? "", /UPC "012345000011"/);
    assert.equal(r.report.lines_malformed, 4);
    assert.equal(await countLines(t().db, tenant.id), before);
    // The refusal is on record; the fixed file imports.
    const recorded = await t().db.asService((tx) =>
      tx.query<{ status: string }>("select status from internal.royalty_imports where id = $1", [
        r.report.id,
      ]),
    );
    assert.equal(recorded.rows[0]?.status, "rejected");
    const fixed = reportFile(
      [
        "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
        "2026-06,2026-05,spotify,US,012345000010,QZABC2600001,stream,10,0.04,0.01,0.03,USD",
      ].join("\n"),
    );
    const ok = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file: fixed });
    assert.equal(ok.status, "completed");
    assert.equal(await countLines(t().db, tenant.id), before + 1);
  });

  test("periods outside 1950 to next year and amounts of 10^12 or more are malformed lines, not a database error", async () => {
    const before = await countLines(t().db, tenant.id);
    const next = new Date().getUTCFullYear() + 1;
    const head =
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency";
    const ok = "spotify,US,012345000010,QZABC2600001,stream,10";
    const cases: [string, RegExp][] = [
      [`2026-06,0000-01,${ok},0.04,0.01,0.03,USD`, /sale period "0000-01" is not a month from 1950/],
      [`0000-12,2026-05,${ok},0.04,0.01,0.03,USD`, /reporting period "0000-12" is not a month from 1950/],
      [`2026-06,1949-12,${ok},0.04,0.01,0.03,USD`, /sale period "1949-12"/],
      [
        `2026-06,${next + 1}-01,${ok},0.04,0.01,0.03,USD`,
        new RegExp(`"${next + 1}-01" is not a month from 1950 to ${next}`),
      ],
      [`2026-06,2026-05,${ok},1000000000000,0,1000000000000,USD`, /gross "1000000000000" is too large/],
      [`2026-06,2026-05,${ok},0,0,-99999999999999999999.5,USD`, /net "-99999999999999999999.5" is too large/],
    ];
    const file = reportFile(
      [head, `2026-06,${next}-12,${ok},999999999999.5,0,999999999999.5,USD`, ...cases.map(([l]) => l)].join(
        "\n",
      ),
    );
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file });
    assert.equal(r.status, "rejected");
    if (r.status !== "rejected") return;
    assert.deepEqual(
      r.report.errors.map((e) => e.line),
      [3, 4, 5, 6, 7, 8],
    );
    for (const [i, [, want]] of cases.entries()) assert.match(r.report.errors[i]?.message ?? "", want);
    assert.equal(await countLines(t().db, tenant.id), before);
    await assert.rejects(
      importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file, period: "0000-01" }),
      (e: unknown) => e instanceof ImportError && /--period 0000-01 is not a month from 1950/.test(e.message),
    );
  });

  test("lines that each fit but whose sums overflow an analytics row: the import is refused whole with a message", async () => {
    const before = await countLines(t().db, tenant.id);
    const head =
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency";
    // 10,001 lines of 999,999,999,999 on one release, month, store and currency: past 10^16, more
    // than the analytics and totals columns hold.
    const body = Array.from(
      { length: 10_001 },
      (_, i) => `2026-07,2026-06,itunes,US,012345000010,,download,${i},999999999999,0,999999999999,USD`,
    );
    const file = reportFile([head, ...body].join("\n"));
    const imports = async () =>
      (
        await t().db.asService((tx) =>
          tx.query("select 1 from internal.royalty_imports where tenant_id = $1", [tenant.id]),
        )
      ).rowCount;
    const importsBefore = await imports();
    await assert.rejects(
      importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file }),
      (e: unknown) => e instanceof ImportError && /too large for the analytics totals/.test(e.message),
    );
    assert.equal(await countLines(t().db, tenant.id), before);
    assert.equal(await imports(), importsBefore);
  });

  test("an unclosed quote: one malformed line where the record starts, the rest of the file unread, nothing loaded", async () => {
    const before = await countLines(t().db, tenant.id);
    const head =
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency";
    const good = "2026-06,2026-05,spotify,US,012345000010,QZABC2600001,stream,10,0.04,0.01,0.03,USD";
    const rest = Array.from({ length: 50_000 }, () => good);
    const file = reportFile([head, good, '2026-06,2026-05,spotify,"US,012345000010', ...rest].join("\n"));
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file });
    assert.equal(r.status, "rejected");
    if (r.status !== "rejected") return;
    assert.equal(r.report.errors.length, 1);
    assert.equal(r.report.errors[0]?.line, 3);
    assert.match(
      r.report.errors[0]?.message ?? "",
      /longer than 65536 characters or 100 lines \(an unclosed quote\?\)/,
    );
    assert.equal(r.report.lines_malformed, 1);
    assert.equal(await countLines(t().db, tenant.id), before);
  });

  test("a report the format cannot read at all is refused at its header; --period and --store are checked", async () => {
    const noColumn = reportFile("reporting_period,sale_period,store\n2026-01,2026-01,spotify\n");
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file: noColumn });
    assert.equal(r.status, "rejected");
    if (r.status === "rejected") {
      assert.equal(r.report.errors[0]?.line, 1);
      assert.match(r.report.errors[0]?.message ?? "", /lacks the columns territory, upc, isrc/);
    }
    const noPeriod = reportFile(
      "Country,ISRC,Content Type,Owned Views,Partner Revenue\nUS,QZABC2600001,UGC,1,0.1\n",
      "video.csv",
    );
    const v = await importRoyalties(t().db, { tenantId: tenant.id, format: "video-ugc", file: noPeriod });
    assert.equal(v.status, "rejected");
    if (v.status === "rejected") assert.match(v.report.errors[0]?.message ?? "", /--period/);
    await assert.rejects(
      importRoyalties(t().db, { tenantId: tenant.id, format: "nope", file: SAMPLES.backline }),
      /unknown format nope/,
    );
    await assert.rejects(
      importRoyalties(t().db, {
        tenantId: tenant.id,
        format: "backline",
        file: SAMPLES.backline,
        period: "2026-13",
      }),
      /not a month/,
    );
    await assert.rejects(
      importRoyalties(t().db, {
        tenantId: tenant.id,
        format: "streaming-monthly",
        file: noPeriod,
        store: "nostore",
      }),
      /unknown store nostore/,
    );
  });

  test("progress is reported as the file is read", async () => {
    const header =
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency\n";
    let body = "";
    for (let i = 0; i < 3000; i++)
      body += `2026-08,2026-07,deezer,BR,012345000027,QZABC2600003,stream,${i},0.${i},0,0.${i},BRL\n`;
    const file = reportFile(header + body);
    const seen: { bytes: number; lines: number; totalBytes: number }[] = [];
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file,
      progressEveryMs: 0,
      onProgress: (p) => seen.push(p),
    });
    assert.equal(r.status, "completed");
    const last = seen.at(-1);
    assert.ok(last);
    assert.equal(last.lines, 3000);
    assert.equal(last.bytes, last.totalBytes);
    assert.ok(seen.length >= 2);
  });
});
