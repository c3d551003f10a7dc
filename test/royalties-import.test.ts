import assert from "node:assert/strict";
import fs from "node:fs";
import { before, test } from "node:test";
import { importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { WEBHOOK_EVENTS } from "../src/webhooks/events.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  countLines,
  reportFile,
  SAMPLES,
  type SampleCatalog,
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
      { currency: "EUR", lines: 3, units: "970", gross: "3.64", fees: "1.088", net: "2.552" },
      { currency: "GBP", lines: 1, units: "3", gross: "20.97", fees: "6.29", net: "14.68" },
      { currency: "USD", lines: 3, units: "1910", gross: "21.7", fees: "6.51", net: "15.19" },
    ]);
    assert.deepEqual(rep.unmatched, [{ isrc: "GBXYZ2600099", upc: "190000000015", lines: 1, units: "50" }]);
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
        ["apple_music", "USD", "400", "0", "1.960000", "1"],
        ["itunes", "GBP", "0", "3", "14.680000", "1"],
        ["spotify", "EUR", "800", "0", "2.072000", "1"],
        ["spotify", "USD", "1500", "0", "4.200000", "1"],
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
        ["spotify", "EUR", "800", "2.072000"],
        ["spotify", "USD", "1500", "4.200000"],
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
      { currency: "EUR", lines: 2, units: "920", gross: "3.44", fees: "1.028", net: "2.412" },
      { currency: "GBP", lines: 1, units: "3", gross: "20.97", fees: "6.29", net: "14.68" },
      { currency: "USD", lines: 3, units: "1910", gross: "21.7", fees: "6.51", net: "15.19" },
    ]);
    // The payload is what the documented webhook schema says.
    const schema = WEBHOOK_EVENTS.find((e) => e.type === "royalties.imported")?.schema;
    assert.ok(schema);
    schema.parse({
      id: event.id,
      type: "royalties.imported",
      created: new Date().toISOString(),
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
      { currency: "EUR", lines: 3, units: "1253", gross: "13.97", fees: "4.191", net: "9.779" },
      { currency: "GBP", lines: 1, units: "2000", gross: "1.2", fees: "0.36", net: "0.84" },
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
        units: "12840",
        gross: "1.578567891234",
        fees: "0",
        net: "1.578567891234",
      },
    ]);
    assert.deepEqual(r.report.unmatched, [{ isrc: "GBXYZ2600099", upc: null, lines: 1, units: "40" }]);
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

  test("an ISRC on two releases: the line's UPC picks the release, else the oldest release", async () => {
    const other = await seedAccount(t().db, tenant, "Other");
    const compilation = await seedSampleCatalogCompilation(other.id);
    const file = reportFile(
      [
        "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
        "2026-05,2026-04,tidal,NO,085100000037,QZABC2600001,stream,10,0.1,0,0.1,NOK",
        "2026-05,2026-04,tidal,NO,,QZABC2600001,stream,20,0.2,0,0.2,NOK",
      ].join("\n"),
    );
    const r = await importRoyalties(t().db, { tenantId: tenant.id, format: "backline", file });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    const rows = await lines(r.report.id);
    assert.equal(rows[0]?.release_id, compilation);
    assert.equal(rows[0]?.account_id, other.id);
    assert.equal(rows[1]?.release_id, catalog.nightDrive);
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
        [account.id, 1],
        [other.id, 1],
      ].sort(),
    );
  });

  async function seedSampleCatalogCompilation(accountId: string): Promise<string> {
    const { seedRelease } = await import("./support/ddex.ts");
    const r = await seedRelease(t().db, accountId, { title: "Compilation", upc: "085100000037" }, [
      { title: "Night Drive", isrc: "QZABC2600001", duration: 200, track_number: 1 },
    ]);
    return r.id;
  }

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
      batchSize: 500,
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
