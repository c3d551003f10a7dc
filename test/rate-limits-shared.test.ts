import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { MemoryRateLimiter } from "../src/http/rate-limit.ts";
import { tenantWithKeys } from "./support/app.ts";
import { createTestDb, describeEachEngine, ENGINES, TEST_ENCRYPTION_KEY, type TestDb } from "./support/db.ts";
import { type RunningServer, startServer } from "./support/process.ts";
import { issueTestKey } from "./support/public-api.ts";
import { seedAccount } from "./support/seed.ts";

/**
 * Issue 20, item 1: one limit across processes. Each process decides from its own counters and,
 * on PostgreSQL, exchanges them through internal.rate_counters in the background
 * (docs/operations.md, "Rate limits across processes").
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describeEachEngine("rate-limit counters shared through the database", (t) => {
  test("two limiters' hits add up after an exchange; hits between exchanges are not lost", async () => {
    const a = new MemoryRateLimiter();
    const b = new MemoryRateLimiter();
    const limit = { max: 10, windowSeconds: 3600 };
    const key = `test:${Math.random()}`;
    for (let i = 0; i < 4; i++) a.hit(key, limit);
    for (let i = 0; i < 3; i++) b.hit(key, limit);
    assert.equal(a.peek(key, limit).remaining, 6, "before an exchange a counts only its own");
    await a.sync(t().db);
    await b.sync(t().db);
    assert.equal(b.peek(key, limit).remaining, 3, "b learned a's 4 hits");
    a.hit(key, limit); // counted while nothing is exchanged
    await a.sync(t().db);
    assert.equal(a.peek(key, limit).remaining, 2, "a: 4 + 3 + 1");
    b.hit(key, limit);
    b.hit(key, limit);
    assert.equal(b.hit(key, limit).allowed, true, "b knows 7 (not a's last), plus 3 of its own since: 10");
    assert.equal(b.hit(key, limit).allowed, false, "b: 7 + 4 = 11 > 10");
    await b.sync(t().db);
    await a.sync(t().db);
    assert.equal(a.peek(key, limit).allowed, false);
    const stored = await t().db.asService(
      async (tx) =>
        (await tx.query<{ hits: number }>("select hits from internal.rate_counters where key = $1", [key]))
          .rows,
    );
    assert.deepEqual(stored, [{ hits: 12 }], "each hit is in the database exactly once");
  });
});

describe("one public-API key's limit across three server processes [postgres]", () => {
  const skip = ENGINES.includes("postgres") ? false : "PostgreSQL only: TEST_DATABASE_URL is not set";
  let t: TestDb | undefined;
  const servers: RunningServer[] = [];

  before(async () => {
    if (skip) return;
    t = await createTestDb("postgres");
  });

  after(async () => {
    await Promise.all(servers.map((s) => s.stop("SIGKILL")));
    await t?.close();
  });

  test("three processes sharing one key let through about the limit, not three times it", {
    skip,
  }, async () => {
    const db = t as TestDb;
    const max = 30;
    const { tenant } = await tenantWithKeys(db, {
      settings: { public_api_rate_limit: { max, windowSeconds: 3600 } },
    });
    const account = await seedAccount(db.db, tenant);
    const key = await issueTestKey(db.db, account);
    const env = {
      DATABASE_URL: db.url as string,
      MIGRATE_ON_START: "false",
      DEV_TENANT: "false",
      WORKER: "off",
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      RATE_LIMIT_SYNC_MS: "100",
    };
    servers.push(...(await Promise.all([startServer(env), startServer(env), startServer(env)])));
    // The window is the hour: not across its end.
    const left = 3_600_000 - (Date.now() % 3_600_000);
    if (left < 20_000) await sleep(left + 100);

    const status: number[][] = servers.map(() => []);
    // 20 rounds of one request to each process, a sync interval and a half apart: 60 requests.
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        servers.map(async (s, i) => {
          const res = await fetch(`${s.url}/api/public/v1/releases?limit=1`, {
            headers: { authorization: `Bearer ${key.secret}` },
          });
          await res.arrayBuffer();
          status[i]?.push(res.status);
        }),
      );
      await sleep(150);
    }
    const allowed = status.flat().filter((s) => s === 200).length;
    const refused = status.flat().filter((s) => s === 429).length;
    assert.equal(allowed + refused, 60, JSON.stringify(status));
    // Each process alone would let 20 through (60 in all); shared, the limit holds to within what
    // the three let through between two exchanges.
    assert.ok(allowed >= max && allowed <= max + 3, `allowed ${allowed}: ${JSON.stringify(status)}`);
    for (const [i, s] of status.entries()) {
      assert.ok(s.includes(429), `process ${i} never refused: ${JSON.stringify(s)}`);
      assert.equal(s.at(-1), 429, `process ${i} let the last request through`);
    }
  });
});
