import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import { listMail, Mailer } from "../src/mail/mailer.ts";
import { generateApiKey, parseApiKey } from "../src/public-api/keys/format.ts";
import { addMember, type MembershipRole } from "../src/tenancy/memberships.ts";
import { type Account, createAccount } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { copyMigratedDatabase, describeEachEngine } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";
import { type ApiResponse, issueTestKey, publicApi } from "./support/public-api.ts";
import { seedUser } from "./support/seed.ts";

/**
 * The API-key lifecycle of /api/public/v1 end to end: users signed in through /auth/v1 with
 * supabase-js create keys, reveal them with the code e-mailed to the account's owners, freeze,
 * unfreeze and revoke them; keys then authenticate (or are refused) on the next request. Who may
 * manage which key is the database's decision (row-level security on internal.api_keys).
 */

const PASSWORD = "Correct-Horse-7";
const LIVE_SECRET = /^bk_live_[0-9A-Za-z]{49}$/;
const DEFAULT_SCOPES = ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage"];
const PROBLEM_FIELDS = ["type", "title", "status", "code", "detail", "request_id"];

interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  request_id: string;
  param?: string;
  errors?: { param: string; code: string }[];
}

interface Key {
  id: string;
  object: string;
  account_id: string;
  name: string;
  mode: "live" | "test";
  prefix: string;
  scopes: string[];
  status: string;
  last_used_at: string | null;
  revealed_at: string | null;
  frozen_at: string | null;
  revoked_at: string | null;
  expires_at: string | null;
  secret?: string;
  verification?: { sent_to: string[]; expires_at: string };
}

interface List<T> {
  object: string;
  data: T[];
  total: number;
}

function expectCreated(res: ApiResponse<unknown>): void {
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

/** A problem-details answer with this status and code; 401s carry WWW-Authenticate. */
function assertProblem(res: ApiResponse<unknown>, status: number, code: string): Problem {
  const body = res.body as Problem;
  assert.deepEqual(
    { status: res.status, code: body?.code },
    { status, code },
    `expected ${status} ${code}, got ${res.status} ${JSON.stringify(res.body)}`,
  );
  assert.match(res.headers.get("content-type") ?? "", /^application\/problem\+json/);
  assert.deepEqual(
    PROBLEM_FIELDS.filter((f) => !(f in body)),
    [],
    "every field of the problem shape",
  );
  assert.equal(body.type, `https://backline.dev/errors/${code}`);
  assert.equal(body.status, status);
  assert.ok(body.title && body.detail && body.request_id);
  if (status === 401) assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer realm="backline"/);
  return body;
}

/** No field of a listed or fetched key holds (or names) a secret. */
function assertNoSecret(key: Record<string, unknown>): void {
  for (const field of ["secret", "key_hash", "reveal_code_hash"]) assert.equal(field in key, false, field);
  assert.doesNotMatch(JSON.stringify(key), /bk_(live|test)_[0-9A-Za-z]{49}/);
}

const newEmail = () => `user-${randomUUID().slice(0, 8)}@example.com`;
const masked = (email: string) => `${email[0]}******@${email.split("@")[1]}`;
const releaseBody = (title: string) => ({ title, artist_name: "Luna Vale" });

describeEachEngine("public API: API-key lifecycle", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  const db = () => t().db;
  const api = (token?: string) => publicApi(app.url, token);

  async function rows<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return db().asService(async (tx) => (await tx.query<T & Record<string, unknown>>(sql, params)).rows);
  }

  /** A tenant whose users sign up without confirming their address. */
  const tenantEnv = () => tenantWithKeys(t(), { auth: { email_confirmation: false } });
  type Env = Awaited<ReturnType<typeof tenantEnv>>;

  const account = (env: Env, name = `Label ${randomUUID().slice(0, 6)}`) =>
    createAccount(db(), { tenantId: env.tenant.id, name });

  /**
   * Signs a new user up with supabase-js. Invited first to `memberships`, they join those accounts
   * (as those roles) once their address is proven, which this helper records as if they had
   * confirmed it (the tenant asks no confirmation); with none, they get a personal account as its owner.
   */
  async function signUp(env: Env, memberships: { account: Account; role: MembershipRole }[] = []) {
    const email = newEmail();
    for (const m of memberships) {
      await rows(
        "insert into internal.invitations (tenant_id, account_id, email, role) values ($1, $2, $3, $4)",
        [env.tenant.id, m.account.id, email, m.role],
      );
    }
    const client = createClient(app.url, env.keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({ email, password: PASSWORD });
    assert.equal(error, null);
    assert.ok(data.session && data.user, "sign-up without confirmation returns a session");
    await rows("update internal.users set email_proven_at = now() where id = $1", [data.user.id]);
    const token = data.session.access_token;
    return { id: data.user.id, email, token, api: api(token) };
  }
  type User = Awaited<ReturnType<typeof signUp>>;

  /** The newest reveal code mailed to `email` for the key named `name`. */
  async function codeFor(env: Env, email: string, name: string): Promise<string> {
    const mail = (await listMail(db(), { tenantId: env.tenant.id, to: email })).find(
      (m) => m.kind === "api_key.reveal" && m.text_body.includes(`"${name}"`),
    );
    const code = /Verification code: (\d{6})\b/.exec(mail?.text_body ?? "")?.[1];
    assert.ok(code, `no reveal code for ${name} mailed to ${email}`);
    return code;
  }

  /** POST /api-keys as `user`: 201, pending_reveal; returns the key with its (unique) name. */
  async function createKey(user: User, body: Record<string, unknown> = {}): Promise<Key> {
    const name = `key ${randomUUID().slice(0, 8)}`;
    const res = await user.api<Key>("POST", "/api-keys", { name, ...body });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual([res.body.status, res.body.name, res.body.object], ["pending_reveal", name, "api_key"]);
    return res.body;
  }

  const reveal = (user: User, id: string, code: string) =>
    user.api<Key>("POST", `/api-keys/${id}/reveal`, { code });

  /** Creates a key as its owner `user` and reveals it: its id and secret. */
  async function revealedKey(env: Env, user: User) {
    const key = await createKey(user);
    const res = await reveal(user, key.id, await codeFor(env, user.email, key.name));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { id: key.id, secret: String(res.body.secret) };
  }

  // ---------------------------------------------------------------------------------------------
  // Create, verify, reveal

  test("an owner creates a key, reveals its secret once with the e-mailed code, and the key works", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const owner = await signUp(env, [{ account: label, role: "owner" }]);

    const created = await owner.api<Key>("POST", "/api-keys", { name: "CI deploys" });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, "pending_reveal");
    assert.equal(created.body.account_id, label.id);
    assert.equal(created.body.mode, "live");
    assert.deepEqual(created.body.scopes, DEFAULT_SCOPES);
    assert.deepEqual(created.body.verification?.sent_to, [masked(owner.email)]);
    assert.ok(Date.parse(created.body.verification?.expires_at ?? "") > Date.now());
    assertNoSecret(created.body as unknown as Record<string, unknown>);
    const id = created.body.id;

    const code = await codeFor(env, owner.email, "CI deploys");

    const wrong = code === "000000" ? "000001" : "000000";
    assertProblem(await reveal(owner, id, wrong), 422, "verification_code_invalid");
    assertProblem(await reveal(owner, id, "12345"), 422, "validation_failed");

    const revealed = await reveal(owner, id, code);
    assert.equal(revealed.status, 200, JSON.stringify(revealed.body));
    const secret = String(revealed.body.secret);
    assert.match(secret, LIVE_SECRET);
    assert.deepEqual(parseApiKey(secret), { mode: "live" });
    assert.equal(revealed.body.status, "active");
    assert.ok(revealed.body.revealed_at);
    assert.equal(revealed.body.prefix, secret.slice(0, "bk_live_".length + 6));

    assertProblem(await reveal(owner, id, code), 409, "api_key_already_revealed");
    assertProblem(await owner.api("POST", `/api-keys/${id}/verification`), 409, "api_key_already_revealed");

    const releases = await api(secret)<List<unknown>>("GET", "/releases");
    assert.equal(releases.status, 200, JSON.stringify(releases.body));
    assert.equal(releases.body.object, "list");

    const listed = await owner.api<List<Key>>("GET", "/api-keys");
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.data.map((k) => [k.id, k.prefix, k.status]),
      [[id, revealed.body.prefix, "active"]],
    );
    for (const k of listed.body.data) assertNoSecret(k as unknown as Record<string, unknown>);

    // last_used_at is written after the request, outside its transaction.
    let lastUsed: string | null = null;
    for (let i = 0; i < 40 && !lastUsed; i++) {
      const got = await owner.api<Key>("GET", `/api-keys/${id}`);
      assert.equal(got.status, 200);
      assertNoSecret(got.body as unknown as Record<string, unknown>);
      lastUsed = got.body.last_used_at;
      if (!lastUsed) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(lastUsed, "last_used_at is set after the key's first use");
  });

  test("a reveal is never kept for Idempotency-Key replays: the secret is stored nowhere", async () => {
    const env = await tenantEnv();
    const user = await signUp(env);
    const key = await createKey(user);
    const code = await codeFor(env, user.email, key.name);
    const headers = { "idempotency-key": `reveal-${key.id}` };
    const first = await user.api<Key>("POST", `/api-keys/${key.id}/reveal`, { code }, headers);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.headers.get("idempotent-replayed"), null);
    const again = await user.api<Key>("POST", `/api-keys/${key.id}/reveal`, { code }, headers);
    assertProblem(again, 409, "api_key_already_revealed");
    const kept = await rows<{ body: string }>(
      "select coalesce(response_body::text, '') as body from internal.idempotency_keys where path like $1",
      [`%${key.id}%`],
    );
    assert.deepEqual(kept, []);
  });

  test("five wrong codes use the code up; POST /verification mails a new one, which works", async () => {
    const env = await tenantEnv();
    const owner = await signUp(env);
    const key = await createKey(owner);
    const code = await codeFor(env, owner.email, key.name);
    const wrong = code === "999999" ? "999998" : "999999";
    for (let i = 0; i < 5; i++) {
      assertProblem(await reveal(owner, key.id, wrong), 422, "verification_code_invalid");
    }
    // Locked: not even the right code works now.
    assertProblem(await reveal(owner, key.id, code), 409, "verification_code_required");

    const resent = await owner.api<{ sent_to: string[]; expires_at: string }>(
      "POST",
      `/api-keys/${key.id}/verification`,
    );
    assert.equal(resent.status, 201, JSON.stringify(resent.body));
    assert.deepEqual(resent.body.sent_to, [masked(owner.email)]);
    const fresh = await codeFor(env, owner.email, key.name);
    // Earlier codes stop working.
    if (fresh !== code) assertProblem(await reveal(owner, key.id, code), 422, "verification_code_invalid");
    const revealed = await reveal(owner, key.id, fresh);
    assert.equal(revealed.status, 200, JSON.stringify(revealed.body));
    assert.match(String(revealed.body.secret), LIVE_SECRET);
  });

  test("an expired code is refused with verification_code_expired", async () => {
    const env = await tenantEnv();
    const owner = await signUp(env);
    const key = await createKey(owner);
    const code = await codeFor(env, owner.email, key.name);
    await rows(
      "update internal.api_keys set reveal_code_expires_at = now() - interval '1 minute' where id = $1",
      [key.id],
    );
    const res = assertProblem(await reveal(owner, key.id, code), 422, "verification_code_expired");
    assert.equal(res.param, "code");
  });

  // ---------------------------------------------------------------------------------------------
  // Freeze, unfreeze, revoke; refused keys

  test("freeze, unfreeze and revoke take effect on the key's next request; revoked is final", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const owner = await signUp(env, [{ account: label, role: "owner" }]);
    const key = await issueTestKey(db(), label);
    const asKey = api(key.secret);
    assert.equal((await asKey("GET", "/releases")).status, 200);

    const frozen = await owner.api<Key>("POST", `/api-keys/${key.id}/freeze`);
    assert.equal(frozen.status, 200, JSON.stringify(frozen.body));
    assert.equal(frozen.body.status, "frozen");
    assert.ok(frozen.body.frozen_at);
    assertProblem(await asKey("GET", "/releases"), 401, "api_key_frozen");

    const unfrozen = await owner.api<Key>("POST", `/api-keys/${key.id}/unfreeze`);
    assert.deepEqual([unfrozen.status, unfrozen.body.status, unfrozen.body.frozen_at], [200, "active", null]);
    assert.equal((await asKey("GET", "/releases")).status, 200);

    const revoked = await owner.api<Key>("DELETE", `/api-keys/${key.id}`);
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    assert.equal(revoked.body.status, "revoked");
    assert.ok(revoked.body.revoked_at);
    assertProblem(await asKey("GET", "/releases"), 401, "api_key_revoked");
    for (const action of ["unfreeze", "freeze"]) {
      assertProblem(
        await owner.api("POST", `/api-keys/${key.id}/${action}`),
        409,
        "invalid_status_transition",
      );
    }
    assertProblem(await asKey("GET", "/releases"), 401, "api_key_revoked");

    // A key waiting for its code cannot be activated (or frozen) around the reveal; it can be revoked.
    const pending = await createKey(owner);
    for (const action of ["unfreeze", "freeze"]) {
      assertProblem(
        await owner.api("POST", `/api-keys/${pending.id}/${action}`),
        409,
        "invalid_status_transition",
      );
    }
    const dropped = await owner.api<Key>("DELETE", `/api-keys/${pending.id}`);
    assert.deepEqual([dropped.status, dropped.body.status], [200, "revoked"]);
    const late = await reveal(owner, pending.id, await codeFor(env, owner.email, pending.name));
    assert.equal(late.status, 409, "a revoked key's code reveals nothing");
    assert.equal("secret" in (late.body as object), false);
  });

  test("every way a bearer can fail answers 401 with a code, WWW-Authenticate and the problem shape", async (ctx) => {
    const env = await tenantEnv();
    const label = await account(env);
    const user = await signUp(env, [{ account: label, role: "owner" }]);
    const expired = await issueTestKey(db(), label, { expiresAt: new Date(Date.now() - 60_000) });
    const expiring = await issueTestKey(db(), label);
    await rows("update internal.api_keys set expires_at = now() - interval '1 second' where id = $1", [
      expiring.id,
    ]);
    const real = generateApiKey("live").key;
    const badChecksum = real.slice(0, -1) + (real.endsWith("0") ? "1" : "0");

    const cases: { name: string; token: string | undefined; path?: string; code: string }[] = [
      { name: "no Authorization", token: undefined, code: "missing_api_key" },
      { name: "a malformed key", token: "bk_live_short", code: "api_key_invalid" },
      { name: "a key whose checksum fails", token: badChecksum, code: "api_key_invalid" },
      { name: "a well-formed key never issued", token: generateApiKey("live").key, code: "api_key_unknown" },
      { name: "an unknown test-mode key", token: generateApiKey("test").key, code: "api_key_unknown" },
      { name: "a key issued expired", token: expired.secret, code: "api_key_expired" },
      { name: "a key that expired since", token: expiring.secret, code: "api_key_expired" },
      { name: "a forged JWT on /api-keys", token: "a.b.c", path: "/api-keys", code: "invalid_token" },
    ];
    for (const c of cases) {
      await ctx.test(c.name, async () => {
        assertProblem(await api(c.token)("GET", c.path ?? "/releases"), 401, c.code);
      });
    }
    const missing = await api(undefined)("GET", "/releases");
    assert.equal(missing.headers.get("www-authenticate"), 'Bearer realm="backline"');
    // A user's access token is taken on every route, but acts only for the account it names
    // (test/public-api-members.test.ts): without Backline-Account, a catalogue route says so.
    const unnamed = await api(user.token)("GET", "/releases");
    assertProblem(unnamed, 400, "account_required");
  });

  // ---------------------------------------------------------------------------------------------
  // Modes and scopes

  test("a test-mode key acts on the account's sandbox twin; live and test data never mix", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const live = await issueTestKey(db(), label);
    const sandbox = await issueTestKey(db(), label, { mode: "test" });
    assert.match(sandbox.secret, /^bk_test_[0-9A-Za-z]{49}$/);
    const [twin] = await rows<{ id: string; is_sandbox: boolean }>(
      "select id, is_sandbox from internal.accounts where sandbox_of = $1",
      [label.id],
    );
    assert.deepEqual(twin, { id: sandbox.accountId, is_sandbox: true });
    assert.equal(live.accountId, label.id);
    // A second test key goes to the same twin.
    assert.equal((await issueTestKey(db(), label, { mode: "test" })).accountId, twin.id);

    const asLive = api(live.secret);
    const asTest = api(sandbox.secret);
    const liveRelease = await asLive<{ id: string }>("POST", "/releases", releaseBody("Live One"));
    const testRelease = await asTest<{ id: string }>("POST", "/releases", releaseBody("Test One"));
    assert.deepEqual([liveRelease.status, testRelease.status], [201, 201]);

    assert.equal((await asLive("GET", `/releases/${liveRelease.body.id}`)).status, 200);
    assert.equal((await asTest("GET", `/releases/${testRelease.body.id}`)).status, 200);
    assertProblem(await asTest("GET", `/releases/${liveRelease.body.id}`), 404, "resource_missing");
    assertProblem(await asLive("GET", `/releases/${testRelease.body.id}`), 404, "resource_missing");

    const titles = async (as: typeof asLive) =>
      (await as<List<{ title: string }>>("GET", "/releases")).body.data.map((r) => r.title);
    assert.deepEqual(await titles(asLive), ["Live One"]);
    assert.deepEqual(await titles(asTest), ["Test One"]);
  });

  test("scopes: each route needs its scope; 403 insufficient_scope names it", async (ctx) => {
    const env = await tenantEnv();
    const label = await account(env);
    const reader = await issueTestKey(db(), label, { scopes: ["catalog:read"] });
    const standard = await issueTestKey(db(), label);
    const cases: [name: string, secret: string, route: string, want: number, body?: unknown][] = [
      ["catalog:read lists releases", reader.secret, "GET /releases", 200],
      ["catalog:read cannot create a release", reader.secret, "POST /releases", 403, releaseBody("No")],
      ["the default scopes cannot list keys", standard.secret, "GET /api-keys", 403],
      ["the default scopes cannot create keys", standard.secret, "POST /api-keys", 403, {}],
      ["nor freeze a key", standard.secret, `POST /api-keys/${standard.id}/freeze`, 403],
    ];
    for (const [name, secret, route, want, body] of cases) {
      await ctx.test(name, async () => {
        const [method = "", path = ""] = route.split(" ");
        const res = await api(secret)(method, path, body);
        if (want === 200) return assert.equal(res.status, 200, JSON.stringify(res.body));
        assertProblem(res, 403, "insufficient_scope");
        assert.match(
          res.headers.get("www-authenticate") ?? "",
          /error="insufficient_scope", scope="[a-z:]+"/,
        );
      });
    }
    assert.equal((await api(standard.secret)("GET", "/releases")).status, 200, "the refused key still works");
  });

  test("a key with keys:manage manages the keys of its own account only", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const other = await account(env);
    const owner = await seedUser(db(), env.tenant, [{ account: label, role: "owner" }]);
    const manager = await issueTestKey(db(), label, { scopes: ["keys:manage", "catalog:read"] });
    const sibling = await issueTestKey(db(), label, { name: "sibling" });
    const foreign = await issueTestKey(db(), other, { name: "foreign" });
    const asManager = api(manager.secret);

    const listed = await asManager<List<Key>>("GET", "/api-keys");
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body.data.map((k) => k.id).sort(), [manager.id, sibling.id].sort());

    const created = await asManager<Key>("POST", "/api-keys", { name: "made by a key" });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.account_id, label.id);
    assert.deepEqual(created.body.scopes, ["catalog:read"], "the defaults it has itself");
    assert.deepEqual(created.body.verification?.sent_to, [masked(owner.email)]);
    const code = await codeFor(env, owner.email, "made by a key");
    const revealed = await asManager<Key>("POST", `/api-keys/${created.body.id}/reveal`, { code });
    assert.equal(revealed.status, 200, JSON.stringify(revealed.body));

    assertProblem(
      await asManager("POST", "/api-keys", { name: "elsewhere", account_id: other.id }),
      404,
      "resource_missing",
    );
    for (const [method, path] of [
      ["GET", `/api-keys/${foreign.id}`],
      ["POST", `/api-keys/${foreign.id}/freeze`],
      ["DELETE", `/api-keys/${foreign.id}`],
    ] as const) {
      assertProblem(await asManager(method, path), 404, "resource_missing");
    }
    assert.equal((await api(foreign.secret)("GET", "/releases")).status, 200, "the foreign key is untouched");
  });

  // Issue 26: a key that may only manage keys made a key with the default scopes.
  test("a key gives a new key at most its own scopes, asked for or by default", async (ctx) => {
    const env = await tenantEnv();
    const label = await account(env);
    await seedUser(db(), env.tenant, [{ account: label, role: "owner" }]);
    const ALL = [...DEFAULT_SCOPES, "keys:manage"];
    const cases: [maker: string[], asked: string[] | undefined, want: string[] | string][] = [
      [["keys:manage"], undefined, ["keys:manage"]],
      [["keys:manage", "catalog:read"], undefined, ["catalog:read"]],
      [ALL, undefined, DEFAULT_SCOPES],
      [["keys:manage"], ["catalog:read"], "catalog:read"],
      [["keys:manage"], DEFAULT_SCOPES, "catalog:read catalog:write royalties:read webhooks:manage"],
      [["keys:manage", "catalog:read"], ["catalog:read", "royalties:read"], "royalties:read"],
      [
        ["keys:manage", "catalog:read"],
        ["catalog:read", "keys:manage"],
        ["catalog:read", "keys:manage"],
      ],
    ];
    for (const [maker, asked, want] of cases) {
      await ctx.test(
        `[${maker.join(", ")}] asking ${asked ? `[${asked.join(", ")}]` : "nothing"}`,
        async () => {
          const key = await issueTestKey(db(), label, { scopes: maker });
          const before = await rows("select id from internal.api_keys where account_id = $1", [label.id]);
          const res = await api(key.secret)<Key>("POST", "/api-keys", asked ? { scopes: asked } : {});
          if (Array.isArray(want)) {
            assert.equal(res.status, 201, JSON.stringify(res.body));
            assert.deepEqual(res.body.scopes, want);
            const [stored] = await rows<{ scopes: string[] }>(
              "select scopes from internal.api_keys where id = $1",
              [res.body.id],
            );
            assert.deepEqual(stored?.scopes, want, "stored as answered");
            return;
          }
          const problem = assertProblem(res, 403, "insufficient_scope");
          assert.equal(problem.param, "scopes");
          assert.equal(
            res.headers.get("www-authenticate"),
            `Bearer realm="backline", error="insufficient_scope", scope="${want}"`,
          );
          for (const scope of want.split(" ")) assert.ok(problem.detail.includes(scope), problem.detail);
          const after = await rows("select id from internal.api_keys where account_id = $1", [label.id]);
          assert.equal(after.length, before.length, "nothing stored");
        },
      );
    }
    // /rest/v1 serves only the public schema: keys cannot be inserted there at all.
    const key = await issueTestKey(db(), label, { scopes: ["keys:manage"] });
    for (const profile of [undefined, "internal"]) {
      const res = await fetch(`${app.url}/rest/v1/api_keys`, {
        method: "POST",
        headers: {
          apikey: env.keys.anon_key,
          authorization: `Bearer ${key.secret}`,
          "content-type": "application/json",
          ...(profile ? { "content-profile": profile } : {}),
        },
        body: JSON.stringify({ account_id: label.id, scopes: DEFAULT_SCOPES }),
      });
      assert.ok(res.status >= 400 && res.status < 500, `${profile}: ${res.status}`);
    }
  });

  // Issue 26: asking for a new code reset the count of wrong ones, so codes could be guessed for ever.
  test("wrong codes count against the key for good: ten lock it, a new code gives no new tries, owners are told", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const owner = await signUp(env, [{ account: label, role: "owner" }]);
    const admin = await signUp(env, [{ account: label, role: "admin" }]);
    const key = await createKey(admin);
    for (let round = 0; round < 2; round++) {
      const code = await codeFor(env, owner.email, key.name);
      const wrong = code === "999999" ? "999998" : "999999";
      for (let i = 0; i < 5; i++) {
        assertProblem(await reveal(admin, key.id, wrong), 422, "verification_code_invalid");
      }
      if (round === 0) {
        assertProblem(await reveal(admin, key.id, code), 409, "verification_code_required");
        expectCreated(await admin.api("POST", `/api-keys/${key.id}/verification`));
      }
    }
    // Locked: the right code of a fresh request works no more, and no new code is sent.
    const mailsBefore = (await listMail(db(), { tenantId: env.tenant.id, to: owner.email })).length;
    assertProblem(await admin.api("POST", `/api-keys/${key.id}/verification`), 409, "api_key_reveal_locked");
    assert.equal((await listMail(db(), { tenantId: env.tenant.id, to: owner.email })).length, mailsBefore);
    assertProblem(
      await reveal(admin, key.id, await codeFor(env, owner.email, key.name)),
      409,
      "api_key_reveal_locked",
    );
    const got = await admin.api<Key & { reveal_locked_at: string | null }>("GET", `/api-keys/${key.id}`);
    assert.deepEqual([got.body.status, typeof got.body.reveal_locked_at], ["pending_reveal", "string"]);
    // Only an operator-side update could clear it; the key can still be revoked.
    const alerts = (await listMail(db(), { tenantId: env.tenant.id, to: owner.email })).filter(
      (m) => m.kind === "api_key.reveal_locked",
    );
    assert.equal(alerts.length, 1);
    assert.match(alerts[0]?.text_body ?? "", new RegExp(key.name));
    assert.doesNotMatch(alerts[0]?.text_body ?? "", /\b\d{6}\b/, "no code in the alert");
    assert.equal(
      (await listMail(db(), { tenantId: env.tenant.id, to: admin.email })).some((m) =>
        m.kind.startsWith("api_key"),
      ),
      false,
      "the admin who guessed is not told anything by mail",
    );
    const revoked = await admin.api<Key>("DELETE", `/api-keys/${key.id}`);
    assert.deepEqual([revoked.status, revoked.body.status], [200, "revoked"]);
  });

  test("wrong codes count against the account over 24 hours: twenty pause every reveal, new keys too", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const owner = await signUp(env, [{ account: label, role: "owner" }]);
    const admin = await signUp(env, [{ account: label, role: "admin" }]);
    // Two keys, ten wrong codes each (two codes each): each locks, and the account reaches twenty.
    for (let k = 0; k < 2; k++) {
      const key = await createKey(admin);
      for (let round = 0; round < 2; round++) {
        if (round > 0) expectCreated(await admin.api("POST", `/api-keys/${key.id}/verification`));
        const code = await codeFor(env, owner.email, key.name);
        const wrong = code === "999999" ? "999998" : "999999";
        for (let i = 0; i < 5; i++) {
          assertProblem(await reveal(admin, key.id, wrong), 422, "verification_code_invalid");
        }
      }
    }
    const fresh = await createKey(admin);
    const code = await codeFor(env, owner.email, fresh.name);
    const paused = await reveal(admin, fresh.id, code);
    assertProblem(paused, 429, "reveal_attempts_exceeded");
    const retryAfter = Number(paused.headers.get("retry-after"));
    assert.ok(retryAfter > 23 * 3600 && retryAfter <= 24 * 3600, `Retry-After ${retryAfter}`);
    const mail = await listMail(db(), { tenantId: env.tenant.id, to: owner.email });
    assert.deepEqual(
      [
        mail.filter((m) => m.kind === "api_key.reveal_locked").length,
        mail.filter((m) => m.kind === "api_key.reveal_limited").length,
      ],
      [2, 1],
      "each lock and the account's limit told once",
    );
    // Another account of the tenant is not affected.
    const elsewhere = await signUp(env);
    await revealedKey(env, elsewhere);
    // Once the wrong codes are older than the window, the waiting key is revealed with its code.
    await rows(
      "update internal.api_key_reveal_failures set failed_at = failed_at - interval '25 hours' where account_id = $1",
      [label.id],
    );
    const revealed = await reveal(admin, fresh.id, code);
    assert.equal(revealed.status, 200, JSON.stringify(revealed.body));
  });

  // ---------------------------------------------------------------------------------------------
  // Who may manage keys: memberships, decided by row-level security

  test("members and viewers manage no keys; admins and owners do", async (ctx) => {
    const env = await tenantEnv();
    const label = await account(env);
    const owner = await signUp(env, [{ account: label, role: "owner" }]);
    const existing = await issueTestKey(db(), label);
    for (const role of ["member", "viewer"] as const) {
      await ctx.test(`a ${role}`, async () => {
        const user = await signUp(env, [{ account: label, role }]);
        assertProblem(await user.api("POST", "/api-keys", { account_id: label.id }), 404, "resource_missing");
        const listed = await user.api<List<Key>>("GET", "/api-keys");
        assert.deepEqual([listed.status, listed.body.data, listed.body.total], [200, [], 0]);
        assertProblem(await user.api("GET", `/api-keys/${existing.id}`), 404, "resource_missing");
        assertProblem(await user.api("POST", `/api-keys/${existing.id}/freeze`), 404, "resource_missing");
      });
    }
    await ctx.test("an admin creates a key; the code goes to the owner", async () => {
      const admin = await signUp(env, [{ account: label, role: "admin" }]);
      const key = await createKey(admin);
      assert.deepEqual(key.verification?.sent_to, [masked(owner.email)]);
      assert.equal(
        (await listMail(db(), { tenantId: env.tenant.id, to: admin.email })).some(
          (m) => m.kind === "api_key.reveal",
        ),
        false,
        "an admin is not sent the code",
      );
      const revealed = await reveal(admin, key.id, await codeFor(env, owner.email, key.name));
      assert.equal(revealed.status, 200, JSON.stringify(revealed.body));
      const listed = await admin.api<List<Key>>("GET", "/api-keys");
      assert.deepEqual(listed.body.data.map((k) => k.id).sort(), [existing.id, key.id].sort());
    });
  });

  test("another account's or another tenant's key is not found, whatever the action", async () => {
    const env = await tenantEnv();
    const owner = await signUp(env);
    const label = await account(env);
    await signUp(env, [{ account: label, role: "owner" }]);
    const theirs = await issueTestKey(db(), label);
    const otherEnv = await tenantEnv();
    const stranger = await signUp(otherEnv);
    const mine = await revealedKey(env, owner);

    const cases: { who: User; id: string; method: string; action: string; body?: unknown }[] = [];
    for (const [who, id] of [
      [owner, theirs.id],
      [stranger, mine.id],
    ] as const) {
      cases.push(
        { who, id, method: "GET", action: "" },
        { who, id, method: "POST", action: "/freeze" },
        { who, id, method: "POST", action: "/unfreeze" },
        { who, id, method: "DELETE", action: "" },
        { who, id, method: "POST", action: "/reveal", body: { code: "123456" } },
        { who, id, method: "POST", action: "/verification" },
      );
    }
    for (const c of cases) {
      const res = await c.who.api(c.method, `/api-keys/${c.id}${c.action}`, c.body);
      assertProblem(res, 404, "resource_missing");
    }
    assert.deepEqual((await stranger.api<List<Key>>("GET", "/api-keys")).body.data, []);
    assert.deepEqual(
      (await owner.api<List<Key>>("GET", "/api-keys")).body.data.map((k) => k.id),
      [mine.id],
    );
    assert.equal((await api(theirs.secret)("GET", "/releases")).status, 200, "untouched");
    assert.equal((await api(mine.secret)("GET", "/releases")).status, 200, "untouched");
  });

  test("a user managing two accounts must name one", async () => {
    const env = await tenantEnv();
    const second = await account(env);
    const user = await signUp(env);
    await addMember(
      db(),
      { accountId: second.id, email: user.email, role: "owner" },
      { mailer: new Mailer(db(), { smtpUrl: undefined, from: "backline@example.com" }), publicUrl: app.url },
    );
    const res = assertProblem(
      await user.api("POST", "/api-keys", { name: "which" }),
      422,
      "validation_failed",
    );
    assert.deepEqual(
      res.errors?.map((e) => [e.param, e.code]),
      [["account_id", "required"]],
    );
    const past = await user.api("POST", "/api-keys", {
      account_id: second.id,
      expires_at: "2001-01-01T00:00:00Z",
    });
    assert.equal(assertProblem(past, 422, "validation_failed").param, "expires_at");
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const key = await createKey(user, {
      account_id: second.id,
      scopes: ["catalog:read"],
      expires_at: expiresAt,
    });
    assert.deepEqual(
      [key.account_id, key.scopes, Date.parse(String(key.expires_at))],
      [second.id, ["catalog:read"], Date.parse(expiresAt)],
    );
  });

  test("an account without an owner's address cannot verify a key: 409 no_account_owner", async () => {
    const env = await tenantEnv();
    const label = await account(env);
    const admin = await signUp(env, [{ account: label, role: "admin" }]);
    assertProblem(await admin.api("POST", "/api-keys", { name: "orphan" }), 409, "no_account_owner");
    // A refused request leaves nothing behind: no key waits for a code nobody received.
    const listed = await admin.api<List<Key>>("GET", "/api-keys");
    assert.deepEqual(
      listed.body.data.map((k) => [k.name, k.status]),
      [],
      "the refused POST /api-keys left a pending key behind",
    );
  });
});

// -----------------------------------------------------------------------------------------------
// The operator's side: `backline keys` on an embedded database

describe("backline keys (CLI)", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, PUBLIC_URL: "https://api.example.com" };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  // A migrated database to start from: this suite is about the commands, not a first start.
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test("issue, list, freeze, unfreeze and revoke a test-mode key", async () => {
    const tenant = await json("tenants", "create", "--name", "Keys Tenant");
    const label = await json("accounts", "create", "--tenant", tenant.slug, "--name", "Keyed Label");

    const issued = await json("keys", "issue", "--account", label.id, "--mode", "test", "--name", "ci");
    assert.match(issued.secret, /^bk_test_[0-9A-Za-z]{49}$/);
    assert.deepEqual(parseApiKey(issued.secret), { mode: "test" });
    assert.deepEqual(
      [issued.mode, issued.status, issued.name, issued.prefix],
      ["test", "active", "ci", issued.secret.slice(0, "bk_test_".length + 6)],
    );
    assert.notEqual(issued.account_id, label.id, "a test key belongs to the sandbox twin");
    assert.equal("key_hash" in issued, false);

    const listed = await json("keys", "list", "--account", label.id);
    assert.deepEqual(
      listed.map((k: Key) => [k.id, k.prefix, k.status]),
      [[issued.id, issued.prefix, "active"]],
    );
    for (const k of listed) assertNoSecret(k);

    for (const [command, status] of [
      ["freeze", "frozen"],
      ["unfreeze", "active"],
      ["revoke", "revoked"],
    ] as const) {
      const changed = await json("keys", command, issued.id);
      assert.deepEqual([changed.id, changed.status], [issued.id, status]);
    }

    const again = await runCli(["keys", "unfreeze", issued.id], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^backline: no API key \S+ that can be set active\n$/);
  });

  test("an unknown scope is a usage error: exit 2 with one clear line", async () => {
    const r = await runCli(
      ["keys", "issue", "--account", randomUUID(), "--scopes", "catalog:read,everything"],
      env,
    );
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
    assert.match(
      r.stderr,
      /^backline: unknown scope everything; expected some of catalog:read, .* \(see `backline keys issue --help`\)\n$/,
    );
  });
});
