import assert from "node:assert/strict";
import { createHmac, createPublicKey, generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import { SignJWT } from "jose";
import { PROPAGATION_S, type TenantSigningKeys } from "./signing-keys.ts";
import { TokenError, verifyBearerToken, verifyToken } from "./tokens.ts";

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

describe("verifyBearerToken", () => {
  const now = Date.parse("2026-11-22T12:00:00Z");
  const iat = Math.floor(now / 1000);
  const pair = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const other = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = pair.publicKey.export({ format: "jwk" });
  const since = now - 600_000; // the tenant switched ten minutes ago
  const signing = (verifyUntil?: number): TenantSigningKeys => ({
    current: { kid: "k1", privateKey: pair.privateKey },
    published: [
      {
        kid: "k1",
        jwk: { kty: "EC", crv: "P-256", x: String(jwk.x), y: String(jwk.y) },
        key: createPublicKey(pair.privateKey),
        verifyUntil,
      },
    ],
    since,
    hs256SessionsUntil: since + (3600 + PROPAGATION_S) * 1000,
  });
  const tenant = { jwtSecret: secret, signing: signing() };
  const es256 = (kid: string | undefined, payload: Record<string, unknown>, k = pair.privateKey) =>
    new SignJWT(payload).setProtectedHeader(kid ? { alg: "ES256", kid } : { alg: "ES256" }).sign(k);
  const session = { role: "authenticated", sub: "u", exp: iat + 60 };

  test("accepts an ES256 session of a published key, and the HS256 anon and service-role keys", async () => {
    assert.equal((await verifyBearerToken(await es256("k1", session), tenant, now)).sub, "u");
    for (const role of ["anon", "service_role"]) {
      const apiKey = hs256({ alg: "HS256" }, { iss: "backline", role, iat: iat + 10, exp: iat + 999 });
      assert.equal((await verifyBearerToken(apiKey, tenant, now)).role, role);
    }
  });

  test("an HS256 session from before the switch is accepted until such sessions have expired", async () => {
    const old = hs256({ alg: "HS256" }, { ...session, iat: Math.floor(since / 1000) - 5, exp: iat + 600 });
    assert.equal(await reason(verifyBearerToken(old, tenant, now)), "ok");
    // Past the window (jwt_expiry and the propagation minute after the switch), whatever its exp says.
    const later = since + (3600 + PROPAGATION_S) * 1000;
    const forever = hs256(
      { alg: "HS256" },
      { ...session, iat: Math.floor(since / 1000) - 5, exp: iat + 99_999 },
    );
    assert.equal(await reason(verifyBearerToken(forever, tenant, later)), "bad_signature");
    // Issued after the switch: refused, though signed with the secret.
    const after = hs256({ alg: "HS256" }, { ...session, iat: Math.floor(since / 1000) + PROPAGATION_S + 1 });
    assert.equal(await reason(verifyBearerToken(after, tenant, now)), "bad_signature");
    // No iat: refused too.
    assert.equal(
      await reason(verifyBearerToken(hs256({ alg: "HS256" }, session), tenant, now)),
      "bad_signature",
    );
    // A tenant without signing keys: HS256 sessions are its kind.
    const plain = {
      jwtSecret: secret,
      signing: { ...signing(), since: undefined, hs256SessionsUntil: undefined },
    };
    assert.equal(await reason(verifyBearerToken(after, plain, now)), "ok");
  });

  test("refuses unknown, missing or withdrawn kids, other keys, none and algorithm confusion", async () => {
    assert.equal(await reason(verifyBearerToken(await es256("k2", session), tenant, now)), "bad_signature");
    assert.equal(
      await reason(verifyBearerToken(await es256(undefined, session), tenant, now)),
      "bad_signature",
    );
    assert.equal(
      await reason(verifyBearerToken(await es256("k1", session, other.privateKey), tenant, now)),
      "bad_signature",
    );
    const withdrawn = { jwtSecret: secret, signing: signing(now - 1) };
    assert.equal(
      await reason(verifyBearerToken(await es256("k1", session), withdrawn, now)),
      "bad_signature",
    );
    assert.equal(
      await reason(verifyBearerToken(`${b64({ alg: "none", kid: "k1" })}.${b64(session)}.`, tenant, now)),
      "malformed",
    );
    const pem = pair.publicKey.export({ format: "pem", type: "spki" }).toString();
    const confused = hs256(
      { alg: "HS256", kid: "k1" },
      { ...session, iat: Math.floor(since / 1000) - 5 },
      pem,
    );
    assert.equal(await reason(verifyBearerToken(confused, tenant, now)), "bad_signature");
    // A valid signature under another header (kid kept, alg changed) is refused.
    const [, p, sig] = (await es256("k1", session)).split(".");
    assert.equal(
      await reason(verifyBearerToken(`${b64({ alg: "ES384", kid: "k1" })}.${p}.${sig}`, tenant, now)),
      "malformed",
    );
    assert.equal(
      await reason(verifyBearerToken(await es256("k1", { ...session, exp: iat - 1 }), tenant, now)),
      "expired",
    );
  });
});
