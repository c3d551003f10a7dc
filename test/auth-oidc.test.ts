import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { listMail } from "../src/mail/mailer.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { type LoopbackProvider, playBrowser, startOidcProvider } from "./support/oidc-provider.ts";
import { tempDir } from "./support/process.ts";

/**
 * OpenID Connect providers per tenant (issue 42, item 6) on both engines, against a real OpenID
 * provider on loopback (oidc-provider): set up through /admin/v1 (the secret never comes back),
 * then supabase-js's signInWithOAuth (PKCE) → the provider's login → /auth/v1/callback →
 * exchangeCodeForSession; identities in /user; linking only by a verified address; a replayed or
 * altered state, an ID token with a wrong nonce, audience or key refused; linkIdentity and
 * unlinkIdentity; another tenant's provider out of reach; a disabled provider's answer.
 */

const PUBLIC_URL = "https://auth.backline.test";
const SITE_URL = "https://app.backline.test/welcome";

const newEmail = () => `oidc-${randomUUID().slice(0, 8)}@example.com`;

describeEachEngine("auth: OpenID Connect providers", (t) => {
  let app: RunningApp;
  let idp: LoopbackProvider;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL, OIDC_ALLOW_PRIVATE: "true" });
    idp = await startOidcProvider({ redirectUri: `${PUBLIC_URL}/auth/v1/callback` });
  });
  after(async () => {
    await app?.close();
    await idp?.close();
  });

  const rewrite = (url: string) =>
    url.startsWith(PUBLIC_URL) ? app.url + url.slice(PUBLIC_URL.length) : url;

  async function admin(serviceKey: string, method: string, path: string, body?: unknown) {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { apikey: serviceKey, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
  }

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  /** A tenant with the loopback provider set up as `loopback` through the admin API. */
  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), {
      auth: { site_url: SITE_URL, email_confirmation: false, ...auth },
    });
    const put = await admin(keys.service_role_key, "POST", "/auth/providers/loopback", {
      display_name: "Loopback ID",
      issuer: idp.issuer,
      client_id: idp.clientId,
      client_secret: idp.clientSecret,
    });
    assert.equal(put.status, 200, put.text);
    const client = (): SupabaseClient =>
      createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false, flowType: "pkce" },
      });
    return { tenant, keys, client };
  }

  /** signInWithOAuth, the browser's trip through the provider, and where it ends (redirect_to's URL). */
  async function oauthTrip(client: SupabaseClient, anonKey: string, account: string, provider = "loopback") {
    const { data, error } = await client.auth.signInWithOAuth({
      provider: provider as "google",
      options: { redirectTo: SITE_URL, skipBrowserRedirect: true, queryParams: { apikey: anonKey } },
    });
    assert.equal(error, null);
    assert.ok(data.url);
    return new URL(await playBrowser(data.url, { account, provider: idp, rewrite }));
  }

  async function signIn(client: SupabaseClient, anonKey: string, account: string) {
    const back = await oauthTrip(client, anonKey, account);
    assert.equal(back.origin + back.pathname, SITE_URL, back.toString());
    const code = back.searchParams.get("code");
    assert.ok(code, `a code in ${back}`);
    const exchanged = await client.auth.exchangeCodeForSession(code);
    assert.equal(exchanged.error, null, exchanged.error?.message);
    assert.ok(exchanged.data.session);
    return exchanged.data;
  }

  test("admin API: set up, listed with client_secret_set and never the secret; sealed at rest", async () => {
    const env = await tenant();
    const list = await admin(env.keys.service_role_key, "GET", "/auth/providers");
    assert.equal(list.status, 200);
    assert.ok(!list.text.includes(idp.clientSecret), "the secret is never returned");
    assert.deepEqual(
      list.body.data.map((p: Record<string, unknown>) => [
        p.name,
        p.display_name,
        p.client_secret_set,
        p.enabled,
      ]),
      [["loopback", "Loopback ID", true, true]],
    );
    assert.equal(list.body.data[0].callback_url, `${PUBLIC_URL}/auth/v1/callback`);
    const [stored] = await rows<{ client_secret_sealed: string }>(
      "select client_secret_sealed from internal.oidc_providers where tenant_id = $1",
      [env.tenant.id],
    );
    assert.match(stored?.client_secret_sealed ?? "", /^v\d+\./);
    assert.ok(!stored?.client_secret_sealed.includes(idp.clientSecret));
    // A preset needs only the client's id; a generic provider without an issuer is refused.
    const google = await admin(env.keys.service_role_key, "POST", "/auth/providers/google", {
      client_id: "g-id",
    });
    assert.equal(google.status, 200, google.text);
    assert.equal(google.body.issuer, "https://accounts.google.com");
    assert.equal(google.body.client_secret_set, false);
    const noIssuer = await admin(env.keys.service_role_key, "POST", "/auth/providers/acme", {
      client_id: "x",
    });
    assert.equal(noIssuer.status, 400);
    const plainHttp = await admin(env.keys.service_role_key, "POST", "/auth/providers/acme", {
      client_id: "x",
      issuer: "http://id.example.com",
    });
    assert.equal(plainHttp.status, 400);
    // The anon key is not an admin.
    assert.equal((await admin(env.keys.anon_key, "GET", "/auth/providers")).status, 403);
    // /settings shows the providers that are on, with their names for buttons.
    const settings = (await (
      await fetch(`${app.url}/auth/v1/settings`, { headers: { apikey: env.keys.anon_key } })
    ).json()) as { external: Record<string, boolean>; external_labels: Record<string, string> };
    assert.equal(settings.external.loopback, true);
    assert.equal(settings.external.google, true);
    assert.equal(settings.external_labels.loopback, "Loopback ID");
  });

  test("a new user with its identity; the second sign-in is the same user", async () => {
    const env = await tenant();
    const email = newEmail();
    const sub = `new-${randomUUID()}`;
    idp.accounts.set(sub, { email, email_verified: true, name: "Nova Artist" });
    const first = await signIn(env.client(), env.keys.anon_key, sub);
    const user = first.user;
    assert.equal(user.email, email);
    assert.ok(user.email_confirmed_at, "a verified address is confirmed");
    assert.deepEqual(user.app_metadata.providers, ["loopback"]);
    assert.equal(user.user_metadata.full_name, "Nova Artist");
    assert.equal(user.identities?.length, 1);
    const identity = user.identities?.[0];
    assert.equal(identity?.provider, "loopback");
    assert.equal(identity?.id, sub);
    assert.equal(identity?.user_id, user.id);
    // GoTrue's identity object carries the address (auth-js's UserIdentity type leaves it out).
    assert.equal((identity as { email?: string } | undefined)?.email, email);
    assert.ok(
      identity?.identity_id && identity.created_at && identity.last_sign_in_at && identity.updated_at,
    );
    assert.equal(identity?.identity_data?.email_verified, true);
    const claims = decodeJwt(first.session.access_token);
    assert.equal((claims.amr as { method: string }[])[0]?.method, "oauth");
    // GET /user lists it too.
    const got = await env.client().auth.getUser(first.session.access_token);
    assert.deepEqual(
      got.data.user?.identities?.map((i) => [i.provider, i.id]),
      [["loopback", sub]],
    );
    const second = await signIn(env.client(), env.keys.anon_key, sub);
    assert.equal(second.user.id, user.id);
    assert.equal(
      (await rows("select 1 from internal.users where tenant_id = $1", [env.tenant.id])).length,
      1,
    );
    // A code is spent once.
    const again = await fetch(`${app.url}/auth/v1/token?grant_type=pkce`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ auth_code: randomUUID(), code_verifier: "x".repeat(43) }),
    });
    assert.equal(again.status, 404);
    assert.equal(((await again.json()) as { error_code: string }).error_code, "flow_state_not_found");
  });

  test("a verified address joins its user; an unverified one does not", async () => {
    const env = await tenant({ email_confirmation: true });
    const password = "Linked-Horse-42";
    // A user who proved their address (the code mailed at sign-up).
    const email = newEmail();
    const owner = env.client();
    assert.equal((await owner.auth.signUp({ email, password })).error, null);
    const mail = (await listMail(t().db, { tenantId: env.tenant.id, to: email })).at(-1);
    const otp = /enter this code: (\d{6})\b/.exec(mail?.text_body ?? "")?.[1];
    assert.ok(otp);
    const proven = await owner.auth.verifyOtp({ email, token: otp, type: "signup" });
    assert.equal(proven.error, null);
    const userId = proven.data.user?.id;

    // Unverified at the provider: refused back to redirect_to, nothing linked.
    const unverified = `unverified-${randomUUID()}`;
    idp.accounts.set(unverified, { email, email_verified: false });
    const refused = await oauthTrip(env.client(), env.keys.anon_key, unverified);
    assert.equal(refused.searchParams.get("error_code"), "email_exists");
    assert.equal(refused.searchParams.get("code"), null);
    assert.deepEqual(
      (
        await rows<{ provider: string }>("select provider from internal.identities where user_id = $1", [
          userId,
        ])
      ).map((r) => r.provider),
      ["email"],
    );

    // Verified: the same user, with both identities; the password still works.
    const verified = `verified-${randomUUID()}`;
    idp.accounts.set(verified, { email, email_verified: true });
    const linked = await signIn(env.client(), env.keys.anon_key, verified);
    assert.equal(linked.user.id, userId);
    assert.deepEqual(linked.user.identities?.map((i) => i.provider).sort(), ["email", "loopback"]);
    assert.deepEqual(linked.user.app_metadata.providers, ["email", "loopback"]);
    assert.equal((await env.client().auth.signInWithPassword({ email, password })).error, null);

    // An address nobody proved (a sign-up never confirmed): the provider proves it first, and the
    // password that sign-up chose no longer signs in.
    const squatted = newEmail();
    assert.equal((await env.client().auth.signUp({ email: squatted, password })).error, null);
    const claimed = `claimed-${randomUUID()}`;
    idp.accounts.set(claimed, { email: squatted, email_verified: true });
    const owned = await signIn(env.client(), env.keys.anon_key, claimed);
    assert.equal(owned.user.email, squatted);
    const squatter = await env.client().auth.signInWithPassword({ email: squatted, password });
    assert.equal(squatter.error?.code, "invalid_credentials");
  });

  test("a replayed or altered state is refused; a wrong nonce, audience or key in the ID token too", async () => {
    const env = await tenant();
    const sub = `state-${randomUUID()}`;
    idp.accounts.set(sub, { email: newEmail(), email_verified: true });
    const client = env.client();
    const { data } = await client.auth.signInWithOAuth({
      provider: "loopback" as "google",
      options: {
        redirectTo: SITE_URL,
        skipBrowserRedirect: true,
        queryParams: { apikey: env.keys.anon_key },
      },
    });
    const callback = await playBrowser(data.url as string, {
      account: sub,
      provider: idp,
      rewrite,
      stopAt: (url) => url.startsWith(`${PUBLIC_URL}/auth/v1/callback`),
    });
    const state = new URL(callback).searchParams.get("state") as string;
    const altered = new URL(rewrite(callback));
    altered.searchParams.set("state", `${state.slice(0, -2)}xy`);
    const tampered = await fetch(altered, { redirect: "manual" });
    assert.equal(tampered.status, 400);
    assert.equal(((await tampered.json()) as { error_code: string }).error_code, "bad_oauth_state");
    const used = await fetch(rewrite(callback), { redirect: "manual" });
    assert.equal(used.status, 302);
    const code = new URL(used.headers.get("location") as string).searchParams.get("code");
    assert.ok(code);
    const replay = await fetch(rewrite(callback), { redirect: "manual" });
    assert.equal(replay.status, 400);
    assert.equal(((await replay.json()) as { error_code: string }).error_code, "bad_oauth_state");
    // A provider's form post (Apple's response_mode=form_post) lands on the same check.
    const posted = await fetch(`${app.url}/auth/v1/callback`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ state, code: "x" }),
      redirect: "manual",
    });
    assert.equal(posted.status, 400);
    assert.equal(((await posted.json()) as { error_code: string }).error_code, "bad_oauth_state");
    // A code with another verifier: refused, and spent.
    const wrong = await fetch(`${app.url}/auth/v1/token?grant_type=pkce`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ auth_code: code, code_verifier: "v".repeat(43) }),
    });
    assert.equal(wrong.status, 403);
    assert.equal(((await wrong.json()) as { error_code: string }).error_code, "bad_code_verifier");
    assert.equal((await client.auth.exchangeCodeForSession(code)).error?.code, "flow_state_not_found");

    for (const tamper of ["nonce", "aud", "key"] as const) {
      idp.tamper = tamper;
      try {
        const back = await oauthTrip(env.client(), env.keys.anon_key, sub);
        assert.equal(back.searchParams.get("error_code"), "bad_oauth_callback", `${tamper}: ${back}`);
        assert.equal(back.searchParams.get("code"), null);
        assert.match(back.searchParams.get("error_description") ?? "", /Invalid ID token/);
      } finally {
        idp.tamper = undefined;
      }
    }
    assert.equal(
      (await rows("select 1 from internal.users where tenant_id = $1", [env.tenant.id])).length,
      1,
    );
  });

  test("linkIdentity and unlinkIdentity (manual linking on); never the last identity", async () => {
    const off = await tenant();
    const password = "Linking-Horse-42";
    const offClient = off.client();
    assert.equal((await offClient.auth.signUp({ email: newEmail(), password })).error, null);
    const refused = await offClient.auth.linkIdentity({ provider: "loopback" as "google" });
    assert.equal(refused.error?.code, "manual_linking_disabled");

    const env = await tenant({ manual_linking: true });
    const client = env.client();
    const email = newEmail();
    const signedUp = await client.auth.signUp({ email, password });
    assert.equal(signedUp.error, null);
    const userId = signedUp.data.user?.id;
    // Linked under another address at the provider: only the signed-in user decides.
    const sub = `link-${randomUUID()}`;
    idp.accounts.set(sub, { email: newEmail(), email_verified: false });
    const link = await client.auth.linkIdentity({
      provider: "loopback" as "google",
      options: { redirectTo: SITE_URL, skipBrowserRedirect: true },
    });
    assert.equal(link.error, null, link.error?.message);
    assert.ok(link.data.url?.startsWith(idp.issuer));
    const back = new URL(
      await playBrowser(link.data.url as string, { account: sub, provider: idp, rewrite }),
    );
    const code = back.searchParams.get("code");
    assert.ok(code, back.toString());
    const exchanged = await client.auth.exchangeCodeForSession(code);
    assert.equal(exchanged.error, null);
    assert.equal(exchanged.data.user?.id, userId);
    const { data: ids } = await client.auth.getUserIdentities();
    assert.deepEqual(ids?.identities.map((i) => i.provider).sort(), ["email", "loopback"]);
    // Another user cannot link the same identity.
    const other = env.client();
    assert.equal((await other.auth.signUp({ email: newEmail(), password })).error, null);
    const taken = await other.auth.linkIdentity({
      provider: "loopback" as "google",
      options: { redirectTo: SITE_URL, skipBrowserRedirect: true },
    });
    const takenBack = new URL(
      await playBrowser(taken.data.url as string, { account: sub, provider: idp, rewrite }),
    );
    assert.equal(takenBack.searchParams.get("error_code"), "identity_already_exists");

    const emailIdentity = ids?.identities.find((i) => i.provider === "email");
    const oidcIdentity = ids?.identities.find((i) => i.provider === "loopback");
    assert.ok(emailIdentity && oidcIdentity);
    assert.equal((await client.auth.unlinkIdentity(oidcIdentity)).error, null);
    const after1 = await client.auth.getUserIdentities();
    assert.deepEqual(
      after1.data?.identities.map((i) => i.provider),
      ["email"],
    );
    const last = await client.auth.unlinkIdentity(emailIdentity);
    assert.equal(last.error?.code, "single_identity_not_deletable");
    assert.equal(last.error?.status, 422);
    // Another user's identity is not found.
    const otherIds = await other.auth.getUserIdentities();
    const notMine = await client.auth.unlinkIdentity(otherIds.data?.identities[0] as never);
    assert.equal(notMine.error?.code, "identity_not_found");
  });

  test("another tenant's provider is out of reach; a disabled or unknown provider has GoTrue's answer", async () => {
    const a = await tenant();
    const { keys: bKeys } = await tenantWithKeys(t(), { auth: { site_url: SITE_URL } });
    const authorize = async (anonKey: string, provider: string) => {
      const res = await fetch(
        `${app.url}/auth/v1/authorize?provider=${provider}&redirect_to=${encodeURIComponent(SITE_URL)}&apikey=${anonKey}`,
        { redirect: "manual" },
      );
      return {
        status: res.status,
        body: res.status === 302 ? res.headers.get("location") : await res.json(),
      };
    };
    assert.equal((await authorize(a.keys.anon_key, "loopback")).status, 302);
    assert.deepEqual((await authorize(bKeys.anon_key, "loopback")).body, {
      code: 400,
      error_code: "validation_failed",
      msg: "Unsupported provider: Provider loopback could not be found",
    });
    assert.deepEqual((await authorize(bKeys.anon_key, "google")).body, {
      code: 400,
      error_code: "validation_failed",
      msg: "Unsupported provider: provider is not enabled",
    });
    // A's code is no good with B's key.
    const sub = `cross-${randomUUID()}`;
    idp.accounts.set(sub, { email: newEmail(), email_verified: true });
    const aClient = a.client();
    const back = await oauthTrip(aClient, a.keys.anon_key, sub);
    const code = back.searchParams.get("code") as string;
    const cross = await fetch(`${app.url}/auth/v1/token?grant_type=pkce`, {
      method: "POST",
      headers: { apikey: bKeys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ auth_code: code, code_verifier: "v".repeat(43) }),
    });
    assert.equal(cross.status, 404);
    assert.equal((await aClient.auth.exchangeCodeForSession(code)).error, null, "the code still works for A");

    // Turned off: GoTrue's answer, and gone from /settings.
    const off = await admin(a.keys.service_role_key, "POST", "/auth/providers/loopback", { enabled: false });
    assert.equal(off.status, 200);
    assert.equal(off.body.enabled, false);
    assert.deepEqual((await authorize(a.keys.anon_key, "loopback")).body, {
      code: 400,
      error_code: "validation_failed",
      msg: "Unsupported provider: provider is not enabled",
    });
    const settings = (await (
      await fetch(`${app.url}/auth/v1/settings`, { headers: { apikey: a.keys.anon_key } })
    ).json()) as { external: Record<string, boolean> };
    assert.equal(settings.external.loopback, undefined);
    // B's admin cannot see or change A's provider.
    assert.deepEqual((await admin(bKeys.service_role_key, "GET", "/auth/providers")).body, { data: [] });
  });

  test("a redirect_to outside the allow list goes to the site URL; the implicit flow has the session in the fragment", async () => {
    const env = await tenant();
    const sub = `implicit-${randomUUID()}`;
    idp.accounts.set(sub, { email: newEmail(), email_verified: true });
    const implicit = createClient(app.url, env.keys.anon_key, {
      auth: {
        persistSession: false,
        autoRefreshToken: false,
        detectSessionInUrl: false,
        flowType: "implicit",
      },
    });
    const { data } = await implicit.auth.signInWithOAuth({
      provider: "loopback" as "google",
      options: {
        redirectTo: "https://evil.example.com/steal",
        skipBrowserRedirect: true,
        queryParams: { apikey: env.keys.anon_key },
      },
    });
    const back = new URL(await playBrowser(data.url as string, { account: sub, provider: idp, rewrite }));
    assert.equal(back.origin + back.pathname, SITE_URL);
    const fragment = new URLSearchParams(back.hash.slice(1));
    const access = fragment.get("access_token");
    assert.ok(access && fragment.get("refresh_token"));
    const user = await implicit.auth.getUser(access);
    assert.equal(user.data.user?.identities?.[0]?.id, sub);
  });

  test("backline auth providers: set from a secret file, listed without it, turned off, removed", async () => {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { site_url: SITE_URL } });
    const dir = tempDir("backline-oidc-cli-");
    const secretFile = path.join(dir, "apple-secret.jwt");
    const secret = `eyJ-apple-secret-${randomUUID()}`;
    fs.writeFileSync(secretFile, `${secret}\n`);
    const set = await runCliOn(t(), [
      "--json",
      "auth",
      "providers",
      "set",
      "apple",
      "--tenant",
      tenant.slug,
      "--client-id",
      "com.example.portal",
      "--client-secret-file",
      secretFile,
    ]);
    assert.equal(set.code, 0, set.stderr);
    assert.ok(!set.stdout.includes(secret));
    const shown = JSON.parse(set.stdout);
    assert.equal(shown.issuer, "https://appleid.apple.com");
    assert.equal(shown.client_secret_set, true);
    const [stored] = await rows<{ client_secret_sealed: string }>(
      "select client_secret_sealed from internal.oidc_providers where tenant_id = $1",
      [tenant.id],
    );
    assert.equal(
      t().db.secrets.decrypt(stored?.client_secret_sealed as string),
      secret,
      "sealed, and opens to it",
    );
    const list = await runCliOn(t(), ["auth", "providers", "list", "--tenant", tenant.slug]);
    assert.match(list.stdout, /^apple\ton\tApple\thttps:\/\/appleid\.apple\.com\tcom\.example\.portal$/m);
    assert.ok(!list.stdout.includes(secret));
    const off = await runCliOn(t(), [
      "--json",
      "auth",
      "providers",
      "set",
      "apple",
      "--tenant",
      tenant.slug,
      "--disable",
    ]);
    assert.equal(JSON.parse(off.stdout).enabled, false);
    const generic = await runCliOn(t(), [
      "auth",
      "providers",
      "set",
      "acme",
      "--tenant",
      tenant.slug,
      "--client-id",
      "x",
    ]);
    assert.notEqual(generic.code, 0);
    assert.match(generic.stderr, /issuer is required/);
    const removed = await runCliOn(t(), ["auth", "providers", "remove", "apple", "--tenant", tenant.slug]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual((await admin(keys.service_role_key, "GET", "/auth/providers")).body, { data: [] });
    fs.rmSync(dir, { recursive: true, force: true });
  });
  test("a provider whose issuer changed signs in to none of the identities the old issuer made", async () => {
    const env = await tenant();
    const sub = `moved-${randomUUID()}`;
    idp.accounts.set(sub, { email: newEmail(), email_verified: true });
    const first = await signIn(env.client(), env.keys.anon_key, sub);
    const userId = first.user.id;
    // The tenant's admin points "loopback" at another issuer, whose accounts claim the same sub.
    const other = await startOidcProvider({ redirectUri: `${PUBLIC_URL}/auth/v1/callback` });
    try {
      const moved = await admin(env.keys.service_role_key, "POST", "/auth/providers/loopback", {
        issuer: other.issuer,
        client_id: other.clientId,
        client_secret: other.clientSecret,
      });
      assert.equal(moved.status, 200, moved.text);
      other.accounts.set(sub, { email: newEmail(), email_verified: true });
      const { data } = await env.client().auth.signInWithOAuth({
        provider: "loopback" as "google",
        options: {
          redirectTo: SITE_URL,
          skipBrowserRedirect: true,
          queryParams: { apikey: env.keys.anon_key },
        },
      });
      const back = new URL(await playBrowser(data.url as string, { account: sub, provider: other, rewrite }));
      assert.equal(back.searchParams.get("error_code"), "identity_already_exists", back.toString());
      assert.equal(back.searchParams.get("code"), null);
      const sessions = await rows<{ n: number }>(
        "select count(*)::int as n from internal.sessions where user_id = $1",
        [userId],
      );
      assert.equal(sessions[0]?.n, 1, "only the first sign-in's session");
    } finally {
      await other.close();
    }
  });

  test("no new user where the tenant takes no sign-ups, nor with an unverified address where it confirms them", async () => {
    const closed = await tenant({ disable_signup: true });
    const email = newEmail();
    const sub = `closed-${randomUUID()}`;
    idp.accounts.set(sub, { email, email_verified: true });
    const refused = await oauthTrip(closed.client(), closed.keys.anon_key, sub);
    assert.equal(refused.searchParams.get("error_code"), "signup_disabled", refused.toString());
    const confirming = await tenant({ email_confirmation: true });
    const unverified = `unverified-new-${randomUUID()}`;
    const other = newEmail();
    idp.accounts.set(unverified, { email: other, email_verified: false });
    const needs = await oauthTrip(confirming.client(), confirming.keys.anon_key, unverified);
    assert.equal(needs.searchParams.get("error_code"), "provider_email_needs_verification", needs.toString());
    assert.equal(needs.searchParams.get("code"), null);
    for (const [tenantId, address] of [
      [closed.tenant.id, email],
      [confirming.tenant.id, other],
    ] as const) {
      const made = await rows<{ n: number }>(
        "select count(*)::int as n from internal.users where tenant_id = $1 and email = $2",
        [tenantId, address],
      );
      assert.equal(made[0]?.n, 0, `no user ${address}`);
    }
    // A verified address where the tenant confirms them is a new user at once.
    const verified = `verified-new-${randomUUID()}`;
    idp.accounts.set(verified, { email: newEmail(), email_verified: true });
    await signIn(confirming.client(), confirming.keys.anon_key, verified);
  });
});
