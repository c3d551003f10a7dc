import assert from "node:assert/strict";
import { test } from "node:test";
import { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import { prepared } from "../src/db/prepared.ts";
import { describeEachEngine } from "./support/db.ts";
import { keyClaims, seedAccount, seedTenant } from "./support/seed.ts";

// Statements of fixed text planned once per connection (src/db/prepared.ts).

describeEachEngine("prepared statements", (t) => {
  test("answer as the same text does, with bind parameters, in every transaction", async () => {
    const sql = "select $1::int + 1 as n, current_user as role";
    const statement = prepared(sql);
    assert.match(statement.name, /^bl_[0-9a-f]{24}$/);
    assert.equal(prepared(sql).name, statement.name, "the name follows from the text");
    assert.notEqual(prepared(`${sql} `).name, statement.name);
    // More transactions than the pool has connections: each connection prepares it once.
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        t().db.asService(async (tx) => {
          const a = (await tx.query<{ n: number; role: string }>(statement, [i])).rows[0];
          const b = (await tx.query<{ n: number; role: string }>(sql, [i])).rows[0];
          return { a, b };
        }),
      ),
    );
    answers.forEach(({ a, b }, i) => {
      assert.deepEqual(a, b);
      assert.equal(a?.n, i + 1);
    });
  });

  test("run under the caller's role and row-level security, like any statement", async () => {
    const tenant = await seedTenant(t().db);
    const mine = await seedAccount(t().db, tenant, "Mine");
    const other = await seedAccount(t().db, tenant, "Other");
    for (const account of [mine, other]) {
      await t().db.withRequestContext(keyClaims(account, "admin"), (tx) =>
        tx.query("insert into public.artist_profiles (name) values ($1)", [`Artist of ${account.name}`]),
      );
    }
    const statement = prepared("select name from public.artist_profiles order by name");
    for (const [account, expected] of [
      [mine, ["Artist of Mine"]],
      [other, ["Artist of Other"]],
      [mine, ["Artist of Mine"]],
    ] as const) {
      const names = await t().db.withRequestContext(keyClaims(account), async (tx) =>
        (await tx.query<{ name: string }>(statement)).rows.map((r) => r.name),
      );
      assert.deepEqual(names, expected);
    }
  });

  test("a migration that changes a prepared statement's result type costs one failed request per connection", async (c) => {
    if (t().kind !== "postgres") return c.skip("PostgreSQL only: PGlite prepares nothing");
    // One connection, so the statement is known to the connection that meets the change.
    const engine = new PostgresEngine({ url: t().url as string, poolSize: 1 });
    const db = new Db(engine);
    try {
      await t().owner.transaction(
        (tx) =>
          tx.exec("create table public.prepared_probe (a int); insert into public.prepared_probe values (1)"),
        { readOnly: false },
      );
      const statement = prepared("select a from public.prepared_probe");
      const read = () => db.asService(async (tx) => (await tx.query<{ a: unknown }>(statement)).rows[0]?.a);
      const before = await db.asService(async (tx) => {
        const a = (await tx.query<{ a: unknown }>(statement)).rows[0]?.a;
        const known = await tx.query("select 1 from pg_prepared_statements where name = $1", [
          statement.name,
        ]);
        return { a, known: known.rowCount };
      });
      assert.deepEqual(before, { a: 1, known: 1 });
      await t().owner.transaction(
        (tx) => tx.exec("alter table public.prepared_probe alter column a type text"),
        { readOnly: false },
      );
      const error = await read().catch((e: unknown) => e);
      assert.equal(asDbError(error)?.sqlstate, "0A000", String(error));
      // That connection was dropped: the next transaction prepares the statement afresh.
      assert.equal(await read(), "1");
      assert.equal(await read(), "1");
    } finally {
      await db.close();
      await t().owner.transaction((tx) => tx.exec("drop table if exists public.prepared_probe"), {
        readOnly: false,
      });
    }
  });
});
