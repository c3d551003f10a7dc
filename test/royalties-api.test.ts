import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { assertProblem, type IssuedKey, issueTestKey, publicApi } from "./support/public-api.ts";
import {
  reportFile,
  SAMPLES,
  type SampleCatalog,
  seedDeliveredRelease,
  seedSampleCatalog,
} from "./support/royalties.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

/**
 * GET /royalties and GET /releases/{id}/royalties over real HTTP with real keys, after real
 * imports: lines, filters, groupings, totals per currency as decimal strings, pagination, the
 * scope, and another account's key seeing nothing.
 */

interface Sums {
  currency: string;
  lines: number;
  units: number;
  gross: string;
  fees: string;
  net: string;
  [k: string]: unknown;
}
interface RoyaltyList {
  object: string;
  data: Record<string, unknown>[];
  total: number;
  has_more: boolean;
  totals: Sums[];
}

describeEachEngine("royalties: public API", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let account: Account;
  let catalog: SampleCatalog;
  let key: IssuedKey;
  let otherKey: IssuedKey;
  let noScopeKey: IssuedKey;
  let otherRelease: string;
  const api = (k: IssuedKey) => publicApi(app.url, k.secret);

  before(async () => {
    app = await startApp(t());
    tenant = await seedTenant(t().db);
    account = await seedAccount(t().db, tenant, "A");
    catalog = await seedSampleCatalog(t().db, account);
    const other = await seedAccount(t().db, tenant, "B");
    // Delivered: an import matches only releases that went to the stores.
    otherRelease = (
      await seedDeliveredRelease(t().db, other.id, { title: "B side", upc: "085100000037" }, [
        { title: "B", isrc: "QZBBB2600001", duration: 100, track_number: 1 },
      ])
    ).id;
    key = await issueTestKey(t().db, account);
    otherKey = await issueTestKey(t().db, other);
    noScopeKey = await issueTestKey(t().db, account, { scopes: ["catalog:read"] });
    for (const [format, file] of Object.entries(SAMPLES)) {
      const r = await importRoyalties(t().db, { tenantId: tenant.id, format, file });
      assert.equal(r.status, "completed");
    }
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(
        [
          "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency",
          "2026-04,2026-03,spotify,US,012345000010,QZABC2600001,stream,100,0.4,0.12,0.28,USD",
          "2026-04,2026-03,spotify,US,085100000037,QZBBB2600001,stream,999,9,1,8,USD",
        ].join("\n"),
      ),
    });
    assert.equal(r.status, "completed");
  });

  after(async () => {
    await app?.close();
  });

  test("GET /royalties lists the account's lines, newest month first, with totals per currency", async () => {
    const res = await api(key)<RoyaltyList>("GET", "/royalties?limit=100");
    assert.equal(res.status, 200);
    const body = res.body;
    assert.equal(body.object, "list");
    // backline 6 matched, streaming-monthly 4, video-ugc 3, and 1 of the last report.
    assert.equal(body.total, 14);
    assert.equal(body.data.length, 14);
    assert.equal(body.has_more, false);
    assert.equal(body.data[0]?.period_start, "2026-03-01");
    const line = body.data[0] as Record<string, unknown>;
    assert.equal(line.object, "royalty_line");
    assert.equal(line.net, "0.28");
    assert.equal(typeof line.gross, "string");
    assert.equal(line.units, 100);
    assert.deepEqual(
      body.totals.map((x) => [x.currency, x.lines, x.net]),
      [
        ["EUR", 5, "12.191"],
        ["GBP", 2, "15.52"],
        ["USD", 7, "17.044567891234"],
      ],
    );
    for (const l of body.data) assert.notEqual(l.release_id, otherRelease);
    // Newest month first, then the newest line: ids compare as numbers, not as text ("9" > "14").
    const order = body.data.map((l) => [String(l.period_start), BigInt(String(l.id))] as const);
    const sorted = [...order].sort(([pa, ia], [pb, ib]) =>
      pa === pb ? (ib > ia ? 1 : ib < ia ? -1 : 0) : pb.localeCompare(pa),
    );
    assert.deepEqual(order, sorted);
  });

  test("filters: period, store, territory, release, currency; pagination", async () => {
    const q = (s: string) => api(key)<RoyaltyList>("GET", `/royalties?${s}`);
    assert.equal((await q("from=2026-03")).body.total, 1);
    assert.equal((await q("to=2026-02")).body.total, 13);
    assert.equal((await q("from=2026-01&to=2026-01")).body.total, 0);
    const spotify = await q("store=spotify&limit=100");
    assert.ok(spotify.body.data.every((l) => l.store === "spotify"));
    assert.equal(spotify.body.total, 7);
    const gb = await q("territory=GB");
    assert.deepEqual(
      gb.body.data.map((l) => l.currency),
      ["GBP", "GBP"],
    );
    const daybreak = await q(`release_id=${catalog.daybreak}&limit=100`);
    assert.ok(daybreak.body.data.every((l) => l.release_id === catalog.daybreak));
    assert.equal(daybreak.body.total, 4);
    const eur = await q("currency=EUR");
    assert.deepEqual(
      eur.body.totals.map((x) => x.currency),
      ["EUR"],
    );
    const page1 = await q("limit=5");
    const page3 = await q("limit=5&offset=10");
    assert.equal(page1.body.has_more, true);
    assert.equal(page3.body.data.length, 4);
    assert.equal(page3.body.has_more, false);
    const ids = new Set([...page1.body.data, ...page3.body.data].map((l) => l.id));
    assert.equal(ids.size, 9);
  });

  test("starting_after pages the lines by keyset, as offsets do; a cursor that is not the caller's line is refused", async () => {
    const q = (query: string) => api(key)<RoyaltyList>("GET", `/royalties?${query}`);
    const all = (await q("limit=100")).body.data.map((l) => String(l.id));
    assert.ok(all.length > 4);
    const seen: string[] = [];
    let page = await q("limit=3");
    seen.push(...page.body.data.map((l) => String(l.id)));
    while (page.body.has_more) {
      page = await q(`limit=3&starting_after=${seen.at(-1)}`);
      assert.equal(page.status, 200, JSON.stringify(page.body));
      seen.push(...page.body.data.map((l) => String(l.id)));
    }
    assert.deepEqual(seen, all, "the keyset pages are the offset listing, in order, once each");
    assert.equal(page.body.total, undefined, "a keyset page sums nothing");
    assert.equal(page.body.totals, undefined);
    const filtered = await q(`store=spotify&limit=100&starting_after=${all[0]}`);
    assert.ok(filtered.body.data.every((l) => l.store === "spotify"));

    assertProblem(await q("starting_after=999999999"), 400, "resource_missing");
    assertProblem(await q(`starting_after=${all[0]}&offset=3`), 400, "invalid_parameter");
    assertProblem(await q(`starting_after=${all[0]}&group_by=store`), 400, "invalid_parameter");
    assertProblem(await q("starting_after=abc"), 400, "invalid_parameter");
  });

  test("group_by=store sums per store and currency; group_by=period,release", async () => {
    const res = await api(key)<RoyaltyList>("GET", "/royalties?group_by=store&limit=100");
    assert.equal(res.status, 200);
    const spotifyUsd = res.body.data.find((g) => g.store === "spotify" && g.currency === "USD");
    assert.deepEqual(spotifyUsd, {
      object: "royalty_group",
      store: "spotify",
      currency: "USD",
      lines: 2,
      units: 1600,
      streams: 1600,
      downloads: 0,
      ugc_uses: 0,
      gross: "6.4",
      fees: "1.92",
      net: "4.48",
    });
    const yt = res.body.data.find((g) => g.store === "youtube_content_id");
    assert.equal(yt?.ugc_uses, 12500);
    const sumLines = res.body.data.reduce((n, g) => n + Number(g.lines), 0);
    assert.equal(sumLines, 14);
    const byPeriod = await api(key)<RoyaltyList>("GET", "/royalties?group_by=period,release&currency=USD");
    const order = (a: unknown[], b: unknown[]) => `${a[0]}${a[1]}`.localeCompare(`${b[0]}${b[1]}`);
    assert.deepEqual(
      byPeriod.body.data.map((g) => [g.period, g.release_id, g.lines]),
      [
        ["2026-02", catalog.nightDrive, 5],
        ["2026-02", catalog.daybreak, 1],
        ["2026-03", catalog.nightDrive, 1],
      ].sort(order),
    );
  });

  test("GET /releases/{id}/royalties: one release; another account's release is 404", async () => {
    const res = await api(key)<RoyaltyList>(
      "GET",
      `/releases/${catalog.daybreak}/royalties?group_by=territory`,
    );
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.body.data.map((g) => [g.territory, g.currency, g.net]),
      [
        ["FR", "EUR", "1.386"],
        ["SE", "EUR", "4.893"],
        ["US", "USD", "9.03"],
        [null, "EUR", "0.34"],
      ],
    );
    assertProblem(await api(key)("GET", `/releases/${otherRelease}/royalties`), 404, "resource_missing");
    const b = await api(otherKey)<RoyaltyList>("GET", `/releases/${otherRelease}/royalties`);
    assert.equal(b.body.total, 1);
    assert.equal(b.body.totals[0]?.net, "8");
  });

  test("another account's key sees only its own; a key without royalties:read is refused", async () => {
    const b = await api(otherKey)<RoyaltyList>("GET", "/royalties");
    assert.equal(b.body.total, 1);
    assert.equal(b.body.data[0]?.release_id, otherRelease);
    assertProblem(await api(noScopeKey)("GET", "/royalties"), 403, "insufficient_scope");
    assert.equal((await publicApi(app.url, undefined)("GET", "/royalties")).status, 401);
  });

  test("bad query parameters are 400 with the parameter named", async () => {
    const bad = await api(key)("GET", "/royalties?group_by=artist&from=2026-13&territory=usa");
    const p = assertProblem(bad, 400, "invalid_parameter");
    const params = (p.errors ?? []).map((e) => e.param).sort();
    assert.deepEqual(params, ["from", "group_by", "territory"]);
    assertProblem(await api(key)("GET", "/royalties?sort=net"), 400, "invalid_parameter");
    for (const path of [
      "/royalties?from=2026-05&to=2026-02",
      `/releases/${catalog.daybreak}/royalties?from=2026-05&to=2026-02`,
    ]) {
      const reversed = assertProblem(await api(key)("GET", path), 400, "invalid_parameter");
      assert.deepEqual(
        (reversed.errors ?? []).map((e) => e.param),
        ["to"],
        path,
      );
    }
  });
});
