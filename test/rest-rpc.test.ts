import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { loadSchemaCache } from "../src/rest/schema-cache.ts";
import { typescriptTypes } from "../src/rest/typescript-types.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { memberToken, seedAccount } from "./support/seed.ts";

/**
 * /rest/v1/rpc/<function> (issue 46, item 1), through the real supabase-js `.rpc()` over a socket
 * and plain fetch where the client cannot say it: functions created here in `public`, called with
 * named arguments (POST body, GET query), a single json argument, `Prefer: params=single-object`,
 * overloads, variadics; results as scalars, rows and sets (filtered, ordered, paged, counted);
 * PostgREST's errors; and who may call what: grants alone decide, row security holds inside a
 * SECURITY INVOKER function, Backline's own functions stay unreachable.
 */

// One statement a line-ending `;` (the fixture is run a statement at a time); no body holds one.
const FIXTURE = `
create type public.rpc_status as enum ('ONLINE', 'OFFLINE');
create table public.rpc_people (username text primary key, status public.rpc_status not null default 'ONLINE', age int not null);
insert into public.rpc_people values ('supabot', 'ONLINE', 3), ('kiwicopple', 'OFFLINE', 30), ('awailas', 'ONLINE', 28), ('dragarcia', 'ONLINE', 25);
grant select, update on public.rpc_people to authenticated;
create table public.rpc_pets (id int primary key, name text not null, owner text not null references public.rpc_people);
insert into public.rpc_pets values (1, 'Rex', 'kiwicopple'), (2, 'Tom', 'kiwicopple'), (3, 'Fifi', 'awailas');
grant select on public.rpc_pets to authenticated;
create function public.rpc_exact(n numeric) returns text language sql immutable as $$ select n::text $$;
create function public.rpc_get_status(name_param text) returns public.rpc_status language sql stable
  as $$ select status from public.rpc_people where username = name_param $$;
create function public.rpc_people_older(min_age int default 0) returns setof public.rpc_people language sql stable
  as $$ select * from public.rpc_people where age >= min_age order by username $$;
create function public.rpc_name_and_status(name_param text) returns table (username text, status public.rpc_status)
  language sql stable as $$ select username, status from public.rpc_people where username = name_param $$;
create function public.rpc_person(name_param text) returns public.rpc_people language sql stable
  as $$ select * from public.rpc_people where username = name_param $$;
create function public.rpc_echo_json(jsonb) returns jsonb language sql immutable as $$ select $1 $$;
create function public.rpc_shout(text) returns text language sql immutable as $$ select upper($1) $$;
create function public.rpc_unnamed_int(int) returns int language sql immutable as $$ select $1 $$;
create function public.rpc_unnamed_two(text, text) returns text language sql immutable as $$ select $1 || $2 $$;
create function public.rpc_initial(c character) returns text language sql immutable as $$ select c::text $$;
create function public.rpc_keys(payload jsonb) returns text[] language sql immutable
  as $$ select array(select jsonb_object_keys(payload) order by 1) $$;
create function public.rpc_add(a int, b int) returns int language sql immutable as $$ select a + b $$;
create function public.rpc_add(a int, b int, c int) returns int language sql immutable as $$ select a + b + c $$;
create function public.rpc_add(x text) returns text language sql immutable as $$ select 'text:' || x $$;
create function public.rpc_ambiguous(a int) returns int language sql immutable as $$ select a $$;
create function public.rpc_ambiguous(a text) returns text language sql immutable as $$ select a $$;
create function public.rpc_default_pick(text default 'x') returns text language sql immutable as $$ select $1 $$;
create function public.rpc_default_pick() returns int language sql immutable as $$ select 1 $$;
create function public.rpc_sum(variadic nums int[]) returns int language sql immutable
  as $$ select coalesce(sum(n), 0)::int from unnest(nums) as n $$;
create function public.rpc_ids(n int) returns setof int language sql immutable as $$ select generate_series(1, n) $$;
create function public.rpc_go_offline(name_param text) returns public.rpc_status language sql volatile
  as $$ update public.rpc_people set status = 'OFFLINE' where username = name_param returning status $$;
create function public.rpc_noop() returns void language plpgsql as $$ begin perform 1; end $$;
create function public.rpc_revoked() returns text language sql immutable as $$ select 'once' $$;
create function public.rpc_secret() returns text language sql immutable as $$ select 'secret' $$;
revoke execute on function public.rpc_secret() from public;
create table public.rpc_notes (id serial primary key, owner uuid not null default auth.uid(), note text not null);
alter table public.rpc_notes enable row level security;
create policy own_notes on public.rpc_notes for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
grant select, insert on public.rpc_notes to authenticated;
grant usage on sequence public.rpc_notes_id_seq to authenticated;
create function public.rpc_my_notes() returns setof public.rpc_notes language sql stable security invoker
  as $$ select * from public.rpc_notes order by id $$;
create function public.rpc_artist_names() returns setof text language sql stable
  as $$ select name from public.artist_profiles order by name $$;
create function public.rpc_add_note(note text) returns public.rpc_notes language sql volatile security invoker
  as $$ insert into public.rpc_notes (note) values (note) returning * $$;
`;

/**
 * The functions of `public` a request role may execute, besides this file's fixture: each was
 * granted on purpose. A function added to `public` by a migration is callable at /rest/v1/rpc by
 * every role PostgreSQL lets execute it (PUBLIC, by default): list it here only once its migration
 * revokes it from public and grants it to the roles meant to call it.
 */
const CALLABLE: Record<string, string[]> = {
  // 0036: a payee asks for their balance (the function checks who asks and at which level).
  "request_payout(uuid)": ["authenticated"],
};

describeEachEngine("rest: functions at /rest/v1/rpc", (t) => {
  let app: RunningApp;
  let keys: TenantKeys;
  let tenant: Tenant;
  let token: string;
  let otherToken: string;
  let client: SupabaseClient;
  let other: SupabaseClient;
  let anon: SupabaseClient;
  let before0: Record<string, string[]>;

  const clientFor = (bearer: string): SupabaseClient =>
    createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { headers: { Authorization: `Bearer ${bearer}` } },
    });

  const callableNow = async (): Promise<Record<string, string[]>> => {
    const rows = await t().owner.transaction(
      (tx) =>
        tx.query<{ f: string; roles: string[] }>(
          `select p.oid::regprocedure::text as f,
                  array(select r.rolname::text from pg_roles r
                        where r.rolname in ('anon', 'authenticated', 'tenant_service')
                          and has_function_privilege(r.oid, p.oid, 'EXECUTE') order by 1)::text[] as roles
           from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname = 'public' order by 1`,
        ),
      { readOnly: true },
    );
    return Object.fromEntries(rows.rows.filter((r) => r.roles.length > 0).map((r) => [r.f, r.roles]));
  };

  before(async () => {
    before0 = await callableNow();
    await t().owner.transaction(
      async (tx) => {
        for (const statement of FIXTURE.split(/;\n/)) if (statement.trim()) await tx.query(statement);
      },
      { readOnly: false },
    );
    app = await startApp(t());
    ({ tenant, keys } = await tenantWithKeys(t(), { settings: UNLIMITED }));
    const account = await seedAccount(t().db, tenant);
    const otherAccount = await seedAccount(t().db, tenant, "Other label");
    token = await memberToken(t().db, tenant, [account], `${app.url}/auth/v1`);
    otherToken = await memberToken(t().db, tenant, [otherAccount], `${app.url}/auth/v1`);
    client = clientFor(token);
    other = clientFor(otherToken);
    anon = clientFor(keys.anon_key);
  });
  after(async () => {
    await app?.close();
  });

  function raw(
    path: string,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: unknown;
      text?: string;
      bearer?: string;
    } = {},
  ) {
    const text = init.text ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
    return fetch(`${app.url}/rest/v1${path}`, {
      method: init.method ?? "GET",
      headers: {
        apikey: keys.anon_key,
        authorization: `Bearer ${init.bearer ?? token}`,
        ...(text === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(text === undefined ? {} : { body: text }),
    });
  }

  test("no function of public is callable by a request role unless granted on purpose", () => {
    assert.deepEqual(before0, CALLABLE);
  });

  test("a scalar, by POST with named arguments and by GET with them in the query string", async () => {
    const post = await client.rpc("rpc_get_status", { name_param: "supabot" });
    assert.deepEqual(
      { status: post.status, data: post.data, error: post.error },
      {
        status: 200,
        data: "ONLINE",
        error: null,
      },
    );
    const get = await client.rpc("rpc_get_status", { name_param: "kiwicopple" }, { get: true });
    assert.deepEqual({ status: get.status, data: get.data }, { status: 200, data: "OFFLINE" });
    const none = await client.rpc("rpc_get_status", { name_param: "nobody" });
    assert.deepEqual({ status: none.status, data: none.data }, { status: 200, data: null });
    const res = await raw("/rpc/rpc_get_status?name_param=supabot");
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(await res.text(), '"ONLINE"');
  });

  test("a set of table rows is selected, filtered, ordered, paged and counted like a table", async () => {
    const all = await client.rpc("rpc_people_older", { min_age: 20 });
    assert.deepEqual(
      (all.data as { username: string }[]).map((r) => r.username),
      ["awailas", "dragarcia", "kiwicopple"],
    );
    const page = await client
      .rpc("rpc_people_older", { min_age: 20 }, { count: "exact" })
      .select("username,age")
      .gte("age", 26)
      .order("age", { ascending: false })
      .limit(1);
    assert.deepEqual(
      { status: page.status, count: page.count, data: page.data, error: page.error },
      { status: 206, count: 2, data: [{ username: "kiwicopple", age: 30 }], error: null },
    );
    const ranged = await client
      .rpc("rpc_people_older", {}, { get: true })
      .select("username")
      .eq("status", "ONLINE")
      .order("username")
      .range(1, 2);
    assert.deepEqual(ranged.data, [{ username: "dragarcia" }, { username: "supabot" }]);
    const grouped = await client
      .rpc("rpc_people_older", {})
      .select("status, n:username.count(), oldest:age.max(), who:username")
      .eq("username", "supabot");
    assert.deepEqual(grouped.data, [{ status: "ONLINE", n: 1, oldest: 3, who: "supabot" }]);
    const renamed = await client
      .rpc("rpc_name_and_status", { name_param: "supabot" })
      .select("name:username,status::text");
    assert.deepEqual(renamed.data, [{ name: "supabot", status: "ONLINE" }]);
    const head = await client.rpc("rpc_people_older", { min_age: 20 }, { head: true, count: "exact" });
    assert.deepEqual(
      { status: head.status, count: head.count, data: head.data },
      {
        status: 200,
        count: 3,
        data: null,
      },
    );
    const single = await client.rpc("rpc_people_older", { min_age: 29 }).select("username").single();
    assert.deepEqual(single.data, { username: "kiwicopple" });
    const many = await client.rpc("rpc_people_older", { min_age: 20 }).single();
    assert.equal(many.status, 406);
    assert.equal(many.error?.code, "PGRST116");
  });

  test("a set of table rows embeds the table's relationships", async () => {
    const res = await client
      .rpc("rpc_people_older", { min_age: 26 })
      .select("username, rpc_pets(name)")
      .order("username")
      .order("name", { referencedTable: "rpc_pets" });
    assert.deepEqual(res.data, [
      { username: "awailas", rpc_pets: [{ name: "Fifi" }] },
      { username: "kiwicopple", rpc_pets: [{ name: "Rex" }, { name: "Tom" }] },
    ]);
  });

  test("arguments reach the database as sent: a long number keeps every digit", async () => {
    const n = "12345678901234567890.123456789";
    const post = await raw("/rpc/rpc_exact", { method: "POST", text: `{"n": ${n}}` });
    assert.equal(await post.json(), n);
    const get = await raw(`/rpc/rpc_exact?n=${n}`);
    assert.equal(await get.json(), n);
  });

  test("max-affected with handling=strict: a set above it fails, a single result is PGRST128", async () => {
    const over = await raw("/rpc/rpc_people_older", {
      method: "POST",
      headers: { prefer: "handling=strict, max-affected=2" },
      body: {},
    });
    assert.equal(over.status, 400);
    assert.deepEqual(await over.json(), {
      code: "PGRST124",
      message: "Query result exceeds max-affected preference constraint",
      details: "The query affects 4 rows",
      hint: null,
    });
    const within = await raw("/rpc/rpc_people_older", {
      method: "POST",
      headers: { prefer: "handling=strict, max-affected=4" },
      body: {},
    });
    assert.equal(within.status, 200);
    assert.match(within.headers.get("preference-applied") ?? "", /max-affected=4/);
    const single = await raw("/rpc/rpc_get_status", {
      method: "POST",
      headers: { prefer: "handling=strict, max-affected=1" },
      body: { name_param: "supabot" },
    });
    assert.equal(single.status, 400);
    assert.equal(((await single.json()) as { code: string }).code, "PGRST128");
  });

  test("RETURNS TABLE gives rows, a single composite an object, a set of scalars an array", async () => {
    const table = await client.rpc("rpc_name_and_status", { name_param: "supabot" }).select();
    assert.deepEqual(table.data, [{ username: "supabot", status: "ONLINE" }]);
    const person = await client.rpc("rpc_person", { name_param: "awailas" });
    assert.deepEqual(person.data, { username: "awailas", status: "ONLINE", age: 28 });
    const ids = await client.rpc("rpc_ids", { n: 3 });
    assert.deepEqual(ids.data, [1, 2, 3]);
    const res = await raw("/rpc/rpc_ids?n=5&limit=2&offset=1");
    assert.deepEqual(await res.json(), [2, 3]);
    const filtered = await raw("/rpc/rpc_ids?n=5&pgrst_scalar=gt.3");
    assert.deepEqual(await filtered.json(), [4, 5]);
  });

  test("a single unnamed json argument takes the whole body; params=single-object any one json argument", async () => {
    const echo = await client.rpc("rpc_echo_json", { a: 1, b: [2, "three"], c: { d: null } });
    assert.deepEqual(echo.data, { a: 1, b: [2, "three"], c: { d: null } });
    const single = await raw("/rpc/rpc_keys", {
      method: "POST",
      headers: { prefer: "params=single-object" },
      body: { y: 1, x: 2 },
    });
    assert.equal(single.status, 200);
    assert.deepEqual(await single.json(), ["x", "y"]);
    // Without the preference the body's keys are the argument names: payload is a named argument.
    const named = await client.rpc("rpc_keys", { payload: { z: 1 } });
    assert.deepEqual(named.data, ["z"]);
    const missing = await client.rpc("rpc_keys", { y: 1, x: 2 });
    assert.equal(missing.status, 404);
    assert.equal(missing.error?.code, "PGRST202");
  });

  test("a text/plain body is the one argument of a function taking a single unnamed text", async () => {
    const res = await raw("/rpc/rpc_shout", {
      method: "POST",
      text: "hello there",
      headers: { "content-type": "text/plain" },
    });
    assert.deepEqual({ status: res.status, body: await res.json() }, { status: 200, body: "HELLO THERE" });
    // A JSON string is JSON, not text: the single unnamed jsonb takes it.
    const json = await raw("/rpc/rpc_echo_json", { method: "POST", text: '"hello"' });
    assert.deepEqual({ status: json.status, body: await json.json() }, { status: 200, body: "hello" });
    const none = await raw("/rpc/rpc_get_status", {
      method: "POST",
      text: "supabot",
      headers: { "content-type": "text/plain" },
    });
    assert.equal(none.status, 404);
    assert.deepEqual(await none.json(), {
      code: "PGRST202",
      message: "Could not find the function public.rpc_get_status in the schema cache",
      details:
        "Searched for the function public.rpc_get_status with a single unnamed text parameter, but no matches were found in the schema cache.",
      hint: null,
    });
  });

  test("unnamed parameters: only a single json, jsonb, text, xml or bytea one is callable, as PostgREST", async () => {
    for (const name of ["rpc_unnamed_int", "rpc_unnamed_two"]) {
      const res = await client.rpc(name, { "": 1 });
      assert.deepEqual(
        { status: res.status, code: res.error?.code },
        { status: 404, code: "PGRST202" },
        name,
      );
    }
    // A character argument is not cut to one character by the cast (a parameter has no length).
    assert.equal((await client.rpc("rpc_initial", { c: "xy" })).data, "xy");
    assert.equal((await client.rpc("rpc_initial", { c: "xy" }, { get: true })).data, "xy");
  });

  test("overloads are told apart by the argument names; several fitting are PGRST203", async () => {
    assert.equal((await client.rpc("rpc_add", { a: 1, b: 2 })).data, 3);
    assert.equal((await client.rpc("rpc_add", { a: 1, b: 2, c: 3 })).data, 6);
    assert.equal((await client.rpc("rpc_add", { x: "hi" })).data, "text:hi");
    assert.equal((await client.rpc("rpc_add", { a: "4", b: "5" }, { get: true })).data, 9);
    const none = await client.rpc("rpc_add", { a: 1 });
    assert.equal(none.status, 404);
    assert.deepEqual(none.error, {
      code: "PGRST202",
      message: "Could not find the function public.rpc_add(a) in the schema cache",
      details:
        "Searched for the function public.rpc_add with parameter a or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.",
      hint: "Perhaps you meant to call the function public.rpc_add(a, b)",
    });
    const ambiguous = await client.rpc("rpc_ambiguous", { a: 1 });
    assert.equal(ambiguous.status, 300);
    assert.deepEqual(ambiguous.error, {
      code: "PGRST203",
      message:
        "Could not choose the best candidate function between: public.rpc_ambiguous(a => integer), public.rpc_ambiguous(a => text)",
      details: null,
      hint: "Try renaming the parameters or the function itself in the database so function overloading can be resolved",
    });
    // Listed fewest parameters first, whatever order they were created in (PostgREST's answer).
    const pick = await client.rpc("rpc_default_pick");
    assert.equal(pick.status, 300);
    assert.equal(
      pick.error?.message,
      "Could not choose the best candidate function between: public.rpc_default_pick(), public.rpc_default_pick( => text)",
    );
  });

  test("a variadic argument: a JSON array, or the parameter repeated in the query string", async () => {
    assert.equal((await client.rpc("rpc_sum", { nums: [1, 2, 3] })).data, 6);
    const get = await raw("/rpc/rpc_sum?nums=1&nums=2&nums=3&nums=4");
    assert.deepEqual({ status: get.status, body: await get.json() }, { status: 200, body: 10 });
    const one = await raw("/rpc/rpc_sum?nums=7");
    assert.deepEqual(await one.json(), 7);
  });

  test("GET runs read-only: a volatile function that writes is 405 there, and runs by POST", async () => {
    const get = await client.rpc("rpc_go_offline", { name_param: "dragarcia" }, { get: true });
    assert.equal(get.status, 405);
    assert.equal(get.error?.code, "25006");
    const rolledBack = await raw("/rpc/rpc_go_offline", {
      method: "POST",
      headers: { prefer: "tx=rollback" },
      body: { name_param: "dragarcia" },
    });
    assert.deepEqual(
      {
        status: rolledBack.status,
        applied: rolledBack.headers.get("preference-applied"),
        body: await rolledBack.json(),
      },
      { status: 200, applied: "tx=rollback", body: "OFFLINE" },
    );
    assert.equal((await client.rpc("rpc_get_status", { name_param: "dragarcia" })).data, "ONLINE");
    const post = await client.rpc("rpc_go_offline", { name_param: "dragarcia" });
    assert.deepEqual({ status: post.status, data: post.data }, { status: 200, data: "OFFLINE" });
    assert.equal((await client.rpc("rpc_get_status", { name_param: "dragarcia" })).data, "OFFLINE");
  });

  test("a void function answers 204 without a body; other methods are 405 PGRST101", async () => {
    const res = await client.rpc("rpc_noop");
    assert.deepEqual(
      { status: res.status, data: res.data, error: res.error },
      {
        status: 204,
        data: null,
        error: null,
      },
    );
    const patch = await raw("/rpc/rpc_noop", { method: "PATCH", body: {} });
    assert.equal(patch.status, 405);
    assert.deepEqual(await patch.json(), {
      code: "PGRST101",
      message: "Cannot use the PATCH method on RPC",
      details: null,
      hint: null,
    });
  });

  test("a missing function is 404 PGRST202 with PostgREST's message and a hint from the names", async () => {
    const missing = await client.rpc("zzzzzzzzzz");
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.error, {
      code: "PGRST202",
      message: "Could not find the function public.zzzzzzzzzz without parameters in the schema cache",
      details:
        "Searched for the function public.zzzzzzzzzz without parameters or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.",
      hint: null,
    });
    const typo = await client.rpc("rpc_get_statu", { name_param: "x" }, { get: true });
    assert.deepEqual(typo.error, {
      code: "PGRST202",
      message: "Could not find the function public.rpc_get_statu(name_param) in the schema cache",
      details:
        "Searched for the function public.rpc_get_statu with parameter name_param, but no matches were found in the schema cache.",
      hint: "Perhaps you meant to call the function public.rpc_get_status",
    });
  });

  test("a function the role may not execute is not there: 404 PGRST202, never named in a hint", async () => {
    const secret = await client.rpc("rpc_secret");
    assert.equal(secret.status, 404);
    assert.equal(secret.error?.code, "PGRST202");
    const near = await client.rpc("rpc_secre");
    assert.equal(near.error?.code, "PGRST202");
    assert.ok(!String(near.error?.hint).includes("rpc_secret"), String(near.error?.hint));
    // anon may not request a payout (0036 grants it to authenticated only).
    const payout = await anon.rpc("request_payout", { payee: randomUUID() });
    assert.deepEqual({ status: payout.status, code: payout.error?.code }, { status: 404, code: "PGRST202" });
    // A user may: the function itself refuses a payee that is not theirs.
    const mine = await client.rpc("request_payout", { payee: randomUUID() });
    assert.deepEqual({ status: mine.status, code: mine.error?.code }, { status: 404, code: "P0002" });
    assert.match(mine.error?.message ?? "", /^no payee /);
  });

  test("Backline's internal functions are unreachable, by name or by another schema", async () => {
    for (const [name, args] of [
      ["my_memberships", {}],
      ["uid", {}],
      ["release_problems", { release: randomUUID() }],
      ["audit", {}],
      ["auth.uid", {}],
      ["internal.release_problems", {}],
    ] as const) {
      for (const c of [client, anon]) {
        const res = await c.rpc(name, args);
        assert.equal(res.status, 404, `${name}: ${JSON.stringify(res.error)}`);
        assert.equal(res.error?.code, "PGRST202");
      }
    }
    const res = await raw("/rpc/uid", { method: "POST", headers: { "content-profile": "auth" }, body: {} });
    assert.equal(res.status, 406);
    assert.equal(((await res.json()) as { code: string }).code, "PGRST106");
    // Every function of every other schema, by its name: not there, for a user or anon.
    const names = (
      await t().owner.transaction(
        (tx) =>
          tx.query<{ name: string }>(
            `select distinct p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
             where n.nspname not in ('public', 'pg_catalog', 'information_schema', 'pg_toast') order by 1`,
          ),
        { readOnly: true },
      )
    ).rows.map((r) => r.name);
    assert.ok(names.includes("my_memberships") && names.length > 20, names.join(","));
    for (const name of names) {
      for (const bearer of [token, keys.anon_key]) {
        const post = await raw(`/rpc/${name}`, { method: "POST", body: {}, bearer });
        assert.equal(post.status, 404, `${name}: ${await post.text()}`);
        const get = await raw(`/rpc/${name}`, { bearer });
        assert.equal(get.status, 404, `${name}: ${await get.text()}`);
      }
    }
    const deeper = await raw("/rpc/auth/uid", { method: "POST", body: {} });
    assert.equal(deeper.status, 404);
    assert.equal(((await deeper.json()) as { code: string }).code, "PGRST125");
  });

  test("row security holds inside a SECURITY INVOKER function: each caller sees only their rows", async () => {
    const mine = await client.rpc("rpc_add_note", { note: "mine" });
    assert.equal(mine.status, 200, JSON.stringify(mine.error));
    assert.equal((mine.data as { note: string }).note, "mine");
    await other.rpc("rpc_add_note", { note: "theirs" }).throwOnError();
    const a = await client.rpc("rpc_my_notes").select("note");
    const b = await other.rpc("rpc_my_notes", {}, { get: true, count: "exact" }).select("note");
    assert.deepEqual(a.data, [{ note: "mine" }]);
    assert.deepEqual({ data: b.data, count: b.count }, { data: [{ note: "theirs" }], count: 1 });
    // anon may execute it (PUBLIC may), but not read the table inside: 401 as for the table itself.
    const anonymous = await anon.rpc("rpc_my_notes");
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.error?.code, "42501");
  });

  test("the OpenAPI description lists the functions the role may execute, GET only where not volatile", async () => {
    const res = await raw("/");
    const doc = (await res.json()) as {
      paths: Record<string, Record<string, { parameters?: { name?: string }[]; responses: object }>>;
    };
    const rpc = Object.keys(doc.paths).filter((p) => p.startsWith("/rpc/"));
    assert.ok(rpc.includes("/rpc/request_payout") && rpc.includes("/rpc/rpc_people_older"), rpc.join(","));
    assert.ok(!rpc.includes("/rpc/rpc_secret"));
    assert.deepEqual(Object.keys(doc.paths["/rpc/rpc_go_offline"] ?? {}), ["post"]);
    assert.deepEqual(Object.keys(doc.paths["/rpc/rpc_get_status"] ?? {}), ["post", "get"]);
    const get = doc.paths["/rpc/rpc_people_older"]?.get;
    assert.ok(get?.parameters?.some((p) => p.name === "min_age"));
    assert.deepEqual(Object.keys(doc.paths["/rpc/rpc_noop"]?.post?.responses ?? {}).slice(0, 1), ["204"]);
    // A tenant's service key may call none of them but what PUBLIC may; request_payout is not one.
    const service = await raw("/", {
      bearer: keys.service_role_key,
      headers: { apikey: keys.service_role_key },
    });
    const serviceDoc = (await service.json()) as { paths: Record<string, unknown> };
    assert.ok(!("/rpc/request_payout" in serviceDoc.paths));
    assert.ok("/rpc/rpc_get_status" in serviceDoc.paths);
  });

  test("backline gen types typescript lists the functions as supabase's generator does", async () => {
    const types = typescriptTypes(await loadSchemaCache(t().db), "authenticated");
    assert.match(types, /rpc_get_status: \{\s+Args: \{ name_param: string \};\s+Returns: string;\s+\}/);
    assert.match(types, /rpc_noop: \{\s+Args: never;\s+Returns: undefined;/);
    assert.match(
      types,
      /rpc_people_older: \{\s+Args: \{ min_age\?: number \};\s+Returns: \(Database\["public"\]\["Tables"\]\["rpc_people"\]\["Row"\]\)\[\];/,
    );
    assert.match(
      types,
      /rpc_add: \{\s+Args: \{ a: number; b: number \};[^|]+\| \{\s+Args: \{ a: number; b: number; c: number \};/,
    );
    assert.match(types, /rpc_sum: \{\s+Args: \{ nums: number\[\] \};/);
    assert.ok(!types.includes("rpc_secret"));
    assert.ok(types.includes("request_payout"));
  });

  test("inside a function Backline's own row security holds too: accounts and tenants stay apart", async () => {
    const { tenant: tenant2, keys: keys2 } = await tenantWithKeys(t(), { settings: UNLIMITED });
    const strangerToken = await memberToken(
      t().db,
      tenant2,
      [await seedAccount(t().db, tenant2)],
      `${app.url}/auth/v1`,
    );
    const stranger = createClient(app.url, keys2.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { headers: { Authorization: `Bearer ${strangerToken}` } },
    });
    await client.from("artist_profiles").insert({ name: "Mira Vale" }).throwOnError();
    await other.from("artist_profiles").insert({ name: "Other Artist" }).throwOnError();
    await stranger.from("artist_profiles").insert({ name: "Stranger Artist" }).throwOnError();
    assert.deepEqual((await client.rpc("rpc_artist_names")).data, ["Mira Vale"]);
    assert.deepEqual((await other.rpc("rpc_artist_names", {}, { get: true })).data, ["Other Artist"]);
    assert.deepEqual((await stranger.rpc("rpc_artist_names")).data, ["Stranger Artist"]);
    const counted = await client.rpc("rpc_artist_names", {}, { head: true, count: "exact" });
    assert.equal(counted.count, 1);
  });

  test("a grant revoked before the cache is read again: the database still refuses the call", async () => {
    assert.equal((await client.rpc("rpc_revoked")).data, "once");
    await t().owner.transaction(
      (tx) => tx.exec("revoke execute on function public.rpc_revoked() from public"),
      { readOnly: false },
    );
    const stale = await client.rpc("rpc_revoked");
    assert.deepEqual({ status: stale.status, code: stale.error?.code }, { status: 403, code: "42501" });
    const anonymous = await anon.rpc("rpc_revoked");
    assert.deepEqual(
      { status: anonymous.status, code: anonymous.error?.code },
      { status: 401, code: "42501" },
    );
    await t().owner.transaction((tx) => tx.exec("notify pgrst, 'reload schema'"), { readOnly: false });
    const deadline = Date.now() + 5000;
    for (;;) {
      const res = await client.rpc("rpc_revoked");
      if (res.status === 404) {
        assert.equal(res.error?.code, "PGRST202");
        break;
      }
      assert.ok(Date.now() < deadline, `not reloaded: ${JSON.stringify(res.error)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  test("a function created after start is callable once pgrst is notified", async () => {
    const name = `rpc_late_${Math.random().toString(36).slice(2, 8)}`;
    assert.equal((await client.rpc("rpc_get_status", { name_param: "supabot" })).status, 200);
    await t().owner.transaction(
      (tx) =>
        tx.exec(`create function public.${name}() returns int language sql immutable as $$ select 42 $$;`),
      { readOnly: false },
    );
    assert.equal((await client.rpc(name)).status, 404, "the cache is not read on every request");
    await t().owner.transaction((tx) => tx.exec("notify pgrst, 'reload schema'"), { readOnly: false });
    const deadline = Date.now() + 5000;
    for (;;) {
      const res = await client.rpc(name);
      if (res.status === 200) {
        assert.equal(res.data, 42);
        break;
      }
      assert.ok(Date.now() < deadline, `not reloaded: ${JSON.stringify(res.error)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  });
});
