import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { importRoyalties } from "../src/royalties/import.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { issueTestKey, publicApi } from "./support/public-api.ts";
import { SAMPLES, seedSampleCatalog } from "./support/royalties.ts";
import { seedAccount, seedTenant, seedUser, userToken } from "./support/seed.ts";

/**
 * The public API acting for a signed-in member (docs/public-api.md, "A member's access token"):
 * an access token from /auth/v1 with Backline-Account naming the account. Their role in that
 * account decides, the account alone is reached, and a member of another account, or of no
 * account, reaches nothing of it. Real server, real HTTP.
 */

type Problem = { code: string; param?: string; detail: string };

describeEachEngine("public API: a member's access token, acting for one account", (t) => {
  let app: RunningApp;
  let tenant: Tenant;
  let a: Account;
  let b: Account;
  let elsewhere: Account;
  const tokens: Record<string, string> = {};
  let releaseOfB = "";

  before(async () => {
    app = await startApp(t());
    const db = t().db;
    const issuer = `${app.url}/auth/v1`;
    tenant = await seedTenant(db);
    a = await seedAccount(db, tenant, "Label A");
    b = await seedAccount(db, tenant, "Label B");
    const other = await seedTenant(db);
    elsewhere = await seedAccount(db, other, "Label C");
    const users = {
      // Owner of A and a member of B: two accounts, so every call must say which.
      owner: await seedUser(db, tenant, [
        { account: a, role: "owner" },
        { account: b, role: "member" },
      ]),
      admin: await seedUser(db, tenant, [{ account: a, role: "admin" }]),
      member: await seedUser(db, tenant, [{ account: a, role: "member" }]),
      viewer: await seedUser(db, tenant, [{ account: a, role: "viewer" }]),
      ownerOfB: await seedUser(db, tenant, [{ account: b, role: "owner" }]),
      nobody: await seedUser(db, tenant, []),
    };
    for (const [name, user] of Object.entries(users))
      tokens[name] = await userToken(db, tenant, user, issuer);
    const ownerOfC = await seedUser(db, other, [{ account: elsewhere, role: "owner" }]);
    tokens.ownerOfC = await userToken(db, other, ownerOfC, `${app.url}/auth/v1`);

    await seedSampleCatalog(db, a);
    const made = await publicApi(app.url, tokens.ownerOfB)<{ id: string }>(
      "POST",
      "/releases",
      { title: "B's own", artist_name: "Bee" },
      { "backline-account": b.id },
    );
    assert.equal(made.status, 201, JSON.stringify(made.body));
    releaseOfB = made.body.id;
    for (const [format, file] of Object.entries(SAMPLES)) {
      const r = await importRoyalties(db, { tenantId: tenant.id, format, file });
      assert.equal(r.status, "completed");
    }
  });
  after(async () => {
    await app?.close();
  });

  /** A call as `who`, acting for `account` (no header when undefined). */
  const as =
    (who: string, account: string | undefined) =>
    <T = Record<string, unknown>>(method: string, path: string, body?: unknown) =>
      publicApi(app.url, tokens[who])<T>(
        method,
        path,
        body,
        account === undefined ? {} : { "backline-account": account },
      );

  test("a member with two accounts reads the one they name, and only it", async () => {
    const inA = await as("owner", a.id)<{ data: { title: string }[] }>("GET", "/releases");
    assert.equal(inA.status, 200, JSON.stringify(inA.body));
    assert.deepEqual(inA.body.data.map((r) => r.title).sort(), ["Daybreak", "Night Drive"]);
    const inB = await as("owner", b.id)<{ data: { title: string }[] }>("GET", "/releases");
    assert.deepEqual(
      inB.body.data.map((r) => r.title),
      ["B's own"],
    );
    // A release of B, asked for while acting for A: not found, as for a key of A.
    assert.equal((await as("owner", a.id)("GET", `/releases/${releaseOfB}`)).status, 404);
  });

  test("every route but key management needs the account named; a malformed one is a 400 naming the header", async () => {
    const none = await as("owner", undefined)<Problem>("GET", "/releases");
    assert.deepEqual(
      [none.status, none.body.code, none.body.param],
      [400, "account_required", "Backline-Account"],
    );
    const bad = await as("owner", "not-a-uuid")<Problem>("GET", "/releases");
    assert.deepEqual(
      [bad.status, bad.body.code, bad.body.param],
      [400, "validation_failed", "Backline-Account"],
    );
    // Key management keeps working without it, over every account the member manages.
    assert.equal((await as("owner", undefined)("GET", "/api-keys")).status, 200);
  });

  test("an account the caller is no member of is refused the same way, whatever it is", async () => {
    for (const [who, account] of [
      ["nobody", a.id],
      ["ownerOfB", a.id],
      ["owner", elsewhere.id],
      ["ownerOfC", a.id],
      ["owner", "00000000-0000-4000-8000-000000000000"],
    ] as const) {
      const r = await as(who, account)<Problem>("GET", "/releases");
      assert.deepEqual([r.status, r.body.code], [403, "account_not_accessible"], `${who} → ${account}`);
    }
  });

  test("the role decides: viewers read, members write the catalogue, owners and admins manage hooks and keys", async () => {
    const cases: [string, string, string, unknown, number][] = [
      ["viewer", "GET", "/releases", undefined, 200],
      ["viewer", "GET", "/royalties", undefined, 200],
      ["viewer", "POST", "/releases", { title: "No", artist_name: "X" }, 403],
      ["viewer", "GET", "/webhooks", undefined, 403],
      ["member", "POST", "/releases", { title: "Yes", artist_name: "X" }, 201],
      ["member", "GET", "/webhooks", undefined, 403],
      ["member", "GET", "/api-keys", undefined, 403],
      ["admin", "GET", "/webhooks", undefined, 200],
      ["admin", "GET", "/api-keys", undefined, 200],
      ["owner", "GET", "/webhooks", undefined, 200],
    ];
    for (const [who, method, path, body, status] of cases) {
      const r = await as(who, a.id)<Problem>(method, path, body);
      assert.equal(r.status, status, `${who} ${method} ${path}: ${JSON.stringify(r.body)}`);
      if (status === 403) {
        assert.equal(r.body.code, "insufficient_scope");
        assert.match(r.body.detail, new RegExp(`Your role in this account \\(${who}\\)`));
      }
    }
    // The member's release went to the account they named, made by them.
    const made = await as("member", a.id)<{ id: string; account_id: string }>("POST", "/releases", {
      title: "Mine",
      artist_name: "X",
    });
    assert.equal(made.body.account_id, a.id);
  });

  test("royalties: a member reads their account's lines and none of another's", async () => {
    const inA = await as("viewer", a.id)<{ data: unknown[]; totals: { currency: string; net: string }[] }>(
      "GET",
      "/royalties",
    );
    assert.equal(inA.status, 200);
    assert.ok(inA.body.data.length > 0, "the sample reports matched A's catalogue");
    const key = await issueTestKey(t().db, a, { scopes: ["royalties:read"] });
    const byKey = await publicApi(app.url, key.secret)<{ totals: unknown }>("GET", "/royalties");
    assert.deepEqual(inA.body.totals, byKey.body.totals, "the member sees what the account's key sees");
    const inB = await as("ownerOfB", b.id)<{ data: unknown[] }>("GET", "/royalties");
    assert.deepEqual(inB.body.data, []);
  });

  test("an account that asks aal2 refuses a member's aal1 token, and takes an aal2 one", async () => {
    await t().db.asService((tx) =>
      tx.query("update internal.accounts set require_aal2 = true where id = $1", [b.id]),
    );
    try {
      const aal1 = await as("ownerOfB", b.id)<Problem>("GET", "/releases");
      assert.deepEqual([aal1.status, aal1.body.code], [403, "aal2_required"]);
      const user = await t().db.asService(
        async (tx) =>
          (
            await tx.query<{ id: string; tenant_id: string; email: string }>(
              `select u.id, u.tenant_id, u.email from internal.users u join internal.memberships m on m.user_id = u.id
               where m.account_id = $1 and m.role = 'owner'`,
              [b.id],
            )
          ).rows[0],
      );
      assert.ok(user);
      const token = await userToken(t().db, tenant, user, `${app.url}/auth/v1`, "aal2");
      const aal2 = await publicApi(app.url, token)("GET", "/releases", undefined, {
        "backline-account": b.id,
      });
      assert.equal(aal2.status, 200);
    } finally {
      await t().db.asService((tx) =>
        tx.query("update internal.accounts set require_aal2 = false where id = $1", [b.id]),
      );
    }
  });

  test("a key may name only its own account", async () => {
    const key = await issueTestKey(t().db, a);
    const own = await publicApi(app.url, key.secret)("GET", "/releases", undefined, {
      "backline-account": a.id,
    });
    assert.equal(own.status, 200);
    const other = await publicApi(app.url, key.secret)<Problem>("GET", "/releases", undefined, {
      "backline-account": b.id,
    });
    assert.deepEqual([other.status, other.body.code], [403, "account_not_accessible"]);
  });

  test("under the owner-only preset a member reaches only what they made, as on /rest/v1", async () => {
    const db = t().db;
    const issuer = `${app.url}/auth/v1`;
    const strict = await seedTenant(db, "owner-only");
    const label = await seedAccount(db, strict, "Strict label");
    const first = await seedUser(db, strict, [{ account: label, role: "member" }]);
    const second = await seedUser(db, strict, [{ account: label, role: "member" }]);
    const call = async (user: typeof first, method: string, path: string, body?: unknown) =>
      publicApi(app.url, await userToken(db, strict, user, issuer))<{ data: { title: string }[] }>(
        method,
        path,
        body,
        { "backline-account": label.id },
      );
    assert.equal(
      (await call(first, "POST", "/releases", { title: "First's", artist_name: "X" })).status,
      201,
    );
    assert.equal(
      (await call(second, "POST", "/releases", { title: "Second's", artist_name: "Y" })).status,
      201,
    );
    assert.deepEqual(
      (await call(first, "GET", "/releases")).body.data.map((r) => r.title),
      ["First's"],
    );
    // A key of the account acts for all of it, as before.
    const key = await issueTestKey(db, label);
    const all = await publicApi(app.url, key.secret)<{ data: { title: string }[] }>("GET", "/releases");
    assert.deepEqual(all.body.data.map((r) => r.title).sort(), ["First's", "Second's"]);
  });

  test("auth.my_memberships() answers a person their own memberships, and a key or the anon role nothing", async () => {
    const db = t().db;
    const owner = await db.asService(
      async (tx) =>
        (
          await tx.query<{ user_id: string }>(
            "select user_id from internal.memberships where account_id = $1 and role = 'owner'",
            [a.id],
          )
        ).rows[0]?.user_id,
    );
    const mine = await db.withRequestContext(
      { role: "authenticated", sub: owner, tenant_id: tenant.id, aal: "aal1" },
      async (tx) =>
        (
          await tx.query<{ account_id: string; role: string }>(
            "select account_id, role from auth.my_memberships()",
          )
        ).rows,
    );
    assert.deepEqual(
      mine.map((m) => [m.account_id, m.role]).sort(),
      [
        [a.id, "owner"],
        [b.id, "member"],
      ].sort(),
    );
    const key = await issueTestKey(db, a);
    const asKey = await db.withRequestContext(
      {
        role: "authenticated",
        tenant_id: tenant.id,
        account_id: a.id,
        account_role: "member",
        api_key_id: key.id,
      },
      async (tx) => (await tx.query("select * from auth.my_memberships()")).rowCount,
    );
    assert.equal(asKey, 0);
    await assert.rejects(
      db.withRequestContext({ role: "anon", tenant_id: tenant.id }, (tx) =>
        tx.query("select * from auth.my_memberships()"),
      ),
      /permission denied/,
    );
  });

  test("a member's acts are audited as the member", async () => {
    const made = await as("member", a.id)<{ id: string }>("POST", "/releases", {
      title: "Audited",
      artist_name: "X",
    });
    assert.equal(made.status, 201);
    const changed = await as("member", a.id)("POST", `/releases/${made.body.id}/submit`);
    assert.ok([200, 202, 422].includes(changed.status), JSON.stringify(changed.body));
    const rows = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ actor_type: string; actor: string }>(
            `select actor_type, actor from internal.audit_log where object_table = 'internal.release_history'
             and after ->> 'release_id' = $1`,
            [made.body.id],
          )
        ).rows,
    );
    const memberId = JSON.parse(
      Buffer.from(String(tokens.member).split(".")[1] ?? "", "base64url").toString(),
    ).sub;
    assert.ok(rows.length > 0, "the release's history is audited");
    for (const r of rows) assert.deepEqual([r.actor_type, r.actor], ["user", memberId]);
  });
});
