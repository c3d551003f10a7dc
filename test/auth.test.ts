import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import {
  type AuthError,
  createClient,
  type Session,
  type SupabaseClient,
  type User,
} from "@supabase/supabase-js";
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from "jose";
import { listMail, type MailRow } from "../src/mail/mailer.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { signSessionClaims } from "./support/seed.ts";

/**
 * /auth/v1 end to end: the real server on a socket, the real @supabase/supabase-js client, a real
 * database per engine. Each test works in a tenant of its own, so rate limits and mail never mix.
 */

const PUBLIC_URL = "https://auth.backline.test";
const SITE_URL = "https://app.backline.test/welcome";
const PASSWORD = "Correct-Horse-7";
const NEW_PASSWORD = "Battery-Staple-8";
const API_VERSION = { "X-Supabase-Api-Version": "2024-01-01" };

const newEmail = () => `user-${randomUUID().slice(0, 8)}@example.com`;
const sha256 = (v: string) => createHash("sha256").update(v).digest("hex");
/** The sign-in methods an access token's amr claim lists. */
const amrMethods = (accessToken: string | undefined) =>
  (decodeJwt(accessToken ?? "").amr as { method: string; timestamp: number }[]).map((a) => a.method);

/** What a test asserts about an error from supabase-js. */
function assertAuthError(
  error: AuthError | null,
  expected: { status: number; code: string | undefined; name?: string },
): void {
  assert.ok(error, `expected ${expected.code ?? expected.name}, got no error`);
  assert.deepEqual(
    { name: error.name, status: error.status, code: error.code },
    { name: expected.name ?? "AuthApiError", status: expected.status, code: expected.code },
    error.message,
  );
}

/** The link and the six-digit code of an auth mail. */
function readMail(mail: MailRow | undefined): { link: URL; token: string; code: string } {
  assert.ok(mail, "expected a mail");
  const link = /Open this link: (\S+)/.exec(mail.text_body)?.[1];
  const code = /enter this code: (\d{6})\b/.exec(mail.text_body)?.[1];
  assert.ok(link && code, `no link or code in:\n${mail.text_body}`);
  const url = new URL(link);
  return { link: url, token: url.searchParams.get("token") ?? "", code };
}

describeEachEngine("auth: /auth/v1 with supabase-js", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL });
  });
  after(async () => {
    await app?.close();
  });

  /** A tenant with these auth settings, and supabase-js clients on its anon key. */
  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth });
    const client = (): SupabaseClient =>
      createClient(app.url, keys.anon_key, { auth: { persistSession: false, autoRefreshToken: false } });
    return { tenant, keys, client };
  }
  type Env = Awaited<ReturnType<typeof tenant>>;

  /** Signs a new user up on a tenant without e-mail confirmation; the client holds the session. */
  async function signedUp(env: Env, options: { email?: string; data?: Record<string, unknown> } = {}) {
    const email = options.email ?? newEmail();
    const client = env.client();
    const { data, error } = await client.auth.signUp({
      email,
      password: PASSWORD,
      ...(options.data ? { options: { data: options.data } } : {}),
    });
    assert.equal(error, null);
    assert.ok(data.session && data.user, "sign-up without confirmation returns a session");
    return { client, email, session: data.session, user: data.user };
  }

  async function signIn(env: Env, email: string, password = PASSWORD) {
    const client = env.client();
    const result = await client.auth.signInWithPassword({ email, password });
    return { client, ...result };
  }

  /** A raw request to /auth/v1 (for status codes, headers and bodies the client hides). */
  function raw(
    env: Env | undefined,
    path: string,
    init: { method?: string; bearer?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    return fetch(`${app.url}/auth/v1${path}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      redirect: "manual",
      headers: {
        ...(env ? { apikey: env.keys.anon_key } : {}),
        ...(init.bearer ? { authorization: `Bearer ${init.bearer}` } : {}),
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
  }

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  const mailTo = (env: Env, email: string) => listMail(t().db, { tenantId: env.tenant.id, to: email });

  /** GET /user with this access token: the status and the error code, if any. */
  async function userStatus(env: Env, accessToken: string): Promise<{ status: number; code?: string }> {
    const res = await raw(env, "/user", { bearer: accessToken, headers: API_VERSION });
    const body = (await res.json()) as { code?: string };
    return res.ok ? { status: res.status } : { status: res.status, code: body.code };
  }

  // ---------------------------------------------------------------------------------------------
  // Sign-up and sign-in

  test("signUp without e-mail confirmation returns a session whose access token carries GoTrue's claims", async () => {
    const env = await tenant({ email_confirmation: false });
    const { session, user, email } = await signedUp(env, { data: { name: "Mira Vale" } });
    assert.equal(session.token_type, "bearer");
    assert.equal(session.expires_in, 3600);
    assert.equal(user.email, email);
    assert.ok(user.email_confirmed_at, "confirmed at once when confirmation is off");

    const header = decodeProtectedHeader(session.access_token);
    assert.deepEqual([header.alg, typeof header.kid], ["ES256", "string"]);
    const [stored] = await rows<{ id: string }>("select id from internal.sessions where user_id = $1", [
      user.id,
    ]);
    // Exactly GoTrue's claims, plus tenant_id; the ones that vary are checked below.
    const { amr: _amr, iat, exp, ...fixed } = decodeJwt(session.access_token);
    assert.deepEqual(fixed, {
      sub: user.id,
      aud: "authenticated",
      role: "authenticated",
      email,
      phone: "",
      app_metadata: { provider: "email", providers: ["email"] },
      user_metadata: { name: "Mira Vale" },
      session_id: stored?.id,
      aal: "aal1",
      iss: `${PUBLIC_URL}/auth/v1`,
      is_anonymous: false,
      tenant_id: env.tenant.id,
    });
    assert.deepEqual(amrMethods(session.access_token), ["password"]);
    assert.equal(Number(exp) - Number(iat), 3600);
    assert.equal(exp, session.expires_at);
    // Signed with the tenant's own signing key (test/auth-signing-keys.test.ts goes further).
    await jwtVerify(
      session.access_token,
      createRemoteJWKSet(new URL(`${app.url}/auth/v1/.well-known/jwks.json?apikey=${env.keys.anon_key}`)),
    );
  });

  test("signUp: a new user gets a personal account, as its owner", async () => {
    // (Invited addresses: test/auth-invitations.test.ts.)
    const env = await tenant({ email_confirmation: false });
    const { user } = await signedUp(env, { data: { full_name: "Mira Vale" } });
    const memberships = await rows<{ account_id: string; role: string; name: string; kind: string }>(
      `select m.account_id, m.role, a.name, a.kind from internal.memberships m
       join internal.accounts a on a.id = m.account_id where m.user_id = $1`,
      [user.id],
    );
    const [defaults] = await rows<{ default_account_id: string | null }>(
      "select default_account_id from internal.users where id = $1",
      [user.id],
    );
    assert.equal(memberships.length, 1);
    assert.deepEqual(
      { ...memberships[0], account_id: undefined },
      { account_id: undefined, role: "owner", name: "Mira Vale", kind: "artist" },
    );
    assert.equal(defaults?.default_account_id, memberships[0]?.account_id);
  });

  test("signInWithPassword: the right password signs in; a wrong one and an unknown address fail alike", async () => {
    const env = await tenant({ email_confirmation: false });
    const { email, user } = await signedUp(env);
    const attempts = [
      { name: "the right password", email, password: PASSWORD, ok: true },
      { name: "the address in upper case", email: email.toUpperCase(), password: PASSWORD, ok: true },
      { name: "a wrong password", email, password: "Wrong-Password-9", ok: false },
      { name: "an unknown address", email: newEmail(), password: PASSWORD, ok: false },
    ];
    const failures: string[] = [];
    for (const a of attempts) {
      const { data, error } = await signIn(env, a.email, a.password);
      if (a.ok) {
        assert.equal(error, null, a.name);
        assert.equal(data.user?.id, user.id, a.name);
        assert.equal(decodeJwt(data.session?.access_token ?? "").sub, user.id, a.name);
      } else {
        assertAuthError(error, { status: 400, code: "invalid_credentials" });
        failures.push(error?.message ?? "");
      }
    }
    assert.equal(new Set(failures).size, 1, "no account enumeration: one message for both failures");
  });

  test("signUp for an address already registered: 422 without confirmation; an obfuscated user with it", async () => {
    // GoTrue: with autoconfirm the error says so; with confirmation on, a fake user (no identities)
    // is returned instead, so sign-up cannot be used to find out which addresses have accounts.
    const open = await tenant({ email_confirmation: false });
    const { email } = await signedUp(open);
    const again = await open.client().auth.signUp({ email, password: PASSWORD });
    assertAuthError(again.error, { status: 422, code: "user_already_exists" });

    const confirming = await tenant({ site_url: SITE_URL });
    const first = await confirming.client().auth.signUp({ email, password: PASSWORD });
    assert.equal(first.error, null);
    const { code } = readMail((await mailTo(confirming, email))[0]);
    assert.equal(
      (await confirming.client().auth.verifyOtp({ email, token: code, type: "signup" })).error,
      null,
    );
    const existing = await confirming.client().auth.signUp({ email, password: PASSWORD });
    assert.equal(existing.error, null, "no error that would reveal the account");
    assert.equal(existing.data.session, null);
    assert.deepEqual(existing.data.user?.identities, []);
    assert.notEqual(existing.data.user?.id, first.data.user?.id);
  });

  // ---------------------------------------------------------------------------------------------
  // E-mail confirmation

  test("with e-mail confirmation on, signUp returns a user and no session, and sign-in waits for the confirmation", async () => {
    const env = await tenant({ site_url: SITE_URL });
    const email = newEmail();
    const { data, error } = await env.client().auth.signUp({ email, password: PASSWORD });
    assert.equal(error, null);
    assert.equal(data.session, null);
    assert.equal(data.user?.email, email);
    assert.equal(data.user?.email_confirmed_at, undefined);
    assert.ok(data.user?.confirmation_sent_at);

    const early = await signIn(env, email);
    assertAuthError(early.error, { status: 400, code: "email_not_confirmed" });

    const mails = await mailTo(env, email);
    assert.equal(mails.length, 1);
    assert.deepEqual(
      { kind: mails[0]?.kind, subject: mails[0]?.subject, status: mails[0]?.status },
      { kind: "auth.signup", subject: "Confirm your sign-up", status: "stored" },
    );
    const { link, code } = readMail(mails[0]);
    assert.equal(`${link.origin}${link.pathname}`, `${PUBLIC_URL}/auth/v1/verify`);
    assert.equal(link.searchParams.get("type"), "signup");
    assert.equal(link.searchParams.get("redirect_to"), SITE_URL);
    assert.match(code, /^\d{6}$/);
  });

  /** One way to use the confirmation in a mail: a session, or the error it ends in. */
  interface Outcome {
    accessToken?: string;
    status?: number;
    code?: string | undefined;
  }
  const fromClient = (r: { data: { session: Session | null }; error: AuthError | null }): Outcome =>
    r.error
      ? { status: r.error.status, code: r.error.code }
      : { accessToken: r.data.session?.access_token ?? "" };

  /** Follows a verify link (with the tenant's apikey as ?apikey=): the redirect and its fragment. */
  async function followLink(env: Env, link: URL, expectTarget = SITE_URL): Promise<Outcome> {
    const url = new URL(`${link.pathname}${link.search}`, app.url);
    url.searchParams.set("apikey", env.keys.anon_key);
    const res = await fetch(url, { redirect: "manual" });
    assert.equal(res.status, 303);
    const location = new URL(res.headers.get("location") ?? "");
    assert.equal(`${location.origin}${location.pathname}`, expectTarget);
    const fragment = new URLSearchParams(location.hash.slice(1));
    if (fragment.get("error")) {
      assert.equal(fragment.get("error"), "access_denied");
      return { status: res.status, code: fragment.get("error_code") ?? undefined };
    }
    assert.equal(fragment.get("token_type"), "bearer");
    assert.equal(fragment.get("type"), "signup");
    assert.ok(fragment.get("refresh_token"));
    assert.equal(Number(fragment.get("expires_in")), 3600);
    return { accessToken: fragment.get("access_token") ?? "" };
  }

  const confirmations: {
    name: string;
    use: (env: Env, email: string, mail: ReturnType<typeof readMail>) => Promise<Outcome>;
    failedStatus: number;
  }[] = [
    {
      name: "verifyOtp with the 6-digit code",
      use: async (env, email, mail) =>
        fromClient(await env.client().auth.verifyOtp({ email, token: mail.code, type: "signup" })),
      failedStatus: 403,
    },
    {
      name: "verifyOtp with the link's token as token_hash",
      use: async (env, _email, mail) =>
        fromClient(await env.client().auth.verifyOtp({ token_hash: mail.token, type: "signup" })),
      failedStatus: 403,
    },
    {
      name: "the link, which redirects 303 to the site URL with the session in the fragment",
      use: (env, _email, mail) => followLink(env, mail.link),
      failedStatus: 303,
    },
  ];
  for (const c of confirmations) {
    test(`confirming by ${c.name} signs in, once`, async () => {
      const env = await tenant({ site_url: SITE_URL });
      const email = newEmail();
      const { data } = await env.client().auth.signUp({ email, password: PASSWORD });
      const mail = readMail((await mailTo(env, email))[0]);

      const first = await c.use(env, email, mail);
      assert.ok(first.accessToken, `no session: ${JSON.stringify(first)}`);
      assert.equal(decodeJwt(first.accessToken).sub, data.user?.id);
      assert.deepEqual(amrMethods(first.accessToken), ["otp"]);
      assert.deepEqual(await userStatus(env, first.accessToken), { status: 200 });

      assert.deepEqual(await c.use(env, email, mail), { status: c.failedStatus, code: "otp_expired" });
      const later = await signIn(env, email);
      assert.equal(later.error, null, "the address is confirmed: password sign-in works");
    });
  }

  test("the link in the mail works as mailed: a mail client adds no apikey", async () => {
    const env = await tenant({ site_url: SITE_URL });
    const email = newEmail();
    await env.client().auth.signUp({ email, password: PASSWORD });
    const { link } = readMail((await mailTo(env, email))[0]);
    const res = await fetch(new URL(`${link.pathname}${link.search}`, app.url), { redirect: "manual" });
    assert.equal(
      res.status,
      303,
      `GET ${link.pathname} as mailed answered ${res.status}: ${await res.text()}`,
    );
    assert.match(res.headers.get("location") ?? "", /^https:\/\/app\.backline\.test\/welcome#access_token=/);
  });

  test("the code and the link of one mail are one token: the code kills the link", async () => {
    const env = await tenant({ site_url: SITE_URL });
    const email = newEmail();
    await env.client().auth.signUp({ email, password: PASSWORD });
    const mail = readMail((await mailTo(env, email))[0]);
    assert.equal(
      (await env.client().auth.verifyOtp({ email, token: mail.code, type: "signup" })).error,
      null,
    );
    assert.deepEqual(await followLink(env, mail.link), { status: 303, code: "otp_expired" });
  });

  test("signing up again before confirming sends a new mail; the older code stops working", async () => {
    const env = await tenant({ site_url: SITE_URL });
    const email = newEmail();
    await env.client().auth.signUp({ email, password: PASSWORD });
    const older = readMail((await mailTo(env, email))[0]);
    const again = await env.client().auth.signUp({ email, password: PASSWORD });
    assert.equal(again.error, null);
    const mails = await mailTo(env, email);
    assert.equal(mails.length, 2);
    const newer = readMail(mails[0]);
    const stale = await env.client().auth.verifyOtp({ email, token: older.code, type: "signup" });
    if (older.code !== newer.code) assertAuthError(stale.error, { status: 403, code: "otp_expired" });
    assert.equal(
      (await env.client().auth.verifyOtp({ email, token: newer.code, type: "signup" })).error,
      null,
    );
    // The same password both times: one person, whose password is kept.
    assert.equal((await signIn(env, email)).error, null);
  });

  const redirects: { name: string; redirectTo: string | undefined; lands: string }[] = [
    { name: "no redirect_to lands on the site URL", redirectTo: undefined, lands: SITE_URL },
    {
      name: "a redirect_to on the site's origin is followed",
      redirectTo: "https://app.backline.test/after-confirm",
      lands: "https://app.backline.test/after-confirm",
    },
    {
      name: "a redirect_to matching an allowed prefix is followed",
      redirectTo: "https://partner.example.org/auth/done",
      lands: "https://partner.example.org/auth/done",
    },
    {
      name: "a redirect_to elsewhere falls back to the site URL (no open redirect)",
      redirectTo: "https://evil.example.net/steal",
      lands: SITE_URL,
    },
  ];
  for (const c of redirects) {
    test(`verify link: ${c.name}`, async () => {
      const env = await tenant({ site_url: SITE_URL, redirect_urls: ["https://partner.example.org/auth/*"] });
      const email = newEmail();
      await env.client().auth.signUp({
        email,
        password: PASSWORD,
        ...(c.redirectTo ? { options: { emailRedirectTo: c.redirectTo } } : {}),
      });
      const { link } = readMail((await mailTo(env, email))[0]);
      const outcome = await followLink(env, link, c.lands);
      assert.ok(outcome.accessToken);
    });
  }

  test("verify link without a site URL: the tenant's portal, signed in, then the error once used", async () => {
    const env = await tenant({});
    const email = newEmail();
    await env.client().auth.signUp({ email, password: PASSWORD });
    const { link } = readMail((await mailTo(env, email))[0]);
    assert.equal(link.searchParams.get("redirect_to"), null);
    const url = new URL(`${link.pathname}${link.search}`, app.url);
    const portal = `${PUBLIC_URL}/portal/t/${env.tenant.slug}/auth/callback`;
    const first = await fetch(url, { redirect: "manual" });
    assert.equal(first.status, 303);
    const landed = new URL(first.headers.get("location") ?? "");
    assert.equal(`${landed.origin}${landed.pathname}`, portal);
    const fragment = new URLSearchParams(landed.hash.slice(1));
    assert.equal(fragment.get("type"), "signup");
    assert.ok(fragment.get("access_token"));
    const again = await fetch(url, { redirect: "manual" });
    assert.equal(again.status, 303);
    const refused = new URL(again.headers.get("location") ?? "");
    assert.equal(`${refused.origin}${refused.pathname}`, portal);
    assert.equal(new URLSearchParams(refused.hash.slice(1)).get("error_code"), "otp_expired");
  });

  test("a link's redirect_to may name this server's portal (its path or the tenant's own domain), nothing else", async () => {
    const env = await tenant({ email_confirmation: true });
    await t().db.asService((tx) =>
      tx.query(
        `update internal.tenants set settings = settings || '{"portal":{"domains":["music.example.test"]}}'::jsonb where id = $1`,
        [env.tenant.id],
      ),
    );
    const cases = [
      [`${PUBLIC_URL}/portal/t/${env.tenant.slug}/auth/callback`, true],
      ["https://music.example.test/portal/auth/callback", true],
      ["https://music.example.test/elsewhere", false],
      ["https://evil.example.test/portal/auth/callback", false],
    ] as const;
    for (const [target, allowed] of cases) {
      const email = newEmail();
      await env.client().auth.signUp({ email, password: PASSWORD, options: { emailRedirectTo: target } });
      const { link } = readMail((await mailTo(env, email))[0]);
      const res = await fetch(new URL(`${link.pathname}${link.search}`, app.url), { redirect: "manual" });
      assert.equal(res.status, 303);
      const landed = new URL(res.headers.get("location") ?? "");
      assert.equal(
        `${landed.origin}${landed.pathname}`,
        allowed ? target : `${PUBLIC_URL}/portal/t/${env.tenant.slug}/auth/callback`,
        target,
      );
    }
  });

  // ---------------------------------------------------------------------------------------------
  // The signed-in user

  test("getUser and updateUser: data is merged into user_metadata, a null removes a key", async () => {
    const env = await tenant({ email_confirmation: false });
    const { client, user, email } = await signedUp(env, { data: { name: "Mira", genre: "folk" } });
    const got = await client.auth.getUser();
    assert.equal(got.error, null);
    assert.deepEqual(
      { id: got.data.user?.id, email: got.data.user?.email, meta: got.data.user?.user_metadata },
      { id: user.id, email, meta: { name: "Mira", genre: "folk" } },
    );

    const updated = await client.auth.updateUser({ data: { plan: "pro", genre: null } });
    assert.equal(updated.error, null);
    assert.deepEqual(updated.data.user?.user_metadata, { name: "Mira", plan: "pro" });
    assert.deepEqual((await client.auth.getUser()).data.user?.user_metadata, { name: "Mira", plan: "pro" });
    // Tokens issued from now on carry the new metadata.
    const refreshed = await client.auth.refreshSession();
    assert.deepEqual(decodeJwt(refreshed.data.session?.access_token ?? "").user_metadata, {
      name: "Mira",
      plan: "pro",
    });
  });

  test("updateUser({ password }): the new password signs in, the old one no longer does", async () => {
    const env = await tenant({ email_confirmation: false });
    const { client, email } = await signedUp(env);
    assert.equal((await client.auth.updateUser({ password: NEW_PASSWORD })).error, null);
    assertAuthError((await signIn(env, email, PASSWORD)).error, { status: 400, code: "invalid_credentials" });
    assert.equal((await signIn(env, email, NEW_PASSWORD)).error, null);
  });

  const weakPasswords: {
    name: string;
    attempt: (env: Env) => Promise<{ error: AuthError | null }>;
  }[] = [
    {
      name: "signUp",
      attempt: (env) => env.client().auth.signUp({ email: newEmail(), password: "short" }),
    },
    {
      name: "updateUser",
      attempt: async (env) => (await signedUp(env)).client.auth.updateUser({ password: "short" }),
    },
  ];
  for (const c of weakPasswords) {
    test(`${c.name} with a weak password: AuthWeakPasswordError, weak_password, 422`, async () => {
      const env = await tenant({ email_confirmation: false });
      const { error } = await c.attempt(env);
      assertAuthError(error, { name: "AuthWeakPasswordError", status: 422, code: "weak_password" });
      assert.deepEqual((error as AuthError & { reasons: string[] }).reasons, ["length"]);
    });
  }

  test("refreshSession rotates the refresh token; reusing a used one revokes the whole session", async () => {
    const env = await tenant({ email_confirmation: false });
    const { client, session } = await signedUp(env);
    const rotated = await client.auth.refreshSession({ refresh_token: session.refresh_token });
    assert.equal(rotated.error, null);
    const next = rotated.data.session;
    assert.ok(next);
    assert.notEqual(next.refresh_token, session.refresh_token);
    // Access tokens minted in the same second may be byte-identical (GoTrue's are too); what
    // matters is that the new one is valid and belongs to the same session.
    assert.equal(decodeJwt(next.access_token).session_id, decodeJwt(session.access_token).session_id);
    assert.deepEqual(await userStatus(env, next.access_token), { status: 200 });

    const reused = await env.client().auth.refreshSession({ refresh_token: session.refresh_token });
    assertAuthError(reused.error, { status: 400, code: "refresh_token_already_used" });
    const newest = await env.client().auth.refreshSession({ refresh_token: next.refresh_token });
    assertAuthError(newest.error, { status: 400, code: "refresh_token_not_found" });
    assert.deepEqual(await userStatus(env, next.access_token), { status: 403, code: "session_not_found" });
  });

  const scopes: { scope: "local" | "global" | "others"; survivors: ("this" | "other")[] }[] = [
    { scope: "local", survivors: ["other"] },
    { scope: "global", survivors: [] },
    { scope: "others", survivors: ["this"] },
  ];
  for (const c of scopes) {
    test(`signOut({ scope: '${c.scope}' }) ends the right sessions`, async () => {
      const env = await tenant({ email_confirmation: false });
      const { email } = await signedUp(env);
      const bystander = await signedUp(env);
      const sessions = {
        this: await signIn(env, email),
        other: await signIn(env, email),
      };
      const { error } = await sessions.this.client.auth.signOut({ scope: c.scope });
      assert.equal(error, null);

      for (const [name, s] of Object.entries(sessions)) {
        const session = s.data.session;
        assert.ok(session);
        const alive = c.survivors.includes(name as "this" | "other");
        assert.deepEqual(
          await userStatus(env, session.access_token),
          alive ? { status: 200 } : { status: 403, code: "session_not_found" },
          `${name} session`,
        );
        const refreshed = await env.client().auth.refreshSession({ refresh_token: session.refresh_token });
        if (alive) assert.equal(refreshed.error, null, `${name} session refreshes`);
        else assertAuthError(refreshed.error, { status: 400, code: "refresh_token_not_found" });
      }
      assert.deepEqual(await userStatus(env, bystander.session.access_token), { status: 200 });
    });
  }

  test("getUser with the access token of a signed-out session: session_not_found", async () => {
    const env = await tenant({ email_confirmation: false });
    const { client, session } = await signedUp(env);
    assert.equal((await client.auth.signOut()).error, null);
    const { data, error } = await env.client().auth.getUser(session.access_token);
    assert.equal(data.user, null);
    // supabase-js turns 403 session_not_found into AuthSessionMissingError.
    assertAuthError(error, { name: "AuthSessionMissingError", status: 400, code: undefined });
    assert.deepEqual(await userStatus(env, session.access_token), { status: 403, code: "session_not_found" });
  });

  // ---------------------------------------------------------------------------------------------
  // Password recovery

  test("resetPasswordForEmail: the same answer for any address, mail only for a known one", async () => {
    const env = await tenant({ email_confirmation: false, site_url: SITE_URL });
    const { email } = await signedUp(env);
    const unknown = newEmail();
    const answers: unknown[] = [];
    for (const address of [email, unknown]) {
      const { data, error } = await env.client().auth.resetPasswordForEmail(address);
      assert.equal(error, null);
      const res = await raw(env, "/recover", { body: { email: address } });
      answers.push({ client: data, status: res.status, body: await res.json() });
    }
    assert.deepEqual(answers[0], answers[1]);
    assert.deepEqual(answers[0], { client: {}, status: 200, body: {} });
    assert.equal((await mailTo(env, unknown)).length, 0);
    const mails = await mailTo(env, email);
    assert.deepEqual(
      mails.map((m) => [m.kind, m.subject]),
      [
        ["auth.recovery", "Reset your password"],
        ["auth.recovery", "Reset your password"],
      ],
    );
  });

  test("verifyOtp({ type: 'recovery' }) signs in; the user then sets a new password", async () => {
    const env = await tenant({ email_confirmation: false, site_url: SITE_URL });
    const { email, user } = await signedUp(env);
    assert.equal((await env.client().auth.resetPasswordForEmail(email)).error, null);
    const { code, link } = readMail((await mailTo(env, email))[0]);
    assert.equal(link.searchParams.get("type"), "recovery");

    const client = env.client();
    const verified = await client.auth.verifyOtp({ email, token: code, type: "recovery" });
    assert.equal(verified.error, null);
    assert.equal(verified.data.user?.id, user.id);
    assert.deepEqual(amrMethods(verified.data.session?.access_token), ["recovery"]);
    assert.equal((await client.auth.updateUser({ password: NEW_PASSWORD })).error, null);
    assertAuthError((await signIn(env, email, PASSWORD)).error, { status: 400, code: "invalid_credentials" });
    assert.equal((await signIn(env, email, NEW_PASSWORD)).error, null);
    assertAuthError((await env.client().auth.verifyOtp({ email, token: code, type: "recovery" })).error, {
      status: 403,
      code: "otp_expired",
    });
  });

  // ---------------------------------------------------------------------------------------------
  // Tokens, limits, errors

  test("jwt_expiry sets the token lifetime; an expired token is refused with 403 bad_jwt", async () => {
    const env = await tenant({ email_confirmation: false, jwt_expiry: 30 });
    const { session } = await signedUp(env);
    assert.equal(session.expires_in, 30);
    const claims = decodeJwt(session.access_token);
    assert.equal(Number(claims.exp) - Number(claims.iat), 30);

    // No sleeping: the same claims, signed with the tenant's signing key, with the clock moved.
    const now = Math.floor(Date.now() / 1000);
    const cases = [
      {
        name: "expired a minute ago",
        iat: now - 90,
        exp: now - 60,
        expected: { status: 403, code: "bad_jwt" },
      },
      { name: "valid for a minute more", iat: now - 10, exp: now + 60, expected: { status: 200 } },
    ];
    for (const c of cases) {
      const token = await signSessionClaims(t().db, env.tenant.id, { ...claims, iat: c.iat, exp: c.exp });
      assert.deepEqual(await userStatus(env, token), c.expected, c.name);
    }
  });

  test("rate limit: the 4th sign-in for an address from one client within the window gets 429 with Retry-After", async () => {
    // (Other client addresses, and the per-address bound: test/auth-invitations.test.ts.)
    const windowSeconds = 60;
    const env = await tenant({
      email_confirmation: false,
      rate_limits: { signin_per_email_ip: { max: 3, windowSeconds } },
    });
    const { email } = await signedUp(env);
    // Fixed windows: start well inside one so that all attempts count in the same window.
    const left = windowSeconds * 1000 - (Date.now() % (windowSeconds * 1000));
    if (left < 10_000) await new Promise((resolve) => setTimeout(resolve, left + 100));

    for (let i = 0; i < 3; i++) {
      assertAuthError((await signIn(env, email, "Wrong-Password-9")).error, {
        status: 400,
        code: "invalid_credentials",
      });
    }
    // Even the right password is refused now.
    const res = await raw(env, "/token?grant_type=password", {
      body: { email, password: PASSWORD },
      headers: API_VERSION,
    });
    assert.equal(res.status, 429);
    const retryAfter = Number(res.headers.get("retry-after"));
    assert.ok(
      Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= windowSeconds,
      `${retryAfter}`,
    );
    assert.equal(((await res.json()) as { code: string }).code, "over_request_rate_limit");
    assertAuthError((await signIn(env, email)).error, { status: 429, code: "over_request_rate_limit" });
    // The limit is per address: another user of the tenant signs in.
    const other = await signedUp(env);
    assert.equal((await signIn(env, other.email)).error, null);
  });

  const shapes: { name: string; headers: Record<string, string>; body: unknown; echoed: string | null }[] = [
    {
      name: "X-Supabase-Api-Version 2024-01-01: {code, message}, the header echoed",
      headers: API_VERSION,
      body: { code: "invalid_credentials", message: "Invalid login credentials" },
      echoed: "2024-01-01",
    },
    {
      name: "no version header: {code: <status>, error_code, msg}",
      headers: {},
      body: { code: 400, error_code: "invalid_credentials", msg: "Invalid login credentials" },
      echoed: null,
    },
  ];
  for (const c of shapes) {
    test(`error shape with ${c.name}`, async () => {
      const env = await tenant({ email_confirmation: false });
      const res = await raw(env, "/token?grant_type=password", {
        body: { email: newEmail(), password: PASSWORD },
        headers: c.headers,
      });
      assert.equal(res.status, 400);
      assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
      assert.equal(res.headers.get("x-supabase-api-version"), c.echoed);
      assert.deepEqual(await res.json(), c.body);
    });
  }

  test("secrets at rest: only hashes of passwords, refresh tokens, links and codes are stored", async () => {
    const env = await tenant({ site_url: SITE_URL });
    const email = newEmail();
    const { data } = await env.client().auth.signUp({ email, password: PASSWORD });
    const userId = data.user?.id;
    const mail = readMail((await mailTo(env, email))[0]);
    const [otp] = await rows<{ token_hash: string; otp_hash: string }>(
      "select token_hash, otp_hash from internal.one_time_tokens where user_id = $1",
      [userId],
    );
    assert.ok(otp);
    assert.equal(otp.token_hash, sha256(mail.token));
    assert.match(otp.otp_hash, /^[0-9a-f]{64}$/);
    assert.notEqual(otp.otp_hash, sha256(mail.code), "the code's hash is bound to the user");

    const verified = await env.client().auth.verifyOtp({ email, token: mail.code, type: "signup" });
    const refreshToken = verified.data.session?.refresh_token ?? "";
    assert.ok(refreshToken);
    const [user] = await rows<{ encrypted_password: string }>(
      "select encrypted_password from internal.users where id = $1",
      [userId],
    );
    assert.ok(user);
    assert.match(user.encrypted_password, /^scrypt\$/);
    assert.ok(!user.encrypted_password.includes(PASSWORD), "the password is not stored");
    const tokens = await rows<{ token_hash: string }>(
      `select rt.token_hash from internal.refresh_tokens rt
       join internal.sessions s on s.id = rt.session_id where s.user_id = $1`,
      [userId],
    );
    assert.equal(tokens.length, 1);
    assert.match(tokens[0]?.token_hash ?? "", /^[0-9a-f]{64}$/);
    assert.notEqual(tokens[0]?.token_hash, refreshToken);
    assert.equal(tokens[0]?.token_hash, sha256(refreshToken));
  });

  // ---------------------------------------------------------------------------------------------
  // Tenants

  test("tenants are separate: tokens do not cross, the same address signs up in each", async () => {
    const a = await tenant({ email_confirmation: false });
    const b = await tenant({ email_confirmation: false });
    const email = newEmail();
    const inA = await signedUp(a, { email });
    const inB = await b.client().auth.signUp({ email, password: NEW_PASSWORD });
    assert.equal(inB.error, null);
    assert.ok(inB.data.user);
    assert.notEqual(inB.data.user.id, inA.user.id);

    assert.deepEqual(await userStatus(b, inA.session.access_token), { status: 403, code: "bad_jwt" });
    assertAuthError((await b.client().auth.getUser(inA.session.access_token)).error, {
      status: 403,
      code: "bad_jwt",
    });
    assertAuthError(
      (await b.client().auth.refreshSession({ refresh_token: inA.session.refresh_token })).error,
      {
        status: 400,
        code: "refresh_token_not_found",
      },
    );
    assertAuthError((await signIn(b, email, PASSWORD)).error, { status: 400, code: "invalid_credentials" });
    const both = await Promise.all([signIn(a, email, PASSWORD), signIn(b, email, NEW_PASSWORD)]);
    assert.deepEqual(
      both.map((r) => (r.data.user as User | null)?.id),
      [inA.user.id, inB.data.user.id],
    );
  });

  const settings: { name: string; auth: Record<string, unknown>; autoconfirm: boolean }[] = [
    { name: "confirmation on (the default)", auth: {}, autoconfirm: false },
    { name: "confirmation off", auth: { email_confirmation: false }, autoconfirm: true },
  ];
  for (const c of settings) {
    test(`GET /auth/v1/settings answers mailer_autoconfirm per tenant: ${c.name}`, async () => {
      const env = await tenant(c.auth);
      const res = await raw(env, "/settings");
      assert.equal(res.status, 200);
      const body = (await res.json()) as Record<string, unknown>;
      assert.equal(body.mailer_autoconfirm, c.autoconfirm);
      assert.equal(body.disable_signup, false);
      assert.deepEqual(body.external, { email: true, phone: false, anonymous_users: false });
    });
  }
});
