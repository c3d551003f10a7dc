// The caller memo of the row-level security helpers (migration "rules at statement speed",
// docs/database.md, "Asking who the caller is once"): an answer is reused only for the same
// claims, in the same statement and transaction, with no change to the tables it is read from.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { asDbError } from "../src/db/errors.ts";
import type { Claims, Tx } from "../src/db/types.ts";
import { describeEachEngine } from "./support/db.ts";
import { type SeedUser, seedAccount, seedTenant, seedUser, userClaims } from "./support/seed.ts";

interface Fixture {
  tenantId: string;
  accountA: string;
  accountB: string;
  alice: SeedUser; // owner of A
  bob: SeedUser; // owner of B
  artistA: string;
  releaseA: string;
}

/** Switches the transaction to `claims` (as Db.withRequestContext's first statement does). */
async function actAs(tx: Tx, claims: Claims): Promise<void> {
  await tx.query("select set_config('role', $1, true), set_config('request.jwt.claims', $2, true)", [
    claims.role,
    JSON.stringify(claims),
  ]);
}

async function releasesSeen(tx: Tx): Promise<string[]> {
  return (await tx.query<{ id: string }>("select id from public.releases order by id")).rows.map((r) => r.id);
}

async function errorOf(p: Promise<unknown>): Promise<string | undefined> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  return e === undefined ? undefined : (asDbError(e)?.sqlstate ?? String(e));
}

describeEachEngine("the caller memo", (t) => {
  let f: Fixture;

  before(async () => {
    const tenant = await seedTenant(t().db);
    const a = await seedAccount(t().db, tenant, "Label A");
    const b = await seedAccount(t().db, tenant, "Label B");
    const alice = await seedUser(t().db, tenant, [{ account: a, role: "owner" }]);
    const bob = await seedUser(t().db, tenant, [{ account: b, role: "owner" }]);
    const ids = await t().db.asService(async (tx) => {
      const artist = (
        await tx.query<{ id: string }>(
          "insert into public.artist_profiles (account_id, name) values ($1, 'Memo Artist') returning id",
          [a.id],
        )
      ).rows[0]?.id as string;
      const release = (
        await tx.query<{ id: string }>(
          "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Memo Release') returning id",
          [a.id, artist],
        )
      ).rows[0]?.id as string;
      return { artist, release };
    });
    f = {
      tenantId: tenant.id,
      accountA: a.id,
      accountB: b.id,
      alice,
      bob,
      artistA: ids.artist,
      releaseA: ids.release,
    };
  });

  test("a statement leaves its caller's answer in the memo, and the next transaction starts without it", async () => {
    const memo = await t().db.withRequestContext(userClaims(f.alice), async (tx) => {
      assert.deepEqual(await releasesSeen(tx), [f.releaseA]);
      return (
        await tx.query<{ ids: string | null; key: string | null }>(
          "select current_setting('backline.memo_readable', true) as ids, current_setting('backline.memo_readable_key', true) as key",
        )
      ).rows[0];
    });
    assert.equal(memo?.ids, `{${f.accountA}}`);
    assert.match(memo?.key ?? "", new RegExp(`^\\S+ .*${f.alice.id}`));
    // Another caller on the same database (PGlite: the same connection; PostgreSQL: the pool).
    const next = await t().db.withRequestContext(userClaims(f.bob), async (tx) => ({
      left: (
        await tx.query<{ ids: string | null; key: string | null }>(
          "select current_setting('backline.memo_readable', true) as ids, current_setting('backline.memo_readable_key', true) as key",
        )
      ).rows[0],
      seen: await releasesSeen(tx),
    }));
    assert.ok(!next.left?.ids, "the memo is local to the transaction that made it");
    assert.ok(!next.left?.key);
    assert.deepEqual(next.seen, []);
  });

  test("other claims in the same transaction are a new question (the service path switching callers)", async () => {
    await t().db.asService(async (tx) => {
      await actAs(tx, userClaims(f.alice));
      assert.deepEqual(await releasesSeen(tx), [f.releaseA]);
      await actAs(tx, userClaims(f.bob));
      assert.deepEqual(await releasesSeen(tx), [], "Bob never gets Alice's accounts from her memo");
      await tx.query("savepoint refused");
      assert.equal(
        await errorOf(
          tx.query("insert into public.tracks (release_id, title) values ($1, 'Not mine')", [f.releaseA]),
        ),
        "23503",
      );
      await tx.query("rollback to savepoint refused");
      // Back to Alice, and a SECURITY DEFINER context in between changes nothing about her answer.
      await actAs(tx, userClaims(f.alice));
      await tx.query("select internal.release_problems($1)", [f.releaseA]);
      assert.deepEqual(await releasesSeen(tx), [f.releaseA]);
    });
  });

  test("a membership removed or added in the same transaction counts from the next statement, as before", async () => {
    await t()
      .db.asService(async (tx) => {
        await actAs(tx, userClaims(f.alice));
        assert.deepEqual(await releasesSeen(tx), [f.releaseA]);
        await actAs(tx, { role: "service_role" });
        await tx.query("delete from internal.memberships where user_id = $1", [f.alice.id]);
        await actAs(tx, userClaims(f.alice));
        assert.deepEqual(await releasesSeen(tx), [], "the removed membership reaches nothing");
        assert.equal(
          await errorOf(
            tx.query("insert into public.releases (artist_id, title) values ($1, 'After removal')", [
              f.artistA,
            ]),
          ),
          "23503",
        );
        throw new Error("roll back");
      })
      .catch((e: Error) => assert.equal(e.message, "roll back"));
    await t()
      .db.asService(async (tx) => {
        await actAs(tx, userClaims(f.bob));
        assert.deepEqual(await releasesSeen(tx), []);
        await actAs(tx, { role: "service_role" });
        await tx.query(
          "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'member')",
          [f.tenantId, f.accountA, f.bob.id],
        );
        await actAs(tx, userClaims(f.bob));
        assert.deepEqual(await releasesSeen(tx), [f.releaseA], "the added membership reaches the account");
        throw new Error("roll back");
      })
      .catch((e: Error) => assert.equal(e.message, "roll back"));
  });

  test("a rolled-back savepoint takes its memo with it", async () => {
    await t().db.asService(async (tx) => {
      await tx.query("savepoint s");
      await tx.query(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'member')",
        [f.tenantId, f.accountA, f.bob.id],
      );
      await actAs(tx, userClaims(f.bob));
      assert.deepEqual(await releasesSeen(tx), [f.releaseA]);
      await tx.query("rollback to savepoint s");
      await actAs(tx, userClaims(f.bob));
      assert.deepEqual(await releasesSeen(tx), []);
    });
  });

  test("a memo under another key is not taken, even when written by hand", async () => {
    const seen = await t().db.withRequestContext(userClaims(f.bob), async (tx) => {
      await tx.query(
        "select set_config('backline.memo_readable', $1, true), set_config('backline.memo_readable_key', 'forged', true)",
        [`{${f.accountA}}`],
      );
      return releasesSeen(tx);
    });
    assert.deepEqual(seen, []);
  });

  test("the helpers keep their callers: anon may not ask about staff roles, fresh or memoised", async () => {
    const r = await t().owner.transaction(
      (tx) =>
        tx.query<{ wrapper: boolean; fresh: boolean; member: boolean }>(
          `select has_function_privilege('anon', 'auth.has_staff_role(uuid, text)', 'execute') as wrapper,
             has_function_privilege('anon', 'internal.has_staff_role_fresh(uuid, text)', 'execute') as fresh,
             has_function_privilege('authenticated', 'internal.has_staff_role_fresh(uuid, text)', 'execute') as member`,
        ),
      { readOnly: true },
    );
    assert.deepEqual(r.rows[0], { wrapper: false, fresh: false, member: true });
  });

  test("a bulk insert over several rows keeps every refusal: a row of another account's release fails the statement", async () => {
    const other = await t().db.asService(async (tx) => {
      const artist = (
        await tx.query<{ id: string }>(
          "insert into public.artist_profiles (account_id, name) values ($1, 'Bob Artist') returning id",
          [f.accountB],
        )
      ).rows[0]?.id as string;
      return artist;
    });
    const rows = [
      ...Array.from({ length: 20 }, (_, i) => ({ artist_id: f.artistA, title: `Bulk ${i}` })),
      { artist_id: other, title: "Not Alice's artist" },
    ];
    const code = await errorOf(
      t().db.withRequestContext(userClaims(f.alice), (tx) =>
        tx.query(
          "insert into public.releases (artist_id, title) select artist_id, title from json_populate_recordset(null::public.releases, $1::json)",
          [JSON.stringify(rows)],
        ),
      ),
    );
    assert.equal(code, "23503");
  });

  test("rows sharing a parent read it once (migration 0040); a parent the caller cannot see fails the statement wherever it comes", async () => {
    const bobsRelease = await t().db.asService(async (tx) => {
      const artist = (
        await tx.query<{ id: string }>(
          "insert into public.artist_profiles (account_id, name) values ($1, 'Bob Parent') returning id",
          [f.accountB],
        )
      ).rows[0]?.id as string;
      return (
        await tx.query<{ id: string }>(
          "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Bob Release') returning id",
          [f.accountB, artist],
        )
      ).rows[0]?.id as string;
    });
    const insertTracks = (releaseIds: string[]) =>
      t().db.withRequestContext(userClaims(f.alice), (tx) =>
        tx.query(
          "insert into public.tracks (release_id, title, track_number) select r, 'T' || n, n from unnest($1::uuid[]) with ordinality u(r, n)",
          [releaseIds],
        ),
      );
    // Bob's release between Alice's: after the memo holds Alice's release, and before it again.
    for (const order of [
      [f.releaseA, f.releaseA, bobsRelease, f.releaseA],
      [bobsRelease, f.releaseA, f.releaseA],
      [f.releaseA, f.releaseA, f.releaseA, bobsRelease],
    ])
      assert.equal(await errorOf(insertTracks(order)), "23503", order.join(", "));
    // The rows that share a parent take its account and detail; the memo names that parent.
    // (Rolled back: the other tests count Alice's releases.)
    const undo = new Error("rolled back");
    const done = t().db.withRequestContext(userClaims(f.alice), async (tx) => {
      const made = await tx.query<{ account_id: string }>(
        "insert into public.releases (artist_id, title) select $1, 'Shared ' || g from generate_series(1, 4) g returning account_id",
        [f.artistA],
      );
      assert.deepEqual(
        made.rows.map((r) => r.account_id),
        Array(4).fill(f.accountA),
      );
      const memo = (
        await tx.query<{ k: string | null }>("select current_setting('backline.memo_parent', true) as k")
      ).rows[0]?.k;
      assert.ok(memo?.includes(` artist_profiles ${f.artistA}\n${f.accountA}\nMemo Artist`), String(memo));
      throw undo;
    });
    await assert.rejects(done, (e) => e === undo);
  });

  test("a commit by another transaction between two statements counts from the next statement (PostgreSQL)", async (c) => {
    if (t().kind !== "postgres") {
      c.skip("one connection: transactions take turns on PGlite");
      return;
    }
    await t().db.withRequestContext(userClaims(f.alice), async (tx) => {
      assert.deepEqual(await releasesSeen(tx), [f.releaseA]);
      await t().owner.transaction(
        (o) => o.query("update internal.accounts set require_aal2 = true where id = $1", [f.accountA]),
        { readOnly: false },
      );
      try {
        assert.deepEqual(await releasesSeen(tx), [], "an aal1 session no longer reaches the account");
      } finally {
        await t().owner.transaction(
          (o) => o.query("update internal.accounts set require_aal2 = false where id = $1", [f.accountA]),
          { readOnly: false },
        );
      }
    });
  });
});
