import assert from "node:assert/strict";
import path from "node:path";
import { before, test } from "node:test";
import { ImportError, importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { dsrMissingFails, dsrPath, dsrSkip } from "./support/dsr.ts";
import { ROOT } from "./support/process.ts";
import { seedSampleCatalog } from "./support/royalties.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

/** The ddex-dsr format through the whole import: streamed, bulk-loaded, matched, idempotent. */
describeEachEngine("royalties: ddex-dsr import", (t) => {
  let tenant: Tenant;
  let account: Account;

  before(async () => {
    tenant = await seedTenant(t().db);
    account = await seedAccount(t().db, tenant, "Night Owl");
    await seedSampleCatalog(t().db, account);
  });

  test("the sample: 6 lines, 5 matched by ISRC or the release's ICPN, totals per currency; once only", async () => {
    const file = path.join(ROOT, "docs/formats/ddex-dsr.tsv");
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "ddex-dsr",
      file,
      store: "spotify",
    });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    assert.deepEqual(
      [r.report.lines_total, r.report.lines_matched, r.report.lines_unmatched, r.report.account_ids],
      [6, 5, 1, [account.id]],
    );
    assert.deepEqual(r.report.totals, [
      { currency: "EUR", lines: 4, units: 2100, gross: "8", fees: "0", net: "8" },
      { currency: "GBP", lines: 2, units: 3, gross: "14.97", fees: "0", net: "14.97" },
    ]);
    assert.deepEqual(r.report.unmatched, [
      { isrc: "QZABC2699999", upc: "4006381333931", reason: "no_match", lines: 1, units: 100 },
    ]);
    const again = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "ddex-dsr",
      file,
      store: "spotify",
    });
    assert.equal(again.status, "duplicate");
    const events = await t().db.asService((tx) =>
      tx.query("select 1 from internal.events where account_id = $1 and type = 'royalties.imported'", [
        account.id,
      ]),
    );
    assert.equal(events.rowCount, 1);
  });

  test("without --store, a sender no store has is refused before reading, naming its party id", async () => {
    await assert.rejects(
      importRoyalties(t().db, {
        tenantId: tenant.id,
        format: "ddex-dsr",
        file: path.join(ROOT, "docs/formats/ddex-dsr.tsv"),
      }),
      (e: unknown) =>
        e instanceof ImportError &&
        /no store has the DDEX party id PADPIDA2026000001X/.test(e.message) &&
        /say --store/.test(e.message),
    );
  });

  test("DDEX's Basic Audio sample imports whole (nothing of ours in it: all unmatched)", {
    // Under CI a missing sample fails here rather than skipping.
    skip: dsrMissingFails ? false : dsrSkip,
  }, async () => {
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "ddex-dsr",
      file: dsrPath("unlimited"),
      store: "amazon_music",
    });
    assert.equal(r.status, "completed");
    if (r.status !== "completed") return;
    assert.deepEqual([r.report.lines_total, r.report.lines_matched], [15, 0]);
    assert.equal(r.report.totals[0]?.units, 3160);
  });
});
