import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type AuthError, createClient, type SupabaseClient } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * GoTrue's answers everywhere under /auth/v1 (issue 42, item 7), on both engines: unknown routes
 * and the features Backline does not offer answer GoTrue's JSON, so supabase-js shows a message;
 * a malformed address is GoTrue's "Unable to validate email address: invalid format" on every
 * route that takes one, and changes nothing.
 */

const PUBLIC_URL = "https://auth.backline.test";
const INVALID = "Unable to validate email address: invalid format";
const BAD_ADDRESSES = ["xx:;x@x.x", "a", "mira@", "@example.com", "mi ra@example.com", "mira@exa_mple.com"];

function assertAuthError(
  error: AuthError | null,
  expected: { status: number; code: string; message?: string },
  what = "",
) {
  assert.ok(error, `${what}: expected ${expected.code}, got no error`);
  const got: Record<string, unknown> = { status: error.status, code: error.code };
  if (expected.message !== undefined) got.message = error.message;
  assert.deepEqual(got, expected, `${what}: ${error.message}`);
}

describeEachEngine("auth: GoTrue's answers under /auth/v1", (t) => {
  let app: RunningApp;
  let anonKey: string;
  let serviceKey: string;
  let tenantId: string;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL });
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { email_confirmation: false } });
    anonKey = keys.anon_key;
    serviceKey = keys.service_role_key;
    tenantId = tenant.id;
  });
  after(async () => {
    await app?.close();
  });

  const options = { auth: { persistSession: false, autoRefreshToken: false } };
  const client = (): SupabaseClient => createClient(app.url, anonKey, options);
  const admin = (): SupabaseClient => createClient(app.url, serviceKey, options);
  const userCount = async () =>
    Number(
      (
        await t().db.asService((tx) =>
          tx.query<{ n: string }>("select count(*) as n from internal.users where tenant_id = $1", [
            tenantId,
          ]),
        )
      ).rows[0]?.n,
    );

  async function raw(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${app.url}/auth/v1${path}`, {
      method,
      headers: {
        apikey: anonKey,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return {
      status: res.status,
      type: res.headers.get("content-type") ?? "",
      body: (await res.json()) as unknown,
    };
  }

  test("an unknown route answers GoTrue's JSON error in both shapes, not problem+json", async () => {
    const old = await raw("POST", "/no/such/route", {});
    assert.equal(old.status, 404);
    assert.match(old.type, /^application\/json/);
    assert.deepEqual(old.body, {
      code: 404,
      error_code: "not_found",
      msg: "No API route for POST /auth/v1/no/such/route",
    });
    const current = await raw("DELETE", "/signup", undefined, { "X-Supabase-Api-Version": "2024-01-01" });
    assert.equal(current.status, 404);
    assert.deepEqual(current.body, { code: "not_found", message: "No API route for DELETE /auth/v1/signup" });
  });

  test("features Backline does not offer answer as GoTrue does when they are off", async () => {
    const sso = await client().auth.signInWithSSO({ domain: "example.com" });
    assertAuthError(
      sso.error,
      { status: 404, code: "saml_provider_disabled", message: "SAML 2.0 is disabled" },
      "SSO",
    );
    const asService = { authorization: `Bearer ${serviceKey}` };
    assert.deepEqual((await raw("GET", "/admin/sso/providers", undefined, asService)).body, {
      code: 404,
      error_code: "saml_provider_disabled",
      msg: "SAML 2.0 is disabled",
    });
    assert.equal(
      (
        (await raw("GET", "/admin/sso/providers", undefined, { authorization: `Bearer ${anonKey}` }))
          .body as {
          error_code: string;
        }
      ).error_code,
      "not_admin",
    );
    assert.deepEqual((await raw("GET", "/admin/custom-providers", undefined, asService)).body, {
      code: 404,
      error_code: "feature_disabled",
      msg: "Custom OAuth providers are disabled",
    });
    assert.deepEqual((await raw("GET", "/admin/audit", undefined, asService)).body, {
      code: 404,
      error_code: "not_found",
      msg: "No API route for GET /auth/v1/admin/audit",
    });

    // A password sign-in with a phone (auth-js's own suite asks it): no phone sign-in here.
    const byPhone = await client().auth.signInWithPassword({ phone: "+15555550100", password: "x-y-z-1234" });
    assertAuthError(
      byPhone.error,
      { status: 400, code: "phone_provider_disabled", message: "Phone logins are disabled" },
      "password grant with a phone",
    );
    for (const [body, message] of [
      [{ email: "mira@example.com", phone: "+15555550100", password: "p" }, /Only an email address or phone/],
      [{ password: "p" }, /missing email or phone/],
    ] as const) {
      const answer = await raw("POST", "/token?grant_type=password", body);
      assert.equal(answer.status, 400);
      const got = answer.body as { error_code: string; msg: string };
      assert.equal(got.error_code, "validation_failed");
      assert.match(got.msg, message);
    }

    const idToken = await client().auth.signInWithIdToken({ provider: "google", token: "x.y.z" });
    assertAuthError(
      idToken.error,
      {
        status: 400,
        code: "provider_disabled",
        message: 'Provider (issuer "https://accounts.google.com") is not enabled',
      },
      "signInWithIdToken",
    );
    assert.deepEqual((await raw("POST", "/token?grant_type=web3", { chain: "ethereum" })).body, {
      code: 422,
      error_code: "web3_provider_disabled",
      msg: "Web3 provider is disabled",
    });
    assert.deepEqual(
      (await raw("POST", "/token?grant_type=pkce", { auth_code: "x", code_verifier: "y" })).body,
      {
        code: 404,
        error_code: "flow_state_not_found",
        msg: "invalid flow state, no valid flow state found",
      },
    );
    assert.deepEqual((await raw("POST", "/token?grant_type=magic", {})).body, {
      code: 400,
      error_code: "invalid_credentials",
      msg: "unsupported_grant_type",
    });

    const phone = "+15555550123";
    assertAuthError(
      (await client().auth.signInWithOtp({ phone })).error,
      { status: 400, code: "phone_provider_disabled", message: "Unsupported phone provider" },
      "signInWithOtp({ phone })",
    );
    assertAuthError(
      (await client().auth.signUp({ phone, password: "Phone-Horse-1" })).error,
      { status: 400, code: "phone_provider_disabled", message: "Phone signups are disabled" },
      "signUp({ phone })",
    );
    assertAuthError(
      (await client().auth.verifyOtp({ phone, token: "123456", type: "sms" })).error,
      { status: 400, code: "phone_provider_disabled" },
      "verifyOtp({ phone })",
    );

    for (const path of ["/passkeys/authentication/options", "/passkeys/registration/options"]) {
      assert.deepEqual((await raw("POST", path, {})).body, {
        code: 404,
        error_code: "passkey_disabled",
        msg: "Passkeys are disabled",
      });
    }
    assert.deepEqual((await raw("GET", "/user/identities/authorize?provider=google")).body, {
      code: 404,
      error_code: "manual_linking_disabled",
      msg: "Manual linking is disabled",
    });
    assert.deepEqual((await raw("GET", "/oauth/authorize?client_id=x")).body, {
      code: 404,
      error_code: "feature_disabled",
      msg: "OAuth server is disabled",
    });

    // signInWithOAuth sends the browser to /authorize, with no apikey.
    const { data } = await client().auth.signInWithOAuth({
      provider: "google",
      options: { skipBrowserRedirect: true },
    });
    const res = await fetch(data.url ?? "");
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      code: 400,
      error_code: "validation_failed",
      msg: "Unsupported provider: provider is not enabled",
    });
    assert.equal(
      ((await (await fetch(`${app.url}/auth/v1/authorize?provider=myspace`)).json()) as { msg: string }).msg,
      "Unsupported provider: Provider myspace could not be found",
    );
    assert.equal(await userCount(), 0);
  });

  test("a malformed address is 400 'Unable to validate email address: invalid format' on every route, and creates nobody", async () => {
    const password = "Valid-Horse-42";
    const good = `valid-${randomUUID().slice(0, 8)}@example.com`;
    const signedUp = await client().auth.signUp({ email: good, password });
    assert.equal(signedUp.error, null);
    const session = signedUp.data.session;
    assert.ok(session);
    const signedIn = createClient(app.url, anonKey, options);
    await signedIn.auth.setSession({
      access_token: session.access_token,
      refresh_token: session.refresh_token,
    });
    const before = await userCount();

    for (const email of BAD_ADDRESSES) {
      const expected = { status: 400, code: "validation_failed", message: INVALID };
      const calls: [string, () => Promise<{ error: AuthError | null }>][] = [
        ["signUp", () => client().auth.signUp({ email, password })],
        ["signInWithPassword", () => client().auth.signInWithPassword({ email, password })],
        ["signInWithOtp", () => client().auth.signInWithOtp({ email })],
        ["resetPasswordForEmail", () => client().auth.resetPasswordForEmail(email)],
        ["verifyOtp", () => client().auth.verifyOtp({ email, token: "123456", type: "email" })],
        ["updateUser", () => signedIn.auth.updateUser({ email })],
        ["inviteUserByEmail", () => admin().auth.admin.inviteUserByEmail(email)],
        ["createUser", () => admin().auth.admin.createUser({ email, password })],
        ["generateLink", () => admin().auth.admin.generateLink({ type: "magiclink", email })],
      ];
      for (const [name, call] of calls) {
        const { error } = await call();
        // A one-letter "address" that ends in nothing is read by auth-js as is; all answer the same.
        assertAuthError(error, expected, `${name}(${JSON.stringify(email)})`);
      }
    }
    const invite = await raw(
      "POST",
      "/invite",
      { email: "xx:;x@x.x" },
      { authorization: `Bearer ${serviceKey}` },
    );
    assert.deepEqual(invite, {
      status: 400,
      type: "application/json; charset=utf-8",
      body: { code: 400, error_code: "validation_failed", msg: INVALID },
    });
    assert.equal(await userCount(), before, "no user was made");
    const user = await signedIn.auth.getUser();
    assert.equal(user.data.user?.email, good, "the address did not change");
  });
});
