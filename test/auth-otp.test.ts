import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { listMail, type MailRow } from "../src/mail/mailer.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * POST /auth/v1/otp (supabase-js `signInWithOtp`): a sign-in link and code by e-mail, as GoTrue
 * sends them — the console's "e-mail me a code" sign-in. Real server, real supabase-js client.
 */

const PUBLIC_URL = "https://auth.backline.test";
const PASSWORD = "Correct-Horse-7";
const newEmail = () => `otp-${randomUUID().slice(0, 8)}@example.com`;

function readMail(mail: MailRow | undefined): { token: string; code: string; subject: string } {
  assert.ok(mail, "expected a mail");
  const link = /Open this link: (\S+)/.exec(mail.text_body)?.[1];
  const code = /enter this code: (\d{6})\b/.exec(mail.text_body)?.[1];
  assert.ok(link && code, `no link or code in:\n${mail.text_body}`);
  return { token: new URL(link).searchParams.get("token") ?? "", code, subject: mail.subject };
}

describeEachEngine("auth: sign-in links and codes (POST /auth/v1/otp)", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL });
  });
  after(async () => {
    await app?.close();
  });

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth });
    const client = (): SupabaseClient =>
      createClient(app.url, keys.anon_key, { auth: { persistSession: false, autoRefreshToken: false } });
    const mails = async (email: string) => listMail(t().db, { tenantId: tenant.id, to: email });
    return { tenant, keys, client, mails };
  }

  test("an existing user gets a sign-in code that signs in once (verifyOtp type email) and proves the address", async () => {
    const env = await tenant({ email_confirmation: false });
    const email = newEmail();
    const signup = await env.client().auth.signUp({ email, password: PASSWORD });
    assert.equal(signup.error, null);

    const client = env.client();
    const sent = await client.auth.signInWithOtp({ email, options: { shouldCreateUser: false } });
    assert.equal(sent.error, null);
    const mail = readMail((await env.mails(email))[0]);
    assert.equal(mail.subject, "Your sign-in link");

    const { data, error } = await client.auth.verifyOtp({ email, token: mail.code, type: "email" });
    assert.equal(error, null);
    assert.equal(data.user?.email, email);
    const amr = decodeJwt(data.session?.access_token ?? "").amr as { method: string }[];
    assert.equal(amr[0]?.method, "otp");
    const again = await env.client().auth.verifyOtp({ email, token: mail.code, type: "email" });
    assert.equal(again.error?.code, "otp_expired");
    // The sign-up never proved the address (no confirmation on this tenant): this code is its first
    // proof, so the password whoever signed up chose is dropped (docs/auth.md).
    const password = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(password.error?.code, "invalid_credentials");
  });

  test("the link signs in too (type magiclink, token_hash), and only once", async () => {
    const env = await tenant({ email_confirmation: false });
    const email = newEmail();
    await env.client().auth.signUp({ email, password: PASSWORD });
    await env.client().auth.signInWithOtp({ email });
    const { token } = readMail((await env.mails(email))[0]);
    const first = await env.client().auth.verifyOtp({ token_hash: token, type: "magiclink" });
    assert.equal(first.error, null);
    assert.equal(first.data.user?.email, email);
    const second = await env.client().auth.verifyOtp({ token_hash: token, type: "magiclink" });
    assert.equal(second.error?.code, "otp_expired");
  });

  test("an unknown address: a user is made and confirmed by the code, unless create_user is false", async () => {
    const env = await tenant();
    const refused = newEmail();
    const no = await env
      .client()
      .auth.signInWithOtp({ email: refused, options: { shouldCreateUser: false } });
    assert.equal(no.error?.status, 422);
    assert.equal(no.error?.code, "otp_disabled");
    assert.equal((await env.mails(refused)).length, 0);

    const email = newEmail();
    const yes = await env.client().auth.signInWithOtp({ email, options: { data: { name: "Ada" } } });
    assert.equal(yes.error, null);
    const mail = readMail((await env.mails(email))[0]);
    assert.equal(mail.subject, "Confirm your sign-up");
    const { data, error } = await env.client().auth.verifyOtp({ email, token: mail.code, type: "email" });
    assert.equal(error, null);
    assert.ok(data.user?.email_confirmed_at);
    assert.equal(data.user?.user_metadata.name, "Ada");
  });

  test("sign-ups off: an unknown address is refused, a known one still gets its code", async () => {
    const env = await tenant({ email_confirmation: false });
    const email = newEmail();
    await env.client().auth.signUp({ email, password: PASSWORD });
    const { error: off } = await env.client().auth.signInWithOtp({ email: newEmail() });
    assert.equal(off, null, "sign-ups are still on here");
    const closed = await tenant({ disable_signup: true });
    const no = await closed.client().auth.signInWithOtp({ email: newEmail() });
    assert.equal(no.error?.code, "signup_disabled");
  });

  test("a code for another address, a wrong code and bad input are refused", async () => {
    const env = await tenant({ email_confirmation: false });
    const a = newEmail();
    const b = newEmail();
    await env.client().auth.signUp({ email: a, password: PASSWORD });
    await env.client().auth.signUp({ email: b, password: PASSWORD });
    await env.client().auth.signInWithOtp({ email: a });
    const { code } = readMail((await env.mails(a))[0]);
    const wrongUser = await env.client().auth.verifyOtp({ email: b, token: code, type: "email" });
    assert.equal(wrongUser.error?.code, "otp_expired");
    const wrong = await env.client().auth.verifyOtp({
      email: a,
      token: code === "000000" ? "111111" : "000000",
      type: "email",
    });
    assert.equal(wrong.error?.code, "otp_expired");

    const res = await fetch(`${app.url}/auth/v1/otp`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email: a, create_user: "yes" }),
    });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error_code: string }).error_code, "validation_failed");
    const noEmail = await fetch(`${app.url}/auth/v1/otp`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(noEmail.status, 400);
  });

  test("another tenant's code does not sign in here", async () => {
    const one = await tenant({ email_confirmation: false });
    const two = await tenant({ email_confirmation: false });
    const email = newEmail();
    await one.client().auth.signUp({ email, password: PASSWORD });
    await two.client().auth.signUp({ email, password: PASSWORD });
    await one.client().auth.signInWithOtp({ email });
    const { code, token } = readMail((await one.mails(email))[0]);
    assert.equal(
      (await two.client().auth.verifyOtp({ email, token: code, type: "email" })).error?.code,
      "otp_expired",
    );
    assert.equal(
      (await two.client().auth.verifyOtp({ token_hash: token, type: "magiclink" })).error?.code,
      "otp_expired",
    );
  });
});
