import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import type { Account } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedRelease } from "./support/ddex.ts";
import {
  anonClaims,
  keyClaims,
  seedAccount,
  seedTenant,
  seedUser,
  tenantServiceClaims,
  userClaims,
} from "./support/seed.ts";

/**
 * The catalogue transfer's tables (migrations 0037 and 0038, docs/catalogue.md) met in SQL as each
 * kind of caller: a client reads its own accounts' transfers, uploads and jobs (whoever may read
 * the account's catalogue), the tenant's service key its tenant's, and no client role writes any
 * of them — which release came by transfer decides whether the lead time applies, so no account
 * may mark its own. Writes run in transactions that are rolled back.
 */

type Outcome = number | "denied";

const TABLES = [
  "internal.transfers",
  "internal.transferred_releases",
  "internal.transfer_uploads",
  "internal.transfer_jobs",
] as const;

describeEachEngine("rls: the catalogue transfer's tables (migrations 0037, 0038)", (t) => {
  const callers = new Map<string, Claims>();
  let a: Account;

  /** One of each row for `account`: a transfer, a release it brought, an upload and a job. */
  async function seedTransfer(account: Account): Promise<void> {
    const release = await seedRelease(t().db, account.id, { title: "Transferred", upc: "012345000010" }, []);
    await t().db.asService(async (tx) => {
      const transfer = (
        await tx.query<{ id: string }>(
          "insert into internal.transfers (tenant_id, account_id, source, format) values ($1, $2, 'catalogue.csv', 'csv') returning id",
          [account.tenant_id, account.id],
        )
      ).rows[0]?.id;
      await tx.query(
        "insert into internal.transferred_releases (release_id, account_id, transfer_id, source_key) values ($1, $2, $3, 'upc:012345000010')",
        [release.id, account.id, transfer],
      );
      const upload = (
        await tx.query<{ id: string }>(
          `insert into internal.transfer_uploads (tenant_id, account_id, content_type, token_hash, max_bytes, upload_expires_at)
           values ($1, $2, 'text/csv', 'x', 1024, now() + interval '15 minutes') returning id`,
          [account.tenant_id, account.id],
        )
      ).rows[0]?.id;
      await tx.query(
        "insert into internal.transfer_jobs (tenant_id, account_id, upload_id, dry_run, source_format) values ($1, $2, $3, true, 'csv')",
        [account.tenant_id, account.id, upload],
      );
    });
  }

  before(async () => {
    const db = t().db;
    const tenant = await seedTenant(db);
    const other = await seedTenant(db);
    a = await seedAccount(db, tenant, "A");
    const b = await seedAccount(db, tenant, "B");
    const c = await seedAccount(db, other, "C");
    await seedTransfer(a);
    await seedTransfer(c);
    callers.set("ownerA", userClaims(await seedUser(db, tenant, [{ account: a, role: "owner" }])));
    callers.set("viewerA", userClaims(await seedUser(db, tenant, [{ account: a, role: "viewer" }])));
    callers.set("keyA", keyClaims(a));
    callers.set("ownerB", userClaims(await seedUser(db, tenant, [{ account: b, role: "owner" }])));
    callers.set("ownerC", userClaims(await seedUser(db, other, [{ account: c, role: "owner" }])));
    callers.set("anon", anonClaims(tenant));
    callers.set("tenantService", tenantServiceClaims(tenant));
    callers.set("tamperedUser", { ...(callers.get("ownerA") as Claims), tenant_id: other.id });
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
      if (asDbError(error)?.sqlstate === "42501") return "denied";
      throw error;
    }
  }

  // Each table holds one row of A's and one of C's (another tenant's).
  const READS: Record<string, Outcome> = {
    ownerA: 1,
    viewerA: 1,
    keyA: 1,
    ownerB: 0,
    ownerC: 1,
    anon: "denied",
    tenantService: 1,
    tamperedUser: 0,
  };

  for (const table of TABLES) {
    describe(table, () => {
      for (const [caller, expected] of Object.entries(READS)) {
        test(`select as ${caller}: ${expected}`, async () => {
          const n = await as(
            caller,
            async (tx) =>
              (
                await tx.query<{ n: number }>(
                  // transfer_uploads grants its columns but the file's content and token hash.
                  `select count(account_id)::int as n from ${table}`,
                )
              ).rows[0]?.n ?? 0,
          );
          assert.equal(n, expected);
        });
      }
      for (const caller of Object.keys(READS)) {
        test(`delete and update as ${caller}: refused or nothing`, async () => {
          for (const sql of [`delete from ${table}`, `update ${table} set account_id = account_id`]) {
            const changed = await as(caller, async (tx) => (await tx.query(sql)).rowCount ?? 0);
            assert.ok(changed === "denied" || changed === 0, `${sql}: ${changed}`);
          }
        });
      }
    });
  }

  test("no client marks its own release as transferred (which would lift the lead time)", async () => {
    const release = await seedRelease(t().db, a.id, { title: "New", upc: "012345000027" }, []);
    for (const caller of ["ownerA", "keyA", "tenantService"]) {
      const inserted = await as(
        caller,
        async (tx) =>
          (
            await tx.query(
              "insert into internal.transferred_releases (release_id, account_id, source_key) values ($1, $2, 'upc:012345000027')",
              [release.id, a.id],
            )
          ).rowCount ?? 0,
      );
      assert.equal(inserted, "denied", caller);
    }
  });

  test("a content column of an upload is the operator's only", async () => {
    const seen = await as(
      "ownerA",
      async (tx) => (await tx.query("select content from internal.transfer_uploads")).rowCount ?? 0,
    );
    assert.equal(seen, "denied");
  });
});
