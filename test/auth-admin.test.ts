import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type AuthError, createClient, type SupabaseClient } from "@supabase/supabase-js";
import { totpCode, totpStep } from "../src/auth/totp.ts";
import { listMail } from "../src/mail/mailer.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * GoTrue's admin API (issue 42, item 1) through supabase-js's own `auth.admin` methods on both
 * engines: list (paged, with GoTrue's Link and X-Total-Count), get, create, update (ban, password,
 * e-mail, metadata), delete (soft and hard), generateLink; only with the tenant's service-role key,
 * and only for that tenant's users.
 */

const PUBLIC_URL = "https://auth.backline.test";
const SITE_URL = "https://app.backline.test/welcome";
const PASSWORD = "Correct-Horse-7";

const newEmail = (what = "user") => `${what}-${randomUUID().slice(0, 8)}@example.com`;

function assertAuthError(error: AuthError | null, expected: { status: number; code: string }, what = "") {
  assert.ok(error, `${what}: expected ${expected.code}, got no error`);
  assert.deepEqual({ status: error.status, code: error.code }, expected, `${what}: ${error.message}`);
}

describeEachEngine("auth: the admin API (auth.admin)", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL });
  });
  after(async () => {
    await app?.close();
  });

  const options = { auth: { persistSession: false, autoRefreshToken: false } };

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { site_url: SITE_URL, ...auth } });
    const client = (): SupabaseClient => createClient(app.url, keys.anon_key, options);
    const admin = (): SupabaseClient => createClient(app.url, keys.service_role_key, options);
    return { tenant, keys, client, admin };
  }

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  test("createUser with a password, confirmed: the user signs in, has a personal account, and the act is audited", async () => {
    const env = await tenant();
    const email = newEmail();
    const { data, error } = await env.admin().auth.admin.createUser({
      email,
      password: PASSWORD,
      email_confirm: true,
      user_metadata: { name: "Mira Admin" },
      app_metadata: { plan: "gold" },
    });
    assert.equal(error, null);
    const user = data.user;
    assert.ok(user);
    assert.equal(user.email, email);
    assert.ok(user.email_confirmed_at);
    assert.deepEqual(user.user_metadata, { name: "Mira Admin" });
    assert.deepEqual(user.app_metadata, { plan: "gold", provider: "email", providers: ["email"] });
    assert.equal(user.identities?.[0]?.provider, "email");
    assert.equal(user.is_anonymous, false);

    const signedIn = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(signedIn.error, null);
    assert.equal(signedIn.data.user?.id, user.id);

    const accounts = await rows<{ name: string; role: string }>(
      `select a.name, m.role from internal.memberships m join internal.accounts a on a.id = m.account_id
       where m.user_id = $1`,
      [user.id],
    );
    assert.deepEqual(accounts, [{ name: "Mira Admin", role: "owner" }]);
    const audit = await rows<{ actor_type: string; action: string }>(
      "select actor_type, action from internal.audit_log where object_id = $1 and action like 'auth.%'",
      [user.id],
    );
    assert.deepEqual(audit, [{ actor_type: "service_key", action: "auth.user_created" }]);
  });

  test("createUser without confirmation leaves the address unconfirmed; refusals create nobody", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env.admin().auth.admin.createUser({ email, password: PASSWORD });
    assert.equal(created.error, null);
    assert.equal(created.data.user?.email_confirmed_at, undefined);
    const signIn = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assertAuthError(signIn.error, { status: 400, code: "email_not_confirmed" }, "unconfirmed sign-in");

    const again = await env.admin().auth.admin.createUser({ email, password: PASSWORD });
    assertAuthError(again.error, { status: 422, code: "email_exists" }, "same address");
    const bad = await env.admin().auth.admin.createUser({ email: "xx:;x@x.x", password: PASSWORD });
    assertAuthError(bad.error, { status: 400, code: "validation_failed" }, "bad address");
    assert.equal(bad.error?.message, "Unable to validate email address: invalid format");
    const weak = await env.admin().auth.admin.createUser({ email: newEmail(), password: "short" });
    assertAuthError(weak.error, { status: 422, code: "weak_password" }, "weak password");
    const none = await env.admin().auth.admin.createUser({});
    assertAuthError(none.error, { status: 400, code: "validation_failed" }, "no address");
    const phone = await env.admin().auth.admin.createUser({ phone: "+15555550100" });
    assertAuthError(phone.error, { status: 400, code: "phone_provider_disabled" }, "phone");
    const meta = await env.admin().auth.admin.createUser({
      email: newEmail(),
      user_metadata: "nope" as unknown as object,
    });
    assertAuthError(meta.error, { status: 400, code: "validation_failed" }, "metadata not an object");
    const count = await rows<{ n: string }>("select count(*) as n from internal.users where tenant_id = $1", [
      env.tenant.id,
    ]);
    assert.equal(Number(count[0]?.n), 1);
  });

  test("listUsers pages as GoTrue: per_page, Link and X-Total-Count, newest first", async () => {
    const env = await tenant();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { data, error } = await env.admin().auth.admin.createUser({ email: newEmail(`list${i}`) });
      assert.equal(error, null);
      made.push(data.user?.id ?? "");
    }
    const first = await env.admin().auth.admin.listUsers({ page: 1, perPage: 2 });
    assert.equal(first.error, null);
    assert.equal(first.data.users.length, 2);
    assert.deepEqual(
      first.data.users.map((u) => u.id),
      [made[4], made[3]],
    );
    assert.equal((first.data as { total?: number }).total, 5);
    assert.equal((first.data as { nextPage?: number }).nextPage, 2);
    assert.equal((first.data as { lastPage?: number }).lastPage, 3);
    const third = await env.admin().auth.admin.listUsers({ page: 3, perPage: 2 });
    assert.deepEqual(
      third.data.users.map((u) => u.id),
      [made[0]],
    );
    assert.equal((third.data as { nextPage?: number | null }).nextPage, null);

    // The raw answer: GoTrue's headers and body.
    const res = await fetch(`${app.url}/auth/v1/admin/users?page=2&per_page=2`, {
      headers: { apikey: env.keys.service_role_key, Authorization: `Bearer ${env.keys.service_role_key}` },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-total-count"), "5");
    assert.equal(
      res.headers.get("link"),
      '</auth/v1/admin/users?page=3&per_page=2>; rel="next", </auth/v1/admin/users?page=3&per_page=2>; rel="last"',
    );
    const body = (await res.json()) as { users: unknown[]; aud: string };
    assert.equal(body.aud, "authenticated");
    assert.equal(body.users.length, 2);
    const bad = await fetch(`${app.url}/auth/v1/admin/users?per_page=0`, {
      headers: { apikey: env.keys.service_role_key, Authorization: `Bearer ${env.keys.service_role_key}` },
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error_code: string }).error_code, "validation_failed");
  });

  test("getUserById and updateUserById: metadata merged, e-mail and password changed, sessions ended", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env.admin().auth.admin.createUser({
      email,
      password: PASSWORD,
      email_confirm: true,
      user_metadata: { name: "Ada", colour: "red" },
    });
    const id = created.data.user?.id ?? "";
    const got = await env.admin().auth.admin.getUserById(id);
    assert.equal(got.error, null);
    assert.equal(got.data.user?.email, email);

    const session = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(session.error, null);

    const moved = newEmail("moved");
    const updated = await env.admin().auth.admin.updateUserById(id, {
      email: moved,
      password: "Another-Horse-8",
      user_metadata: { colour: null, city: "Lyon" },
      app_metadata: { plan: "silver" },
    });
    assert.equal(updated.error, null);
    assert.equal(updated.data.user?.email, moved);
    assert.deepEqual(updated.data.user?.user_metadata, { name: "Ada", city: "Lyon" });
    assert.equal(updated.data.user?.app_metadata.plan, "silver");
    assert.equal(updated.data.user?.identities?.[0]?.identity_data?.email, moved);

    // The new password works at the new address; the old session's refresh token does not.
    const refreshed = await env.client().auth.refreshSession({
      refresh_token: session.data.session?.refresh_token ?? "",
    });
    assert.ok(refreshed.error, "the session ended with the password change");
    const old = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assertAuthError(old.error, { status: 400, code: "invalid_credentials" }, "old address and password");
    const fresh = await env.client().auth.signInWithPassword({ email: moved, password: "Another-Horse-8" });
    assert.equal(fresh.error, null);

    const missing = await env.admin().auth.admin.getUserById(randomUUID());
    assertAuthError(missing.error, { status: 404, code: "user_not_found" }, "unknown id");
    // auth-js checks the id itself; the server answers as GoTrue when another client does not.
    const notUuid = await fetch(`${app.url}/auth/v1/admin/users/not-a-uuid`, {
      headers: { apikey: env.keys.service_role_key, Authorization: `Bearer ${env.keys.service_role_key}` },
    });
    assert.equal(notUuid.status, 404);
    assert.deepEqual(await notUuid.json(), {
      code: 404,
      error_code: "validation_failed",
      msg: "user_id must be an UUID",
    });
    const taken = await env.admin().auth.admin.createUser({ email: newEmail() });
    const clash = await env.admin().auth.admin.updateUserById(id, { email: taken.data.user?.email ?? "" });
    assertAuthError(clash.error, { status: 422, code: "email_exists" }, "address of another user");
  });

  test("ban_duration: a banned user cannot sign in or refresh (user_banned); 'none' lifts it", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env
      .admin()
      .auth.admin.createUser({ email, password: PASSWORD, email_confirm: true });
    const id = created.data.user?.id ?? "";
    const session = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(session.error, null);

    const banned = await env.admin().auth.admin.updateUserById(id, { ban_duration: "24h" });
    assert.equal(banned.error, null);
    const until = (banned.data.user as { banned_until?: string } | null)?.banned_until;
    assert.ok(
      until && Math.abs(Date.parse(until) - Date.now() - 24 * 3600_000) < 60_000,
      `banned_until ${until}`,
    );

    const signIn = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assertAuthError(signIn.error, { status: 400, code: "user_banned" }, "sign-in while banned");
    const refresh = await env.client().auth.refreshSession({
      refresh_token: session.data.session?.refresh_token ?? "",
    });
    assertAuthError(refresh.error, { status: 400, code: "user_banned" }, "refresh while banned");
    const link = await env.admin().auth.admin.generateLink({ type: "magiclink", email });
    const verified = await env.client().auth.verifyOtp({
      type: "magiclink",
      token_hash: link.data.properties?.hashed_token ?? "",
    });
    assertAuthError(verified.error, { status: 400, code: "user_banned" }, "magic link while banned");

    const bad = await env.admin().auth.admin.updateUserById(id, { ban_duration: "a week" });
    assertAuthError(bad.error, { status: 400, code: "validation_failed" }, "bad duration");

    const lifted = await env.admin().auth.admin.updateUserById(id, { ban_duration: "none" });
    assert.equal(lifted.error, null);
    const again = await env.client().auth.refreshSession({
      refresh_token: session.data.session?.refresh_token ?? "",
    });
    assert.equal(again.error, null, "the session refreshes once the ban is lifted");
    const signInAgain = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(signInAgain.error, null);
  });

  test("deleteUser, hard: the user, memberships and sessions go; the accounts and the audit log stay", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env
      .admin()
      .auth.admin.createUser({ email, password: PASSWORD, email_confirm: true });
    const id = created.data.user?.id ?? "";
    const session = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(session.error, null);
    const [account] = await rows<{ account_id: string }>(
      "select account_id from internal.memberships where user_id = $1",
      [id],
    );
    assert.ok(account);

    const { error } = await env.admin().auth.admin.deleteUser(id);
    assert.equal(error, null);
    assert.deepEqual(await rows("select id from internal.users where id = $1", [id]), []);
    assert.deepEqual(await rows("select 1 from internal.memberships where user_id = $1", [id]), []);
    assert.deepEqual(await rows("select 1 from internal.sessions where user_id = $1", [id]), []);
    assert.equal(
      (await rows("select 1 from internal.accounts where id = $1", [account.account_id])).length,
      1,
    );
    const audit = await rows<{ action: string; object_table: string }>(
      `select action, object_table from internal.audit_log
       where object_id in ($1, $2) order by id`,
      [id, `${account.account_id}:${id}`],
    );
    assert.deepEqual(audit, [
      { action: "insert", object_table: "internal.memberships" },
      { action: "auth.user_created", object_table: "internal.users" },
      { action: "auth.user_deleted", object_table: "internal.users" },
      { action: "delete", object_table: "internal.memberships" },
    ]);
    const signIn = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assertAuthError(signIn.error, { status: 400, code: "invalid_credentials" }, "deleted user");
    const gone = await env.admin().auth.admin.getUserById(id);
    assertAuthError(gone.error, { status: 404, code: "user_not_found" }, "deleted user");
    // The address is free again.
    const reused = await env.admin().auth.admin.createUser({ email });
    assert.equal(reused.error, null);
  });

  test("deleteUser, soft: the row stays without address, password or metadata; access ends", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env.admin().auth.admin.createUser({
      email,
      password: PASSWORD,
      email_confirm: true,
      user_metadata: { name: "Soft" },
    });
    const id = created.data.user?.id ?? "";
    const session = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(session.error, null);

    const { error } = await env.admin().auth.admin.deleteUser(id, true);
    assert.equal(error, null);
    const [row] = await rows<{ email: string | null; encrypted_password: string | null; deleted: boolean }>(
      "select email, encrypted_password, raw_user_meta_data = '{}' as deleted from internal.users where id = $1 and deleted_at is not null",
      [id],
    );
    assert.deepEqual(row, { email: null, encrypted_password: null, deleted: true });
    for (const table of ["memberships", "sessions", "identities"]) {
      assert.deepEqual(await rows(`select 1 from internal.${table} where user_id = $1`, [id]), [], table);
    }
    const refresh = await env.client().auth.refreshSession({
      refresh_token: session.data.session?.refresh_token ?? "",
    });
    assert.ok(refresh.error);
    const list = await env.admin().auth.admin.listUsers();
    assert.equal(
      list.data.users.some((u) => u.id === id),
      false,
    );
    const twice = await env.admin().auth.admin.deleteUser(id, true);
    assertAuthError(twice.error, { status: 404, code: "user_not_found" }, "deleted twice");
  });

  test("generateLink: signup, invite, magiclink, recovery and email_change_new answer the link and code, and send no mail", async () => {
    const env = await tenant();
    const admin = env.admin().auth.admin;

    const signupEmail = newEmail("signup");
    const signup = await admin.generateLink({
      type: "signup",
      email: signupEmail,
      password: PASSWORD,
      options: { data: { name: "Sig" }, redirectTo: `${SITE_URL}/x` },
    });
    assert.equal(signup.error, null);
    const p = signup.data.properties;
    assert.ok(p);
    assert.equal(p.verification_type, "signup");
    assert.equal(p.redirect_to, `${SITE_URL}/x`);
    assert.match(p.email_otp, /^\d{6}$/);
    const action = new URL(p.action_link);
    assert.equal(`${action.origin}${action.pathname}`, `${PUBLIC_URL}/auth/v1/verify`);
    assert.equal(action.searchParams.get("token"), p.hashed_token);
    assert.equal(action.searchParams.get("type"), "signup");
    assert.equal(signup.data.user?.email, signupEmail);
    assert.deepEqual(signup.data.user?.user_metadata, { name: "Sig" });
    // The code signs the user in, with the password the link was made with.
    const confirmed = await env
      .client()
      .auth.verifyOtp({ email: signupEmail, token: p.email_otp, type: "signup" });
    assert.equal(confirmed.error, null);
    assert.equal(
      (await env.client().auth.signInWithPassword({ email: signupEmail, password: PASSWORD })).error,
      null,
    );
    const dup = await admin.generateLink({ type: "signup", email: signupEmail, password: PASSWORD });
    assertAuthError(dup.error, { status: 422, code: "email_exists" }, "signup link for a confirmed user");

    const inviteEmail = newEmail("invite");
    const invite = await admin.generateLink({ type: "invite", email: inviteEmail });
    assert.equal(invite.error, null);
    assert.equal(invite.data.properties?.verification_type, "invite");
    assert.ok(invite.data.user?.invited_at);
    const accepted = await env.client().auth.verifyOtp({
      type: "invite",
      token_hash: invite.data.properties?.hashed_token ?? "",
    });
    assert.equal(accepted.error, null);
    assert.equal(accepted.data.user?.email, inviteEmail);

    const magic = await admin.generateLink({ type: "magiclink", email: signupEmail });
    assert.equal(magic.data.properties?.verification_type, "magiclink");
    const viaMagic = await env.client().auth.verifyOtp({
      type: "magiclink",
      token_hash: magic.data.properties?.hashed_token ?? "",
    });
    assert.equal(viaMagic.error, null);
    assert.equal(viaMagic.data.user?.email, signupEmail);
    // A magic link for an address with no user makes one: a sign-up link, as GoTrue answers.
    const newcomer = newEmail("newcomer");
    const magicNew = await admin.generateLink({ type: "magiclink", email: newcomer });
    assert.equal(magicNew.error, null);
    assert.equal(magicNew.data.properties?.verification_type, "signup");
    assert.equal(magicNew.data.user?.email, newcomer);

    const recovery = await admin.generateLink({ type: "recovery", email: signupEmail });
    assert.equal(recovery.data.properties?.verification_type, "recovery");
    const recovered = await env.client().auth.verifyOtp({
      email: signupEmail,
      token: recovery.data.properties?.email_otp ?? "",
      type: "recovery",
    });
    assert.equal(recovered.error, null);
    const nobody = await admin.generateLink({ type: "recovery", email: newEmail("nobody") });
    assertAuthError(nobody.error, { status: 404, code: "user_not_found" }, "recovery of nobody");

    const target = newEmail("target");
    const change = await admin.generateLink({
      type: "email_change_new",
      email: signupEmail,
      newEmail: target,
    });
    assert.equal(change.error, null);
    assert.equal(change.data.user?.new_email, target);
    const changed = await env.client().auth.verifyOtp({
      type: "email_change",
      token_hash: change.data.properties?.hashed_token ?? "",
    });
    assert.equal(changed.error, null);
    assert.equal(changed.data.user?.email, target);
    const current = await admin.generateLink({
      type: "email_change_current",
      email: target,
      newEmail: newEmail(),
    });
    assertAuthError(current.error, { status: 400, code: "validation_failed" }, "email_change_current");

    // A redirect_to that is not allowed falls back to the site URL.
    const open = await admin.generateLink({
      type: "recovery",
      email: target,
      options: { redirectTo: "https://evil.example/steal" },
    });
    assert.equal(open.data.properties?.redirect_to, SITE_URL);
    const badType = await admin.generateLink({ type: "phone_change", email: target } as never);
    assertAuthError(badType.error, { status: 400, code: "validation_failed" }, "unknown type");

    const mail = await listMail(t().db, { tenantId: env.tenant.id });
    assert.deepEqual(mail, [], "generateLink sends no mail");
  });

  test("admin.mfa: listFactors and deleteFactor remove a lost factor; the user's sessions are aal1 again", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env
      .admin()
      .auth.admin.createUser({ email, password: PASSWORD, email_confirm: true });
    const id = created.data.user?.id ?? "";
    const client = env.client();
    assert.equal((await client.auth.signInWithPassword({ email, password: PASSWORD })).error, null);
    const enrolled = await client.auth.mfa.enroll({ factorType: "totp" });
    assert.equal(enrolled.error, null);
    const factorId = enrolled.data?.id ?? "";
    const verified = await client.auth.mfa.challengeAndVerify({
      factorId,
      code: totpCode(enrolled.data?.type === "totp" ? enrolled.data.totp.secret : "", totpStep()),
    });
    assert.equal(verified.error, null);

    const listed = await env.admin().auth.admin.mfa.listFactors({ userId: id });
    assert.equal(listed.error, null);
    assert.deepEqual(
      listed.data?.factors.map((f) => [f.id, f.status]),
      [[factorId, "verified"]],
    );
    const deleted = await env.admin().auth.admin.mfa.deleteFactor({ userId: id, id: factorId });
    assert.equal(deleted.error, null);
    // auth-js hands the answer back wrapped once more ({ data: { data: factor, error } }).
    assert.equal((deleted.data as unknown as { data: { id: string } }).data.id, factorId);
    assert.deepEqual(await rows("select aal from internal.sessions where user_id = $1", [id]), [
      { aal: "aal1" },
    ]);
    const again = await env.admin().auth.admin.mfa.deleteFactor({ userId: id, id: factorId });
    assertAuthError(again.error, { status: 404, code: "mfa_factor_not_found" }, "deleted twice");
    const other = await tenant();
    const foreign = await other.admin().auth.admin.mfa.listFactors({ userId: id });
    assertAuthError(foreign.error, { status: 404, code: "user_not_found" }, "another tenant's key");
  });

  test("only the tenant's service-role key: the anon key and a user's token get GoTrue's not_admin, no bearer no_authorization", async () => {
    const env = await tenant();
    const email = newEmail();
    const created = await env
      .admin()
      .auth.admin.createUser({ email, password: PASSWORD, email_confirm: true });
    const id = created.data.user?.id ?? "";
    const anon = env.client().auth.admin;
    assertAuthError((await anon.listUsers()).error, { status: 403, code: "not_admin" }, "anon list");
    assertAuthError((await anon.getUserById(id)).error, { status: 403, code: "not_admin" }, "anon get");
    assertAuthError(
      (await anon.createUser({ email: newEmail() })).error,
      { status: 403, code: "not_admin" },
      "anon create",
    );

    const session = await env.client().auth.signInWithPassword({ email, password: PASSWORD });
    const asUser = createClient(app.url, env.keys.anon_key, {
      ...options,
      global: { headers: { Authorization: `Bearer ${session.data.session?.access_token}` } },
    }).auth.admin;
    assertAuthError((await asUser.listUsers()).error, { status: 403, code: "not_admin" }, "user list");
    assertAuthError(
      (await asUser.updateUserById(id, { ban_duration: "none" })).error,
      { status: 403, code: "not_admin" },
      "user update",
    );
    assertAuthError((await asUser.deleteUser(id)).error, { status: 403, code: "not_admin" }, "user delete");
    assertAuthError(
      (await asUser.generateLink({ type: "magiclink", email })).error,
      { status: 403, code: "not_admin" },
      "user generateLink",
    );

    const noBearer = await fetch(`${app.url}/auth/v1/admin/users`, {
      headers: { apikey: env.keys.anon_key },
    });
    assert.equal(noBearer.status, 401);
    assert.equal(((await noBearer.json()) as { error_code: string }).error_code, "no_authorization");
    assert.equal(
      (await rows("select 1 from internal.users where tenant_id = $1", [env.tenant.id])).length,
      1,
    );
  });

  test("tenant A's service-role key reaches none of tenant B's users", async () => {
    const a = await tenant();
    const b = await tenant();
    const email = newEmail("b-user");
    const created = await b.admin().auth.admin.createUser({ email, password: PASSWORD, email_confirm: true });
    const id = created.data.user?.id ?? "";
    await a.admin().auth.admin.createUser({ email: newEmail("a-user") });
    const admin = a.admin().auth.admin;

    const list = await admin.listUsers();
    assert.equal(list.error, null);
    assert.equal(
      list.data.users.some((u) => u.id === id || u.email === email),
      false,
    );
    assert.equal((list.data as { total?: number }).total, 1);
    assertAuthError((await admin.getUserById(id)).error, { status: 404, code: "user_not_found" }, "get");
    assertAuthError(
      (await admin.updateUserById(id, { ban_duration: "24h", password: "Hijack-Horse-9" })).error,
      { status: 404, code: "user_not_found" },
      "update",
    );
    assertAuthError((await admin.deleteUser(id)).error, { status: 404, code: "user_not_found" }, "delete");
    assertAuthError(
      (await admin.deleteUser(id, true)).error,
      { status: 404, code: "user_not_found" },
      "soft",
    );
    for (const type of ["recovery", "magiclink"] as const) {
      const link = await admin.generateLink({ type, email });
      // Under A, B's address is nobody's: recovery is 404; a magic link makes A a user of its own.
      if (type === "recovery") assertAuthError(link.error, { status: 404, code: "user_not_found" }, type);
      else assert.notEqual(link.data.user?.id, id);
    }
    const signupB = await admin.generateLink({ type: "signup", email, password: PASSWORD });
    assert.equal(signupB.error, null);
    assert.notEqual(signupB.data.user?.id, id);

    // B's user is untouched and still signs in at B.
    const [row] = await rows<{ banned_until: Date | null; deleted_at: Date | null }>(
      "select banned_until, deleted_at from internal.users where id = $1",
      [id],
    );
    assert.deepEqual(row, { banned_until: null, deleted_at: null });
    assert.equal((await b.client().auth.signInWithPassword({ email, password: PASSWORD })).error, null);
    // A's key with B's apikey is another tenant's token.
    const mixed = createClient(app.url, b.keys.anon_key, {
      ...options,
      global: { headers: { Authorization: `Bearer ${a.keys.service_role_key}` } },
    });
    assertAuthError(
      (await mixed.auth.admin.getUserById(id)).error,
      { status: 403, code: "bad_jwt" },
      "mixed keys",
    );
  });
});
