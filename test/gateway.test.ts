import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { decodeJwt, SignJWT } from "jose";
import { identify } from "../src/http/gateway.ts";
import { TenantDirectory } from "../src/tenancy/directory.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { getTenantSigningSecret, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * The gateway rules (src/http/gateway.ts): the apikey decides the tenant, a bearer the role. First
 * through /auth/v1 over a socket with raw fetch, then identify() itself on a small app of the test's own.
 */

const API_VERSION = { "X-Supabase-Api-Version": "2024-01-01" };
const SERVER_ONLY_CLAIMS = ["account_id", "account_role", "api_key_id"];

type Claims = Record<string, unknown>;

function sign(claims: Claims, secret: string): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .sign(new TextEncoder().encode(secret));
}

/** The token with its payload swapped for `claims`, header and signature kept: a tampered token. */
function tampered(token: string, claims: Claims): string {
  const [header, , signature] = token.split(".");
  return `${header}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${signature}`;
}

/** An unsigned token (alg none). */
function unsigned(claims: Claims): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
}

const now = () => Math.floor(Date.now() / 1000);

interface Side {
  tenant: Tenant;
  keys: TenantKeys;
  secret: string;
  /** A signed-in user's access token. */
  accessToken: string;
}

describeEachEngine("gateway: apikey and bearer", (t) => {
  let app: RunningApp;
  let a: Side;
  let b: Side;

  async function side(): Promise<Side> {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const secret = await getTenantSigningSecret(t().db, tenant.id);
    assert.ok(secret);
    const res = await fetch(`${app.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({
        email: `user-${randomUUID().slice(0, 8)}@example.com`,
        password: "Correct-Horse-7",
      }),
    });
    assert.equal(res.status, 200);
    const { access_token } = (await res.json()) as { access_token: string };
    return { tenant, keys, secret, accessToken: access_token };
  }

  before(async () => {
    app = await startApp(t());
    a = await side();
    b = await side();
  });
  after(async () => {
    await app?.close();
  });

  function get(path: string, headers: Record<string, string>): Promise<Response> {
    return fetch(`${app.url}/auth/v1${path}`, { headers });
  }

  // ---------------------------------------------------------------------------------------------
  // apikey

  const noKey = { message: "No API key found in request" };
  const badKey = { message: "Invalid API key" };
  const apikeys: {
    name: string;
    request: () => Promise<{ path: string; headers: Record<string, string> }>;
    expected: { status: number; message?: string };
  }[] = [
    {
      name: "no apikey",
      request: async () => ({ path: "/settings", headers: {} }),
      expected: { status: 401, ...noKey },
    },
    {
      name: "an empty apikey",
      request: async () => ({ path: "/settings?apikey=", headers: { apikey: "" } }),
      expected: { status: 401, ...noKey },
    },
    {
      name: "no apikey, and a query string that ends in /health",
      request: async () => ({ path: "/user?next=/health", headers: {} }),
      expected: { status: 401, ...noKey },
    },
    {
      name: "a string that is not a key",
      request: async () => ({ path: "/settings", headers: { apikey: "not-a-key" } }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "a key of an unknown tenant",
      request: async () => ({
        path: "/settings",
        headers: {
          apikey: await sign(
            { role: "anon", tenant_id: randomUUID(), iss: "backline" },
            randomBytes(32).toString("base64url"),
          ),
        },
      }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "a key signed with a guessed secret",
      request: async () => ({
        path: "/settings",
        headers: {
          apikey: await sign(
            { ...decodeJwt(a.keys.anon_key), role: "service_role" },
            randomBytes(32).toString("base64url"),
          ),
        },
      }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "the anon key tampered into a service-role key",
      request: async () => ({
        path: "/settings",
        headers: {
          apikey: tampered(a.keys.anon_key, { ...decodeJwt(a.keys.anon_key), role: "service_role" }),
        },
      }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "an unsigned key (alg none)",
      request: async () => ({
        path: "/settings",
        headers: { apikey: unsigned(decodeJwt(a.keys.service_role_key)) },
      }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "an expired key signed with the tenant's secret",
      request: async () => ({
        path: "/settings",
        headers: {
          apikey: await sign(
            { role: "anon", tenant_id: a.tenant.id, iss: "backline", iat: now() - 120, exp: now() - 60 },
            a.secret,
          ),
        },
      }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "a user's access token as the apikey",
      request: async () => ({ path: "/settings", headers: { apikey: a.accessToken } }),
      expected: { status: 401, ...badKey },
    },
    {
      name: "the anon key in the apikey header",
      request: async () => ({ path: "/settings", headers: { apikey: a.keys.anon_key } }),
      expected: { status: 200 },
    },
    {
      name: "the anon key as the ?apikey= query parameter",
      request: async () => ({ path: `/settings?apikey=${encodeURIComponent(a.keys.anon_key)}`, headers: {} }),
      expected: { status: 200 },
    },
    {
      name: "the service-role key",
      request: async () => ({ path: "/settings", headers: { apikey: a.keys.service_role_key } }),
      expected: { status: 200 },
    },
  ];
  for (const c of apikeys) {
    test(`apikey: ${c.name} -> ${c.expected.status}`, async () => {
      const { path, headers } = await c.request();
      const res = await get(path, headers);
      const body = (await res.json()) as { message?: string };
      assert.equal(res.status, c.expected.status, JSON.stringify(body));
      if (c.expected.message) {
        assert.equal(body.message, c.expected.message);
        assert.equal(typeof (body as { hint?: unknown }).hint, "string");
      }
    });
  }

  // ---------------------------------------------------------------------------------------------
  // bearer, on /user (which needs a user)

  const bearers: {
    name: string;
    authorization: () => Promise<string | undefined>;
    expected: { status: number; code?: string };
  }[] = [
    {
      name: "the user's own access token",
      authorization: async () => `Bearer ${a.accessToken}`,
      expected: { status: 200 },
    },
    {
      name: "no Authorization header",
      authorization: async () => undefined,
      expected: { status: 401, code: "no_authorization" },
    },
    {
      name: "an Authorization header that is not a bearer",
      authorization: async () => `Basic ${Buffer.from("user:pass").toString("base64")}`,
      expected: { status: 401, code: "no_authorization" },
    },
    {
      name: "a malformed bearer",
      authorization: async () => "Bearer not.a.jwt",
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "a bearer signed with another secret",
      authorization: async () =>
        `Bearer ${await sign(decodeJwt(a.accessToken), randomBytes(32).toString("base64url"))}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "a tampered bearer (another user's id)",
      authorization: async () =>
        `Bearer ${tampered(a.accessToken, { ...decodeJwt(a.accessToken), sub: randomUUID() })}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "an unsigned bearer (alg none)",
      authorization: async () => `Bearer ${unsigned(decodeJwt(a.accessToken))}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "an expired bearer",
      authorization: async () =>
        `Bearer ${await sign({ ...decodeJwt(a.accessToken), iat: now() - 120, exp: now() - 60 }, a.secret)}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "a bearer of another tenant",
      authorization: async () => `Bearer ${b.accessToken}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "a bearer signed by this tenant but naming another",
      authorization: async () =>
        `Bearer ${await sign({ ...decodeJwt(a.accessToken), tenant_id: b.tenant.id }, a.secret)}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "the anon key as bearer",
      authorization: async () => `Bearer ${a.keys.anon_key}`,
      expected: { status: 403, code: "bad_jwt" },
    },
    {
      name: "the service-role key as bearer",
      authorization: async () => `Bearer ${a.keys.service_role_key}`,
      expected: { status: 403, code: "bad_jwt" },
    },
  ];
  for (const c of bearers) {
    test(`bearer on /user: ${c.name} -> ${c.expected.status}${c.expected.code ? ` ${c.expected.code}` : ""}`, async () => {
      const authorization = await c.authorization();
      const res = await get("/user", {
        apikey: a.keys.anon_key,
        ...API_VERSION,
        ...(authorization ? { authorization } : {}),
      });
      const body = (await res.json()) as { code?: string; id?: string };
      assert.deepEqual(
        { status: res.status, code: res.ok ? undefined : body.code },
        { status: c.expected.status, code: c.expected.code },
        JSON.stringify(body),
      );
      if (res.ok) assert.equal(body.id, decodeJwt(a.accessToken).sub);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // identify(), on an app of the test's own

  describe("identify(), on an app of the test's own", () => {
    let probe: FastifyInstance;
    before(async () => {
      const directory = new TenantDirectory(t().db);
      probe = Fastify();
      probe.get("/whoami", async (request) => {
        const r = await identify(directory, request);
        return r.ok
          ? { tenant: r.caller.tenant.id, claims: r.caller.claims, user: r.caller.user ?? null }
          : { failure: r.failure.kind };
      });
      await probe.ready();
    });
    after(async () => {
      await probe?.close();
    });

    async function whoami(apikey: string | undefined, bearer?: string): Promise<unknown> {
      const res = await probe.inject({
        method: "GET",
        url: "/whoami",
        headers: {
          ...(apikey ? { apikey } : {}),
          ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
        },
      });
      return res.json();
    }

    /** A user's claims as an access token carries them, plus the claims only Backline may set. */
    const userClaims = (): Claims => ({
      ...decodeJwt(a.accessToken),
      account_id: randomUUID(),
      account_role: "owner",
      api_key_id: randomUUID(),
    });
    const without = (claims: Claims, names: string[]) =>
      Object.fromEntries(Object.entries(claims).filter(([k]) => !names.includes(k)));

    const cases: { name: string; run: () => Promise<{ actual: unknown; expected: unknown }> }[] = [
      {
        name: "the service-role key -> tenant_service of its tenant",
        run: async () => ({
          actual: await whoami(a.keys.service_role_key),
          expected: {
            tenant: a.tenant.id,
            claims: { role: "tenant_service", tenant_id: a.tenant.id },
            user: null,
          },
        }),
      },
      {
        name: "the anon key with the service-role key as bearer -> tenant_service",
        run: async () => ({
          actual: await whoami(a.keys.anon_key, a.keys.service_role_key),
          expected: {
            tenant: a.tenant.id,
            claims: { role: "tenant_service", tenant_id: a.tenant.id },
            user: null,
          },
        }),
      },
      {
        name: "the anon key -> anon",
        run: async () => ({
          actual: await whoami(a.keys.anon_key),
          expected: { tenant: a.tenant.id, claims: { role: "anon", tenant_id: a.tenant.id }, user: null },
        }),
      },
      {
        name: "a user's token -> authenticated, server-only claims stripped",
        run: async () => {
          const claims = userClaims();
          return {
            actual: await whoami(a.keys.anon_key, await sign(claims, a.secret)),
            expected: {
              tenant: a.tenant.id,
              claims: without(claims, SERVER_ONLY_CLAIMS),
              user: { id: claims.sub, sessionId: claims.session_id },
            },
          };
        },
      },
      {
        name: "no apikey -> no_apikey",
        run: async () => ({
          actual: await whoami(undefined, a.accessToken),
          expected: { failure: "no_apikey" },
        }),
      },
      {
        name: "a user's token as the apikey -> invalid_apikey",
        run: async () => ({ actual: await whoami(a.accessToken), expected: { failure: "invalid_apikey" } }),
      },
      {
        name: "an expired token -> expired_jwt",
        run: async () => ({
          actual: await whoami(a.keys.anon_key, await sign({ ...userClaims(), exp: now() - 60 }, a.secret)),
          expected: { failure: "expired_jwt" },
        }),
      },
      {
        name: "a token naming another tenant, signed with this one's secret -> wrong_tenant",
        run: async () => ({
          actual: await whoami(
            a.keys.anon_key,
            await sign({ ...userClaims(), tenant_id: b.tenant.id }, a.secret),
          ),
          expected: { failure: "wrong_tenant" },
        }),
      },
      {
        name: "a token without tenant_id -> wrong_tenant",
        run: async () => ({
          actual: await whoami(a.keys.anon_key, await sign(without(userClaims(), ["tenant_id"]), a.secret)),
          expected: { failure: "wrong_tenant" },
        }),
      },
      {
        name: "another tenant's token -> bad_jwt",
        run: async () => ({
          actual: await whoami(a.keys.anon_key, b.accessToken),
          expected: { failure: "bad_jwt" },
        }),
      },
      {
        name: "another tenant's service-role key as bearer -> bad_jwt",
        run: async () => ({
          actual: await whoami(a.keys.anon_key, b.keys.service_role_key),
          expected: { failure: "bad_jwt" },
        }),
      },
      ...["postgres", "tenant_service", "supabase_admin"].map((role) => ({
        name: `a token with role ${role} -> bad_jwt`,
        run: async () => ({
          actual: await whoami(a.keys.anon_key, await sign({ ...userClaims(), role }, a.secret)),
          expected: { failure: "bad_jwt" },
        }),
      })),
      {
        name: "an authenticated token without sub -> bad_jwt",
        run: async () => ({
          actual: await whoami(a.keys.anon_key, await sign(without(userClaims(), ["sub"]), a.secret)),
          expected: { failure: "bad_jwt" },
        }),
      },
    ];
    for (const c of cases) {
      test(`identify(): ${c.name}`, async () => {
        const { actual, expected } = await c.run();
        assert.deepEqual(actual, expected);
      });
    }
  });
});
