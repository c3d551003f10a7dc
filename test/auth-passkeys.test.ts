import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { type SoftCredential, SoftwareAuthenticator } from "./support/software-authenticator.ts";

/**
 * Passkeys (issue 42, item 5) through supabase-js's own passkey API (auth.passkey, the two-step
 * form signInWithPasskey and registerPasskey use in a browser) on both engines, with a software
 * authenticator written from the WebAuthn specification standing in for the browser: register,
 * sign in, list, rename, remove; a challenge used twice, an answer from another origin, a counter
 * that goes back, another user's or tenant's passkey, a tenant with passkeys off, the sign-in
 * limit shared with passwords, the admin API. The browser side (Chromium's virtual authenticator
 * on the portal) is test/portal/passkeys.test.ts.
 */

const PUBLIC_URL = "https://auth.backline.test";
const SITE = "https://app.backline.test";
const PASSWORD = "Correct-Horse-9";

let lastIp = 0;
const newIp = () => `198.51.100.${++lastIp}`;

function assertAuthError(
  error: { status?: number; code?: string; message: string } | null,
  expected: { status: number; code: string },
  what = "",
) {
  assert.ok(error, `${what}: expected ${expected.code}, got no error`);
  assert.deepEqual({ status: error.status, code: error.code }, expected, `${what}: ${error.message}`);
}

type Options = {
  challenge: string;
  rp: { id: string; name: string };
  user: { id: string; name: string };
  pubKeyCredParams: { alg: number; type: string }[];
};

describeEachEngine("auth: passkeys", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL, TRUST_PROXY: "true" });
  });
  after(async () => {
    await app?.close();
  });

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), {
      auth: { site_url: `${SITE}/`, email_confirmation: false, passkeys: true, ...auth },
    });
    const client = (ip = newIp()): SupabaseClient =>
      createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false, experimental: { passkey: true } },
        global: { headers: { "X-Forwarded-For": ip } },
      });
    const admin = createClient(app.url, keys.service_role_key, {
      auth: { persistSession: false, autoRefreshToken: false, experimental: { passkey: true } },
    });
    /** A user signed in with a password on a client of their own. */
    const member = async () => {
      const email = `pk-${randomUUID().slice(0, 8)}@example.com`;
      const c = client();
      const up = await c.auth.signUp({ email, password: PASSWORD });
      assert.equal(up.error, null, up.error?.message);
      const userId = up.data.user?.id as string;
      return { email, client: c, userId };
    };
    return { tenant, keys, client, admin, member };
  }

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  /** Registers a passkey for a signed-in client: the credential, and the server's answer. */
  async function register(c: SupabaseClient, authenticator: SoftwareAuthenticator, origin = SITE) {
    const start = await c.auth.passkey.startRegistration();
    assert.equal(start.error, null, start.error?.message);
    const made = authenticator.create(start.data?.options as unknown as Options, origin);
    const verified = await c.auth.passkey.verifyRegistration({
      challengeId: start.data?.challenge_id as string,
      credential: made.json as never,
    });
    return { credential: made.credential, verified, start };
  }

  /** A sign-in ceremony with `credential` on a fresh client. */
  async function signIn(
    c: SupabaseClient,
    authenticator: SoftwareAuthenticator,
    credential: SoftCredential,
    origin = SITE,
    overrides: Parameters<SoftwareAuthenticator["get"]>[3] = {},
  ) {
    const start = await c.auth.passkey.startAuthentication();
    assert.equal(start.error, null, start.error?.message);
    const assertion = authenticator.get(
      start.data?.options as unknown as { challenge: string; rpId?: string },
      origin,
      credential,
      overrides,
    );
    const result = await c.auth.passkey.verifyAuthentication({
      challengeId: start.data?.challenge_id as string,
      credential: assertion as never,
    });
    return { result, start, assertion };
  }

  test("off by default: GoTrue's 404 passkey_disabled on every passkey route, the admin's too", async () => {
    const env = await tenant({ passkeys: undefined });
    const m = await env.member();
    const reg = await m.client.auth.passkey.startRegistration();
    assertAuthError(reg.error, { status: 404, code: "passkey_disabled" }, "startRegistration");
    assert.equal(reg.error?.message, "Passkeys are disabled");
    const auth = await env.client().auth.passkey.startAuthentication();
    assertAuthError(auth.error, { status: 404, code: "passkey_disabled" }, "startAuthentication");
    const list = await m.client.auth.passkey.list();
    assertAuthError(list.error, { status: 404, code: "passkey_disabled" }, "list");
    const adminList = await env.admin.auth.admin.passkey.listPasskeys({ userId: m.userId });
    assertAuthError(adminList.error, { status: 404, code: "passkey_disabled" }, "admin list");
    assert.deepEqual(
      await rows("select 1 from internal.passkey_challenges where tenant_id = $1", [env.tenant.id]),
      [],
    );
    // Without a token too: the switch is looked at first, as GoTrue's middleware does; where
    // passkeys are on, a route for a signed-in user asks for the token.
    const anonymous = await fetch(`${app.url}/auth/v1/passkeys/registration/options`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: "{}",
    });
    assert.deepEqual(await anonymous.json(), {
      code: 404,
      error_code: "passkey_disabled",
      msg: "Passkeys are disabled",
    });
    const on = await tenant();
    const noToken = await fetch(`${app.url}/auth/v1/passkeys`, { headers: { apikey: on.keys.anon_key } });
    assert.equal(noToken.status, 401);
    assert.equal(((await noToken.json()) as { error_code: string }).error_code, "no_authorization");
  });

  test("register, list, rename, sign in (a session as any sign-in's, amr passkey), remove", async () => {
    const env = await tenant();
    const m = await env.member();
    const authenticator = new SoftwareAuthenticator();

    const { credential, verified, start } = await register(m.client, authenticator);
    const options = start.data?.options as unknown as Options & {
      authenticatorSelection: { residentKey: string };
    };
    // The relying party is the tenant's site; the user handle is the user's id, as GoTrue's.
    assert.equal(options.rp.id, "app.backline.test");
    assert.equal(Buffer.from(options.user.id, "base64url").toString(), m.userId);
    assert.equal(options.user.name, m.email);
    assert.equal(options.authenticatorSelection.residentKey, "required");
    assert.ok((start.data?.expires_at ?? 0) > Date.now() / 1000);
    assert.equal(verified.error, null, verified.error?.message);
    const passkeyId = verified.data?.id as string;
    assert.match(passkeyId, /^[0-9a-f-]{36}$/);
    assert.ok(verified.data?.created_at);

    const listed = await m.client.auth.passkey.list();
    assert.equal(listed.error, null);
    assert.deepEqual(
      listed.data?.map((p) => p.id),
      [passkeyId],
    );
    assert.equal(listed.data?.[0]?.last_used_at, undefined);

    const renamed = await m.client.auth.passkey.update({ passkeyId, friendlyName: "Laptop" });
    assert.equal(renamed.error, null);
    assert.equal(renamed.data?.friendly_name, "Laptop");
    const blank = await m.client.auth.passkey.update({ passkeyId, friendlyName: "" });
    assertAuthError(blank.error, { status: 400, code: "validation_failed" }, "empty name");
    const long = await m.client.auth.passkey.update({ passkeyId, friendlyName: "x".repeat(121) });
    assertAuthError(long.error, { status: 400, code: "validation_failed" }, "long name");

    // Signed out, then in again with the passkey, on a client that knows nobody.
    await m.client.auth.signOut();
    const fresh = env.client();
    const { result } = await signIn(fresh, authenticator, credential);
    assert.equal(result.error, null, result.error?.message);
    const session = result.data?.session;
    assert.ok(session);
    assert.equal(result.data?.user?.id, m.userId);
    const claims = decodeJwt(session.access_token);
    assert.equal(claims.sub, m.userId);
    assert.equal(claims.aal, "aal1");
    assert.deepEqual(
      (claims.amr as { method: string }[]).map((a) => a.method),
      ["passkey"],
    );
    // supabase-js keeps it as any session: /user answers, and it refreshes.
    const me = await fresh.auth.getUser();
    assert.equal(me.data.user?.email, m.email);
    const refreshed = await fresh.auth.refreshSession();
    assert.equal(refreshed.error, null);
    const after = await fresh.auth.passkey.list();
    assert.equal(after.data?.[0]?.friendly_name, "Laptop");
    assert.ok(after.data?.[0]?.last_used_at, "last_used_at is set by the sign-in");
    const [stored] = await rows<{ sign_count: string; transports: string[] }>(
      "select sign_count, transports from internal.passkeys where id = $1",
      [passkeyId],
    );
    assert.equal(Number(stored?.sign_count), 1);
    assert.deepEqual(stored?.transports, ["internal"]);

    // Audit rows, as for the admin API's acts.
    const audit = await rows<{ action: string; actor: string; after: { passkey_id: string } }>(
      "select action, actor, after from internal.audit_log where tenant_id = $1 and action like 'auth.passkey%' order by id",
      [env.tenant.id],
    );
    assert.deepEqual(
      audit.map((a) => [a.action, a.actor, a.after.passkey_id]),
      [
        ["auth.passkey_created", m.userId, passkeyId],
        ["auth.passkey_updated", m.userId, passkeyId],
        ["auth.passkey_sign_in", m.userId, passkeyId],
      ],
    );

    // Removed: gone from the list, and it signs nobody in any more.
    const removed = await fresh.auth.passkey.delete({ passkeyId });
    assert.equal(removed.error, null);
    assert.deepEqual((await fresh.auth.passkey.list()).data, []);
    const again = await signIn(env.client(), authenticator, credential);
    assertAuthError(again.result.error, { status: 400, code: "webauthn_verification_failed" }, "removed");
    const gone = await fresh.auth.passkey.delete({ passkeyId });
    assertAuthError(gone.error, { status: 404, code: "validation_failed" }, "delete twice");
  });

  test("a challenge is used once, expires, and serves only its own ceremony", async () => {
    const env = await tenant();
    const m = await env.member();
    const authenticator = new SoftwareAuthenticator();
    const { credential } = await register(m.client, authenticator);

    // The same answer sent twice: the second finds no challenge, and no second session is made.
    const c = env.client();
    const { result, start, assertion } = await signIn(c, authenticator, credential);
    assert.equal(result.error, null);
    const replay = await c.auth.passkey.verifyAuthentication({
      challengeId: start.data?.challenge_id as string,
      credential: assertion as never,
    });
    assertAuthError(replay.error, { status: 400, code: "webauthn_challenge_not_found" }, "replay");
    const sessions = await rows("select 1 from internal.sessions where user_id = $1", [m.userId]);
    assert.equal(sessions.length, 2, "the password sign-up's session and the passkey's");

    // A registration challenge cannot be answered as a sign-in, nor the other way round.
    const reg = await m.client.auth.passkey.startRegistration();
    const asSignIn = await c.auth.passkey.verifyAuthentication({
      challengeId: reg.data?.challenge_id as string,
      credential: authenticator.get(reg.data?.options as never, SITE, credential) as never,
    });
    assertAuthError(asSignIn.error, { status: 400, code: "webauthn_challenge_not_found" }, "reg as auth");
    const auth = await c.auth.passkey.startAuthentication();
    const asReg = await m.client.auth.passkey.verifyRegistration({
      challengeId: auth.data?.challenge_id as string,
      credential: authenticator.create(
        {
          challenge: String((auth.data?.options as unknown as { challenge?: string } | undefined)?.challenge),
          rp: { name: "x" },
          user: { id: "eA", name: "x" },
          pubKeyCredParams: [{ alg: -7, type: "public-key" }],
        },
        SITE,
      ).json as never,
    });
    assertAuthError(asReg.error, { status: 400, code: "webauthn_challenge_not_found" }, "auth as reg");

    // Expired: refused, and used up all the same.
    const late = await c.auth.passkey.startAuthentication();
    await rows(
      "update internal.passkey_challenges set expires_at = now() - interval '1 second' where id = $1",
      [late.data?.challenge_id],
    );
    const lateAnswer = authenticator.get(late.data?.options as never, SITE, credential);
    const expired = await c.auth.passkey.verifyAuthentication({
      challengeId: late.data?.challenge_id as string,
      credential: lateAnswer as never,
    });
    assertAuthError(expired.error, { status: 400, code: "webauthn_challenge_expired" }, "expired");

    // Nonsense ids and bodies: GoTrue's validation answers.
    const bad = await c.auth.passkey.verifyAuthentication({ challengeId: "nope", credential: {} as never });
    assertAuthError(bad.error, { status: 400, code: "validation_failed" }, "bad challenge id");
    const unknown = await c.auth.passkey.verifyAuthentication({
      challengeId: randomUUID(),
      credential: lateAnswer as never,
    });
    assertAuthError(unknown.error, { status: 400, code: "webauthn_challenge_not_found" }, "unknown id");
  });

  test("an answer from another origin or for another relying party is refused; nothing is stored", async () => {
    const env = await tenant();
    const m = await env.member();
    const authenticator = new SoftwareAuthenticator();

    const start = await m.client.auth.passkey.startRegistration();
    const evil = authenticator.create(start.data?.options as never, "https://evil.example");
    const refused = await m.client.auth.passkey.verifyRegistration({
      challengeId: start.data?.challenge_id as string,
      credential: evil.json as never,
    });
    assertAuthError(refused.error, { status: 400, code: "webauthn_verification_failed" }, "evil origin");
    const otherRp = await m.client.auth.passkey.startRegistration();
    const wrongRp = authenticator.create(otherRp.data?.options as never, SITE, { rpId: "evil.example" });
    const refusedRp = await m.client.auth.passkey.verifyRegistration({
      challengeId: otherRp.data?.challenge_id as string,
      credential: wrongRp.json as never,
    });
    assertAuthError(refusedRp.error, { status: 400, code: "webauthn_verification_failed" }, "wrong rp id");
    assert.deepEqual(await rows("select 1 from internal.passkeys where user_id = $1", [m.userId]), []);

    // A registered passkey's assertion made on another origin, or with another rp id: no session.
    const { credential } = await register(m.client, authenticator);
    const before = (await rows("select 1 from internal.sessions where user_id = $1", [m.userId])).length;
    const phished = await signIn(
      env.client(),
      authenticator,
      credential,
      "https://app.backline.test.evil.example",
    );
    assertAuthError(phished.result.error, { status: 400, code: "webauthn_verification_failed" }, "phished");
    const wrongRpId = await signIn(env.client(), authenticator, credential, SITE, { rpId: "backline.test" });
    assertAuthError(wrongRpId.result.error, { status: 400, code: "webauthn_verification_failed" }, "rp id");
    const created = await signIn(env.client(), authenticator, credential, SITE, { type: "webauthn.create" });
    assertAuthError(created.result.error, { status: 400, code: "webauthn_verification_failed" }, "type");
    assert.equal(
      (await rows("select 1 from internal.sessions where user_id = $1", [m.userId])).length,
      before,
    );

    // The portal under PUBLIC_URL is one of the tenant's own addresses: a page there may ask, and
    // the relying party is then that host (the Origin header names the page).
    const res = await fetch(`${app.url}/auth/v1/passkeys/authentication/options`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json", origin: PUBLIC_URL },
      body: "{}",
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { options: { rpId: string } }).options.rpId, "auth.backline.test");
    const stranger = await fetch(`${app.url}/auth/v1/passkeys/authentication/options`, {
      method: "POST",
      headers: {
        apikey: env.keys.anon_key,
        "content-type": "application/json",
        origin: "https://evil.example",
      },
      body: "{}",
    });
    assert.equal(
      ((await stranger.json()) as { options: { rpId: string } }).options.rpId,
      "app.backline.test",
    );
  });

  test("passkey_rp_id: one relying party for the tenant's hosts under it, other hosts refused", async () => {
    const env = await tenant({
      passkey_rp_id: "backline.test",
      redirect_urls: ["https://portal.backline.test/*", "https://elsewhere.example/*"],
    });
    const m = await env.member();
    const authenticator = new SoftwareAuthenticator();
    const { credential, verified, start } = await register(m.client, authenticator);
    assert.equal((start.data?.options as unknown as Options | undefined)?.rp.id, "backline.test");
    assert.equal(verified.error, null, verified.error?.message);
    // Made at app.backline.test, used at portal.backline.test: the same relying party.
    const there = await signIn(env.client(), authenticator, credential, "https://portal.backline.test");
    assert.equal(there.result.error, null, there.result.error?.message);
    // One of the tenant's addresses, but not under the relying party: refused.
    const outside = await signIn(env.client(), authenticator, credential, "https://elsewhere.example");
    assertAuthError(outside.result.error, { status: 400, code: "webauthn_verification_failed" }, "outside");
    // Not a host name: the settings command refuses it and writes nothing.
    const bad = await runCliOn(t(), [
      "auth",
      "settings",
      "--tenant",
      env.tenant.slug,
      "--set",
      "passkey_rp_id=https://backline.test",
    ]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /passkey_rp_id/);
  });

  test("a signature counter that goes back (a cloned authenticator) is refused", async () => {
    const env = await tenant();
    const m = await env.member();
    const authenticator = new SoftwareAuthenticator();
    const { credential } = await register(m.client, authenticator);
    const first = await signIn(env.client(), authenticator, credential, SITE, { counter: 5 });
    assert.equal(first.result.error, null);
    const back = await signIn(env.client(), authenticator, credential, SITE, { counter: 3 });
    assertAuthError(back.result.error, { status: 400, code: "webauthn_verification_failed" }, "counter 3");
    const same = await signIn(env.client(), authenticator, credential, SITE, { counter: 5 });
    assertAuthError(same.result.error, { status: 400, code: "webauthn_verification_failed" }, "counter 5");
    const [row] = await rows<{ sign_count: string }>(
      "select sign_count from internal.passkeys where user_id = $1",
      [m.userId],
    );
    assert.equal(Number(row?.sign_count), 5);
    const on = await signIn(env.client(), authenticator, credential, SITE, { counter: 6 });
    assert.equal(on.result.error, null);
  });

  test("another user's or another tenant's passkey: not listed, not changed, signs nobody in", async () => {
    const a = await tenant();
    const b = await tenant();
    const alice = await a.member();
    const bob = await a.member();
    const carol = await b.member();
    const authenticator = new SoftwareAuthenticator();
    const aliceKey = await register(alice.client, authenticator);
    const bobKey = await register(bob.client, authenticator);
    const alicePasskey = aliceKey.verified.data?.id as string;

    assert.deepEqual(
      (await bob.client.auth.passkey.list()).data?.map((p) => p.id),
      [bobKey.verified.data?.id],
    );
    const rename = await bob.client.auth.passkey.update({ passkeyId: alicePasskey, friendlyName: "mine" });
    assertAuthError(rename.error, { status: 404, code: "validation_failed" }, "rename another's");
    const remove = await bob.client.auth.passkey.delete({ passkeyId: alicePasskey });
    assertAuthError(remove.error, { status: 404, code: "validation_failed" }, "delete another's");
    assert.equal((await alice.client.auth.passkey.list()).data?.length, 1);

    // Alice's passkey answering with Bob's user handle: refused.
    const swapped = await signIn(a.client(), authenticator, aliceKey.credential, SITE, {
      userHandle: bobKey.credential.userHandle,
    });
    assertAuthError(swapped.result.error, { status: 400, code: "webauthn_verification_failed" }, "handle");
    // Alice's passkey at the other tenant (same site address): nobody there knows it.
    const elsewhere = await signIn(b.client(), authenticator, aliceKey.credential);
    assertAuthError(elsewhere.result.error, { status: 400, code: "webauthn_verification_failed" }, "tenant");
    assert.deepEqual(
      await rows("select 1 from internal.sessions where user_id = $1", [carol.userId]).then((r) => r.length),
      1,
    );

    // Row security: a user reads the names of their own passkeys, nothing of anyone else's.
    const session = (await alice.client.auth.getSession()).data.session;
    const asAlice = createClient(app.url, a.keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { headers: { Authorization: `Bearer ${session?.access_token}` } },
    });
    const claims = decodeJwt(session?.access_token ?? "");
    const seen = await t().db.withRequestContext(claims as never, async (tx) =>
      (await tx.query<{ id: string }>("select id from internal.passkeys")).rows.map((r) => r.id),
    );
    assert.deepEqual(seen, [alicePasskey]);
    await assert.rejects(
      t().db.withRequestContext(claims as never, (tx) =>
        tx.query("select public_key from internal.passkeys"),
      ),
    );
    await assert.rejects(
      t().db.withRequestContext(claims as never, (tx) =>
        tx.query("update internal.passkeys set friendly_name = 'x'"),
      ),
    );
    assert.ok(asAlice);

    // The admin API: the tenant's service key lists and removes its users' passkeys, no one else's.
    const listed = await a.admin.auth.admin.passkey.listPasskeys({ userId: alice.userId });
    assert.equal(listed.error, null);
    assert.deepEqual(
      listed.data?.map((p) => p.id),
      [alicePasskey],
    );
    const foreign = await b.admin.auth.admin.passkey.listPasskeys({ userId: alice.userId });
    assertAuthError(foreign.error, { status: 404, code: "user_not_found" }, "other tenant's user");
    const foreignDelete = await b.admin.auth.admin.passkey.deletePasskey({
      userId: alice.userId,
      passkeyId: alicePasskey,
    });
    assertAuthError(foreignDelete.error, { status: 404, code: "user_not_found" }, "other tenant's delete");
    const byUser = await fetch(`${app.url}/auth/v1/admin/users/${alice.userId}/passkeys`, {
      headers: { apikey: a.keys.anon_key, authorization: `Bearer ${session?.access_token}` },
    });
    assert.equal(byUser.status, 403);
    const deleted = await a.admin.auth.admin.passkey.deletePasskey({
      userId: alice.userId,
      passkeyId: alicePasskey,
    });
    assert.equal(deleted.error, null);
    assert.deepEqual((await alice.client.auth.passkey.list()).data, []);
  });

  test("turned off for the tenant: its passkeys sign nobody in until it is on again", async () => {
    const env = await tenant();
    const m = await env.member();
    const authenticator = new SoftwareAuthenticator();
    const { credential } = await register(m.client, authenticator);
    const setPasskeys = async (on: boolean) => {
      const r = await runCliOn(t(), [
        "auth",
        "settings",
        "--tenant",
        env.tenant.slug,
        "--set",
        `passkeys=${on}`,
      ]);
      assert.equal(r.code, 0, r.stderr);
    };
    await setPasskeys(false);
    // The app reads a tenant's settings from a cache of a few seconds: wait for the change.
    const deadline = Date.now() + 15_000;
    let start = await env.client().auth.passkey.startAuthentication();
    while (start.error === null && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 250));
      start = await env.client().auth.passkey.startAuthentication();
    }
    assertAuthError(start.error, { status: 404, code: "passkey_disabled" }, "off");
    await setPasskeys(true);
    let back = await signIn(env.client(), authenticator, credential).catch(() => undefined);
    while (back === undefined && Date.now() < deadline + 15_000) {
      await new Promise((res) => setTimeout(res, 250));
      back = await signIn(env.client(), authenticator, credential).catch(() => undefined);
    }
    assert.equal(back?.result.error, null);
  });

  test("sign-ins count against signin_per_ip, the same count as password sign-ins", async () => {
    const env = await tenant({ rate_limits: { signin_per_ip: { max: 2, windowSeconds: 300 } } });
    const m = await env.member();
    const ip = newIp();
    const wrong = await env.client(ip).auth.signInWithPassword({ email: m.email, password: "Wrong-Horse-1" });
    assertAuthError(wrong.error, { status: 400, code: "invalid_credentials" }, "wrong password");
    const first = await env.client(ip).auth.passkey.startAuthentication();
    assert.equal(first.error, null);
    const second = await env.client(ip).auth.passkey.startAuthentication();
    assertAuthError(second.error, { status: 429, code: "over_request_rate_limit" }, "third sign-in");
    const password = await env.client(ip).auth.signInWithPassword({ email: m.email, password: PASSWORD });
    assertAuthError(password.error, { status: 429, code: "over_request_rate_limit" }, "password after");
  });
});
