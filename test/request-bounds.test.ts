import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Db } from "../src/db/db.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import type { Claims } from "../src/db/types.ts";
import { REST_LIMITS } from "../src/rest/limits.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine, testSecrets } from "./support/db.ts";
import { completeRelease, keyedAccount, publicApi } from "./support/public-api.ts";
import { seedAccount } from "./support/seed.ts";

/**
 * Issue 26, items 2 and 8: every request is bounded. /rest/v1 refuses what one request may not
 * ask (docs/rest.md, "Request limits") on both engines; on PostgreSQL a request's statement runs
 * under its role's statement timeout and a cancelled one answers 504 while other requests go on;
 * background work (asService) has no such timeout; and counts never reveal another tenant's volume.
 */

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  ms: number;
}

async function get(url: string, keys: TenantKeys, headers: Record<string, string> = {}): Promise<Answer> {
  const started = Date.now();
  const res = await fetch(url, {
    headers: { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}`, ...headers },
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    ms: Date.now() - started,
  };
}

const list = (n: number, item: (i: number) => string) =>
  Array.from({ length: n }, (_, i) => item(i)).join(",");
/** An embed chain `releases(tracks(releases(...)))` `depth` levels deep. */
const chain = (depth: number): string => {
  let s = "id";
  for (let d = depth; d >= 1; d--) s = `id,${d % 2 === 1 ? "releases" : "tracks"}(${s})`;
  return s;
};

describeEachEngine("request bounds", (t) => {
  describe("/rest/v1 request limits", () => {
    let app: RunningApp;
    let keys: TenantKeys;
    before(async () => {
      app = await startApp(t());
      ({ keys } = await tenantWithKeys(t(), { settings: UNLIMITED }));
    });
    after(() => app.close());

    const L = REST_LIMITS;
    const cases: { name: string; limit: string; over: string; at: string }[] = [
      {
        name: "an in list",
        limit: "listItems",
        over: `name=in.(${list(L.listItems + 1, String)})`,
        at: `name=in.(${list(L.listItems, String)})`,
      },
      {
        name: "a quantified list",
        limit: "listItems",
        over: `name=eq(any).{${list(L.listItems + 1, String)}}`,
        at: `name=eq(any).{${list(L.listItems, String)}}`,
      },
      {
        name: "a like pattern",
        limit: "patternLength",
        over: `name=like.${"a".repeat(L.patternLength + 1)}*`.slice(0, -1),
        at: `name=like.*${"a".repeat(L.patternLength - 1)}`,
      },
      {
        name: "an imatch pattern",
        limit: "patternLength",
        over: `name=imatch.${"a".repeat(L.patternLength + 1)}`,
        at: `name=imatch.${"a".repeat(L.patternLength)}`,
      },
      {
        name: "a pattern in a quantified list",
        limit: "patternLength",
        over: `name=ilike(any).{x*,${"b".repeat(L.patternLength + 1)}}`,
        at: `name=ilike(any).{x*,${"b".repeat(L.patternLength)}}`,
      },
      {
        name: "a pattern inside an or",
        limit: "patternLength",
        over: `or=(name.match.${"c".repeat(L.patternLength + 1)},name.eq.x)`,
        at: `or=(name.match.${"c".repeat(L.patternLength)},name.eq.x)`,
      },
      {
        name: "a deep logic tree",
        limit: "logicDepth",
        over: `or=(${"and(".repeat(L.logicDepth)}name.eq.a${")".repeat(L.logicDepth)})`,
        at: `or=(${"and(".repeat(L.logicDepth - 1)}name.eq.a${")".repeat(L.logicDepth - 1)})`,
      },
      {
        name: "a wide or",
        limit: "conditions",
        // The group itself is a condition too.
        over: `or=(${list(L.conditions, () => "name.eq.a")})`,
        at: `or=(${list(L.conditions - 1, () => "name.eq.a")})`,
      },
      {
        name: "many filters",
        limit: "conditions",
        over: list(L.conditions + 1, () => "name=neq.a").replaceAll(",", "&"),
        at: list(L.conditions, () => "name=neq.a").replaceAll(",", "&"),
      },
      {
        name: "deep embeds",
        limit: "embedDepth",
        over: `select=${chain(L.embedDepth + 1)}`,
        at: `select=${chain(L.embedDepth)}`,
      },
      {
        name: "many embeds",
        limit: "embeds",
        over: `select=id,${list(L.embeds + 1, (i) => `r${i}:releases(id)`)}`,
        at: `select=id,${list(L.embeds, (i) => `r${i}:releases(id)`)}`,
      },
      {
        name: "a long query string",
        limit: "queryLength",
        over: `name=eq.${"q".repeat(L.queryLength)}`,
        at: `name=eq.${"q".repeat(L.queryLength - "name=eq.".length)}`,
      },
    ];
    for (const c of cases) {
      test(`${c.name}: past the ${c.limit} limit a 400 BL400 names it; at the limit the request runs`, async () => {
        const over = await get(`${app.url}/rest/v1/artist_profiles?${c.over}`, keys);
        assert.equal(over.status, 400, JSON.stringify(over.body).slice(0, 300));
        assert.deepEqual(Object.keys(over.body).sort(), ["code", "details", "hint", "message"]);
        assert.equal(over.body.code, "BL400");
        assert.equal(over.body.message, `Request exceeds the ${c.limit} limit`);
        assert.equal(typeof over.body.details, "string");
        const at = await get(`${app.url}/rest/v1/artist_profiles?${c.at}`, keys);
        assert.equal(at.status, 200, JSON.stringify(at.body).slice(0, 300));
      });
    }

    test("a back-reference in match/imatch is refused (it makes PostgreSQL's regex engine backtrack)", async () => {
      for (const pattern of ["(a*)*\\1", "^(x+)+\\2$"]) {
        for (const op of ["match", "imatch"]) {
          const r = await get(
            `${app.url}/rest/v1/artist_profiles?name=${op}.${encodeURIComponent(pattern)}`,
            keys,
          );
          assert.equal(r.status, 400);
          assert.equal(r.body.code, "BL400");
          assert.match(String(r.body.details), /back-reference/);
        }
      }
      // An escaped backslash followed by a digit is a literal, not a back-reference.
      const literal = await get(
        `${app.url}/rest/v1/artist_profiles?name=match.${encodeURIComponent("a\\\\1")}`,
        keys,
      );
      assert.equal(literal.status, 200);
    });

    test("the public API's status filter takes a bounded list", async () => {
      const { key } = await keyedAccount(t().db);
      const api = publicApi(app.url, key.secret);
      assert.equal((await api("GET", "/releases?status=draft,live")).status, 200);
      const long = await api("GET", `/releases?status=${list(100, () => "draft")}`);
      assert.equal(long.status, 400, JSON.stringify(long.body));
      assert.equal(long.body.param, "status");
    });
  });

  describe("statement timeouts per request role", () => {
    test("a request's transaction runs under its role's timeout; asService under none unless asked", async () => {
      const db = t().db.withStatementTimeouts({ anon: 1111, authenticated: 2222, service: 3333 });
      const setting = async (claims: Claims) =>
        db.withRequestContext(claims, async (tx) => {
          const r = await tx.query<{ v: string }>("select current_setting('statement_timeout') as v");
          return r.rows[0]?.v;
        });
      assert.equal(await setting({ role: "anon" }), "1111ms");
      assert.equal(await setting({ role: "authenticated" }), "2222ms");
      assert.equal(await setting({ role: "tenant_service" }), "3333ms");
      assert.equal(await setting({ role: "service_role" }), "3333ms");
      const service = async (options: { statementTimeoutMs?: number } = {}) =>
        db.asService(async (tx) => {
          const r = await tx.query<{ v: string }>("select current_setting('statement_timeout') as v");
          return r.rows[0]?.v;
        }, options);
      assert.equal(await service(), "0");
      assert.equal(await service({ statementTimeoutMs: 500 }), "500ms");
      // The setting is local to the transaction: the next one on the same connection starts clean.
      assert.equal(await service(), "0");
    });

    test("the defaults are Supabase's: anon 3 s, authenticated 8 s, service 60 s", async () => {
      const r = await t().db.withRequestContext({ role: "anon" }, (tx) =>
        tx.query<{ v: string }>("select current_setting('statement_timeout') as v"),
      );
      assert.equal(r.rows[0]?.v, "3s");
      assert.deepEqual(t().db.statementTimeouts, { anon: 3000, authenticated: 8000, service: 60_000 });
    });

    test("PostgreSQL: a statement past the timeout is cancelled with 57014; background work is not bounded", async (ctx) => {
      if (t().kind !== "postgres") return ctx.skip("PGlite cannot interrupt a running statement");
      const db = t().db.withStatementTimeouts({ anon: 200, authenticated: 200, service: 200 });
      await assert.rejects(
        db.withRequestContext({ role: "tenant_service" }, (tx) => tx.query("select pg_sleep(1)")),
        (e: { code?: string }) => e.code === "57014",
      );
      // A worker's, the CLI's or an import's statement may run for as long as it needs.
      await db.asService((tx) => tx.query("select pg_sleep(0.4)"));
    });
  });

  describe("PostgreSQL: a slow request beside normal traffic", () => {
    let app: RunningApp;
    let keys: TenantKeys;
    let tenant: Tenant;
    before(async () => {
      if (t().kind !== "postgres") return;
      // A test-only view whose every read sleeps, created by the owner: a query that takes too long.
      await t().owner.transaction(
        (tx) =>
          tx.exec(`create view public.slow_view as select 1 as id, pg_sleep(2)::text as slept;
                   grant select on public.slow_view to tenant_service, authenticated;
                   create function public.test_slow_gate() returns boolean language sql stable
                     as 'select pg_sleep(2) is not null';`),
        { readOnly: false },
      );
      app = await startApp(t(), {
        STATEMENT_TIMEOUT_AUTHENTICATED_MS: "300",
        STATEMENT_TIMEOUT_SERVICE_MS: "300",
      });
      ({ keys, tenant } = await tenantWithKeys(t(), { settings: UNLIMITED }));
    });
    after(async () => {
      await app?.close();
    });

    test("the slow /rest/v1 request ends with 504 and PostgREST's 57014 body while normal requests answer 200", async (ctx) => {
      if (t().kind !== "postgres") return ctx.skip("PostgreSQL only (PGlite cannot interrupt a statement)");
      const slow = get(`${app.url}/rest/v1/slow_view?select=id`, keys);
      const normal: Answer[] = [];
      const started = Date.now();
      // Normal traffic while the slow statement runs.
      while (Date.now() - started < 250) {
        normal.push(
          ...(await Promise.all([1, 2, 3].map(() => get(`${app.url}/rest/v1/releases?select=id`, keys)))),
        );
      }
      const s = await slow;
      assert.equal(s.status, 504);
      assert.deepEqual(s.body, {
        code: "57014",
        message: "canceling statement due to statement timeout",
        details: null,
        hint: null,
      });
      assert.ok(s.ms < 1800, `cancelled after the timeout, not after the 2 s sleep (${s.ms} ms)`);
      assert.ok(normal.length >= 3);
      for (const n of normal) assert.equal(n.status, 200);
      // And after it.
      assert.equal((await get(`${app.url}/rest/v1/releases?select=id`, keys)).status, 200);
    });

    test("a cancelled statement on /api/public/v1 is a 504 problem with code statement_timeout", async (ctx) => {
      if (t().kind !== "postgres") return ctx.skip("PostgreSQL only (PGlite cannot interrupt a statement)");
      const { key } = await keyedAccount(t().db, { tenant });
      const api = publicApi(app.url, key.secret);
      // A row for the policy below to be evaluated on.
      assert.equal((await api("POST", "/releases", completeRelease())).status, 201);
      await t().owner.transaction(
        (tx) =>
          tx.exec(`create policy test_slow on public.releases as restrictive for select to authenticated
                   using (public.test_slow_gate())`),
        { readOnly: false },
      );
      try {
        const r = await api("GET", "/releases");
        assert.equal(r.status, 504, JSON.stringify(r.body));
        assert.equal(r.headers.get("content-type"), "application/problem+json; charset=utf-8");
        assert.equal(r.body.code, "statement_timeout");
        assert.equal(r.body.status, 504);
        // The same on /rest/v1 for a user's role.
        const rest = await get(`${app.url}/rest/v1/releases?select=id`, keys);
        assert.equal(rest.status, 200, "the tenant's service key is not subject to the authenticated policy");
      } finally {
        await t().owner.transaction((tx) => tx.exec("drop policy test_slow on public.releases"), {
          readOnly: false,
        });
      }
      assert.equal((await api("GET", "/releases")).status, 200);
    });
  });

  describe("PostgreSQL: a cancelled statement on every interface is a 504 in its own shape", () => {
    // An operator's login-role timeout (here 300 ms on every connection of the app's own pool)
    // cancels a statement that waits on a lock held by a long transaction: a real 57014 on the
    // service paths (tenant lookup) that every interface goes through first.
    let app: RunningApp;
    let keys: TenantKeys;
    let engine: PostgresEngine | undefined;
    let apiKey: string;
    before(async () => {
      if (t().kind !== "postgres") return;
      let tenant: Tenant;
      ({ keys, tenant } = await tenantWithKeys(t(), { settings: UNLIMITED }));
      apiKey = (await keyedAccount(t().db, { tenant })).key.secret;
      const url = new URL(t().url as string);
      url.searchParams.set("options", "-c statement_timeout=300");
      engine = new PostgresEngine({ url: url.toString(), poolSize: 4 });
      app = await startApp({ ...t(), db: new Db(engine, { secrets: testSecrets() }) });
    });
    after(async () => {
      await app?.close();
      await engine?.close();
    });

    test("rest, public API, admin, auth and storage answer 504, never 500", async (ctx) => {
      if (t().kind !== "postgres") return ctx.skip("PostgreSQL only (PGlite cannot interrupt a statement)");
      const key = { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` };
      await t().owner.transaction(
        async (tx) => {
          await tx.query("lock table internal.tenants, internal.api_keys in access exclusive mode");
          const call = async (path: string, headers: Record<string, string> = key) => {
            const res = await fetch(`${app.url}${path}`, { headers });
            return {
              status: res.status,
              type: res.headers.get("content-type"),
              body: (await res.json()) as Record<string, unknown>,
            };
          };
          const rest = await call("/rest/v1/releases?select=id");
          assert.equal(rest.status, 504);
          assert.deepEqual(rest.body, {
            code: "57014",
            message: "canceling statement due to statement timeout",
            details: null,
            hint: null,
          });
          for (const [path, headers] of [
            ["/api/public/v1/releases", { authorization: `Bearer ${apiKey}` }],
            ["/admin/v1/reviews", key],
          ] as const) {
            const r = await call(path, headers);
            assert.equal(r.status, 504, `${path}: ${JSON.stringify(r.body)}`);
            assert.equal(r.type, "application/problem+json; charset=utf-8", path);
            assert.equal(r.body.code, "statement_timeout", path);
          }
          const auth = await call("/auth/v1/user", key);
          assert.equal(auth.status, 504, JSON.stringify(auth.body));
          assert.equal(auth.body.error_code, "request_timeout");
          assert.equal(auth.body.code, 504);
          const storage = await call("/storage/v1/object/authenticated/artwork/x/cover.jpg", key);
          assert.equal(storage.status, 504, JSON.stringify(storage.body));
          assert.deepEqual(
            { statusCode: storage.body.statusCode, error: storage.body.error, code: storage.body.code },
            { statusCode: "504", error: "Gateway Timeout", code: "statement_timeout" },
          );
        },
        { readOnly: false },
      );
      // The lock gone, the same requests go through.
      const again = await fetch(`${app.url}/rest/v1/releases?select=id`, { headers: key });
      assert.equal(again.status, 200);
    });
  });

  describe("counts never reveal another tenant's volume", () => {
    let app: RunningApp;
    let big: { tenant: Tenant; keys: TenantKeys };
    let small: { tenant: Tenant; keys: TenantKeys };
    before(async () => {
      app = await startApp(t());
      big = await tenantWithKeys(t(), { settings: UNLIMITED });
      small = await tenantWithKeys(t(), { settings: UNLIMITED });
      const bigAccount = await seedAccount(t().db, big.tenant);
      const smallAccount = await seedAccount(t().db, small.tenant);
      await t().owner.transaction(
        async (tx) => {
          await tx.query(
            "insert into public.artist_profiles (account_id, name) select $1, 'Big ' || g from generate_series(1, 3000) g",
            [bigAccount.id],
          );
          await tx.query(
            "insert into public.artist_profiles (account_id, name) select $1, 'Small ' || g from generate_series(1, 3) g",
            [smallAccount.id],
          );
        },
        { readOnly: false },
      );
      // Fresh statistics: the planner knows the table holds 3003 rows.
      await t().owner.transaction((tx) => tx.exec("analyze public.artist_profiles"), { readOnly: false });
    });
    after(() => app.close());

    const total = (a: Answer) => a.headers.get("content-range")?.split("/")[1];

    test("planned and estimated count exactly under row security for a tenant's callers", async () => {
      for (const count of ["planned", "estimated", "exact"]) {
        const s = await get(`${app.url}/rest/v1/artist_profiles?select=id`, small.keys, {
          prefer: `count=${count}`,
        });
        assert.equal(s.status, 200);
        assert.equal(total(s), "3", `count=${count}`);
        assert.match(s.headers.get("preference-applied") ?? "", new RegExp(`count=${count}`));
        const filtered = await get(`${app.url}/rest/v1/artist_profiles?select=id&name=like.*1*`, small.keys, {
          prefer: `count=${count}`,
        });
        assert.equal(total(filtered), "1", `count=${count} with a filter`);
        const b = await get(`${app.url}/rest/v1/artist_profiles?select=id&limit=5`, big.keys, {
          prefer: `count=${count}`,
        });
        assert.equal(b.status, 206);
        assert.equal(total(b), "3000", `count=${count} for the big tenant`);
        const head = await fetch(`${app.url}/rest/v1/artist_profiles?select=id`, {
          method: "HEAD",
          headers: {
            apikey: small.keys.service_role_key,
            authorization: `Bearer ${small.keys.service_role_key}`,
            prefer: `count=${count}`,
          },
        });
        assert.equal(head.headers.get("content-range")?.split("/")[1], "3", `HEAD count=${count}`);
      }
    });
  });
});
