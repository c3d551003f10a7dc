import assert from "node:assert/strict";
import { test } from "node:test";
import { describeEachEngine } from "./support/db.ts";

// Row-level security's helpers keep their plans (migration 0030): a SQL function with SECURITY
// DEFINER or a SET clause is neither inlined nor cached, so it was parsed and planned again for
// every table of every statement. What they answer is tested by test/rls-*.test.ts.

describeEachEngine("row-level security helpers", (t) => {
  test("every helper a policy calls with SECURITY DEFINER or a SET clause is PL/pgSQL, so its plan is kept", async () => {
    const rows = await t().owner.transaction(
      async (tx) =>
        (
          await tx.query<{ fn: string; lang: string; secdef: boolean; config: string[] | null }>(
            `with called as (
               select distinct (regexp_matches(coalesce(qual, '') || ' ' || coalesce(with_check, ''),
                 '((?:auth|internal)\\.[a-z_0-9]+)\\(', 'g'))[1] as fn
               from pg_policies where schemaname = 'public')
             select c.fn, l.lanname as lang, p.prosecdef as secdef, p.proconfig as config
             from called c
             join pg_proc p on p.oid = to_regproc(c.fn)::oid
             join pg_language l on l.oid = p.prolang
             order by c.fn`,
          )
        ).rows,
      { readOnly: true },
    );
    const names = rows.map((r) => r.fn);
    for (const expected of [
      "auth.readable_account_ids",
      "auth.writable_account_ids",
      "internal.release_writable",
    ])
      assert.ok(names.includes(expected), `${expected} is called by a policy (${names.join(", ")})`);
    const replanned = rows.filter((r) => (r.secdef || r.config) && r.lang !== "plpgsql").map((r) => r.fn);
    assert.deepEqual(replanned, [], "planned again on every call");
  });
});
