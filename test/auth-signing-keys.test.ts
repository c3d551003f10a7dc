import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID } from "node:crypto";
import fs from "node:fs";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import {
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportJWK,
  exportSPKI,
  jwtVerify,
  SignJWT,
  UnsecuredJWT,
} from "jose";
import { SecretBox } from "../src/secrets/box.ts";
import { ensureDevTenant } from "../src/tenancy/dev-tenant.ts";
import { getTenantSigningSecret } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, TEST_ENCRYPTION_KEY, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { tempDir } from "./support/process.ts";

/**
 * Asymmetric signing keys (issue 42, item 2) on both engines, through supabase-js: a new tenant's
 * sessions are ES256 with a `kid`, `auth.getClaims()` verifies them with the JWKS it fetches from
 * /auth/v1/.well-known/jwks.json (no /user round trip), /rest/v1, /storage/v1 and the public API
 * accept them; `backline tenants rotate-keys --signing-key` keeps old sessions working and
 * publishes both keys, plain `rotate-keys` withdraws them; a tenant that signed HS256 sessions
 * switches with the same command and its earlier sessions keep working; forged tokens (unknown
 * kid, alg none, HS256 "signed" with the public key, another tenant's key) are refused; and the
 * private key is sealed in the database.
 */

const PUBLIC_URL = "https://auth.backline.test";
const PASSWORD = "Correct-Horse-42";
const JWKS_PATH = "/auth/v1/.well-known/jwks.json";

interface Jwks {
  keys: Record<string, unknown>[];
}

describeEachEngine("auth: asymmetric signing keys (ES256, JWKS, getClaims)", (t) => {
  let app: RunningApp;
  const extraApps: RunningApp[] = [];
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL });
  });
  after(async () => {
    await app?.close();
    for (const a of extraApps) await a.close();
  });

  /** Another server process on the same database (it reads keys afresh, as one does after a rotation). */
  async function freshApp(): Promise<RunningApp> {
    const a = await startApp(t(), { PUBLIC_URL });
    extraApps.push(a);
    return a;
  }

  const cli = async (...args: string[]) => {
    const r = await runCliOn(t(), ["--json", ...args]);
    assert.equal(r.code, 0, `backline ${args.join(" ")}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  /** A supabase-js client that records the paths it requests. */
  function client(url: string, anonKey: string): { sb: SupabaseClient; paths: string[] } {
    const paths: string[] = [];
    const sb = createClient(url, anonKey, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: {
        fetch: (input: string | Request | URL, init?: RequestInit) => {
          paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
          return fetch(input, init);
        },
      },
    });
    return { sb, paths };
  }

  async function tenantWithUser(url = app.url) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    const c = client(url, keys.anon_key);
    const email = `keys-${randomUUID().slice(0, 8)}@example.com`;
    const { data, error } = await c.sb.auth.signUp({ email, password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.session);
    return { tenant, keys, email, session: data.session, ...c };
  }

  async function getJwks(url: string, anonKey: string): Promise<Jwks> {
    const res = await fetch(`${url}${JWKS_PATH}`, { headers: { apikey: anonKey } });
    assert.equal(res.status, 200);
    return (await res.json()) as Jwks;
  }

  /**
   * What /rest/v1, /storage/v1, the public API and /auth/v1/user answer a bearer with: one after
   * the other (PGlite serves one request at a time, and a loaded machine would queue them past
   * DATABASE_QUEUE_TIMEOUT_MS).
   */
  async function statuses(url: string, anonKey: string, bearer: string) {
    const headers = { apikey: anonKey, authorization: `Bearer ${bearer}` };
    const status = async (path: string, h: Record<string, string> = headers) =>
      (await fetch(`${url}${path}`, { headers: h })).status;
    return {
      rest: await status("/rest/v1/releases?select=id"),
      storage: await status("/storage/v1/bucket"),
      publicApi: await status("/api/public/v1/api-keys", { authorization: `Bearer ${bearer}` }),
      user: await status("/auth/v1/user"),
    };
  }
  const ACCEPTED = { rest: 200, storage: 200, publicApi: 200, user: 200 };
  const REFUSED = { rest: 401, storage: 401, publicApi: 401, user: 403 };

  test("a new tenant's sessions are ES256 with a kid; getClaims verifies them with the JWKS alone", async () => {
    const env = await tenantWithUser();
    const header = decodeProtectedHeader(env.session.access_token);
    assert.equal(header.alg, "ES256");
    assert.equal(typeof header.kid, "string");

    const jwks = await getJwks(app.url, env.keys.anon_key);
    assert.equal(jwks.keys.length, 1);
    const [key] = jwks.keys;
    assert.deepEqual(Object.keys(key ?? {}).sort(), ["alg", "crv", "key_ops", "kid", "kty", "use", "x", "y"]);
    assert.deepEqual(
      { kid: key?.kid, alg: key?.alg, kty: key?.kty, crv: key?.crv, use: key?.use },
      { kid: header.kid, alg: "ES256", kty: "EC", crv: "P-256", use: "sig" },
    );

    env.paths.length = 0;
    const { data, error } = await env.sb.auth.getClaims(env.session.access_token);
    assert.equal(error, null);
    assert.equal(data?.claims.sub, env.session.user.id);
    assert.equal(data?.claims.email, env.email);
    assert.equal((data?.claims as Record<string, unknown> | undefined)?.tenant_id, env.tenant.id);
    assert.deepEqual(env.paths, [JWKS_PATH], "verified locally: the JWKS fetched, /user never asked");

    // Any JWT library verifies it the same way; `?apikey=` for one that sends no headers.
    const remote = createRemoteJWKSet(new URL(`${app.url}${JWKS_PATH}?apikey=${env.keys.anon_key}`));
    const verified = await jwtVerify(env.session.access_token, remote, {
      issuer: `${PUBLIC_URL}/auth/v1`,
      audience: "authenticated",
    });
    assert.equal(verified.payload.sub, env.session.user.id);

    // The JWKS needs the tenant's apikey, like every /auth/v1 route.
    assert.equal((await fetch(`${app.url}${JWKS_PATH}`)).status, 401);
  });

  test("/rest/v1, /storage/v1, the public API and /auth/v1 accept the ES256 session", async () => {
    const env = await tenantWithUser();
    assert.deepEqual(await statuses(app.url, env.keys.anon_key, env.session.access_token), ACCEPTED);
    const { error } = await env.sb.from("releases").select("id");
    assert.equal(error, null);
    const refreshed = await env.sb.auth.refreshSession({ refresh_token: env.session.refresh_token });
    assert.equal(refreshed.error, null);
    assert.equal(decodeProtectedHeader(refreshed.data.session?.access_token ?? "").alg, "ES256");
    // The anon and service-role keys stay HS256, as they were.
    for (const k of [env.keys.anon_key, env.keys.service_role_key]) {
      assert.deepEqual(decodeProtectedHeader(k), { alg: "HS256", typ: "JWT" });
    }
  });

  test("rotate-keys --signing-key: old sessions keep working, the JWKS lists both keys; rotate-keys withdraws them", async () => {
    const env = await tenantWithUser();
    const oldKid = decodeProtectedHeader(env.session.access_token).kid;

    const rotated = await cli("tenants", "rotate-keys", env.tenant.slug, "--signing-key");
    const newKid = rotated.signing_key.kid as string;
    assert.notEqual(newKid, oldKid);
    assert.deepEqual(
      rotated.signing_keys.map((k: { kid: string; status: string }) => [k.kid, k.status]),
      [
        [newKid, "current"],
        [oldKid, "previous"],
      ],
    );
    const until = Date.parse(rotated.signing_keys[1].verify_until);
    // jwt_expiry (3600 s) plus the propagation minute.
    assert.ok(Math.abs(until - Date.now() - 3660_000) < 30_000, `previous key kept until ${until}`);
    assert.equal((await cli("tenants", "keys", env.tenant.slug)).anon_key, env.keys.anon_key);

    const server = await freshApp();
    const jwks = await getJwks(server.url, env.keys.anon_key);
    assert.deepEqual(jwks.keys.map((k) => k.kid).sort(), [newKid, oldKid].sort());
    assert.deepEqual(await statuses(server.url, env.keys.anon_key, env.session.access_token), ACCEPTED);

    const c = client(server.url, env.keys.anon_key);
    const old = await c.sb.auth.getClaims(env.session.access_token);
    assert.equal(old.error, null);
    assert.equal(old.data?.claims.sub, env.session.user.id);
    const fresh = await c.sb.auth.signInWithPassword({ email: env.email, password: PASSWORD });
    assert.equal(fresh.error, null);
    const freshToken = fresh.data.session?.access_token ?? "";
    assert.equal(decodeProtectedHeader(freshToken).kid, newKid);
    c.paths.length = 0;
    const claims = await c.sb.auth.getClaims(freshToken);
    assert.equal(claims.error, null);
    assert.ok(!c.paths.includes("/auth/v1/user"));

    // Once its time is up the previous key leaves the JWKS and its tokens are refused (the clock
    // moved by setting verify_until back); the new key's tokens are not affected.
    await rows("update internal.signing_keys set verify_until = now() - interval '1 second' where id = $1", [
      oldKid,
    ]);
    const later = await freshApp();
    assert.deepEqual(
      (await getJwks(later.url, env.keys.anon_key)).keys.map((k) => k.kid),
      [newKid],
    );
    assert.deepEqual(await statuses(later.url, env.keys.anon_key, env.session.access_token), REFUSED);
    assert.deepEqual(await statuses(later.url, env.keys.anon_key, freshToken), ACCEPTED);

    // The emergency rotation: new anon and service-role keys, and every session so far refused.
    const emergency = await cli("tenants", "rotate-keys", env.tenant.slug);
    assert.equal(typeof emergency.signing_key_id, "string");
    const listed = await cli("tenants", "signing-keys", env.tenant.slug);
    assert.deepEqual(
      listed.map((k: { status: string }) => k.status),
      ["current", "withdrawn", "withdrawn"],
    );
    const after = await freshApp();
    assert.deepEqual(
      (await getJwks(after.url, emergency.anon_key)).keys.map((k) => k.kid),
      [emergency.signing_key_id],
    );
    for (const token of [env.session.access_token, freshToken]) {
      assert.deepEqual(await statuses(after.url, emergency.anon_key, token), REFUSED);
    }
  });

  test("a tenant that signed HS256 sessions switches; its earlier sessions keep working until they expire", async () => {
    // A tenant from before signing keys: no key row (what migration 0048 leaves every old tenant with).
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    await rows("delete from internal.signing_keys where tenant_id = $1", [tenant.id]);
    assert.deepEqual(await cli("tenants", "signing-keys", tenant.slug), []);
    const server = await freshApp();
    const before = client(server.url, keys.anon_key);
    const email = `hs-${randomUUID().slice(0, 8)}@example.com`;
    const signedUp = await before.sb.auth.signUp({ email, password: PASSWORD });
    const hsToken = signedUp.data.session?.access_token ?? "";
    assert.deepEqual(decodeProtectedHeader(hsToken), { alg: "HS256", typ: "JWT" });
    assert.deepEqual((await getJwks(server.url, keys.anon_key)).keys, []);
    // getClaims falls back to /user for an HS256 token, as with a Supabase project's legacy secret.
    before.paths.length = 0;
    assert.equal((await before.sb.auth.getClaims(hsToken)).error, null);
    assert.ok(before.paths.includes("/auth/v1/user"));

    const switched = await cli("tenants", "rotate-keys", tenant.slug, "--signing-key");
    const after = await freshApp();
    assert.deepEqual(await statuses(after.url, keys.anon_key, hsToken), ACCEPTED);
    const c = client(after.url, keys.anon_key);
    const signedIn = await c.sb.auth.signInWithPassword({ email, password: PASSWORD });
    const esToken = signedIn.data.session?.access_token ?? "";
    assert.equal(decodeProtectedHeader(esToken).kid, switched.signing_key.kid);
    assert.deepEqual(await statuses(after.url, keys.anon_key, esToken), ACCEPTED);

    // An HS256 session dated after the switch is refused, though signed with the tenant's secret.
    const secret = new TextEncoder().encode((await getTenantSigningSecret(t().db, tenant.id)) as string);
    const claims = decodeJwt(hsToken);
    const late = await new SignJWT({ ...claims, iat: Math.floor(Date.now() / 1000) + 120 })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .sign(secret);
    assert.deepEqual(await statuses(after.url, keys.anon_key, late), REFUSED);
  });

  test("the development tenant has a key; one made before signing keys gets its first at the next start", async () => {
    const dataDir = tempDir("backline-dev-");
    try {
      const first = await ensureDevTenant(t().db, { dataDir, url: app.url });
      const keysOf = () =>
        rows<{ id: string; retired_at: Date | null }>(
          "select id, retired_at from internal.signing_keys where tenant_id = $1",
          [first.file.tenant_id],
        );
      assert.equal((await keysOf()).length, 1);
      await rows("delete from internal.signing_keys where tenant_id = $1", [first.file.tenant_id]);
      const again = await ensureDevTenant(t().db, { dataDir, url: app.url });
      assert.equal(again.file.tenant_id, first.file.tenant_id);
      assert.equal(again.file.anon_key, first.file.anon_key, "its anon key does not change");
      const keys = await keysOf();
      assert.deepEqual(
        keys.map((k) => k.retired_at),
        [null],
      );
      // A third start changes nothing.
      await ensureDevTenant(t().db, { dataDir, url: app.url });
      assert.deepEqual(
        (await keysOf()).map((k) => k.id),
        keys.map((k) => k.id),
      );
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("forged tokens are refused: unknown kid, alg none, HS256 keyed with the public key, another tenant's key", async () => {
    const a = await tenantWithUser();
    const b = await tenantWithUser();
    const claims = decodeJwt(a.session.access_token);
    const jwk = (await getJwks(app.url, a.keys.anon_key)).keys[0] as Record<string, unknown>;
    const publicKey = createPublicKey({ key: jwk as never, format: "jwk" });

    // A key pair of the attacker's own, under a kid the tenant does not have, and under the tenant's kid.
    const { privateKey: mine } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const unknownKid = await new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: randomUUID() })
      .sign(mine);
    const wrongKey = await new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: jwk.kid as string })
      .sign(mine);
    const noKid = await new SignJWT(claims).setProtectedHeader({ alg: "ES256", typ: "JWT" }).sign(mine);
    const none = new UnsecuredJWT(claims).encode();
    // Algorithm confusion: HS256 with the published public key (as PEM, as JWK text, as x) for the secret.
    const pem = await exportSPKI(publicKey);
    const confused = await Promise.all(
      [pem, JSON.stringify(jwk), JSON.stringify(await exportJWK(publicKey)), String(jwk.x)].map((s) =>
        new SignJWT(claims)
          .setProtectedHeader({ alg: "HS256", typ: "JWT", kid: jwk.kid as string })
          .sign(new TextEncoder().encode(s)),
      ),
    );
    // ES256 with the kid swapped for tenant B's.
    const bKid = decodeProtectedHeader(b.session.access_token).kid as string;
    const [h, p, s] = a.session.access_token.split(".") as [string, string, string];
    const swapped = `${Buffer.from(JSON.stringify({ alg: "ES256", typ: "JWT", kid: bKid })).toString("base64url")}.${p}.${s}`;
    // An RS256 header over the real signature.
    const rs = `${Buffer.from(JSON.stringify({ ...decodeProtectedHeader(a.session.access_token), alg: "RS256" })).toString("base64url")}.${p}.${s}`;
    assert.ok(h);

    for (const [name, token] of [
      ["unknown kid", unknownKid],
      ["the tenant's kid, another key", wrongKey],
      ["no kid", noKid],
      ["alg none", none],
      ...confused.map((c, i) => [`HS256 keyed with the public key (${i})`, c] as const),
      ["another tenant's kid", swapped],
      ["RS256", rs],
    ] as const) {
      assert.deepEqual(await statuses(app.url, a.keys.anon_key, token), REFUSED, name);
    }
    // getClaims refuses the forged ES256 tokens too (the JWKS does not verify them).
    const forged = await a.sb.auth.getClaims(wrongKey);
    assert.ok(forged.error, "getClaims of a token signed with another key");

    // Tenant B's genuine session with tenant A's apikey, and A's with B's.
    assert.deepEqual(await statuses(app.url, a.keys.anon_key, b.session.access_token), {
      ...REFUSED,
      publicApi: 200, // the public API takes no apikey: the token names its own tenant, B, and B's key verifies it
    });
    assert.deepEqual(await statuses(app.url, b.keys.anon_key, a.session.access_token), {
      ...REFUSED,
      publicApi: 200,
    });
    // Tenant B's key signing a token that names tenant A: refused everywhere (kid unknown to A).
    const bPem = await rows<{ v: string }>(
      "select private_key_sealed as v from internal.signing_keys where tenant_id = $1 and retired_at is null",
      [b.tenant.id],
    );
    const bPrivate = createPrivateKey(t().db.secrets.decrypt(bPem[0]?.v as string));
    const crossSigned = await new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: bKid })
      .sign(bPrivate);
    assert.deepEqual(await statuses(app.url, a.keys.anon_key, crossSigned), REFUSED);
    assert.deepEqual(await statuses(app.url, b.keys.anon_key, crossSigned), REFUSED);
  });

  test("the private key is sealed with the master key: not readable in the database without it", async () => {
    const env = await tenantWithUser();
    const [row] = await rows<{ id: string; public_jwk: Record<string, unknown>; private_key_sealed: string }>(
      "select id, public_jwk, private_key_sealed from internal.signing_keys where tenant_id = $1",
      [env.tenant.id],
    );
    assert.ok(row);
    assert.match(row.private_key_sealed, /^v2\.[0-9a-f]{8}\./);
    assert.ok(!row.private_key_sealed.includes("PRIVATE KEY"));
    assert.equal("d" in row.public_jwk, false);
    // Another master key opens nothing; the right one opens the key whose public half is published.
    const stranger = new SecretBox(Buffer.alloc(32, 7));
    assert.throws(() => stranger.decrypt(row.private_key_sealed));
    const box = new SecretBox(Buffer.from(TEST_ENCRYPTION_KEY, "base64"));
    const privateKey = createPrivateKey(box.decrypt(row.private_key_sealed));
    const d = privateKey.export({ format: "jwk" }).d as string;
    assert.deepEqual(createPublicKey(privateKey).export({ format: "jwk" }).x, row.public_jwk.x);
    // Nowhere in the table (or the tenant's row) in the clear, in any encoding the key has.
    const der = privateKey.export({ format: "der", type: "pkcs8" });
    for (const needle of [
      d,
      der.toString("base64"),
      der.toString("hex"),
      Buffer.from(d, "base64url").toString("hex"),
    ]) {
      const found = await rows(
        `select 1 from internal.signing_keys k join internal.tenants t on t.id = k.tenant_id
         where strpos(row_to_json(k)::text || row_to_json(t)::text, $1) > 0`,
        [needle.slice(0, 40)],
      );
      assert.deepEqual(found, []);
    }
    // The same key signs the sessions the JWKS verifies.
    const verified = await jwtVerify(env.session.access_token, createPublicKey(privateKey));
    assert.equal(verified.payload.sub, env.session.user.id);
    // No request role reads the table, the tenant's service key included.
    const res = await fetch(`${app.url}/rest/v1/signing_keys?select=*`, {
      headers: { apikey: env.keys.service_role_key, authorization: `Bearer ${env.keys.service_role_key}` },
    });
    assert.notEqual(res.status, 200);
  });
});
