import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { type IssuedKey, issueTestKey, publicApi } from "./support/public-api.ts";
import { SAMPLES, seedSampleCatalog } from "./support/royalties.ts";
import { seedAccount, seedUser } from "./support/seed.ts";

/**
 * Voiding a royalty import (src/royalties/void.ts, docs/royalties.md "Voiding an import") through
 * the admin API over real HTTP: the import's lines stay, each answered by a reversing line, and
 * every total (GET /royalties, its groups, internal.royalty_totals) and analytics figure
 * (release_analytics, track_analytics) is exactly what it was without the import; royalties.voided
 * and a notification go out; the same file imports again; a second void is 409; another tenant's
 * key voids nothing.
 */

type Obj = Record<string, unknown>;

const HEADER =
  "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency";
/** The wrong report: lines on rows the sample already filled (spotify US 2026-02), on new rows, and unmatched. */
const WRONG = [
  HEADER,
  "2026-03,2026-02,spotify,US,012345000010,QZABC2600001,stream,700,2.8,0.84,1.96,USD",
  "2026-03,2026-02,apple_music,US,012345000010,QZABC2600002,download,2,1.98,0.59,1.39,USD",
  "2026-04,2026-03,deezer,FR,012345000027,QZABC2600003,stream,333,0.123456789012,0.000000000001,0.123456789011,EUR",
  "2026-04,2026-03,youtube_content_id,US,012345000010,QZABC2600002,ugc,5000,1.5,0,1.5,USD",
  "2026-04,2026-03,spotify,US,190000000015,GBXYZ2600099,stream,50,0.2,0.06,0.14,USD",
  "",
].join("\n");

describeEachEngine("royalties: void an import", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let keys: TenantKeys;
  let otherKeys: TenantKeys;
  let account: Account;
  let key: IssuedKey;
  let userId: string;

  before(async () => {
    // Webhook endpoints at a local address (the subscription test).
    app = await startApp(t(), { WEBHOOK_ALLOW_PRIVATE: "true" });
    ({ tenant, keys } = await tenantWithKeys(t()));
    ({ keys: otherKeys } = await tenantWithKeys(t()));
    account = await seedAccount(t().db, tenant, "A");
    await seedSampleCatalog(t().db, account);
    userId = (await seedUser(t().db, tenant, [{ account, role: "owner" }])).id;
    key = await issueTestKey(t().db, account);
    // What was there before the wrong import, and must be there after its void.
    const r = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: SAMPLES.backline,
    });
    assert.equal(r.status, "completed");
  });
  after(async () => {
    await app?.close();
  });

  const rows = <T extends Obj>(sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);

  const admin = async (
    method: string,
    path: string,
    options: { key?: string; json?: unknown; csv?: string } = {},
  ) => {
    const k = options.key ?? keys.service_role_key;
    const headers: Record<string, string> = { apikey: k, authorization: `Bearer ${k}` };
    let body: string | undefined;
    if (options.csv !== undefined) {
      headers["content-type"] = "text/csv";
      body = options.csv;
    } else if (options.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.json);
    }
    const res = await fetch(`${app.url}/admin/v1${path}`, { method, headers, ...(body ? { body } : {}) });
    return { status: res.status, body: (await res.json()) as Obj };
  };

  const upload = async (csv: string) => {
    const r = await admin("POST", "/royalty-imports?format=backline", { csv });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return (r.body.import as Obj).id as string;
  };

  /** Every figure an account or the operator reads: the public API's, the totals and the analytics. */
  const figures = async () => {
    const api = publicApi(app.url, key.secret);
    const listed = await api<Obj>("GET", "/royalties?limit=100");
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    const list = listed.body;
    const byStore = (await api<Obj>("GET", "/royalties?group_by=store,period&limit=100")).body;
    return {
      total: list.total,
      totals: list.totals,
      lines: (list.data as Obj[]).map((l) => l.id).sort(),
      groups: byStore.data,
      royaltyTotals: await rows(
        `select release_id, period_start::text, store, territory, currency, lines::int, units::text, streams::text,
           downloads::text, ugc_uses::text, gross::text, fees::text, net::text
         from internal.royalty_totals where tenant_id = $1
         order by release_id, period_start, store, territory nulls last, currency`,
        [tenant.id],
      ),
      releaseAnalytics: await rows(
        `select id, release_id, period_start::text, store, currency, streams::text, downloads::text, ugc_uses::text,
           other_units::text, revenue::text, gross_revenue::text, fees::text, royalty_lines::text
         from public.release_analytics where account_id = $1 order by release_id, period_start, store, currency`,
        [account.id],
      ),
      trackAnalytics: await rows(
        `select id, track_id, period_start::text, store, currency, streams::text, downloads::text, ugc_uses::text,
           other_units::text, revenue::text, gross_revenue::text, fees::text, royalty_lines::text
         from public.track_analytics where account_id = $1 order by track_id, period_start, store, currency`,
        [account.id],
      ),
    };
  };

  test("a voided import leaves every total and analytics figure exactly as before, its lines kept and reversed; the same file imports again", async () => {
    const before = await figures();
    const id = await upload(WRONG);
    const during = await figures();
    assert.equal(during.total, Number(before.total) + 4, "4 of its 5 lines matched");
    assert.notDeepEqual(during.releaseAnalytics, before.releaseAnalytics);

    const voided = await admin("POST", `/royalty-imports/${id}/void`, {
      json: { reason: "Wrong period: the store sent March again" },
    });
    assert.equal(voided.status, 200, JSON.stringify(voided.body));
    assert.deepEqual(
      [voided.body.id, voided.body.status, voided.body.void_reason, voided.body.voided_via],
      [id, "voided", "Wrong period: the store sent March again", "admin_api"],
    );
    assert.ok(Date.parse(String(voided.body.voided_at)) > 0);
    assert.equal(voided.body.lines_total, 5, "the import's report stays as it was, for audit");

    assert.deepEqual(await figures(), before, "every figure is back where it was");
    // The lines stay, each answered once by its reversal: the import nets to exactly zero.
    const [audit] = await rows<{
      lines: number;
      reversals: number;
      units: string;
      net: string;
      gross: string;
    }>(
      `select count(*) filter (where reverses_line_id is null)::int as lines,
         count(*) filter (where reverses_line_id is not null)::int as reversals,
         sum(units)::text as units, sum(net)::text as net, sum(gross)::text as gross
       from internal.royalty_lines where import_id = $1`,
      [id],
    );
    assert.deepEqual(
      [audit?.lines, audit?.reversals, audit?.units, Number(audit?.net), Number(audit?.gross)],
      [5, 5, "0", 0, 0],
    );
    const unpaired = await rows(
      `select l.id from internal.royalty_lines l where l.import_id = $1 and l.reverses_line_id is null
         and not exists (select 1 from internal.royalty_lines r where r.reverses_line_id = l.id
           and r.net = -l.net and r.units = -l.units and r.account_id is not distinct from l.account_id)`,
      [id],
    );
    assert.deepEqual(unpaired, []);

    // royalties.voided for the account, with what no longer counts; a notification for its members.
    const events = await rows<{ data: { object: Obj & { totals: Obj[] } } }>(
      "select data from internal.events where type = 'royalties.voided' and account_id = $1",
      [account.id],
    );
    assert.equal(events.length, 1);
    const object = events[0]?.data.object;
    assert.deepEqual(
      [object?.id, object?.status, object?.lines, object?.void_reason],
      [id, "voided", 4, "Wrong period: the store sent March again"],
    );
    assert.deepEqual(
      object?.totals.map((x) => [x.currency, x.lines, x.units, x.net]),
      [
        ["EUR", 1, 333, "0.123456789011"],
        ["USD", 3, 5702, "4.85"],
      ],
    );
    const notes = await rows<{ kind: string; body: string }>(
      `select kind, body from public.notifications where user_id = $1 and data ->> 'import_id' = $2
       order by created_at, kind`,
      [userId, id],
    );
    assert.deepEqual(
      notes.map((n) => n.kind),
      ["royalties.imported", "royalties.voided"],
    );
    assert.match(
      String(notes[1]?.body),
      /4 royalty lines for 2026-02 to 2026-03 no longer count .*: Wrong period/,
    );

    // Voided twice: 409, nothing changes.
    const twice = await admin("POST", `/royalty-imports/${id}/void`, { json: { reason: "Again" } });
    assert.equal(twice.status, 409);
    assert.equal(twice.body.code, "already_voided");
    assert.deepEqual(await figures(), before);
    const shown = await admin("GET", `/royalty-imports/${id}`);
    assert.deepEqual(
      [shown.body.status, shown.body.void_reason],
      ["voided", "Wrong period: the store sent March again"],
    );

    // The same file is no longer a duplicate: it imports again, and counts once.
    const again = await admin("POST", "/royalty-imports?format=backline", { csv: WRONG });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.equal(again.body.status, "completed");
    const reimported = await figures();
    assert.deepEqual(
      [reimported.total, reimported.totals, reimported.groups],
      [during.total, during.totals, during.groups],
    );
    // And voided in its turn, everything is back again.
    const newId = (again.body.import as Obj).id as string;
    assert.equal(
      (await admin("POST", `/royalty-imports/${newId}/void`, { json: { reason: "Test" } })).status,
      200,
    );
    assert.deepEqual(
      { ...(await figures()), releaseAnalytics: [], trackAnalytics: [] },
      { ...before, releaseAnalytics: [], trackAnalytics: [] },
    );
  });

  test("refusals: a rejected import 409 not_voidable, a missing or blank reason 400, unknown ids 404, another tenant's key 404 and the anon key 403 — nothing voided", async () => {
    const bad = await admin("POST", "/royalty-imports?format=backline", {
      csv: `${HEADER}\n2026-03,2026-02,spotify,US,012345000010,QZABC2600001,stream,-1,0.1,0,0.1,USD\n`,
    });
    assert.equal(bad.status, 422);
    const rejected = (bad.body.import as Obj).id as string;
    const r1 = await admin("POST", `/royalty-imports/${rejected}/void`, { json: { reason: "x" } });
    assert.deepEqual([r1.status, r1.body.code], [409, "not_voidable"]);

    const id = await upload(
      `${HEADER}\n2026-06,2026-05,spotify,SE,012345000010,QZABC2600001,stream,10,0.04,0.01,0.03,EUR\n`,
    );
    const before = await figures();
    const cases: [string, { json?: unknown; key?: string; path?: string }, number, string, string?][] = [
      ["no body", {}, 400, "invalid_request"],
      ["no reason", { json: {} }, 400, "invalid_request", "reason"],
      ["a blank reason", { json: { reason: "   " } }, 400, "invalid_request", "reason"],
      ["an unknown field", { json: { reason: "x", force: true } }, 400, "invalid_request", "force"],
      ["a reason too long", { json: { reason: "x".repeat(2001) } }, 400, "invalid_request", "reason"],
      ["an unknown id", { json: { reason: "x" }, path: randomUUID() }, 404, "not_found"],
      ["a malformed id", { json: { reason: "x" }, path: "not-an-id" }, 404, "not_found", "id"],
      ["another tenant's key", { json: { reason: "x" }, key: otherKeys.service_role_key }, 404, "not_found"],
      ["the anon key", { json: { reason: "x" }, key: keys.anon_key }, 403, "service_role_required"],
    ];
    for (const [what, c, status, code, param] of cases) {
      const r = await admin("POST", `/royalty-imports/${c.path ?? id}/void`, {
        ...(c.json !== undefined ? { json: c.json } : {}),
        ...(c.key ? { key: c.key } : {}),
      });
      assert.deepEqual([r.status, r.body.code], [status, code], `${what}: ${JSON.stringify(r.body)}`);
      if (param) assert.equal(r.body.param, param, what);
    }
    const [still] = await rows<{ status: string }>(
      "select status from internal.royalty_imports where id = $1",
      [id],
    );
    assert.equal(still?.status, "completed");
    assert.deepEqual(await figures(), before);
    assert.equal(
      (
        await rows(
          "select 1 from internal.events where type = 'royalties.voided' and data -> 'object' ->> 'id' = $1",
          [id],
        )
      ).length,
      0,
    );
  });

  test("two voids of one import at the same moment: one voids it, the other is 409 already_voided; it is reversed once", async () => {
    const id = await upload(
      `${HEADER}\n2026-07,2026-06,spotify,NO,012345000010,QZABC2600001,stream,9,0.09,0.01,0.08,NOK\n`,
    );
    const answers = await Promise.all(
      [1, 2].map(() => admin("POST", `/royalty-imports/${id}/void`, { json: { reason: "Twice at once" } })),
    );
    assert.deepEqual(
      answers.map((a) => a.status).sort(),
      [200, 409],
      JSON.stringify(answers.map((a) => a.body)),
    );
    assert.equal(answers.find((a) => a.status === 409)?.body.code, "already_voided");
    const [counts] = await rows<{ reversals: number; events: number }>(
      `select (select count(*)::int from internal.royalty_lines where import_id = $1 and reverses_line_id is not null) as reversals,
         (select count(*)::int from internal.events where type = 'royalties.voided' and data -> 'object' ->> 'id' = $1::text) as events`,
      [id],
    );
    assert.deepEqual(counts, { reversals: 1, events: 1 });
    const nok = await rows(
      "select 1 from internal.royalty_totals where tenant_id = $1 and currency = 'NOK'",
      [tenant.id],
    );
    assert.deepEqual(nok, [], "the row the import alone made is gone");
  });

  test("royalty lines are never changed in place, even by the operator's own role: a void appends", async () => {
    const [line] = await rows<{ id: string }>(
      "select id::text as id from internal.royalty_lines where tenant_id = $1 limit 1",
      [tenant.id],
    );
    assert.ok(line);
    const refused = await t()
      .db.asService((tx) => tx.query("update internal.royalty_lines set net = 0 where id = $1", [line.id]))
      .then(
        () => "updated",
        (error: unknown) => asDbError(error)?.sqlstate,
      );
    assert.equal(refused, "42501");
  });

  test("royalties.voided is an event webhooks subscribe to, with the royalties:read scope", async () => {
    const url = "http://127.0.0.1:9/backline";
    const withScope = publicApi(app.url, key.secret);
    const created = await withScope<Obj>("POST", "/webhooks", { url, events: ["royalties.voided"] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body.events, ["royalties.voided"]);
    const catalogOnly = await issueTestKey(t().db, account, { scopes: ["catalog:read", "webhooks:manage"] });
    const refused = await publicApi(app.url, catalogOnly.secret)<Obj>("POST", "/webhooks", {
      url,
      events: ["royalties.voided"],
    });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, "insufficient_scope");
    const openapi = (await (await fetch(`${app.url}/api/public/v1/openapi.json`)).json()) as Obj;
    assert.ok(
      JSON.stringify(openapi).includes("RoyaltiesVoidedEvent"),
      "the event is in the OpenAPI document",
    );
  });
});
