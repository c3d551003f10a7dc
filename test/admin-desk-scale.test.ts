import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ACCOUNTS_PAGE_SQL,
  DELIVERIES_PAGE_SQL,
  JOBS_PAGE_SQL,
  REVIEW_COUNTS_SQL,
  REVIEW_PAGE_SQL,
  TAKEDOWNS_PAGE_SQL,
} from "../src/admin/queries.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { expectStatus } from "./support/public-api.ts";
import { wasmTierUp } from "./support/wasm-baseline.ts";

/**
 * The desk's lists at 100,000 releases (issue 16: "stays fast at 100,000 releases"): a tenant with
 * 100,000 releases (10,000 of them waiting for review), 100,000 deliveries (1,000 in error),
 * 100,000 finished jobs and 500 old dead ones, 2,000 accounts. Each list query's plan walks its index
 * (migration 0022) — no sequential scan of releases, deliveries or jobs — for the first page and
 * for a page deep in the list; and over HTTP a deep page costs about what the first does. The
 * figures are printed (`# …` lines); the time bound is loose (a shared 2-core machine), the plan
 * check is the strict one.
 */

// Seeding 100,000 releases is heavy work for the database: the optimising compiler pays here.
wasmTierUp();

const RELEASES = 100_000;
const BOUND_MS = 2_000;
const ACCOUNTS = 2_000;

type Obj = Record<string, unknown>;
// biome-ignore lint/suspicious/noExplicitAny: EXPLAIN's JSON and the answers are read freely.
type Any = any;

/** Every node of a plan, depth first. */
function nodes(plan: Any): Any[] {
  return [plan, ...((plan.Plans as Any[] | undefined) ?? []).flatMap(nodes)];
}

describeEachEngine("admin API desk at 100,000 releases", (t) => {
  const db = () => t().db;
  let app: RunningApp;
  let a: { tenant: Tenant; keys: TenantKeys };
  const store = "dsk_scale";

  before(async () => {
    const started = Date.now();
    a = await tenantWithKeys(t());
    const b = await tenantWithKeys(t());
    const step = (name: string, since: number) =>
      console.log(`# ${db().kind}: ${name} ${Date.now() - since} ms`);
    // Seeded as the schema owner with triggers off (session_replication_role = replica): the rows
    // are what the pipeline leaves, without a history row, event and check per release, which would
    // make the seeding minutes long. The tenant columns triggers fill are given here.
    await t().owner.transaction(
      async (tx) => {
        await tx.query("set local session_replication_role = replica");
        await tx.query(
          "insert into internal.stores (code, name, settings) values ($1, 'Scale store', '{\"adapter\": \"sandbox\"}') on conflict do nothing",
          [store],
        );
        let t0 = Date.now();
        for (const tenant of [a.tenant, b.tenant]) {
          const n = tenant.id === a.tenant.id ? RELEASES : 1_000;
          t0 = Date.now();
          await tx.query(
            "insert into internal.accounts (tenant_id, name, created_at) select $1, 'Account ' || g, now() - g * interval '1 hour' from generate_series(1, $2::int) g",
            [tenant.id, ACCOUNTS],
          );
          if (tenant.id === a.tenant.id) step("accounts", t0);
          t0 = Date.now();
          await tx.query(
            "insert into public.artist_profiles (account_id, name) select id, 'Artist of ' || name from internal.accounts where tenant_id = $1",
            [tenant.id],
          );
          if (tenant.id === a.tenant.id) step("artists", t0);
          // Every 10th release waits for review; the others were delivered. Submitted a second apart.
          t0 = Date.now();
          await tx.query(
            `with artists as (
             select array_agg(ap.id order by ap.id) as ids, array_agg(ap.account_id order by ap.id) as accounts
             from public.artist_profiles ap join internal.accounts x on x.id = ap.account_id where x.tenant_id = $1)
           insert into public.releases (account_id, artist_id, title, status, submitted_at, created_at)
           select artists.accounts[1 + g % $3::int], artists.ids[1 + g % $3::int], 'Release ' || g,
                  case when g % 10 = 0 then 'in_review' else 'delivered' end,
                  now() - g * interval '1 second', now() - g * interval '1 second'
           from generate_series(1, $2::int) g, artists`,
            [tenant.id, n, ACCOUNTS],
          );
          if (tenant.id === a.tenant.id) step("releases", t0);
          t0 = Date.now();
          await tx.query(
            `insert into internal.release_deliveries (release_id, account_id, tenant_id, store, status, message, created_at)
           select r.id, r.account_id, $1, $2, case when row_number() over () % 100 = 0 then 'error' else 'live' end,
                  null, r.created_at
           from public.releases r join internal.accounts x on x.id = r.account_id where x.tenant_id = $1 and r.status = 'delivered'`,
            [tenant.id, store],
          );
          if (tenant.id === a.tenant.id) step("deliveries", t0);
          // The dead jobs first: old ones, behind 100,000 newer finished jobs.
          t0 = Date.now();
          await tx.query(
            `insert into internal.jobs (kind, payload, status, attempts, last_error, finished_at, tenant_id)
           select 'release.deliver', jsonb_build_object('release_id', r.id), 'dead', 10, 'Error: gone', now(), $1
           from public.releases r join internal.accounts x on x.id = r.account_id
           where x.tenant_id = $1 and r.status = 'delivered' limit 500`,
            [tenant.id],
          );
          if (tenant.id === a.tenant.id) step("jobs (dead)", t0);
          t0 = Date.now();
          await tx.query(
            `insert into internal.jobs (kind, payload, status, attempts, finished_at, tenant_id)
           select 'delivery.send', jsonb_build_object('delivery_id', d.id), 'succeeded', 1, now(), $1
           from internal.release_deliveries d join internal.accounts x on x.id = d.account_id where x.tenant_id = $1`,
            [tenant.id],
          );
          if (tenant.id === a.tenant.id) step("jobs (succeeded)", t0);
          t0 = Date.now();
          await tx.query(
            `insert into public.takedown_requests (release_id, account_id, reason, status, created_at)
           select r.id, r.account_id, 'Bulk', 'completed', r.created_at
           from public.releases r join internal.accounts x on x.id = r.account_id
           where x.tenant_id = $1 and r.status = 'delivered' limit 2000`,
            [tenant.id],
          );
          if (tenant.id === a.tenant.id) step("takedowns", t0);
        }
      },
      { readOnly: false },
    );
    // As autovacuum would: the planner's statistics of the new rows.
    await t().owner.transaction(
      (tx) =>
        tx.exec(
          "analyze public.releases; analyze internal.release_deliveries; analyze internal.jobs; analyze internal.accounts; analyze public.takedown_requests",
        ),
      { readOnly: false },
    );
    console.log(
      `# seeded ${RELEASES} releases (+ deliveries, jobs) in ${Date.now() - started} ms on ${db().kind}`,
    );
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  const explain = (sql: string, params: unknown[]) =>
    db().asService(async (tx) => {
      const r = await tx.query<{ "QUERY PLAN": Any }>(`explain (format json) ${sql}`, params);
      const plan = r.rows[0]?.["QUERY PLAN"];
      return (typeof plan === "string" ? JSON.parse(plan) : plan)[0].Plan;
    });

  /** The plan uses one of `indexes` and reads none of `tables` sequentially. */
  function walks(plan: Any, index: string | string[], tables: string[]) {
    const all = nodes(plan);
    const names = typeof index === "string" ? [index] : index;
    assert.ok(
      all.some((n) => names.includes(n["Index Name"])),
      `the plan uses ${names.join(" or ")}: ${JSON.stringify(all.map((n) => [n["Node Type"], n["Index Name"] ?? n["Relation Name"], n["Plan Rows"], n["Total Cost"], n.Filter, n["Index Cond"]]))}`,
    );
    for (const n of all) {
      assert.ok(
        !(n["Node Type"] === "Seq Scan" && tables.includes(n["Relation Name"])),
        `no sequential scan of ${n["Relation Name"]}`,
      );
    }
  }

  const admin = async (path: string) => {
    const started = performance.now();
    const res = await fetch(`${app.url}/admin/v1${path}`, { headers: { apikey: a.keys.service_role_key } });
    const body = (await res.json()) as Any;
    const ms = performance.now() - started;
    assert.equal(res.status, 200, JSON.stringify(body));
    return { body, ms };
  };

  describe("plans", () => {
    test("the review queue walks releases_review_queue; its counts read that index only", async () => {
      const cursor = (
        await db().asService((tx) =>
          tx.query<{ at: string; id: string }>(
            `select r.submitted_at::text as at, r.id from public.releases r join internal.accounts x on x.id = r.account_id
             where x.tenant_id = $1 and r.status = 'in_review' order by r.submitted_at, r.id offset 9000 limit 1`,
            [a.tenant.id],
          ),
        )
      ).rows[0] as { at: string; id: string };
      walks(
        await explain(REVIEW_PAGE_SQL, [a.tenant.id, false, null, null, 101, false]),
        "releases_review_queue",
        ["releases"],
      );
      walks(
        await explain(REVIEW_PAGE_SQL, [a.tenant.id, true, cursor.at, cursor.id, 101, false]),
        "releases_review_queue",
        ["releases"],
      );
      // The counts read an index of the waiting statuses (this one, or releases_status of migration 0003).
      walks(
        await explain(REVIEW_COUNTS_SQL, [a.tenant.id]),
        ["releases_review_queue", "releases_status"],
        ["releases"],
      );
    });

    test("deliveries walk release_deliveries_desk, errors first, with and without a cursor or filter", async () => {
      const deep = (
        await db().asService((tx) =>
          tx.query<{ created_at: string; id: string }>(
            `select d.created_at::text as created_at, d.id from internal.release_deliveries d
             join internal.accounts x on x.id = d.account_id where x.tenant_id = $1 and d.status = 'error'
             order by d.created_at desc, d.id desc offset 500 limit 1`,
            [a.tenant.id],
          ),
        )
      ).rows[0] as { created_at: string; id: string };
      const tables = ["release_deliveries"];
      walks(
        await explain(DELIVERIES_PAGE_SQL, [a.tenant.id, null, null, null, null, null, null, null, 101]),
        "release_deliveries_desk",
        tables,
      );
      walks(
        await explain(DELIVERIES_PAGE_SQL, [
          a.tenant.id,
          null,
          null,
          null,
          null,
          false,
          deep.created_at,
          deep.id,
          101,
        ]),
        "release_deliveries_desk",
        tables,
      );
      walks(
        await explain(DELIVERIES_PAGE_SQL, [a.tenant.id, "error", null, null, null, null, null, null, 101]),
        "release_deliveries_desk",
        tables,
      );
    });

    test("jobs walk jobs_tenant_status; takedowns and accounts their indexes", async () => {
      // A state holding most of the tenant's jobs may walk the primary key backwards instead (also
      // newest first, and the filter keeps nearly every row); the dead ones, old and few behind
      // 100,000 newer jobs, are found through jobs_tenant_status.
      const either = ["jobs_tenant_status", "jobs_pkey"];
      walks(await explain(JOBS_PAGE_SQL, [a.tenant.id, "succeeded", null, null, 101]), either, ["jobs"]);
      walks(await explain(JOBS_PAGE_SQL, [a.tenant.id, "succeeded", null, "50000", 101]), either, ["jobs"]);
      walks(await explain(JOBS_PAGE_SQL, [a.tenant.id, "dead", null, null, 101]), "jobs_tenant_status", [
        "jobs",
      ]);
      // Takedown requests are few beside releases (2,000 here): the planner may read them whole and
      // sort them, which the time check below bounds; it never scans the releases.
      const takedowns = nodes(await explain(TAKEDOWNS_PAGE_SQL, [a.tenant.id, null, null, null, 101]));
      assert.ok(!takedowns.some((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "releases"));
      walks(
        await explain(ACCOUNTS_PAGE_SQL, [a.tenant.id, null, null, null, 101]),
        "accounts_tenant_created",
        [],
      );
    });
  });

  test("over HTTP: a page deep in each list costs about what the first does", async () => {
    const figures: string[] = [];
    const check = async (name: string, first: string, next: (body: Any) => string) => {
      await admin(first); // warm: the first call of a process pays its own costs
      const one = await admin(first);
      // Walk a few pages in, then measure a page deep in the list.
      let body = one.body;
      let deepMs = 0;
      for (let i = 0; i < 5 && body.has_more; i++) {
        const r = await admin(next(body));
        body = r.body;
        deepMs = r.ms;
      }
      figures.push(`${name}: first page ${one.ms.toFixed(0)} ms, page 6 ${deepMs.toFixed(0)} ms`);
      assert.ok(one.ms < BOUND_MS && deepMs < BOUND_MS, figures.at(-1));
      return one.body;
    };
    const q = await check(
      "reviews (100 with checks)",
      "/reviews",
      (b) => `/reviews?starting_after=${b.data.at(-1).id}`,
    );
    assert.equal(q.counts.total, RELEASES / 10);
    assert.equal(q.data.length, 100);
    const d = await check(
      "deliveries",
      "/deliveries",
      (b) => `/deliveries?starting_after=${b.data.at(-1).id}`,
    );
    assert.equal(d.data[0].status, "error");
    await check(
      "jobs (succeeded)",
      "/jobs?state=succeeded",
      (b) => `/jobs?state=succeeded&starting_after=${b.data.at(-1).id}`,
    );
    await check(
      "jobs (dead, old)",
      "/jobs?limit=50",
      (b) => `/jobs?limit=50&starting_after=${b.data.at(-1).id}`,
    );
    await check("takedowns", "/takedowns", (b) => `/takedowns?starting_after=${b.data.at(-1).id}`);
    await check(
      "accounts",
      "/accounts?limit=5",
      (b) => `/accounts?limit=5&starting_after=${b.data.at(-1).id}`,
    );
    // The deepest page of the review queue, by its cursor.
    const last = (
      await db().asService((tx) =>
        tx.query<Obj>(
          `select r.id from public.releases r join internal.accounts x on x.id = r.account_id
           where x.tenant_id = $1 and r.status = 'in_review' order by r.submitted_at desc, r.id desc offset 50 limit 1`,
          [a.tenant.id],
        ),
      )
    ).rows[0] as { id: string };
    const tail = await admin(`/reviews?starting_after=${last.id}`);
    figures.push(`reviews: the last page ${tail.ms.toFixed(0)} ms`);
    assert.equal(expectStatus({ status: 200, headers: new Headers(), body: tail.body }, 200).data.length, 50);
    assert.equal(tail.body.has_more, false);
    console.log(figures.map((f) => `# ${db().kind}: ${f}`).join("\n"));
  });
});
