import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type AuthError, createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { listMail, Mailer, type MailRow } from "../src/mail/mailer.ts";
import { addMember, type MembershipRole } from "../src/tenancy/memberships.ts";
import { createAccount } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * Who gets in where (issue 26, items 1 and 7), tried as an attacker would, with the real
 * @supabase/supabase-js client against the real server on both engines:
 * - an invitation is accepted only by someone who proves the address (the invite link, or a
 *   confirmation of the address), never by whoever signs up with it first;
 * - a repeated sign-up for an unconfirmed address never leaves the first sign-up's password usable;
 * - wrong passwords from one client address lock out that client address, not the user.
 * The app trusts X-Forwarded-For (TRUST_PROXY), so each client below has an address of its own.
 */

const PUBLIC_URL = "https://auth.backline.test";
const SITE_URL = "https://app.backline.test/welcome";
const OWNER_PASSWORD = "Owner-Horse-7";
const ATTACKER_PASSWORD = "Attacker-Staple-9";
const CHOSEN_PASSWORD = "Chosen-Battery-8";

const newEmail = () => `invitee-${randomUUID().slice(0, 8)}@example.com`;

function assertAuthError(error: AuthError | null, expected: { status: number; code: string }, what = "") {
  assert.ok(error, `${what}: expected ${expected.code}, got no error`);
  assert.deepEqual({ status: error.status, code: error.code }, expected, `${what}: ${error.message}`);
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

/** Waits, if needed, until a fixed window of this length has at least `need` ms left. */
async function roomInWindow(windowSeconds: number, need: number): Promise<void> {
  const left = windowSeconds * 1000 - (Date.now() % (windowSeconds * 1000));
  if (left < need) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

describeEachEngine("auth: invitations need proof of the address; sign-in throttling", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t(), { PUBLIC_URL, TRUST_PROXY: "true" });
  });
  after(async () => {
    await app?.close();
  });

  async function tenant(auth: Record<string, unknown> = {}) {
    const { tenant, keys } = await tenantWithKeys(t(), { auth: { site_url: SITE_URL, ...auth } });
    /** A supabase-js client on the anon key, calling from client address `ip`. */
    const client = (ip = "198.51.100.1"): SupabaseClient =>
      createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false },
        global: { headers: { "X-Forwarded-For": ip } },
      });
    const admin = (): SupabaseClient =>
      createClient(app.url, keys.service_role_key, {
        auth: { persistSession: false, autoRefreshToken: false },
      });
    return { tenant, keys, client, admin };
  }
  type Env = Awaited<ReturnType<typeof tenant>>;

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return t().db.asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  /** The newest mail of this kind to the address. */
  async function newestMail(env: Env, email: string, kind: string) {
    const mails = await listMail(t().db, { tenantId: env.tenant.id, to: email });
    return readMail(mails.find((m) => m.kind === kind));
  }

  /** `backline accounts add-member`, as the operator runs it (the mail stays in the mailbox). */
  function invite(accountId: string, email: string, role: MembershipRole) {
    const mailer = new Mailer(t().db, { smtpUrl: undefined, from: "backline@example.com" });
    return addMember(t().db, { accountId, email, role }, { mailer, publicUrl: PUBLIC_URL });
  }

  /** The accounts the user with this address belongs to, with roles. */
  async function membershipsOf(env: Env, email: string): Promise<{ account_id: string; role: string }[]> {
    return rows(
      `select m.account_id, m.role from internal.memberships m
       join internal.users u on u.id = m.user_id
       where u.tenant_id = $1 and u.email = $2 order by m.created_at`,
      [env.tenant.id, email],
    );
  }

  async function signIn(env: Env, email: string, password: string, ip?: string) {
    return env.client(ip).auth.signInWithPassword({ email, password });
  }

  /** Follows a verify link as a browser does (no apikey: the link names its tenant). */
  async function followLink(link: URL): Promise<URLSearchParams> {
    const res = await fetch(new URL(`${link.pathname}${link.search}`, app.url), { redirect: "manual" });
    assert.equal(res.status, 303);
    const location = new URL(res.headers.get("location") ?? "");
    assert.equal(`${location.origin}${location.pathname}`, SITE_URL);
    return new URLSearchParams(location.hash.slice(1));
  }

  // ---------------------------------------------------------------------------------------------
  // The invite link (GoTrue's POST /invite and verify with type=invite)

  const inviteUses: {
    name: string;
    use: (env: Env, email: string, mail: ReturnType<typeof readMail>) => Promise<string>;
  }[] = [
    {
      name: "verifyOtp({ type: 'invite', email, token }) with the code",
      use: async (env, email, mail) => {
        const { data, error } = await env
          .client()
          .auth.verifyOtp({ email, token: mail.code, type: "invite" });
        assert.equal(error, null);
        return data.session?.access_token ?? "";
      },
    },
    {
      name: "verifyOtp({ type: 'invite', token_hash })",
      use: async (env, _email, mail) => {
        const { data, error } = await env.client().auth.verifyOtp({ token_hash: mail.token, type: "invite" });
        assert.equal(error, null);
        return data.session?.access_token ?? "";
      },
    },
    {
      name: "the link, which redirects with the session in the fragment",
      use: async (_env, _email, mail) => {
        const fragment = await followLink(mail.link);
        assert.equal(fragment.get("error_code"), null, fragment.toString());
        assert.equal(fragment.get("type"), "invite");
        return fragment.get("access_token") ?? "";
      },
    },
  ];
  for (const c of inviteUses) {
    test(`auth.admin.inviteUserByEmail, then ${c.name}: signed in, once; the user chooses a password`, async () => {
      const env = await tenant();
      const email = newEmail();
      const invited = await env.admin().auth.admin.inviteUserByEmail(email, { data: { name: "Mira Vale" } });
      assert.equal(invited.error, null);
      const user = invited.data.user;
      assert.ok(user?.invited_at, "invited_at is reported");
      assert.equal(user.email, email);
      assert.equal(user.email_confirmed_at, undefined);
      assert.deepEqual(user.user_metadata, { name: "Mira Vale" });

      const mail = await newestMail(env, email, "auth.invite");
      assert.equal(mail.link.searchParams.get("type"), "invite");
      assert.equal(`${mail.link.origin}${mail.link.pathname}`, `${PUBLIC_URL}/auth/v1/verify`);

      const accessToken = await c.use(env, email, mail);
      assert.equal(decodeJwt(accessToken).sub, user.id);
      const signedIn = env.client();
      const { data: me } = await signedIn.auth.getUser(accessToken);
      assert.ok(me.user?.email_confirmed_at, "the address is confirmed");
      // No account was waiting for this address: the user gets a personal one, named from the data.
      const accounts = await rows<{ role: string; name: string }>(
        `select m.role, a.name from internal.memberships m join internal.accounts a on a.id = m.account_id
         where m.user_id = $1`,
        [user.id],
      );
      assert.deepEqual(accounts, [{ role: "owner", name: "Mira Vale" }]);

      const again = await env.client().auth.verifyOtp({ token_hash: mail.token, type: "invite" });
      assertAuthError(again.error, { status: 403, code: "otp_expired" }, "the link works once");

      // An invited user has no password until they choose one.
      assertAuthError((await signIn(env, email, CHOSEN_PASSWORD)).error, {
        status: 400,
        code: "invalid_credentials",
      });
      const res = await fetch(`${app.url}/auth/v1/user`, {
        method: "PUT",
        headers: {
          apikey: env.keys.anon_key,
          authorization: `Bearer ${accessToken}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ password: CHOSEN_PASSWORD }),
      });
      assert.equal(res.status, 200, await res.text());
      assert.equal((await signIn(env, email, CHOSEN_PASSWORD)).error, null);
    });
  }

  test("POST /invite: only the service-role key; refused for an address already proven", async () => {
    const env = await tenant({ email_confirmation: false });
    const email = newEmail();
    const res = await fetch(`${app.url}/auth/v1/invite`, {
      method: "POST",
      headers: {
        apikey: env.keys.anon_key,
        authorization: `Bearer ${env.keys.anon_key}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ email }),
    });
    assert.equal(res.status, 403);
    assert.equal(((await res.json()) as { error_code: string }).error_code, "not_admin");
    // Without a bearer at all: GoTrue's 401 no_authorization.
    const bare = await fetch(`${app.url}/auth/v1/invite`, {
      method: "POST",
      headers: { apikey: env.keys.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ email }),
    });
    assert.equal(bare.status, 401);
    assert.equal(((await bare.json()) as { error_code: string }).error_code, "no_authorization");
    assert.deepEqual(await rows("select id from internal.users where email = $1", [email]), []);

    await env.admin().auth.admin.inviteUserByEmail(email);
    const { token } = await newestMail(env, email, "auth.invite");
    assert.equal((await env.client().auth.verifyOtp({ token_hash: token, type: "invite" })).error, null);
    const again = await env.admin().auth.admin.inviteUserByEmail(email);
    assertAuthError(again.error, { status: 422, code: "email_exists" });
  });

  test("a sign-up for an invited address learns nothing the inviter gave", async () => {
    const env = await tenant();
    const email = newEmail();
    await env.admin().auth.admin.inviteUserByEmail(email, { data: { name: "Mira Vale", plan: "label" } });
    const { data, error } = await env
      .client("203.0.113.66")
      .auth.signUp({ email, password: ATTACKER_PASSWORD, options: { data: { name: "Someone" } } });
    assert.equal(error, null);
    assert.equal(data.session, null);
    assert.deepEqual(data.user?.user_metadata, { name: "Someone" });
    assert.deepEqual(data.user?.identities, []);
  });

  // ---------------------------------------------------------------------------------------------
  // Invitation takeover: the attacker signs up with an invited address first

  const takeovers: {
    name: string;
    auth: Record<string, unknown>;
    attackerFirst: boolean;
    /** What the attacker's sign-up answers: a session (no confirmation), a user, or an error. */
    signUp: "session" | "user" | "user_already_exists";
  }[] = [
    {
      name: "confirmation on, invited first: the attacker's sign-up waits for a confirmation they cannot give",
      auth: {},
      attackerFirst: false,
      signUp: "user",
    },
    {
      name: "confirmation on, the attacker signed up before the invitation",
      auth: {},
      attackerFirst: true,
      signUp: "user",
    },
    {
      name: "no confirmation, invited first: the invited address cannot be signed up for",
      auth: { email_confirmation: false },
      attackerFirst: false,
      signUp: "user_already_exists",
    },
    {
      name: "no confirmation, the attacker signed up (and holds a session) before the invitation",
      auth: { email_confirmation: false },
      attackerFirst: true,
      signUp: "session",
    },
  ];
  for (const c of takeovers) {
    test(`invitation takeover refused (${c.name}); the invite link makes the owner a member`, async () => {
      const env = await tenant(c.auth);
      const email = newEmail();
      const label = await createAccount(t().db, { tenantId: env.tenant.id, name: "Night Owl Records" });
      const attacker = env.client("203.0.113.66");
      const attack = () => attacker.auth.signUp({ email, password: ATTACKER_PASSWORD });

      let signedUp: Awaited<ReturnType<typeof attack>> | undefined;
      if (c.attackerFirst) signedUp = await attack();
      const invited = await invite(label.id, email, "admin");
      assert.equal(invited.status, "invited", "a user who never proved the address is not added at once");
      if (!c.attackerFirst) signedUp = await attack();
      assert.ok(signedUp);
      if (c.signUp === "user_already_exists") {
        assertAuthError(signedUp.error, { status: 422, code: "user_already_exists" });
      } else {
        assert.equal(signedUp.error, null);
        assert.equal(Boolean(signedUp.data.session), c.signUp === "session");
      }
      const attackerSession = signedUp.data.session;

      // Not a member of the inviting account, whatever the attacker does next.
      const isMember = async () => (await membershipsOf(env, email)).some((m) => m.account_id === label.id);
      assert.equal(await isMember(), false, "the attacker's sign-up made them a member");
      const early = await signIn(env, email, ATTACKER_PASSWORD, "203.0.113.66");
      if (c.signUp === "session") assert.equal(early.error, null);
      else
        assertAuthError(early.error, {
          status: 400,
          // A sign-up for an address already invited stores no password at all.
          code: c.signUp === "user" && c.attackerFirst ? "email_not_confirmed" : "invalid_credentials",
        });
      assert.equal(await isMember(), false);
      assert.equal(
        (await rows("select 1 from internal.invitations where email = $1 and accepted_at is null", [email]))
          .length,
        1,
        "the invitation is still open",
      );

      // The owner uses the invite link mailed to the address: a member, signed in.
      const mail = await newestMail(env, email, "auth.invite");
      const owner = env.client();
      const verified = await owner.auth.verifyOtp({ token_hash: mail.token, type: "invite" });
      assert.equal(verified.error, null);
      assert.deepEqual(
        await membershipsOf(env, email).then((ms) => ms.filter((m) => m.account_id === label.id)),
        [{ account_id: label.id, role: "admin" }],
      );

      // The attacker is out: their password and their session are gone.
      assertAuthError((await signIn(env, email, ATTACKER_PASSWORD, "203.0.113.66")).error, {
        status: 400,
        code: "invalid_credentials",
      });
      if (attackerSession) {
        const refreshed = await env
          .client()
          .auth.refreshSession({ refresh_token: attackerSession.refresh_token });
        assertAuthError(refreshed.error, { status: 400, code: "refresh_token_not_found" });
        const res = await fetch(`${app.url}/auth/v1/user`, {
          headers: {
            apikey: env.keys.anon_key,
            authorization: `Bearer ${attackerSession.access_token}`,
            "x-supabase-api-version": "2024-01-01",
          },
        });
        assert.equal(res.status, 403);
        assert.equal(((await res.json()) as { code: string }).code, "session_not_found");
      }
      // The owner chooses a password with the invite session.
      assert.equal((await owner.auth.updateUser({ password: CHOSEN_PASSWORD })).error, null);
      assert.equal((await signIn(env, email, CHOSEN_PASSWORD)).error, null);
    });
  }

  test("pre-account takeover: after a second sign-up with another password, confirming keeps neither password", async () => {
    const env = await tenant();
    const email = newEmail();
    const label = await createAccount(t().db, { tenantId: env.tenant.id, name: "Night Owl Records" });
    await rows(
      "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, 'member')",
      [env.tenant.id, label.id, email],
    );
    // The attacker signs up first, then the real owner (who never sees the attacker's mail).
    assert.equal(
      (await env.client("203.0.113.66").auth.signUp({ email, password: ATTACKER_PASSWORD })).error,
      null,
    );
    const attackersMail = await newestMail(env, email, "auth.signup");
    assert.equal((await env.client().auth.signUp({ email, password: OWNER_PASSWORD })).error, null);
    const ownersMail = await newestMail(env, email, "auth.signup");
    assert.notEqual(ownersMail.token, attackersMail.token);
    assertAuthError(
      (await env.client().auth.verifyOtp({ token_hash: attackersMail.token, type: "signup" })).error,
      { status: 403, code: "otp_expired" },
      "the earlier confirmation link",
    );

    // The owner confirms: signed in, and the invitation is accepted now that the address is proven.
    const owner = env.client();
    const confirmed = await owner.auth.verifyOtp({ email, token: ownersMail.code, type: "signup" });
    assert.equal(confirmed.error, null);
    assert.deepEqual(await membershipsOf(env, email), [{ account_id: label.id, role: "member" }]);
    for (const [who, password] of [
      ["the attacker's", ATTACKER_PASSWORD],
      ["the owner's", OWNER_PASSWORD],
    ] as const) {
      assertAuthError(
        (await signIn(env, email, password)).error,
        { status: 400, code: "invalid_credentials" },
        who,
      );
    }
    assert.equal((await owner.auth.updateUser({ password: CHOSEN_PASSWORD })).error, null);
    assert.equal((await signIn(env, email, CHOSEN_PASSWORD)).error, null);
  });

  const confirmedByOwner: {
    name: string;
    record: (env: Env, accountId: string, email: string) => Promise<void>;
  }[] = [
    {
      name: "invited with add-member",
      record: async (_env, accountId, email) => {
        await invite(accountId, email, "viewer");
      },
    },
    {
      name: "an invitation with no invited user yet",
      record: async (env, accountId, email) => {
        await rows(
          "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, 'viewer')",
          [env.tenant.id, accountId, email],
        );
      },
    },
  ];
  for (const c of confirmedByOwner) {
    test(`the owner confirms the attacker's sign-up of an invited address (${c.name}): the owner joins, the attacker's password does not work`, async () => {
      const env = await tenant();
      const email = newEmail();
      const label = await createAccount(t().db, { tenantId: env.tenant.id, name: "Night Owl Records" });
      await c.record(env, label.id, email);
      const signedUp = await env.client("203.0.113.66").auth.signUp({ email, password: ATTACKER_PASSWORD });
      assert.equal(signedUp.error, null);
      assert.deepEqual(await membershipsOf(env, email), [], "not before the address is confirmed");

      // The owner gets "Confirm your sign-up" and confirms: they read the mail, so they join...
      const { code } = await newestMail(env, email, "auth.signup");
      const owner = env.client();
      assert.equal((await owner.auth.verifyOtp({ email, token: code, type: "signup" })).error, null);
      assert.deepEqual(await membershipsOf(env, email), [{ account_id: label.id, role: "viewer" }]);
      // ...but the password of a sign-up for an invited address is not kept: the owner chooses one.
      assertAuthError((await signIn(env, email, ATTACKER_PASSWORD, "203.0.113.66")).error, {
        status: 400,
        code: "invalid_credentials",
      });
      assert.equal((await owner.auth.updateUser({ password: CHOSEN_PASSWORD })).error, null);
      assert.equal((await signIn(env, email, CHOSEN_PASSWORD)).error, null);
      // A proven address is added at once from now on.
      const second = await createAccount(t().db, { tenantId: env.tenant.id, name: "Second" });
      assert.equal((await invite(second.id, email, "member")).status, "added");
    });
  }

  test("the database decides: proving an address accepts its invitations; a changed address is unproven", async () => {
    const env = await tenant({ email_confirmation: false });
    const [first, second] = [newEmail(), newEmail()];
    const label = await createAccount(t().db, { tenantId: env.tenant.id, name: "Night Owl Records" });
    const { data } = await env.client().auth.signUp({ email: first, password: OWNER_PASSWORD });
    const id = data.user?.id;
    assert.ok(id);
    for (const email of [first, second]) {
      await rows(
        "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, 'member')",
        [env.tenant.id, label.id, email],
      );
    }
    const inLabel = async () =>
      (
        await rows("select 1 from internal.memberships where user_id = $1 and account_id = $2", [
          id,
          label.id,
        ])
      ).length === 1;
    assert.equal(await inLabel(), false, "auto-confirmed is not proven");

    // Whatever code path records the proof, the database accepts the open invitation.
    await rows("update internal.users set email_proven_at = now() where id = $1", [id]);
    assert.equal(await inLabel(), true);

    // A new address without a new proof: unproven, and its invitation stays open.
    await rows("delete from internal.memberships where user_id = $1 and account_id = $2", [id, label.id]);
    await rows("update internal.users set email = $2 where id = $1", [id, second]);
    const [user] = await rows<{ email_proven_at: Date | null }>(
      "select email_proven_at from internal.users where id = $1",
      [id],
    );
    assert.equal(user?.email_proven_at, null);
    assert.equal(await inLabel(), false);
    assert.equal(
      (await rows("select 1 from internal.invitations where email = $1 and accepted_at is null", [second]))
        .length,
      1,
    );
  });

  // ---------------------------------------------------------------------------------------------
  // Sign-in throttling: nobody locks anybody else out

  test("ten wrong passwords from a stranger's address lock out that address only; the owner signs in from theirs", async () => {
    const env = await tenant({ email_confirmation: false });
    const email = newEmail();
    assert.equal(
      (await env.client("192.0.2.10").auth.signUp({ email, password: OWNER_PASSWORD })).error,
      null,
    );
    await roomInWindow(300, 30_000);

    const stranger = "203.0.113.7";
    for (let i = 0; i < 10; i++) {
      assertAuthError((await signIn(env, email, `Guess-${i}-Wrong`, stranger)).error, {
        status: 400,
        code: "invalid_credentials",
      });
    }
    // The stranger's address is throttled, even with the right password.
    assertAuthError((await signIn(env, email, OWNER_PASSWORD, stranger)).error, {
      status: 429,
      code: "over_request_rate_limit",
    });
    // The owner is not: from the address they signed up from, and from a new one.
    for (const ip of ["192.0.2.10", "192.0.2.77"]) {
      const { data, error } = await signIn(env, email, OWNER_PASSWORD, ip);
      assert.equal(error, null, `from ${ip}`);
      assert.equal(data.user?.email, email);
    }
  });

  test("the per-address bound stops distributed guessing from new client addresses, not the owner's own", async () => {
    const windowSeconds = 600;
    const env = await tenant({
      email_confirmation: false,
      rate_limits: {
        signin_per_email_ip: { max: 2, windowSeconds },
        signin_per_email: { max: 5, windowSeconds },
      },
    });
    const email = newEmail();
    const ownerIp = "192.0.2.10";
    assert.equal((await env.client(ownerIp).auth.signUp({ email, password: OWNER_PASSWORD })).error, null);
    await roomInWindow(windowSeconds, 30_000);

    // Guesses from many addresses, two each (each address's own limit).
    const outcomes: string[] = [];
    for (let i = 1; i <= 4; i++) {
      for (let j = 0; j < 2; j++) {
        const { error } = await signIn(env, email, `Guess-${i}-${j}`, `203.0.113.${i}`);
        outcomes.push(error?.code ?? "ok");
      }
    }
    // Five guesses counted against the address; from then on new client addresses are refused.
    assert.deepEqual(outcomes, [
      ...Array(5).fill("invalid_credentials"),
      ...Array(3).fill("over_request_rate_limit"),
    ]);
    assertAuthError((await signIn(env, email, OWNER_PASSWORD, "198.51.100.200")).error, {
      status: 429,
      code: "over_request_rate_limit",
    });
    // The owner's address holds a session of the user: it is not held to the per-address bound.
    assert.equal((await signIn(env, email, OWNER_PASSWORD, ownerIp)).error, null);
    // Other users of the tenant are untouched.
    const other = newEmail();
    assert.equal(
      (await env.client("198.51.100.201").auth.signUp({ email: other, password: OWNER_PASSWORD })).error,
      null,
    );
    assert.equal((await signIn(env, other, OWNER_PASSWORD, "198.51.100.202")).error, null);
  });
});
