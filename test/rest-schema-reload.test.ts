import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * Issue 20, item 2: /rest/v1's schema cache is read again, in every process, on PostgREST's
 * `NOTIFY pgrst, 'reload schema'`, which the migration runner sends after each migration.
 */
describeEachEngine("rest schema cache reload", (t) => {
  const apps: RunningApp[] = [];
  let anonKey = "";

  before(async () => {
    apps.push(await startApp(t()), await startApp(t()));
    anonKey = (await tenantWithKeys(t())).keys.anon_key;
  });
  after(async () => {
    await Promise.all(apps.map((a) => a.close()));
  });

  const get = async (app: RunningApp, table: string) => {
    const res = await fetch(`${app.url}/rest/v1/${table}?select=id`, {
      headers: { apikey: anonKey, authorization: `Bearer ${anonKey}` },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> & unknown[] };
  };

  test("a table created after start appears in every app once pgrst is notified, not before", async () => {
    const table = `reload_${Math.random().toString(36).slice(2, 8)}`;
    // Both caches are read (a known table answers), then the schema changes under them.
    for (const app of apps) {
      const res = await fetch(`${app.url}/rest/v1/`, {
        headers: { apikey: anonKey, authorization: `Bearer ${anonKey}` },
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    await t().owner.transaction(
      (tx) =>
        tx.exec(`create table public.${table} (id int primary key);
                 insert into public.${table} values (1);
                 alter table public.${table} enable row level security;
                 create policy everyone on public.${table} for select to anon using (true);
                 grant select on public.${table} to anon;`),
      { readOnly: false },
    );
    for (const app of apps) {
      const r = await get(app, table);
      assert.equal(r.status, 404, "the cache is not read on every request");
      assert.equal(r.body.code, "PGRST205");
    }
    await t().owner.transaction((tx) => tx.exec("notify pgrst, 'reload schema'"), { readOnly: false });
    for (const app of apps) {
      const deadline = Date.now() + 5000;
      for (;;) {
        const r = await get(app, table);
        if (r.status === 200) {
          assert.deepEqual(r.body, [{ id: 1 }]);
          break;
        }
        assert.ok(Date.now() < deadline, `not reloaded: ${JSON.stringify(r)}`);
        await new Promise((res) => setTimeout(res, 20));
      }
    }
  });
});
