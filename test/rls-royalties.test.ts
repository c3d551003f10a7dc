import assert from "node:assert/strict";
import { before, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey } from "./support/public-api.ts";
import { SAMPLES, seedSampleCatalog } from "./support/royalties.ts";
import {
  anonClaims,
  seedAccount,
  seedTenant,
  seedUser,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * The database-level security of migration 0011 (royalties), met directly in SQL as each kind of
 * caller: who reads royalty lines, totals, imports and the analytics the imports fill, and that
 * no client writes any of them. Writes run in transactions that are rolled back.
 */

type Outcome = number | "denied";

describeEachEngine("rls: royalties (migration 0011)", (t) => {
  const callers = new Map<string, Claims>();
  let lineA = "";

  before(async () => {
    const db = t().db;
    const tenant = await seedTenant(db);
    const other = await seedTenant(db);
    const a = await seedAccount(db, tenant, "A");
    const b = await seedAccount(db, tenant, "B");
    const c = await seedAccount(db, other, "C");
    await seedSampleCatalog(db, a);
    await seedSampleCatalog(db, c);
    // The same sample imported for both tenants: each tenant's lines match its own catalog only.
    for (const tn of [tenant, other]) {
      const r = await importRoyalties(db, { tenantId: tn.id, format: "backline", file: SAMPLES.backline });
      assert.equal(r.status, "completed");
    }
    const keyOf = async (scopes: string[]) => {
      const key = await issueTestKey(db, a, { scopes });
      return {
        role: "authenticated",
        tenant_id: tenant.id,
        account_id: a.id,
        account_role: "member",
        api_key_id: key.id,
      } as Claims;
    };
    callers.set("ownerA", userClaims(await seedUser(db, tenant, [{ account: a, role: "owner" }])));
    callers.set("viewerA", userClaims(await seedUser(db, tenant, [{ account: a, role: "viewer" }])));
    callers.set("ownerB", userClaims(await seedUser(db, tenant, [{ account: b, role: "owner" }])));
    callers.set("ownerC", userClaims(await seedUser(db, other, [{ account: c, role: "owner" }])));
    callers.set("royaltyKeyA", await keyOf(["royalties:read"]));
    callers.set("catalogKeyA", await keyOf(["catalog:read", "catalog:write"]));
    callers.set("anon", anonClaims(tenant));
    callers.set("tenantService", tenantServiceClaims(tenant));
    // A user's token naming the other tenant reaches nothing.
    const ownerA = callers.get("ownerA") as Claims;
    callers.set("tamperedUser", { ...ownerA, tenant_id: other.id });
    lineA =
      (
        await db.asService((tx) =>
          tx.query<{ id: string }>(
            "select id::text from internal.royalty_lines where account_id = $1 order by id limit 1",
            [a.id],
          ),
        )
      ).rows[0]?.id ?? "";
  });

  async function as(caller: string, fn: (tx: Tx) => Promise<number>): Promise<Outcome> {
    const claims = callers.get(caller);
    assert.ok(claims, caller);
    try {
      return await t().db.withRequestContext(claims, async (tx) => {
        const n = await fn(tx);
        throw Object.assign(new Error("rollback"), { result: n });
      });
    } catch (error) {
      const result = (error as { result?: number }).result;
      if (result !== undefined) return result;
      const code = asDbError(error)?.sqlstate;
      if (code === "42501") return "denied";
      throw error;
    }
  }
  const count = (table: string) => async (tx: Tx) =>
    (await tx.query<{ n: number }>(`select count(*)::int as n from ${table}`)).rows[0]?.n ?? 0;

  const READS: [string, Record<string, Outcome>][] = [
    // 6 matched lines of account A; tenant_service also sees the unmatched line; ownerC sees tenant 2's own.
    [
      "internal.royalty_lines",
      {
        ownerA: 6,
        viewerA: 6,
        royaltyKeyA: 6,
        catalogKeyA: 0,
        ownerB: 0,
        ownerC: 6,
        anon: "denied",
        tenantService: 7,
        tamperedUser: 0,
      },
    ],
    [
      "internal.royalty_totals",
      {
        ownerA: 6,
        viewerA: 6,
        royaltyKeyA: 6,
        catalogKeyA: 0,
        ownerB: 0,
        ownerC: 6,
        anon: "denied",
        tenantService: 6,
        tamperedUser: 0,
      },
    ],
    [
      "internal.royalty_imports",
      {
        ownerA: "denied",
        royaltyKeyA: "denied",
        ownerB: "denied",
        anon: "denied",
        tenantService: 1,
      },
    ],
    [
      "public.release_analytics",
      {
        ownerA: 6,
        viewerA: 6,
        // Analytics carry revenue: a key without royalties:read sees none.
        catalogKeyA: 0,
        royaltyKeyA: 6,
        ownerB: 0,
        ownerC: 6,
        anon: "denied",
        tenantService: 6,
        tamperedUser: 0,
      },
    ],
    [
      "public.track_analytics",
      { ownerA: 5, viewerA: 5, ownerB: 0, ownerC: 5, anon: "denied", tenantService: 5, tamperedUser: 0 },
    ],
  ];

  for (const [table, expected] of READS) {
    test(`select on ${table}`, async () => {
      const got: Record<string, Outcome> = {};
      for (const caller of Object.keys(expected)) got[caller] = await as(caller, count(table));
      assert.deepEqual(got, expected);
    });
  }

  test("no client writes royalty lines or totals: insert, update and delete are refused or reach nothing", async () => {
    for (const caller of ["ownerA", "royaltyKeyA", "tenantService"]) {
      assert.equal(
        await as(
          caller,
          async (tx) =>
            (await tx.query("update internal.royalty_lines set net = 0 where id = $1", [lineA])).rowCount,
        ),
        "denied",
        caller,
      );
      assert.equal(
        await as(
          caller,
          async (tx) =>
            (await tx.query("delete from internal.royalty_lines where id = $1", [lineA])).rowCount,
        ),
        "denied",
        caller,
      );
      assert.equal(
        await as(caller, async (tx) => (await tx.query("delete from internal.royalty_totals")).rowCount),
        "denied",
        caller,
      );
      assert.equal(
        await as(
          caller,
          async (tx) =>
            (
              await tx.query(
                `insert into internal.royalty_lines (import_id, tenant_id, line_number, reporting_period, period_start,
                   period_end, store, isrc, usage_type, units, gross, fees, net, currency)
                 select import_id, tenant_id, 99, reporting_period, period_start, period_end, store, isrc, usage_type,
                   units, gross, fees, net, currency from internal.royalty_lines where id = $1`,
                [lineA],
              )
            ).rowCount,
        ),
        "denied",
        caller,
      );
    }
    // Analytics: clients read, only the tenant's service (and the operator) write.
    assert.equal(
      await as(
        "ownerA",
        async (tx) => (await tx.query("update public.release_analytics set streams = 0")).rowCount,
      ),
      "denied",
    );
  });
});
