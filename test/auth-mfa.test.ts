import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type AuthError, createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { totpCode, totpStep } from "../src/auth/totp.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * Multi-factor sign-in end to end: supabase-js's auth.mfa against /auth/v1 on a socket, codes
 * computed here from the secret the enrolment shows (docs/auth.md, "Multi-factor authentication").
 */

const PASSWORD = "Correct-Horse-7";
const newEmail = () => `mfa-${randomUUID().slice(0, 8)}@example.com`;
type Amr = { method: string; timestamp: number }[];

function assertAuthError(error: AuthError | null, status: number, code: string): void {
  assert.ok(error, `expected ${code}, got no error`);
  assert.deepEqual({ status: error.status, code: error.code }, { status, code }, error.message);
}

describeEachEngine("auth: multi-factor sign-in (TOTP) with supabase-js", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL: "https://auth.backline.test" });
  });
  after(async () => {
    await app?.close();
  });

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), {
      auth: { email_confirmation: false, site_url: "https://app.backline.test/", ...auth },
    });
    const client = (): SupabaseClient =>
      createClient(app.url, keys.anon_key, { auth: { persistSession: false, autoRefreshToken: false } });
    return { tenant, keys, client };
  }

  async function signedUp(env: Awaited<ReturnType<typeof tenant>>) {
    const email = newEmail();
    const client = env.client();
    const { data, error } = await client.auth.signUp({ email, password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.user);
    return { client, email, userId: data.user.id };
  }

  /** Enrols a TOTP factor and verifies it with a code of the current step. */
  async function enrolled(client: SupabaseClient) {
    const { data, error } = await client.auth.mfa.enroll({ factorType: "totp", friendlyName: "phone" });
    assert.equal(error, null);
    assert.ok(data);
    const secret = data.totp.secret;
    const step = totpStep();
    const verified = await client.auth.mfa.challengeAndVerify({
      factorId: data.id,
      code: totpCode(secret, step),
    });
    assert.equal(verified.error, null);
    return { factorId: data.id, secret, step };
  }

  test("enroll, challenge, verify: the session becomes aal2, amr lists totp and password", async () => {
    const env = await tenant();
    const { client, email, userId } = await signedUp(env);

    let aal = await client.auth.mfa.getAuthenticatorAssuranceLevel();
    assert.deepEqual(
      { current: aal.data?.currentLevel, next: aal.data?.nextLevel },
      { current: "aal1", next: "aal1" },
    );

    const { data: enrolled, error } = await client.auth.mfa.enroll({
      factorType: "totp",
      friendlyName: "my phone",
      issuer: "Backline Test",
    });
    assert.equal(error, null);
    assert.ok(enrolled);
    assert.equal(enrolled.type, "totp");
    assert.equal(enrolled.friendly_name, "my phone");
    assert.match(enrolled.totp.secret, /^[A-Z2-7]{32}$/);
    const uri = new URL(enrolled.totp.uri);
    assert.equal(uri.protocol, "otpauth:");
    assert.equal(uri.searchParams.get("secret"), enrolled.totp.secret);
    assert.equal(uri.searchParams.get("issuer"), "Backline Test");
    assert.ok(decodeURIComponent(uri.pathname).endsWith(`Backline Test:${email}`), uri.pathname);
    // supabase-js turns the SVG into a data URL.
    assert.match(enrolled.totp.qr_code, /^data:image\/svg\+xml;utf-8,<svg[^>]*>/);

    // Unverified: listed in all, not among the TOTP factors that count.
    let factors = await client.auth.mfa.listFactors();
    assert.equal(factors.error, null);
    assert.deepEqual(
      factors.data?.all.map((f) => [f.id, f.status, f.factor_type, f.friendly_name]),
      [[enrolled.id, "unverified", "totp", "my phone"]],
    );
    assert.equal(factors.data?.totp.length, 0);

    const challenge = await client.auth.mfa.challenge({ factorId: enrolled.id });
    assert.equal(challenge.error, null);
    assert.ok(challenge.data);
    assert.equal(challenge.data.type, "totp");
    assert.ok(challenge.data.expires_at > Date.now() / 1000);

    // A wrong code first: refused, the session stays aal1.
    const wrong = await client.auth.mfa.verify({
      factorId: enrolled.id,
      challengeId: challenge.data.id,
      code: totpCode(enrolled.totp.secret, totpStep() + 5),
    });
    assertAuthError(wrong.error, 422, "mfa_verification_failed");

    const verified = await client.auth.mfa.verify({
      factorId: enrolled.id,
      challengeId: challenge.data.id,
      code: totpCode(enrolled.totp.secret, totpStep()),
    });
    assert.equal(verified.error, null);
    assert.ok(verified.data);
    const claims = decodeJwt(verified.data.access_token);
    assert.equal(claims.aal, "aal2");
    const amr = claims.amr as Amr;
    assert.deepEqual(amr.map((a) => a.method).sort(), ["password", "totp"]);
    assert.ok(amr.every((a) => Number.isInteger(a.timestamp)));
    assert.equal(amr[0]?.method, "totp", "the latest method first, as GoTrue orders them");

    // The client holds the upgraded session.
    const session = (await client.auth.getSession()).data.session;
    assert.equal(session?.access_token, verified.data.access_token);
    aal = await client.auth.mfa.getAuthenticatorAssuranceLevel();
    assert.equal(aal.data?.currentLevel, "aal2");
    assert.equal(aal.data?.nextLevel, "aal2");
    assert.deepEqual(
      aal.data?.currentAuthenticationMethods.map((a) => (typeof a === "string" ? a : a.method)).sort(),
      ["password", "totp"],
    );
    factors = await client.auth.mfa.listFactors();
    assert.deepEqual(
      factors.data?.totp.map((f) => [f.id, f.status]),
      [[enrolled.id, "verified"]],
    );

    // A refresh keeps aal2.
    const refreshed = await client.auth.refreshSession();
    assert.equal(refreshed.error, null);
    assert.equal(decodeJwt(refreshed.data.session?.access_token ?? "").aal, "aal2");

    // A new sign-in is aal1 with aal2 next: the app asks for the code.
    const again = env.client();
    assert.equal((await again.auth.signInWithPassword({ email, password: PASSWORD })).error, null);
    aal = await again.auth.mfa.getAuthenticatorAssuranceLevel();
    assert.deepEqual(
      { current: aal.data?.currentLevel, next: aal.data?.nextLevel },
      { current: "aal1", next: "aal2" },
    );

    // The secret is sealed at rest: not in the row, opened by the master key.
    const row = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ secret_sealed: string; last_used_step: string }>(
            "select secret_sealed, last_used_step from internal.mfa_factors where user_id = $1",
            [userId],
          )
        ).rows[0],
    );
    assert.ok(row);
    assert.ok(!row.secret_sealed.includes(enrolled.totp.secret));
    assert.equal(t().db.secrets.decrypt(row.secret_sealed), enrolled.totp.secret);
    assert.ok(Number(row.last_used_step) >= totpStep() - 1);
  });

  test("a code is accepted once, a challenge is answered once, no code of an earlier step", async () => {
    const env = await tenant();
    const { client } = await signedUp(env);
    const { data } = await client.auth.mfa.enroll({ factorType: "totp" });
    assert.ok(data);
    const { id: factorId, totp } = data;
    const secret = totp.secret;
    const step = totpStep();
    const challenge = await client.auth.mfa.challenge({ factorId });
    assert.ok(challenge.data);
    const ok = await client.auth.mfa.verify({
      factorId,
      challengeId: challenge.data.id,
      code: totpCode(secret, step),
    });
    assert.equal(ok.error, null);
    // The answered challenge is gone, even with a code that would be good.
    const again = await client.auth.mfa.verify({
      factorId,
      challengeId: challenge.data.id,
      code: totpCode(secret, step + 1),
    });
    assertAuthError(again.error, 422, "mfa_factor_not_found");
    // The code just used, on a new challenge: refused (replay within the window).
    const replay = await client.auth.mfa.challengeAndVerify({ factorId, code: totpCode(secret, step) });
    assertAuthError(replay.error, 422, "mfa_verification_failed");
    // An earlier step's code, still within the window: refused too (only later steps count).
    const older = await client.auth.mfa.challengeAndVerify({ factorId, code: totpCode(secret, step - 1) });
    assertAuthError(older.error, 422, "mfa_verification_failed");
    // The next step's code (one step ahead is within the window): accepted, once.
    const next = await client.auth.mfa.challengeAndVerify({ factorId, code: totpCode(secret, step + 1) });
    assert.equal(next.error, null);
    const nextAgain = await client.auth.mfa.challengeAndVerify({
      factorId,
      code: totpCode(secret, step + 1),
    });
    assertAuthError(nextAgain.error, 422, "mfa_verification_failed");
  });

  test("verification attempts are rate-limited per user (429), right codes included", async () => {
    const env = await tenant({ rate_limits: { mfa_verify_per_user: { max: 3, windowSeconds: 3600 } } });
    const { client } = await signedUp(env);
    const { data } = await client.auth.mfa.enroll({ factorType: "totp" });
    assert.ok(data);
    // Codes of steps far from now: wrong whatever the clock says.
    for (let i = 0; i < 3; i++) {
      const code = totpCode(data.totp.secret, totpStep() + 10 + i);
      const r = await client.auth.mfa.challengeAndVerify({ factorId: data.id, code });
      assertAuthError(r.error, 422, "mfa_verification_failed");
    }
    const limited = await client.auth.mfa.challengeAndVerify({
      factorId: data.id,
      code: totpCode(data.totp.secret, totpStep()),
    });
    assertAuthError(limited.error, 429, "over_request_rate_limit");
  });

  test("unenroll: a verified factor needs aal2; afterwards sessions are aal1", async () => {
    const env = await tenant();
    const { client, email } = await signedUp(env);
    const { factorId } = await enrolled(client);

    const aal1 = env.client();
    assert.equal((await aal1.auth.signInWithPassword({ email, password: PASSWORD })).error, null);
    const refused = await aal1.auth.mfa.unenroll({ factorId });
    assertAuthError(refused.error, 422, "insufficient_aal");
    // Enrolling another factor needs aal2 too, once one is verified.
    const more = await aal1.auth.mfa.enroll({ factorType: "totp", friendlyName: "second" });
    assertAuthError(more.error, 403, "insufficient_aal");

    const done = await client.auth.mfa.unenroll({ factorId });
    assert.equal(done.error, null);
    assert.equal(done.data?.id, factorId);
    const refreshed = await client.auth.refreshSession();
    assert.equal(decodeJwt(refreshed.data.session?.access_token ?? "").aal, "aal1");
    assert.deepEqual((await client.auth.mfa.listFactors()).data?.all, []);
  });

  test("errors: an unknown factor, another user's factor, phone factors, no session", async () => {
    const env = await tenant();
    const alice = await signedUp(env);
    const bob = await signedUp(env);
    const { data } = await alice.client.auth.mfa.enroll({ factorType: "totp" });
    assert.ok(data);
    const theirs = await bob.client.auth.mfa.challenge({ factorId: data.id });
    assertAuthError(theirs.error, 404, "mfa_factor_not_found");
    const unknown = await bob.client.auth.mfa.challenge({ factorId: randomUUID() });
    assertAuthError(unknown.error, 404, "mfa_factor_not_found");
    const notUuid = await bob.client.auth.mfa.unenroll({ factorId: "nope" });
    assertAuthError(notUuid.error, 404, "mfa_factor_not_found");
    const phone = await bob.client.auth.mfa.enroll({ factorType: "phone", phone: "+15555550100" });
    assertAuthError(phone.error, 422, "mfa_phone_enroll_not_enabled");
    const res = await fetch(`${app.url}/auth/v1/factors`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ factor_type: "totp" }),
    });
    assert.equal(res.status, 401);
  });
});
