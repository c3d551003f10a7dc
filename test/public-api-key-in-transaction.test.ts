import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type RunningApp, startApp } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { assertProblem, completeRelease, keyedAccount, publicApi } from "./support/public-api.ts";

/**
 * Issue 20, item 4: a public-API key known to a process is checked again in the first statement
 * of each request's transaction (no transaction of its own), so a key frozen or revoked through
 * another process stops at its next request everywhere, for reads, writes and replayed answers.
 */
describeEachEngine("API keys checked inside the request's transaction", (t) => {
  let a: RunningApp;
  let b: RunningApp;
  before(async () => {
    a = await startApp(t());
    b = await startApp(t());
  });
  after(async () => {
    await a.close();
    await b.close();
  });

  const setStatus = (id: string, status: "active" | "frozen" | "revoked") =>
    t().db.asService((tx) =>
      tx.query(
        `update internal.api_keys set status = $2,
           frozen_at = case when $2 = 'frozen' then now() end,
           revoked_at = case when $2 = 'revoked' then now() end
         where id = $1`,
        [id, status],
      ),
    );

  test("a key learned by two processes, frozen, unfrozen and revoked: each takes effect at the next request in both", async () => {
    const { key } = await keyedAccount(t().db);
    const onA = publicApi(a.url, key.secret);
    const onB = publicApi(b.url, key.secret);
    for (const api of [onA, onB]) {
      // Twice: the second request finds the key learned and checks it in its transaction.
      assert.equal((await api("GET", "/releases?limit=1")).status, 200);
      assert.equal((await api("GET", "/releases?limit=1")).status, 200);
    }
    const created = await onA("POST", "/releases", completeRelease(), { "idempotency-key": "once" });
    assert.equal(created.status, 201, JSON.stringify(created.body));

    await setStatus(key.id, "frozen");
    for (const api of [onA, onB]) {
      assertProblem(await api("GET", "/releases?limit=1"), 401, "api_key_frozen");
      assertProblem(await api("POST", "/releases", completeRelease()), 401, "api_key_frozen");
    }
    // A kept answer is not replayed to a frozen key.
    assertProblem(
      await onA("POST", "/releases", completeRelease(), { "idempotency-key": "once" }),
      401,
      "api_key_frozen",
    );

    await setStatus(key.id, "active");
    for (const api of [onA, onB]) assert.equal((await api("GET", "/releases?limit=1")).status, 200);
    const replayed = await onA("POST", "/releases", completeRelease(), { "idempotency-key": "once" });
    assert.equal(replayed.headers.get("idempotent-replayed"), "true");

    await setStatus(key.id, "revoked");
    for (const api of [onA, onB]) {
      assertProblem(await api("GET", "/releases?limit=1"), 401, "api_key_revoked");
      assertProblem(await api("GET", "/rules"), 401, "api_key_revoked");
    }
  });
});
