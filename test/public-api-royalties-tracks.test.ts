import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { importRoyalties } from "../src/royalties/import.ts";
import { voidImport } from "../src/royalties/void.ts";
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
 * GET /royalties?group_by=track (issue 38, item 6): each track's figures per currency, with its
 * title, ISRC and release, and the sales of a release as a whole as the release's group with no
 * track. Per-track figures add up exactly to the per-release groups and to the totals, under every
 * filter; they agree with the lines themselves; a voided import is left out as everywhere; another
 * account's tracks never appear; the scope is required.
 */

type Obj = Record<string, unknown>;
interface RoyaltyList {
  object: string;
  data: Obj[];
  total: number;
  has_more: boolean;
  totals: Obj[];
}

const INTS = ["lines", "units", "streams", "downloads", "ugc_uses"] as const;
const MONEY = ["gross", "fees", "net"] as const;

/** Exact decimal arithmetic on the API's strings (12 decimals at most, as stored). */
const SCALE = 12;
const toUnits = (s: string): bigint => {
  const negative = s.startsWith("-");
  const [whole = "0", frac = ""] = (negative ? s.slice(1) : s).split(".");
  const v = BigInt(whole) * 10n ** BigInt(SCALE) + BigInt(frac.padEnd(SCALE, "0") || "0");
  return negative ? -v : v;
};
const fromUnits = (v: bigint): string => {
  const negative = v < 0n;
  const a = negative ? -v : v;
  const whole = a / 10n ** BigInt(SCALE);
  const frac = (a % 10n ** BigInt(SCALE)).toString().padStart(SCALE, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${frac ? `.${frac}` : ""}`;
};

/** Sums rows (groups or lines) by `key`, every figure exact: counts as numbers, money as strings. */
function sumBy(rows: Obj[], key: (r: Obj) => string): Map<string, Obj> {
  const acc = new Map<string, { ints: number[]; money: bigint[] }>();
  for (const r of rows) {
    const k = key(r);
    const a = acc.get(k) ?? { ints: INTS.map(() => 0), money: MONEY.map(() => 0n) };
    INTS.forEach((f, i) => {
      // A line has no "lines": it is one; its units count as its usage type's.
      const v =
        r.object === "royalty_line"
          ? f === "lines"
            ? 1
            : f === "units"
              ? Number(r.units)
              : f === `${r.usage_type}s` || (f === "ugc_uses" && r.usage_type === "ugc")
                ? Number(r.units)
                : 0
          : Number(r[f]);
      a.ints[i] = (a.ints[i] ?? 0) + v;
    });
    MONEY.forEach((f, i) => {
      a.money[i] = (a.money[i] ?? 0n) + toUnits(String(r[f]));
    });
    acc.set(k, a);
  }
  const out = new Map<string, Obj>();
  for (const [k, a] of acc) {
    const o: Obj = {};
    INTS.forEach((f, i) => {
      o[f] = a.ints[i];
    });
    MONEY.forEach((f, i) => {
      o[f] = fromUnits(a.money[i] ?? 0n);
    });
    out.set(k, o);
  }
  return out;
}
const figures = (r: Obj): Obj => Object.fromEntries([...INTS, ...MONEY].map((f) => [f, r[f]]));

describeEachEngine("royalties: per track (group_by=track)", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let account: Account;
  let catalog: SampleCatalog;
  let key: IssuedKey;
  let royaltiesOnlyKey: IssuedKey;
  let otherKey: IssuedKey;
  let noScopeKey: IssuedKey;
  let otherRelease: string;
  let otherTrack: string;
  let voidedOnlyTrack: string;
  const api = (k: IssuedKey) => publicApi(app.url, k.secret);

  /** Every page of `path` (limit 7, to cross pages), and the first page's totals. */
  async function all(k: IssuedKey, path: string): Promise<{ data: Obj[]; totals: Obj[]; total: number }> {
    const data: Obj[] = [];
    let first: RoyaltyList | undefined;
    for (let offset = 0; ; offset += 7) {
      const sep = path.includes("?") ? "&" : "?";
      const res = await api(k)<RoyaltyList>("GET", `${path}${sep}limit=7&offset=${offset}`);
      assert.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
      first ??= res.body;
      assert.equal(res.body.total, first.total, "the same total on every page");
      data.push(...res.body.data);
      if (!res.body.has_more) break;
    }
    assert.ok(first);
    assert.equal(data.length, first.total);
    return { data, totals: first.totals, total: first.total };
  }

  before(async () => {
    app = await startApp(t());
    tenant = await seedTenant(t().db);
    account = await seedAccount(t().db, tenant, "A");
    catalog = await seedSampleCatalog(t().db, account);
    const third = await seedDeliveredRelease(t().db, account.id, { title: "Voided", upc: "012345000034" }, [
      { title: "Only voided", isrc: "QZABC2600004", duration: 100, track_number: 1 },
    ]);
    voidedOnlyTrack = third.tracks[0]?.id ?? "";
    const other = await seedAccount(t().db, tenant, "B");
    const b = await seedDeliveredRelease(t().db, other.id, { title: "B side", upc: "085100000037" }, [
      { title: "B", isrc: "QZBBB2600001", duration: 100, track_number: 1 },
    ]);
    otherRelease = b.id;
    otherTrack = b.tracks[0]?.id ?? "";
    key = await issueTestKey(t().db, account);
    royaltiesOnlyKey = await issueTestKey(t().db, account, { scopes: ["royalties:read"] });
    otherKey = await issueTestKey(t().db, other);
    noScopeKey = await issueTestKey(t().db, account, { scopes: ["catalog:read"] });
    for (const [format, file] of Object.entries(SAMPLES)) {
      const r = await importRoyalties(t().db, { tenantId: tenant.id, format, file });
      assert.equal(r.status, "completed");
    }
    const head =
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency";
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(
        [
          head,
          "2026-04,2026-03,spotify,US,012345000010,QZABC2600001,stream,100,0.4,0.12,0.28,USD",
          "2026-04,2026-03,spotify,SE,012345000010,QZABC2600002,stream,7,0.000000000007,0,0.000000000007,EUR",
          "2026-04,2026-03,apple_music,US,012345000010,QZABC2600002,stream,3,0.1,0.03,-0.05,USD",
          "2026-04,2026-03,itunes,US,012345000027,,download,2,2.58,0.774,1.806,USD",
          "2026-04,2026-03,spotify,US,085100000037,QZBBB2600001,stream,999,9,1,8,USD",
        ].join("\n"),
      ),
    });
    assert.equal(r.status, "completed");
    const voided = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: reportFile(
        [
          head,
          "2026-04,2026-03,spotify,US,012345000034,QZABC2600004,stream,5000,50,15,35,USD",
          "2026-04,2026-03,spotify,US,012345000010,QZABC2600001,stream,5000,50,15,35,USD",
        ].join("\n"),
      ),
    });
    assert.equal(voided.status, "completed");
    await voidImport(t().db, voided.status === "completed" ? voided.report.id : "", {
      reason: "sent twice",
      via: "cli",
      tenantId: tenant.id,
    });
  });

  after(async () => {
    await app?.close();
  });

  test("each track's id, title, ISRC and release, per currency; a release-level sale is its release's group with no track", async () => {
    const { data, totals } = await all(key, "/royalties?group_by=track");
    const night = catalog.tracks.QZABC2600001;
    const usd: Obj | undefined = data.find((g) => g.track_id === night && g.currency === "USD");
    assert.equal(typeof usd?.lines, "number");
    assert.equal(typeof usd?.units, "number");
    assert.deepEqual(usd, {
      object: "royalty_group",
      release_id: catalog.nightDrive,
      release_title: "Night Drive",
      track_id: night,
      track_title: "Night Drive",
      isrc: "QZABC2600001",
      currency: "USD",
      // backline's 1500 streams, video-ugc's 10000 + 2500 uses, the 100 streams here; not the voided 5000.
      lines: 4,
      units: 14100,
      streams: 1600,
      downloads: 0,
      ugc_uses: 12500,
      gross: "7.884567891234",
      fees: "1.92",
      net: "5.964567891234",
    });
    for (const g of data) {
      assert.equal(g.object, "royalty_group");
      for (const f of INTS) assert.ok(Number.isSafeInteger(g[f]), `${f} is an integer`);
      for (const f of MONEY)
        assert.match(String(g[f]), /^-?\d+(\.\d*[1-9])?$/, `${f} is a trimmed decimal string`);
      assert.match(String(g.currency), /^[A-Z]{3}$/);
    }
    // The release-level sales (UPC only): Night Drive's download in GBP, Daybreak's in EUR (streaming-monthly) and USD.
    const releaseLevel = data.filter((g) => g.track_id === null);
    assert.deepEqual(
      releaseLevel.map((g) => [g.release_title, g.track_title, g.isrc, g.currency, g.net]).sort(),
      [
        ["Daybreak", null, null, "EUR", "4.893"],
        ["Daybreak", null, null, "USD", "1.806"],
        ["Night Drive", null, null, "GBP", "14.68"],
      ],
    );
    // The negative correction and the 12th decimal are kept exactly.
    const neonEur = data.find((g) => g.isrc === "QZABC2600002" && g.currency === "EUR");
    assert.ok(neonEur);
    assert.match(String(neonEur.net), /\.\d*7$/);
    // A track whose only lines were voided has no group; the voided lines count nowhere.
    assert.ok(!data.some((g) => g.track_id === voidedOnlyTrack));
    // Key order: release, then track (release-level last), then currency.
    const keys = data.map((g) => `${g.release_id}/${g.track_id ?? "~"}/${g.currency}`);
    assert.equal(new Set(keys).size, keys.length, "one group per release, track and currency");
    // Everything adds up, per currency, to the totals.
    const byCurrency = sumBy(data, (g) => String(g.currency));
    assert.deepEqual(
      Object.fromEntries(byCurrency),
      Object.fromEntries(totals.map((x) => [x.currency, figures(x)])),
    );
    // A key with royalties:read only reads the titles too.
    const only = await all(royaltiesOnlyKey, "/royalties?group_by=track");
    assert.deepEqual(only.data, data);
  });

  const FILTERS = [
    "",
    "from=2026-03",
    "to=2026-02",
    "from=2026-02&to=2026-02",
    "store=spotify",
    "store=itunes",
    "territory=US",
    "territory=SE",
    "currency=EUR",
    "currency=USD&store=spotify&from=2026-02",
  ];

  test("per-track figures add up exactly to the per-release groups and the totals, and to the lines, under every filter", async () => {
    const releases = [catalog.nightDrive, catalog.daybreak];
    const queries = [
      ...FILTERS.map((f) => `/royalties?${f}`),
      ...releases.map((r) => `/royalties?release_id=${r}`),
      ...releases.map((r) => `/releases/${r}/royalties?`),
      `/releases/${catalog.nightDrive}/royalties?currency=USD&to=2026-02`,
    ];
    for (const q of queries) {
      const tracks = await all(key, `${q}&group_by=track`);
      const byRelease = await all(key, `${q}&group_by=release`);
      const lines = await all(key, q.replace(/\?$/, ""));
      assert.deepEqual(tracks.totals, byRelease.totals, `${q}: the same totals`);
      const perRelease = sumBy(tracks.data, (g) => `${g.release_id}/${g.currency}`);
      assert.deepEqual(
        Object.fromEntries(perRelease),
        Object.fromEntries(byRelease.data.map((g) => [`${g.release_id}/${g.currency}`, figures(g)])),
        `${q}: tracks add up to their releases`,
      );
      assert.deepEqual(
        Object.fromEntries(sumBy(tracks.data, (g) => String(g.currency))),
        Object.fromEntries(tracks.totals.map((x) => [x.currency, figures(x)])),
        `${q}: tracks add up to the totals`,
      );
      assert.deepEqual(
        Object.fromEntries(sumBy(lines.data, (l) => `${l.track_id ?? "-"}/${l.release_id}/${l.currency}`)),
        Object.fromEntries(
          tracks.data.map((g) => [`${g.track_id ?? "-"}/${g.release_id}/${g.currency}`, figures(g)]),
        ),
        `${q}: each track's figures are its lines'`,
      );
      // What the filter says, each group is.
      const params = new URLSearchParams(q.split("?")[1]);
      const release = q.match(/releases\/([^/]+)\/royalties/)?.[1] ?? params.get("release_id");
      for (const g of tracks.data) {
        if (release) assert.equal(g.release_id, release);
        if (params.get("currency")) assert.equal(g.currency, params.get("currency"));
      }
    }
    // Filters narrow: Neon's Swedish streams are the 7 at the 12th decimal, and fewer groups answer.
    const se = await all(key, "/royalties?group_by=track&territory=SE");
    const everywhere = await all(key, "/royalties?group_by=track");
    assert.ok(se.data.length < everywhere.data.length);
    assert.ok(se.data.some((g) => g.isrc === "QZABC2600002" && g.currency === "EUR"));
    const eur = await all(key, "/royalties?group_by=track&currency=EUR");
    assert.ok(eur.data.length > 0 && eur.data.every((g) => g.currency === "EUR"));
  });

  test("track combines with the other keys, in key order, and pages", async () => {
    const res = await api(key)<RoyaltyList>("GET", "/royalties?group_by=period,track&currency=USD&limit=100");
    assert.equal(res.status, 200);
    const keys = res.body.data.map((g) => [g.period, g.release_id, g.track_id]);
    for (const g of res.body.data) {
      assert.match(String(g.period), /^\d{4}-\d{2}$/);
      assert.ok("track_title" in g && "isrc" in g && "release_title" in g);
    }
    const periods = keys.map((k) => String(k[0]));
    assert.deepEqual(periods, [...periods].sort(), "months in order");
    const march = res.body.data.filter((g) => g.period === "2026-03");
    assert.deepEqual(march.map((g) => [g.track_title ?? "(the release)", g.net]).sort(), [
      ["(the release)", "1.806"],
      ["Neon", "-0.05"],
      ["Night Drive", "0.28"],
    ]);
    const page = await api(key)<RoyaltyList>("GET", "/royalties?group_by=track&limit=2&offset=2");
    assert.equal(page.body.data.length, 2);
    assert.equal(page.body.has_more, page.body.total > 4);
    const beyond = await api(key)<RoyaltyList>("GET", "/royalties?group_by=track&offset=500");
    assert.equal(beyond.body.data.length, 0);
    assert.equal(beyond.body.total, page.body.total, "the total past the last page too");
  });

  test("with territory or store and period as keys too, each group is its lines' sum", async () => {
    const lines = await all(key, "/royalties?");
    for (const [groupBy, keyOf] of [
      ["territory,track", (r: Obj) => `${r.territory}`],
      ["period,store,track", (r: Obj) => `${String(r.period ?? r.period_start).slice(0, 7)}/${r.store}`],
    ] as const) {
      for (const filter of ["", "&currency=USD", "&territory=US"]) {
        const groups = await all(key, `/royalties?group_by=${groupBy}${filter}`);
        const asked = new URLSearchParams(filter);
        const of = lines.data.filter(
          (l) =>
            (!asked.get("currency") || l.currency === asked.get("currency")) &&
            (!asked.get("territory") || l.territory === asked.get("territory")),
        );
        const id = (r: Obj) => `${keyOf(r)}/${r.track_id ?? "-"}/${r.release_id}/${r.currency}`;
        assert.deepEqual(
          Object.fromEntries(groups.data.map((g) => [id(g), figures(g)])),
          Object.fromEntries(sumBy(of, id)),
          `group_by=${groupBy}${filter}`,
        );
        assert.deepEqual(
          Object.fromEntries(sumBy(groups.data, (g) => String(g.currency))),
          Object.fromEntries(groups.totals.map((x) => [x.currency, figures(x)])),
        );
      }
    }
  });

  test("another account's tracks never appear; each account sees its own", async () => {
    const mine = await all(key, "/royalties?group_by=track");
    for (const g of mine.data) {
      assert.notEqual(g.track_id, otherTrack);
      assert.notEqual(g.release_id, otherRelease);
      assert.notEqual(g.isrc, "QZBBB2600001");
    }
    const asked = await all(key, `/royalties?group_by=track&release_id=${otherRelease}`);
    assert.equal(asked.total, 0);
    assert.deepEqual(asked.totals, []);
    assertProblem(
      await api(key)("GET", `/releases/${otherRelease}/royalties?group_by=track`),
      404,
      "resource_missing",
    );
    const theirs = await all(otherKey, "/royalties?group_by=track");
    assert.deepEqual(
      theirs.data.map((g) => [
        g.track_id,
        g.track_title,
        g.isrc,
        g.release_title,
        g.currency,
        g.units,
        g.net,
      ]),
      [[otherTrack, "B", "QZBBB2600001", "B side", "USD", 999, "8"]],
    );
  });

  test("a key without royalties:read is refused; a bad grouping is 400", async () => {
    assertProblem(await api(noScopeKey)("GET", "/royalties?group_by=track"), 403, "insufficient_scope");
    assertProblem(
      await api(noScopeKey)("GET", `/releases/${catalog.nightDrive}/royalties?group_by=track`),
      403,
      "insufficient_scope",
    );
    assert.equal((await publicApi(app.url, undefined)("GET", "/royalties?group_by=track")).status, 401);
    const bad = assertProblem(await api(key)("GET", "/royalties?group_by=tracks"), 400, "invalid_parameter");
    assert.deepEqual(
      (bad.errors ?? []).map((e) => e.param),
      ["group_by"],
    );
    const lines = await api(key)<RoyaltyList>("GET", "/royalties?limit=1");
    assertProblem(
      await api(key)("GET", `/royalties?group_by=track&starting_after=${lines.body.data[0]?.id}`),
      400,
      "invalid_parameter",
    );
  });
});
