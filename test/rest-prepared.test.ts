import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import { generated } from "../src/db/prepared.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine, testSecrets } from "./support/db.ts";

/**
 * Issue 45, item 2: /rest/v1's statements are prepared once per connection and shape (their
 * values are all parameters), in a bounded least-recently-used cache (src/db/postgres.ts).
 * PGlite runs the same text unprepared; both engines must answer the same.
 */
describeEachEngine("rest prepared statements", (t) => {
  // A suite of its own, so that its app and connections close before the test database goes.
  describe("on one app", () => {
    const BOUND = 3;
    const table = `prep_${Math.random().toString(36).slice(2, 8)}`;
    let app: RunningApp;
    let db: Db;
    let anonKey = "";

    before(async () => {
      // On PostgreSQL, an app on one connection, so that the statements it prepared can be listed.
      db =
        t().kind === "postgres"
          ? new Db(new PostgresEngine({ url: t().url as string, poolSize: 1, generatedStatements: BOUND }), {
              secrets: testSecrets(),
            })
          : t().db;
      await t().owner.transaction(
        (tx) =>
          tx.exec(`create table public.${table} (id int primary key, v text, n int);
                 insert into public.${table} select g, 'v' || g, g * 10 from generate_series(1, 20) g;
                 alter table public.${table} enable row level security;
                 create policy everyone on public.${table} for all to anon using (true) with check (true);
                 grant select, insert, update, delete on public.${table} to anon;
                 notify pgrst, 'reload schema';`),
        { readOnly: false },
      );
      app = await startApp({ ...t(), db });
      anonKey = (await tenantWithKeys(t())).keys.anon_key;
    });
    after(async () => {
      await app.close();
      // The test database (and the table) goes with the suite.
      if (db !== t().db) await db.close();
    });

    const request = async (query: string, init: RequestInit = {}) => {
      const res = await fetch(`${app.url}/rest/v1/${table}?${query}`, {
        ...init,
        headers: {
          apikey: anonKey,
          authorization: `Bearer ${anonKey}`,
          "content-type": "application/json",
          ...(init.headers as Record<string, string>),
        },
      });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as unknown) : undefined };
    };

    /** The generated statements prepared on the app's one connection, with their executions. */
    const preparedOnConnection = async () =>
      (
        await db.asService((tx) =>
          tx.query<{ statement: string; runs: number }>(
            `select statement, (generic_plans + custom_plans)::int as runs
             from pg_prepared_statements where name like 'blg\\_%' order by statement`,
          ),
        )
      ).rows;

    test("requests of one shape share one prepared statement, whatever their values", async () => {
      for (let id = 1; id <= 8; id++) {
        const r = await request(`select=id,v&id=eq.${id}`);
        assert.equal(r.status, 200);
        assert.deepEqual(r.body, [{ id, v: `v${id}` }]);
      }
      // Limits, offsets and JSON paths are parameters too: one statement for every page.
      for (let offset = 0; offset < 4; offset++) {
        const r = await request(`select=id&order=id&limit=${offset + 1}&offset=${offset}`);
        assert.deepEqual(
          r.body,
          Array.from({ length: offset + 1 }, (_, i) => ({ id: offset + i + 1 })),
        );
      }
      if (t().kind !== "postgres") return;
      const statements = await preparedOnConnection();
      const byId = statements.find((s) => s.statement.includes('"id" = $1'));
      const paged = statements.filter((s) => /limit \$\d+::bigint offset/.test(s.statement));
      assert.ok(byId, JSON.stringify(statements));
      assert.equal(byId.runs, 8, "prepared once, executed eight times");
      assert.equal(paged.length, 1, JSON.stringify(statements));
      assert.equal(paged[0]?.runs, 3, "offset 0 is left out of the text; the three others share one");
      assert.ok(!statements.some((s) => /\bv[0-9]|'[0-9]/.test(s.statement)), "no value in any text");
    });

    test("more shapes than the bound: only the most recently used stay prepared, and all answer", async () => {
      const shapes = ["select=id", "select=v", "select=n", "select=id,n", "select=v,n", "select=id,v,n"];
      for (let round = 0; round < 2; round++) {
        for (const shape of shapes) {
          const r = await request(`${shape}&id=eq.2`);
          assert.equal(r.status, 200, JSON.stringify(r.body));
          const row = { id: 2, v: "v2", n: 20 };
          const keys = shape.slice("select=".length).split(",") as (keyof typeof row)[];
          assert.deepEqual(r.body, [Object.fromEntries(keys.map((k) => [k, row[k]]))]);
        }
      }
      if (t().kind !== "postgres") return;
      const statements = await preparedOnConnection();
      assert.equal(statements.length, BOUND, JSON.stringify(statements));
      // The three last shapes, each prepared again after its eviction in the first round.
      for (const columns of [
        ["id", "n"],
        ["v", "n"],
        ["id", "v", "n"],
      ]) {
        const list = columns.map((c) => `t0."${c}" as "${c}"`).join(", ");
        assert.ok(
          statements.some((s) => s.statement.includes(`select ${list} from`)),
          `${list} in ${JSON.stringify(statements.map((s) => s.statement))}`,
        );
      }
    });

    test("writes are prepared too, and answer as before", async () => {
      for (let i = 0; i < 3; i++) {
        const id = 100 + i;
        const created = await request("", {
          method: "POST",
          body: JSON.stringify({ id, v: `w${i}`, n: i }),
          headers: { prefer: "return=representation" },
        });
        assert.equal(created.status, 201);
        assert.deepEqual(created.body, [{ id, v: `w${i}`, n: i }]);
        const patched = await request(`id=eq.${id}`, { method: "PATCH", body: JSON.stringify({ n: i + 1 }) });
        assert.equal(patched.status, 204);
        const deleted = await request(`id=eq.${id}`, { method: "DELETE" });
        assert.equal(deleted.status, 204);
      }
      assert.deepEqual((await request("select=id&id=gte.100")).body, []);
    });

    test("a change to the table's columns (type changed, one dropped, one added) answers no 500", async () => {
      const read = () => request("select=*&id=eq.3");
      for (let i = 0; i < 3; i++) assert.deepEqual((await read()).body, [{ id: 3, v: "v3", n: 30 }]);
      const projected = () => request("select=id,n&id=eq.3");
      for (let i = 0; i < 3; i++) assert.deepEqual((await projected()).body, [{ id: 3, n: 30 }]);
      await t().owner.transaction(
        (tx) =>
          tx.exec(`alter table public.${table} alter column n type text using 'n' || n;
                 alter table public.${table} drop column v;
                 alter table public.${table} add column w int default 7;
                 notify pgrst, 'reload schema';`),
        { readOnly: false },
      );
      // Before and after the schema cache is read again: the statements are planned again.
      const deadline = Date.now() + 5000;
      for (;;) {
        const r = await read();
        assert.notEqual(r.status, 500, JSON.stringify(r.body));
        if (r.status === 200 && JSON.stringify(r.body) === JSON.stringify([{ id: 3, n: "n30", w: 7 }])) break;
        assert.ok(Date.now() < deadline, `not reloaded: ${JSON.stringify(r)}`);
        await new Promise((res) => setTimeout(res, 20));
      }
      for (let i = 0; i < 3; i++) {
        assert.deepEqual((await projected()).body, [{ id: 3, n: "n30" }]);
        assert.deepEqual((await read()).body, [{ id: 3, n: "n30", w: 7 }]);
      }
      if (t().kind !== "postgres") return;
      // The reload deallocated the old schema's statements: only the two shapes read since remain.
      const statements = await preparedOnConnection();
      assert.equal(statements.length, 2, JSON.stringify(statements));
      assert.ok(!statements.some((s) => s.statement.includes('t0."v"')), JSON.stringify(statements));
    });

    test("a generated statement whose result type changed fails once, then is prepared afresh on the same connection", async (c) => {
      if (t().kind !== "postgres") return c.skip("PostgreSQL only: PGlite prepares nothing");
      const statement = generated(`select n from public.${table} where id = $1`);
      const run = () =>
        db.asService(async (tx) => (await tx.query<{ n: unknown }>(statement, [3])).rows[0]?.n);
      const pid = () =>
        db.asService(
          async (tx) => (await tx.query<{ p: number }>("select pg_backend_pid() as p")).rows[0]?.p,
        );
      assert.equal(await run(), "n30");
      const before = await pid();
      await t().owner.transaction(
        (tx) => tx.exec(`alter table public.${table} alter column n type int using substr(n, 2)::int`),
        { readOnly: false },
      );
      const error = await run().catch((e: unknown) => e);
      assert.equal(asDbError(error)?.sqlstate, "0A000", String(error));
      assert.equal(await run(), 30);
      assert.equal(await pid(), before, "the connection was kept: only the statement was deallocated");
      // And /rest/v1 reads the changed column as ever.
      await t().owner.transaction((tx) => tx.exec("notify pgrst, 'reload schema'"), { readOnly: false });
      const deadline = Date.now() + 5000;
      for (;;) {
        const r = await request("select=id,n&id=eq.3");
        assert.notEqual(r.status, 500, JSON.stringify(r.body));
        if (JSON.stringify(r.body) === JSON.stringify([{ id: 3, n: 30 }])) break;
        assert.ok(Date.now() < deadline, `not reloaded: ${JSON.stringify(r)}`);
        await new Promise((res) => setTimeout(res, 20));
      }
    });
  });
});
