import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { requestScope } from "../src/db/admission.ts";
import { currentAuditScope } from "../src/db/audit-context.ts";
import { Db } from "../src/db/db.ts";
import { JSON_LIMITS } from "../src/http/body-limits.ts";
import { claimIdempotencyKey } from "../src/public-api/idempotency.ts";
import { FAILED_AUTH_LIMIT } from "../src/public-api/plugin.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { type ApiResponse, type IssuedKey, keyedAccount, publicApi } from "./support/public-api.ts";

/**
 * Issue 27, "Under load and faults it bends and doesn't break": deep and wide bodies, a 413 every
 * client can read, the bounded wait for the database (503 + Retry-After), and a 429 that costs no
 * database work. (The process-level items, the data-directory lock and the graceful stop, are in
 * test/reliability-process.test.ts.)
 */

function nested(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
}

function wide(members: number): string {
  return `[${new Array(members).fill("1").join(",")}]`;
}

/**
 * Counts the transactions opened through any Db while `fn` runs (the prototype's doors, since the
 * app works on its own Db over the test's engine).
 */
async function countingTransactions(fn: () => Promise<void>): Promise<number> {
  let n = 0;
  const proto = Db.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const doors = ["withRequestContext", "asService", "ping"] as const;
  const original = Object.fromEntries(doors.map((d) => [d, proto[d]]));
  for (const door of doors) {
    proto[door] = function (this: unknown, ...args: unknown[]) {
      // Only a request's own work: on PostgreSQL the rate limiter shares its counts from a timer
      // (RateLimiter.startSharing), outside any request, whatever the requests do.
      if (currentAuditScope()) n++;
      return original[door]?.apply(this, args);
    };
  }
  try {
    await fn();
  } finally {
    for (const door of doors) proto[door] = original[door] as (...args: unknown[]) => unknown;
  }
  return n;
}

describeEachEngine("reliability", (t) => {
  let app: RunningApp;
  let key: IssuedKey;
  let keys: { anon_key: string; service_role_key: string };

  before(async () => {
    app = await startApp(t());
    key = (await keyedAccount(t().db)).key;
    keys = (await tenantWithKeys(t())).keys;
  });
  after(() => app.close());

  describe("deep and wide bodies are refused before anything walks them", () => {
    const deep = nested(10_000);
    const cases: { name: string; send: (body: string) => Promise<Response> }[] = [
      {
        name: "/api/public/v1 with an Idempotency-Key",
        send: (body) =>
          fetch(`${app.url}/api/public/v1/releases`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${key.secret}`,
              "content-type": "application/json",
              "idempotency-key": `deep-${Math.random()}`,
            },
            body,
          }),
      },
      {
        name: "/rest/v1",
        send: (body) =>
          fetch(`${app.url}/rest/v1/releases`, {
            method: "POST",
            headers: {
              apikey: keys.service_role_key,
              authorization: `Bearer ${keys.service_role_key}`,
              "content-type": "application/json",
            },
            body,
          }),
      },
      {
        name: "/auth/v1",
        send: (body) =>
          fetch(`${app.url}/auth/v1/signup`, {
            method: "POST",
            headers: { apikey: keys.anon_key, "content-type": "application/json" },
            body,
          }),
      },
      {
        name: "/admin/v1",
        send: (body) =>
          fetch(`${app.url}/admin/v1/releases/00000000-0000-0000-0000-000000000000/approve`, {
            method: "POST",
            headers: { apikey: keys.service_role_key, "content-type": "application/json" },
            body,
          }),
      },
    ];
    for (const c of cases) {
      test(`${c.name}: nested 10,000 deep is 400, and so is an array of too many members`, async () => {
        const r = await c.send(deep);
        assert.equal(r.status, 400);
        const text = await r.text();
        assert.match(text, new RegExp(`deeper than ${JSON_LIMITS.maxDepth} levels`));
        assert.doesNotMatch(text, /RangeError|stack/i);
        const w = await c.send(wide(JSON_LIMITS.maxMembers + 1));
        assert.equal(w.status, 400);
        assert.match(await w.text(), /more than 100000 members/);
      });
    }

    test("the public API names the limit in its code; a body at the limit is parsed as usual", async () => {
      const api = publicApi(app.url, key.secret);
      const r = await fetch(`${app.url}/api/public/v1/releases`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: deep,
      });
      assert.equal(((await r.json()) as { code: string }).code, "json_too_deep");
      // 64 levels is allowed: the body then fails validation (422), not the limit.
      const ok = await api("POST", "/releases", JSON.parse(nested(JSON_LIMITS.maxDepth)));
      assert.equal(ok.status, 422, JSON.stringify(ok.body));
      // Brackets inside strings are text, not nesting.
      const inString = await api("POST", "/releases", { title: "[".repeat(500) });
      assert.equal(inString.status, 422);
    });
  });

  test("a body over the limit: every client reads the 413, however much it sends", async () => {
    const big = new Uint8Array(20 * 1024 * 1024).fill(0x20);
    // Without a Content-Length (chunked), the limit is found only while reading.
    const chunked = () =>
      new ReadableStream({
        start(controller) {
          for (let i = 0; i < 80; i++) controller.enqueue(new Uint8Array(256 * 1024).fill(0x20));
          controller.close();
        },
      });
    for (let i = 0; i < 5; i++) {
      const streamed = await fetch(`${app.url}/api/public/v1/releases`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: chunked(),
        duplex: "half",
      } as RequestInit);
      assert.equal(streamed.status, 413);
      assert.equal(((await streamed.json()) as { code: string }).code, "body_too_large");
      const r = await fetch(`${app.url}/api/public/v1/releases`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: big,
      });
      assert.equal(r.status, 413);
      assert.equal(((await r.json()) as { code: string }).code, "body_too_large");
      const rest = await fetch(`${app.url}/rest/v1/releases`, {
        method: "POST",
        headers: {
          apikey: keys.service_role_key,
          authorization: `Bearer ${keys.service_role_key}`,
          "content-type": "application/json",
        },
        body: big,
      });
      assert.equal(rest.status, 413);
      assert.equal(((await rest.json()) as { code: string }).code, "PGRST413");
    }
  });

  describe("the wait for the database is bounded", () => {
    /** Holds every connection of the engine with background transactions for `ms`. */
    function holdAllConnections(ms: number): Promise<unknown> {
      const slots = t().kind === "pglite" ? 1 : 5;
      return Promise.all(
        Array.from({ length: slots }, () =>
          t().db.asService(async (tx) => {
            await tx.query("select 1");
            await new Promise((r) => setTimeout(r, ms));
          }),
        ),
      );
    }

    test("a long statement does not stop the server: /health answers while it runs", async () => {
      const statement =
        t().kind === "pglite" ? "select count(*) from generate_series(1, 3000000)" : "select pg_sleep(1.5)";
      const started = Date.now();
      const running = t().db.asService((tx) => tx.query(statement), { readOnly: true });
      const slowest: number[] = [];
      let done = false;
      void running.finally(() => {
        done = true;
      });
      while (!done) {
        const asked = Date.now();
        assert.equal((await fetch(`${app.url}/health`)).status, 200);
        slowest.push(Date.now() - asked);
        await new Promise((r) => setTimeout(r, 20));
      }
      await running;
      const ran = Date.now() - started;
      assert.ok(ran > 300, `the statement ran only ${ran} ms: make it longer`);
      assert.ok(slowest.length >= 5, `only ${slowest.length} health checks in ${ran} ms`);
      assert.ok(Math.max(...slowest) < 250, `a health check took ${Math.max(...slowest)} ms`);
    });

    test("past the wait bound: 503 with Retry-After on every interface, then served again", async () => {
      const held = holdAllConnections(4000);
      await new Promise((r) => setTimeout(r, 100));
      const api = publicApi(app.url, key.secret);
      const asked = Date.now();
      const busy = await api("GET", "/releases");
      const waited = Date.now() - asked;
      assert.equal(busy.status, 503, JSON.stringify(busy.body));
      assert.equal(busy.body.code, "too_many_connections");
      assert.equal(busy.headers.get("retry-after"), "1");
      assert.ok(waited >= 900 && waited < 2000, `refused after ${waited} ms`);
      const rest = await fetch(`${app.url}/rest/v1/releases?select=id`, {
        headers: { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` },
      });
      assert.equal(rest.status, 503);
      assert.equal(rest.headers.get("retry-after"), "1");
      assert.equal(((await rest.json()) as { code: string }).code, "53300");
      await held;
      // Once the database is free again, requests are served.
      assert.equal((await api("GET", "/releases")).status, 200);
    });

    test("a request answered 503 after claiming its Idempotency-Key frees the key at once, however busy the database still is", async () => {
      const key = {
        owner: `account:${randomUUID()}`,
        method: "POST",
        path: "/api/public/v1/releases",
        key: `busy-${randomUUID()}`,
        hash: "h",
      };
      // Claimed by a request, as the public API claims it, before the database gets busy.
      const claimed = await requestScope.run({ request: true }, () => claimIdempotencyKey(t().db, key));
      assert.equal(claimed.kind, "run");
      if (claimed.kind !== "run") return;
      const held = holdAllConnections(2500);
      await new Promise((r) => setTimeout(r, 100));
      // The request's own work was refused (503); settling its key waits its turn, unbounded.
      await requestScope.run({ request: true }, () =>
        claimed.finish({ status: 503, body: { code: "too_many_connections" }, headers: {} }),
      );
      await held;
      // The key is free: the client's retry with it runs, rather than 409 for two minutes.
      const again = await requestScope.run({ request: true }, () => claimIdempotencyKey(t().db, key));
      assert.equal(again.kind, "run");
    });

    test("past the queue bound: refused at once, not after the wait", async () => {
      const held = holdAllConnections(2500);
      await new Promise((r) => setTimeout(r, 100));
      const asked = Date.now();
      const answers = await Promise.all(
        Array.from({ length: 130 }, async () => {
          const r = await fetch(`${app.url}/ready`).catch(() => undefined);
          return { status: r?.status, at: Date.now() - asked };
        }),
      );
      const fast = answers.filter((a) => a.status === 503 && a.at < 700);
      assert.ok(fast.length >= 25, `only ${fast.length} of 130 were refused at once`);
      await held;
    });
  });

  describe("a 429 costs no database work", () => {
    test("by key: once a key is over its limit, its calls open no transaction", async () => {
      const limited = await tenantWithKeys(t(), {
        settings: { public_api_rate_limit: { max: 2, windowSeconds: 60 } },
      });
      const { key: k } = await keyedAccount(t().db, { tenant: limited.tenant });
      const api = publicApi(app.url, k.secret);
      const intoMinute = Date.now() % 60_000;
      if (intoMinute > 55_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 200));
      // The counter sees a served request's transactions...
      const served = await countingTransactions(async () => {
        assert.equal((await api("GET", "/releases")).status, 200);
      });
      assert.ok(served > 0, "the counter counted nothing");
      assert.equal((await api("GET", "/releases")).status, 200);
      // ...and none for a refused one.
      const opened = await countingTransactions(async () => {
        for (let i = 0; i < 20; i++) {
          const r = await api("GET", "/releases");
          assert.equal(r.status, 429);
          assert.match(r.headers.get("retry-after") ?? "", /^\d+$/);
        }
      });
      assert.equal(opened, 0);
    });

    test("by client address: after repeated unknown keys, the next is refused unlooked", async () => {
      const good = publicApi(app.url, key.secret);
      assert.equal((await good("GET", "/releases")).status, 200);
      const bogus = (i: number) => publicApi(app.url, `bk_live_${"x".repeat(40)}${i}`);
      let refused: ApiResponse | undefined;
      for (let i = 0; i < FAILED_AUTH_LIMIT.max + 1 && !refused; i++) {
        const r = await bogus(i)("GET", "/releases");
        if (r.status === 429) refused = r;
        else assert.equal(r.status, 401);
      }
      assert.ok(refused, "never refused");
      assert.equal(refused.body.code, "rate_limited");
      const opened = await countingTransactions(async () => {
        for (let i = 0; i < 10; i++) assert.equal((await bogus(1000 + i)("GET", "/releases")).status, 429);
      });
      assert.equal(opened, 0);
      // A known key from the same address still works: it is counted by its own limit.
      assert.equal((await good("GET", "/releases")).status, 200);
    });
  });
});
