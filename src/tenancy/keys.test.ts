import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { jwtVerify } from "jose";
import { newJwtSecret, tenantKeys } from "./keys.ts";
import { slugify } from "./tenants.ts";

describe("tenantKeys", () => {
  const tenant = {
    id: "0b5c1a2e-3f4d-4e5f-8a9b-0c1d2e3f4a5b",
    jwt_secret: newJwtSecret(),
    created_at: new Date("2026-01-02T03:04:05Z"),
  };

  test("signs an anon and a service-role key with the tenant's secret", async () => {
    const keys = await tenantKeys(tenant);
    const secret = new TextEncoder().encode(tenant.jwt_secret);
    const anon = await jwtVerify(keys.anon_key, secret, { issuer: "backline", algorithms: ["HS256"] });
    const service = await jwtVerify(keys.service_role_key, secret, {
      issuer: "backline",
      algorithms: ["HS256"],
    });
    assert.deepEqual([anon.payload.role, anon.payload.tenant_id], ["anon", tenant.id]);
    assert.deepEqual([service.payload.role, service.payload.tenant_id], ["service_role", tenant.id]);
    assert.equal(anon.payload.iat, Date.parse("2026-01-02T03:04:05Z") / 1000);
  });

  test("are the same every time, and change with the secret", async () => {
    assert.deepEqual(await tenantKeys(tenant), await tenantKeys(tenant));
    const rotated = await tenantKeys({ ...tenant, jwt_secret: newJwtSecret() });
    assert.notEqual(rotated.anon_key, (await tenantKeys(tenant)).anon_key);
  });

  test("do not verify with another tenant's secret", async () => {
    const keys = await tenantKeys(tenant);
    await assert.rejects(jwtVerify(keys.anon_key, new TextEncoder().encode(newJwtSecret())));
  });

  test("secrets are 32 random bytes", () => {
    assert.equal(Buffer.from(newJwtSecret(), "base64url").length, 32);
    assert.notEqual(newJwtSecret(), newJwtSecret());
  });
});

describe("slugify", () => {
  const cases: [string, string][] = [
    ["Acme Music", "acme-music"],
    ["  Éditions Çà & Là!  ", "editions-ca-la"],
    ["Sony/ATV", "sony-atv"],
    ["***", "tenant"],
    ["a".repeat(80), "a".repeat(63)],
  ];
  for (const [name, slug] of cases) {
    test(`${JSON.stringify(name)} -> ${slug}`, () => assert.equal(slugify(name), slug));
  }
});
