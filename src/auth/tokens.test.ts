import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { describe, test } from "node:test";
import { SignJWT } from "jose";
import { TokenError, verifyToken } from "./tokens.ts";

const secret = "a-tenant-secret-of-at-least-32-characters";
const key = new TextEncoder().encode(secret);
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
const hs256 = (header: unknown, payload: unknown, s = secret) => {
  const body = `${b64(header)}.${b64(payload)}`;
  return `${body}.${createHmac("sha256", s).update(body).digest("base64url")}`;
};
const reason = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (e) {
    return e instanceof TokenError ? e.reason : `other: ${String(e)}`;
  }
};

describe("verifyToken", () => {
  const now = Date.parse("2026-11-22T00:00:00Z");
  const iat = Math.floor(now / 1000);

  test("accepts a token jose signed, and returns its claims", async () => {
    const token = await new SignJWT({ role: "authenticated", tenant_id: "t" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject("u")
      .setIssuedAt(iat)
      .setExpirationTime(iat + 60)
      .sign(key);
    const claims = await verifyToken(token, secret, now);
    assert.deepEqual([claims.sub, claims.role, claims.tenant_id], ["u", "authenticated", "t"]);
  });

  const cases: [string, () => string, string][] = [
    [
      "another secret",
      () => hs256({ alg: "HS256" }, { exp: iat + 60 }, "another-secret-another-secret-xx"),
      "bad_signature",
    ],
    ["alg none", () => `${b64({ alg: "none" })}.${b64({ exp: iat + 60 })}.`, "malformed"],
    ["alg HS512 header", () => hs256({ alg: "HS512" }, { exp: iat + 60 }), "malformed"],
    ["expired", () => hs256({ alg: "HS256" }, { exp: iat - 1 }), "expired"],
    ["exp not a number", () => hs256({ alg: "HS256" }, { exp: "later" }), "expired"],
    ["not yet valid", () => hs256({ alg: "HS256" }, { nbf: iat + 60 }), "malformed"],
    ["two parts", () => "a.b", "malformed"],
    ["garbage payload", () => `${b64({ alg: "HS256" })}.!!!.sig`, "malformed"],
    ["payload an array", () => hs256({ alg: "HS256" }, [1, 2]), "malformed"],
    [
      "tampered payload",
      () => {
        const [h, , s] = hs256({ alg: "HS256" }, { role: "anon" }).split(".");
        return `${h}.${b64({ role: "service_role" })}.${s}`;
      },
      "bad_signature",
    ],
  ];
  for (const [name, make, expected] of cases) {
    test(`refuses ${name}: ${expected}`, async () => {
      assert.equal(await reason(verifyToken(make(), secret, now)), expected);
    });
  }
});
