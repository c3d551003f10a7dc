import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type GatewayFailure, postgrestGatewayError } from "./gateway.ts";

describe("postgrestGatewayError", () => {
  // A missing or unknown apikey: the gateway's own answer, as Supabase's, with no PostgREST code.
  test("no_apikey -> 401 {message, hint}, as Supabase's gateway", () => {
    const r = postgrestGatewayError({ kind: "no_apikey" });
    assert.equal(r.status, 401);
    assert.equal(r.body.message, "No API key found in request");
    assert.deepEqual(Object.keys(r.body).sort(), ["hint", "message"]);
  });
  test("invalid_apikey -> 401 {message: Invalid API key, hint}", () => {
    const r = postgrestGatewayError({ kind: "invalid_apikey" });
    assert.equal(r.status, 401);
    assert.equal(r.body.message, "Invalid API key");
    assert.deepEqual(Object.keys(r.body).sort(), ["hint", "message"]);
  });
  const cases: [GatewayFailure, string, boolean][] = [
    [{ kind: "no_authorization" }, "PGRST302", false],
    [{ kind: "expired_jwt" }, "PGRST303", true],
    [{ kind: "wrong_tenant" }, "PGRST301", true],
    [{ kind: "bad_jwt", message: 'JWT signature "does not" match' }, "PGRST301", true],
  ];
  for (const [failure, code, invalidToken] of cases) {
    test(`${failure.kind} -> 401 ${code}`, () => {
      const r = postgrestGatewayError(failure);
      assert.equal(r.status, 401);
      assert.equal(r.body.code, code);
      assert.deepEqual(Object.keys(r.body).sort(), ["code", "details", "hint", "message"]);
      const www = r.headers["WWW-Authenticate"];
      if (invalidToken) {
        assert.match(www ?? "", /^Bearer error="invalid_token", error_description="[^"]*"$/);
      } else {
        assert.notEqual(www?.includes("invalid_token"), true);
      }
    });
  }
});
