import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type AuthError, createClient, type SupabaseClient } from "@supabase/supabase-js";
import { listMail } from "../src/mail/mailer.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * resend and reauthenticate (issue 42, item 4) through supabase-js on both engines: a mail asked
 * for again at most once per `mail_interval_seconds` (GoTrue's 60 s by default), and a password
 * change from an old session that needs the mailed code where the tenant asks for it
 * (`secure_password_change`).
 */

const PUBLIC_URL = "https://auth.backline.test";
const PASSWORD = "Correct-Horse-7";
const newEmail = () => `resend-${randomUUID().slice(0, 8)}@example.com`;
let lastIp = 0;

function assertAuthError(error: AuthError | null, expected: { status: number; code: string }, what = "") {
  assert.ok(error, `${what}: expected ${expected.code}, got no error`);
  assert.deepEqual({ status: error.status, code: error.code }, expected, `${what}: ${error.message}`);
}

describeEachEngine("auth: resend and reauthenticate", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL, TRUST_PROXY: "true" });
  });
  after(async () => {
    await app?.close();
  });

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth });
    const client = (): SupabaseClient =>
      createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false },
        global: { headers: { "X-Forwarded-For": `198.51.100.${++lastIp}` } },
      });
    /** The codes mailed to the address, of this kind, newest first. */
    const codes = async (email: string, kind: string) =>
      (await listMail(t().db, { tenantId: tenant.id, to: email }))
        .filter((m) => m.kind === kind)
        .map((m) => /enter this code: (\d{6})\b/i.exec(m.text_body)?.[1] ?? "");
    return { tenant, keys, client, codes };
  }

  test("resend signup: once per interval (429 over_email_send_rate_limit); the new code replaces the old", async () => {
    const strict = await tenant();
    const email = newEmail();
    assert.equal((await strict.client().auth.signUp({ email, password: PASSWORD })).error, null);
    const soon = await strict.client().auth.resend({ type: "signup", email });
    assertAuthError(soon.error, { status: 429, code: "over_email_send_rate_limit" }, "resend at once");
    assert.match(
      soon.error?.message ?? "",
      /^For security purposes, you can only request this after \d+ seconds\.$/,
    );
    assert.equal((await strict.codes(email, "auth.signup")).length, 1);

    const env = await tenant({ mail_interval_seconds: 0 });
    const other = newEmail();
    assert.equal((await env.client().auth.signUp({ email: other, password: PASSWORD })).error, null);
    const [first] = await env.codes(other, "auth.signup");
    const again = await env.client().auth.resend({ type: "signup", email: other });
    assert.equal(again.error, null);
    const [second] = await env.codes(other, "auth.signup");
    assert.ok(first && second && first !== second);
    const stale = await env.client().auth.verifyOtp({ email: other, token: first, type: "signup" });
    assertAuthError(stale.error, { status: 403, code: "otp_expired" }, "the older code");
    const confirmed = await env.client().auth.verifyOtp({ email: other, token: second, type: "signup" });
    assert.equal(confirmed.error, null);

    // Confirmed, or unknown: {} and no mail, as GoTrue (no account enumeration).
    assert.equal((await env.client().auth.resend({ type: "signup", email: other })).error, null);
    assert.equal((await env.codes(other, "auth.signup")).length, 2);
    const nobody = newEmail();
    assert.equal((await env.client().auth.resend({ type: "signup", email: nobody })).error, null);
    assert.deepEqual(await listMail(t().db, { tenantId: env.tenant.id, to: nobody }), []);

    const bad = await env.client().auth.resend({ type: "signup", email: "xx:;x@x.x" });
    assertAuthError(bad.error, { status: 400, code: "validation_failed" }, "bad address");
    const sms = await env.client().auth.resend({ type: "sms", phone: "+15555550100" });
    assertAuthError(sms.error, { status: 400, code: "phone_provider_disabled" }, "sms");
  });

  test("resend email_change: the confirmation goes to the new address again", async () => {
    const env = await tenant({ mail_interval_seconds: 0 });
    const email = newEmail();
    const client = env.client();
    assert.equal((await client.auth.signUp({ email, password: PASSWORD })).error, null);
    const [code] = await env.codes(email, "auth.signup");
    assert.equal((await client.auth.verifyOtp({ email, token: code ?? "", type: "signup" })).error, null);
    const moved = newEmail();
    assert.equal((await client.auth.updateUser({ email: moved })).error, null);
    assert.equal((await env.codes(moved, "auth.email_change")).length, 1);
    assert.equal((await env.client().auth.resend({ type: "email_change", email })).error, null);
    const [latest] = await env.codes(moved, "auth.email_change");
    assert.equal((await env.codes(moved, "auth.email_change")).length, 2);
    const changed = await client.auth.verifyOtp({ email: moved, token: latest ?? "", type: "email_change" });
    assert.equal(changed.error, null);
    assert.equal(changed.data.user?.email, moved);
  });

  test("secure_password_change: an old session needs reauthenticate's code (one try); a fresh one does not", async () => {
    const env = await tenant({
      email_confirmation: false,
      secure_password_change: true,
      mail_interval_seconds: 0,
    });
    const email = newEmail();
    const client = env.client();
    const signedUp = await client.auth.signUp({ email, password: PASSWORD });
    assert.equal(signedUp.error, null);
    // Signed in within the day: no code needed, as GoTrue.
    assert.equal((await client.auth.updateUser({ password: "Fresh-Horse-8" })).error, null);

    await t().db.asService((tx) =>
      tx.query("update internal.sessions set created_at = now() - interval '25 hours' where user_id = $1", [
        signedUp.data.user?.id,
      ]),
    );
    const needed = await client.auth.updateUser({ password: "Older-Horse-9" });
    assertAuthError(needed.error, { status: 400, code: "reauthentication_needed" }, "no nonce");

    assert.equal((await client.auth.reauthenticate()).error, null);
    const [code] = await env.codes(email, "auth.reauthentication");
    assert.ok(code);
    const wrong = await client.auth.updateUser({
      password: "Older-Horse-9",
      nonce: code === "000000" ? "111111" : "000000",
    });
    assertAuthError(wrong.error, { status: 422, code: "reauthentication_not_valid" }, "wrong nonce");
    const voided = await client.auth.updateUser({ password: "Older-Horse-9", nonce: code });
    assertAuthError(
      voided.error,
      { status: 422, code: "reauthentication_not_valid" },
      "the code after a wrong one",
    );

    assert.equal((await client.auth.reauthenticate()).error, null);
    const [fresh] = await env.codes(email, "auth.reauthentication");
    const ok = await client.auth.updateUser({ password: "Older-Horse-9", nonce: fresh ?? "" });
    assert.equal(ok.error, null);
    const reused = await client.auth.updateUser({ password: "Other-Horse-10", nonce: fresh ?? "" });
    assertAuthError(reused.error, { status: 422, code: "reauthentication_not_valid" }, "a used code");
    assert.equal(
      (await env.client().auth.signInWithPassword({ email, password: "Older-Horse-9" })).error,
      null,
    );
  });

  test("reauthenticate: once per interval, only with a confirmed address and a session", async () => {
    const env = await tenant({ email_confirmation: false });
    const client = env.client();
    const email = newEmail();
    assert.equal((await client.auth.signUp({ email, password: PASSWORD })).error, null);
    assert.equal((await client.auth.reauthenticate()).error, null);
    const soon = await client.auth.reauthenticate();
    assertAuthError(soon.error, { status: 429, code: "over_email_send_rate_limit" }, "twice at once");
    assert.equal((await env.codes(email, "auth.reauthentication")).length, 1);
    const res = await fetch(`${app.url}/auth/v1/reauthenticate`, { headers: { apikey: env.keys.anon_key } });
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error_code: string }).error_code, "no_authorization");
  });
});
