import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/** /rest/v1 request limits per tenant plan and per caller (docs/rest.md, "Rate limits"). */
describeEachEngine("rest rate limits", (t) => {
  let running: RunningApp;
  before(async () => {
    running = await startApp(t());
  });
  after(() => running.close());

  test("a caller over its limit gets 429 with Retry-After and a PostgREST-style body; another tenant is unaffected", async () => {
    const limited = await tenantWithKeys(t(), {
      settings: { rest_rate_limits: { caller: { max: 3, windowSeconds: 60 } } },
    });
    const other = await tenantWithKeys(t());
    const get = (keys: { service_role_key: string }) =>
      fetch(`${running.url}/rest/v1/releases?select=id`, {
        headers: { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` },
      });
    for (let i = 0; i < 3; i++) assert.equal((await get(limited.keys)).status, 200);
    const refused = await get(limited.keys);
    assert.equal(refused.status, 429);
    assert.match(refused.headers.get("retry-after") ?? "", /^\d+$/);
    const body = (await refused.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ["code", "details", "hint", "message"]);
    assert.equal(body.code, "BL429");
    assert.equal((await get(other.keys)).status, 200);
  });
});
