import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type AuthError, createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { listMail } from "../src/mail/mailer.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * Anonymous sign-ins (issue 42, item 3) through supabase-js's signInAnonymously on both engines:
 * off by default with GoTrue's answer, limited per client address when on, `is_anonymous` in the
 * token, no account until the user proves an e-mail address (the database refuses the
 * membership), and a policy of an operator's own telling anonymous users apart by the claim.
 * The app trusts X-Forwarded-For (TRUST_PROXY), so each client below has an address of its own.
 */

const PUBLIC_URL = "https://auth.backline.test";
const SITE_URL = "https://app.backline.test/welcome";

const newEmail = () => `anon-${randomUUID().slice(0, 8)}@example.com`;
let lastIp = 0;
const newIp = () => `203.0.113.${++lastIp}`;

function assertAuthError(error: AuthError | null, expected: { status: number; code: string }, what = "") {
  assert.ok(error, `${what}: expected ${expected.code}, got no error`);
  assert.deepEqual({ status: error.status, code: error.code }, expected, `${what}: ${error.message}`);
}

describeEachEngine("auth: anonymous sign-ins", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL, TRUST_PROXY: "true" });
  });
  after(async () => {
    await app?.close();
  });

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { site_url: SITE_URL, ...auth } });
    const client = (ip = newIp()): SupabaseClient =>
      createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false },
        global: { headers: { "X-Forwarded-For": ip } },
      });
    return { tenant, keys, client };
  }

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  test("off by default: GoTrue's 422 anonymous_provider_disabled, and nobody is made", async () => {
    const env = await tenant();
    const { data, error } = await env.client().auth.signInAnonymously();
    assertAuthError(error, { status: 422, code: "anonymous_provider_disabled" }, "signInAnonymously");
    assert.equal(error?.message, "Anonymous sign-ins are disabled");
    assert.equal(data.session, null);
    // The older error shape, and a sign-up without an address, answer the same.
    const res = await fetch(`${app.url}/auth/v1/signup`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ password: "Whatever-Horse-1" }),
    });
    assert.equal(res.status, 422);
    assert.deepEqual(await res.json(), {
      code: 422,
      error_code: "anonymous_provider_disabled",
      msg: "Anonymous sign-ins are disabled",
    });
    const settings = await fetch(`${app.url}/auth/v1/settings`, { headers: { apikey: env.keys.anon_key } });
    assert.equal(
      ((await settings.json()) as { external: { anonymous_users: boolean } }).external.anonymous_users,
      false,
    );
    assert.deepEqual(await rows("select 1 from internal.users where tenant_id = $1", [env.tenant.id]), []);
  });

  test("on: a session whose token says is_anonymous, a user with no address, identity or account", async () => {
    const env = await tenant({ anonymous_users: true });
    const settings = await fetch(`${app.url}/auth/v1/settings`, { headers: { apikey: env.keys.anon_key } });
    assert.equal(
      ((await settings.json()) as { external: { anonymous_users: boolean } }).external.anonymous_users,
      true,
    );
    const client = env.client();
    const { data, error } = await client.auth.signInAnonymously({ options: { data: { theme: "dark" } } });
    assert.equal(error, null);
    const session = data.session;
    assert.ok(session);
    const claims = decodeJwt(session.access_token);
    assert.equal(claims.is_anonymous, true);
    assert.equal(claims.role, "authenticated");
    assert.equal(claims.email, "");
    assert.deepEqual(
      (claims.amr as { method: string }[]).map((a) => a.method),
      ["anonymous"],
    );
    const user = data.user;
    assert.ok(user);
    assert.equal(user.is_anonymous, true);
    assert.equal(user.email, "");
    assert.deepEqual(user.identities, []);
    assert.deepEqual(user.user_metadata, { theme: "dark" });
    assert.deepEqual(user.app_metadata, { provider: "anonymous", providers: ["anonymous"] });

    // It refreshes like any session, and /user knows it.
    const got = await client.auth.getUser(session.access_token);
    assert.equal(got.data.user?.is_anonymous, true);
    const refreshed = await client.auth.refreshSession({ refresh_token: session.refresh_token });
    assert.equal(refreshed.error, null);
    assert.equal(decodeJwt(refreshed.data.session?.access_token ?? "").is_anonymous, true);

    // No account: the catalogue answers nothing, and the database refuses a membership.
    assert.deepEqual(await rows("select 1 from internal.memberships where user_id = $1", [user.id]), []);
    const asUser = createClient(app.url, env.keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { headers: { Authorization: `Bearer ${refreshed.data.session?.access_token}` } },
    });
    const releases = await asUser.from("releases").select("id");
    assert.equal(releases.error, null);
    assert.deepEqual(releases.data, []);
    const [account] = await rows<{ id: string }>(
      "insert into internal.accounts (tenant_id, name, kind) values ($1, 'Somebody', 'artist') returning id",
      [env.tenant.id],
    );
    await assert.rejects(
      rows(
        "insert into internal.memberships (tenant_id, account_id, user_id, role) values ($1, $2, $3, 'owner')",
        [env.tenant.id, account?.id, user.id],
      ),
      /an anonymous user cannot belong to an account/,
    );
    // Second factors are not for anonymous users (GoTrue's answer).
    const enroll = await asUser.auth.mfa.enroll({ factorType: "totp" });
    assertAuthError(enroll.error, { status: 403, code: "no_authorization" }, "mfa.enroll");
    // Nor a password without an address.
    const password = await client.auth.updateUser({ password: "Anon-Horse-77" });
    assertAuthError(password.error, { status: 422, code: "validation_failed" }, "password without address");
  });

  test("backline auth anonymous on|off turns them on per tenant, checked against the settings' schema", async () => {
    const env = await tenant({ password_min_length: 10 });
    const on = await runCliOn(t(), [
      "--json",
      "auth",
      "anonymous",
      "on",
      "--tenant",
      env.tenant.slug,
      "--per-hour",
      "1",
    ]);
    assert.equal(on.code, 0, on.stderr);
    assert.deepEqual(JSON.parse(on.stdout), {
      tenant_id: env.tenant.id,
      anonymous_users: true,
      anonymous_per_ip: { max: 1, windowSeconds: 3600 },
    });
    const [row] = await rows<{ auth: Record<string, unknown> }>(
      "select settings -> 'auth' as auth from internal.tenants where id = $1",
      [env.tenant.id],
    );
    assert.equal(row?.auth.password_min_length, 10, "the other settings are kept");
    // The app reads a tenant's settings from a cache of a few seconds: wait for the change.
    const ip = newIp();
    const deadline = Date.now() + 15_000;
    let first = await env.client(ip).auth.signInAnonymously();
    while (first.error?.code === "anonymous_provider_disabled" && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 250));
      first = await env.client(ip).auth.signInAnonymously();
    }
    assert.equal(first.error, null);
    const second = await env.client(ip).auth.signInAnonymously();
    assertAuthError(second.error, { status: 429, code: "over_request_rate_limit" }, "over --per-hour");

    const bad = await runCliOn(t(), [
      "auth",
      "anonymous",
      "on",
      "--tenant",
      env.tenant.slug,
      "--per-hour",
      "0",
    ]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /expected 1 to 100000/);
    const nobody = await runCliOn(t(), ["auth", "anonymous", "off", "--tenant", "no-such-tenant"]);
    assert.notEqual(nobody.code, 0);
    assert.match(nobody.stderr, /no tenant no-such-tenant/);
    const off = await runCliOn(t(), ["--json", "auth", "anonymous", "off", "--tenant", env.tenant.slug]);
    assert.equal(JSON.parse(off.stdout).anonymous_users, false);
    const audit = await rows<{ actor: string }>(
      "select actor from internal.audit_log where object_table = 'internal.tenants' and object_id = $1",
      [env.tenant.id],
    );
    assert.deepEqual(
      audit.map((a) => a.actor),
      ["cli:auth anonymous", "cli:auth anonymous"],
    );
  });

  test("backline auth settings shows the settings with their defaults and changes them, refusing what /auth/v1 could not read", async () => {
    const env = await tenant();
    const shown = await runCliOn(t(), ["--json", "auth", "settings", "--tenant", env.tenant.slug]);
    assert.equal(shown.code, 0, shown.stderr);
    const before = JSON.parse(shown.stdout) as { effective: Record<string, unknown> };
    assert.equal(before.effective.anonymous_users, false);
    assert.equal(before.effective.mail_interval_seconds, 60);
    assert.equal(before.effective.site_url, SITE_URL);

    const set = await runCliOn(t(), [
      "--json",
      "auth",
      "settings",
      "--tenant",
      env.tenant.slug,
      "--set",
      "secure_password_change=true",
      "--set",
      'rate_limits.anonymous_per_ip={"max":7,"windowSeconds":600}',
      "--unset",
      "site_url",
    ]);
    assert.equal(set.code, 0, set.stderr);
    const [row] = await rows<{ auth: Record<string, unknown> }>(
      "select settings -> 'auth' as auth from internal.tenants where id = $1",
      [env.tenant.id],
    );
    assert.deepEqual(row?.auth, {
      secure_password_change: true,
      rate_limits: { anonymous_per_ip: { max: 7, windowSeconds: 600 } },
    });
    for (const [args, message] of [
      [["--set", "mail_interval_seconds=-1"], /settings\.auth would not be valid: mail_interval_seconds/],
      [["--set", "anonymous_users=yes"], /settings\.auth would not be valid: anonymous_users/],
      [["--set", "anonymous=true"], /no auth setting anonymous/],
      [["--set", "rate_limits.nope={}"], /no auth setting rate_limits\.nope/],
      [["--set", "novalue"], /expected key=value/],
    ] as [string[], RegExp][]) {
      const r = await runCliOn(t(), ["auth", "settings", "--tenant", env.tenant.slug, ...args]);
      assert.notEqual(r.code, 0, args.join(" "));
      assert.match(r.stderr, message);
    }
    const [after] = await rows<{ auth: Record<string, unknown> }>(
      "select settings -> 'auth' as auth from internal.tenants where id = $1",
      [env.tenant.id],
    );
    assert.deepEqual(after?.auth, row?.auth, "a refused change wrote nothing");
  });

  test("limited per client address (anonymous_per_ip): 429 over_request_rate_limit, other addresses unaffected", async () => {
    const env = await tenant({
      anonymous_users: true,
      rate_limits: { anonymous_per_ip: { max: 2, windowSeconds: 3600 } },
    });
    const ip = newIp();
    for (let i = 0; i < 2; i++) assert.equal((await env.client(ip).auth.signInAnonymously()).error, null);
    const third = await env.client(ip).auth.signInAnonymously();
    assertAuthError(third.error, { status: 429, code: "over_request_rate_limit" }, "third from one address");
    assert.equal((await env.client(newIp()).auth.signInAnonymously()).error, null, "another address");
    assert.equal(
      (await rows("select 1 from internal.users where tenant_id = $1", [env.tenant.id])).length,
      3,
    );
  });

  test("updateUser({ email }) with confirmation: the mailed code makes the user permanent, with an account", async () => {
    const env = await tenant({ anonymous_users: true });
    const client = env.client();
    const signedIn = await client.auth.signInAnonymously({ options: { data: { name: "Kim" } } });
    assert.equal(signedIn.error, null);
    const email = newEmail();
    const asked = await client.auth.updateUser({ email });
    assert.equal(asked.error, null);
    assert.equal(asked.data.user?.new_email, email);
    assert.equal(asked.data.user?.is_anonymous, true, "still anonymous until the address is proven");

    const mails = await listMail(t().db, { tenantId: env.tenant.id, to: email });
    const mail = mails.find((m) => m.kind === "auth.email_change");
    const code = /enter this code: (\d{6})\b/.exec(mail?.text_body ?? "")?.[1];
    assert.ok(code, "a confirmation mail with a code");
    const verified = await client.auth.verifyOtp({ email, token: code, type: "email_change" });
    assert.equal(verified.error, null);
    const user = verified.data.user;
    assert.equal(user?.id, signedIn.data.user?.id);
    assert.equal(user?.email, email);
    assert.equal(user?.is_anonymous, false);
    assert.equal(user?.app_metadata.provider, "email");
    assert.deepEqual(
      user?.identities?.map((i) => i.provider),
      ["email"],
    );
    assert.equal(decodeJwt(verified.data.session?.access_token ?? "").is_anonymous, false);
    const accounts = await rows<{ name: string; role: string }>(
      `select a.name, m.role from internal.memberships m join internal.accounts a on a.id = m.account_id
       where m.user_id = $1`,
      [user?.id],
    );
    assert.deepEqual(accounts, [{ name: "Kim", role: "owner" }]);
    // A password now, and a sign-in with it.
    const withPassword = await client.auth.updateUser({ password: "Kim-Horse-8888" });
    assert.equal(withPassword.error, null);
    assert.equal(
      (await env.client().auth.signInWithPassword({ email, password: "Kim-Horse-8888" })).error,
      null,
    );
  });

  test("updateUser({ email }) without confirmation makes the user permanent at once; the refreshed token says so", async () => {
    const env = await tenant({ anonymous_users: true, email_confirmation: false });
    const client = env.client();
    const signedIn = await client.auth.signInAnonymously();
    const email = newEmail();
    const updated = await client.auth.updateUser({ email });
    assert.equal(updated.error, null);
    assert.equal(updated.data.user?.email, email);
    assert.equal(updated.data.user?.is_anonymous, false);
    const refreshed = await client.auth.refreshSession({
      refresh_token: signedIn.data.session?.refresh_token ?? "",
    });
    assert.equal(decodeJwt(refreshed.data.session?.access_token ?? "").is_anonymous, false);
    assert.equal(
      (await rows("select 1 from internal.memberships where user_id = $1", [signedIn.data.user?.id])).length,
      1,
    );
  });

  test("a policy of the operator's own tells anonymous users apart by the is_anonymous claim", async () => {
    const env = await tenant({ anonymous_users: true, email_confirmation: false });
    const table = `members_only_${Math.random().toString(36).slice(2, 8)}`;
    await t().owner.transaction(
      (tx) =>
        tx.exec(`create table public.${table} (id int primary key, note text);
                 insert into public.${table} values (1, 'for permanent users');
                 alter table public.${table} enable row level security;
                 create policy permanent_only on public.${table} for select to authenticated
                   using (not coalesce((auth.jwt() ->> 'is_anonymous')::boolean, false));
                 grant select on public.${table} to authenticated;
                 notify pgrst, 'reload schema';`),
      { readOnly: false },
    );
    const anonymous = env.client();
    assert.equal((await anonymous.auth.signInAnonymously()).error, null);
    const permanent = env.client();
    const email = newEmail();
    assert.equal((await permanent.auth.signUp({ email, password: "Permanent-Horse-1" })).error, null);

    const deadline = Date.now() + 5000;
    let seen: unknown[] | null = null;
    while (Date.now() < deadline) {
      const r = await permanent.from(table).select("id, note");
      if (!r.error) {
        seen = r.data;
        break;
      }
      await new Promise((res) => setTimeout(res, 20));
    }
    assert.deepEqual(seen, [{ id: 1, note: "for permanent users" }], "a permanent user reads the row");
    const hidden = await anonymous.from(table).select("id, note");
    assert.equal(hidden.error, null);
    assert.deepEqual(hidden.data, [], "an anonymous user reads nothing");
  });
});
