import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { Webhook } from "standardwebhooks";
import { loadSecretBox, SecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  assertFieldErrors,
  assertProblem,
  expectStatus,
  issueTestKey,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";

/**
 * /api/public/v1/webhooks (seed 001; docs/webhooks.md): registration with a secret shown once and
 * stored encrypted, the endpoint's lifecycle, rotation, the delivery log, retry and test events;
 * the SSRF check at registration; and what another account or a key without webhooks:manage must
 * not see or do.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

const A_UUID = "00000000-0000-4000-8000-000000000000";

describeEachEngine("public api: webhooks", (t) => {
  let app: RunningApp;
  let strictApp: RunningApp;
  before(async () => {
    app = await startApp(t(), { WEBHOOK_ALLOW_PRIVATE: "true" });
    strictApp = await startApp(t(), { WEBHOOK_ALLOW_PRIVATE: "false" });
  });
  after(async () => {
    await app?.close();
    await strictApp?.close();
  });

  async function keyed(scopes?: string[], tenant?: Awaited<ReturnType<typeof tenantWithKeys>>["tenant"]) {
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    const k = await keyedAccount(t().db, {
      tenant: tenant ?? (await tenantWithKeys(t(), { settings })).tenant,
      ...(scopes ? { scopes } : {}),
    });
    return { ...k, api: publicApi(app.url, k.key.secret), strict: publicApi(strictApp.url, k.key.secret) };
  }

  const rows = async (sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<Obj>(sql, params)).rows);

  const register = async (api: Api, body: Obj = {}) =>
    expectStatus(
      await api("POST", "/webhooks", {
        url: "https://hooks.example.com/backline",
        events: ["release.live"],
        ...body,
      }),
      201,
    ) as Obj & { id: string; secret: string };

  test("register: the secret is shown once and stored only encrypted; list, get, update, delete", async () => {
    const { api, account } = await keyed();
    const created = await register(api, {
      events: ["release.live", "release.rejected", "release.live"],
      description: "Label CMS",
    });
    assert.match(created.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(created.secret.slice(6), "base64").length, 32);
    assert.deepEqual(
      {
        object: created.object,
        url: created.url,
        events: created.events,
        description: created.description,
        enabled: created.enabled,
      },
      {
        object: "webhook_endpoint",
        url: "https://hooks.example.com/backline",
        events: ["release.live", "release.rejected"],
        description: "Label CMS",
        enabled: true,
      },
    );

    // At rest: ciphertext only, which the server's key opens to the secret.
    const [stored] = await rows("select * from internal.webhook_endpoints where id = $1", [created.id]);
    assert.equal(stored?.account_id, account.id);
    const ciphertext = String(stored?.secret_ciphertext);
    assert.ok(!ciphertext.includes(created.secret.slice(6)), "not stored in plain text");
    assert.ok(!JSON.stringify(stored).includes(created.secret.slice(6)));
    assert.equal(loadSecretBox(app.config).decrypt(ciphertext), created.secret);

    // Never shown again.
    const got = expectStatus(await api("GET", `/webhooks/${created.id}`), 200) as Obj;
    assert.equal(got.secret, undefined);
    assert.equal(JSON.stringify(got).includes("secret_ciphertext"), false);
    const list = expectStatus(await api("GET", "/webhooks"), 200) as { data: Obj[]; total: number };
    assert.deepEqual(
      list.data.map((e) => [e.id, e.secret]),
      [[created.id, undefined]],
    );

    const updated = expectStatus(
      await api("PATCH", `/webhooks/${created.id}`, {
        url: "https://hooks.example.com/v2",
        events: ["release.approved"],
        enabled: false,
      }),
      200,
    ) as Obj;
    assert.deepEqual(
      [updated.url, updated.events, updated.enabled, updated.disabled_reason],
      ["https://hooks.example.com/v2", ["release.approved"], false, "Disabled by the account."],
    );
    const enabled = expectStatus(
      await api("PATCH", `/webhooks/${created.id}`, { enabled: true }),
      200,
    ) as Obj;
    assert.deepEqual([enabled.enabled, enabled.disabled_reason], [true, null]);

    assert.deepEqual(expectStatus(await api("DELETE", `/webhooks/${created.id}`), 200), {
      id: created.id,
      object: "webhook_endpoint",
      deleted: true,
    });
    assertProblem(await api("GET", `/webhooks/${created.id}`), 404, "resource_missing");
    assertProblem(await api("DELETE", `/webhooks/${created.id}`), 404, "resource_missing");
  });

  test("bad input: every failing field at once, and nothing is stored", async () => {
    const { api, account } = await keyed();
    const cases: [Obj, string[]][] = [
      [{}, ["url", "events"]],
      [{ url: "https://x.example.com", events: [] }, ["events"]],
      [{ url: "https://x.example.com", events: ["release.bogus"] }, ["events[0]"]],
      [{ url: "https://x.example.com", events: ["release.live"], secret: "mine" }, ["secret"]],
      [{ url: "not a url", events: ["release.live"] }, ["url"]],
      [{ url: "ftp://x.example.com/", events: ["release.live"] }, ["url"]],
      [{ url: `https://x.example.com/${"a".repeat(2100)}`, events: ["release.live"] }, ["url"]],
    ];
    for (const [body, params] of cases) {
      const problem = assertProblem(await api("POST", "/webhooks", body), 422, "validation_failed");
      assert.deepEqual(
        (problem.errors ?? []).map((e) => e.param).sort(),
        [...params].sort(),
        `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(problem.errors)}`,
      );
    }
    assert.deepEqual(
      await rows("select id from internal.webhook_endpoints where account_id = $1", [account.id]),
      [],
    );
  });

  test("SSRF at registration: only https to public addresses, unless the operator allows private ones", async () => {
    const { strict, api, account } = await keyed();
    for (const [url, code] of [
      ["http://hooks.example.com/", "url_not_https"],
      ["https://127.0.0.1/hook", "url_blocked_address"],
      ["https://10.1.2.3/hook", "url_blocked_address"],
      ["https://169.254.169.254/latest/meta-data", "url_blocked_address"],
      ["https://[::1]/hook", "url_blocked_address"],
      ["https://localhost/hook", "url_blocked_address"],
      ["https://192.168.1.20:8443/hook", "url_blocked_address"],
    ] as const) {
      assertFieldErrors(await strict("POST", "/webhooks", { url, events: ["release.live"] }), [
        ["url", code],
      ]);
    }
    const allowed = expectStatus(
      await strict("POST", "/webhooks", { url: "https://93.184.216.34/hook", events: ["release.live"] }),
      201,
    ) as Obj;
    assertFieldErrors(await strict("PATCH", `/webhooks/${allowed.id}`, { url: "https://127.0.0.1/x" }), [
      ["url", "url_blocked_address"],
    ]);
    // Development: a local receiver is fine where the operator allows it.
    expectStatus(
      await api("POST", "/webhooks", { url: "http://127.0.0.1:9/hook", events: ["release.live"] }),
      201,
    );
    const urls = (
      await rows("select url from internal.webhook_endpoints where account_id = $1 order by created_at", [
        account.id,
      ])
    ).map((r) => r.url);
    assert.deepEqual(urls, ["https://93.184.216.34/hook", "http://127.0.0.1:9/hook"]);
  });

  test("rotation: a new secret, the previous one kept for the window; both verify a signed message", async () => {
    const { api } = await keyed();
    const created = await register(api);
    const rotated = expectStatus(
      await api("POST", `/webhooks/${created.id}/rotate-secret`, { previous_secret_hours: 2 }),
      200,
    ) as Obj & { secret: string; previous_secret_expires_at: string };
    assert.notEqual(rotated.secret, created.secret);
    const hours = (Date.parse(rotated.previous_secret_expires_at) - Date.now()) / 3_600_000;
    assert.ok(hours > 1.9 && hours <= 2, `window ${hours} h`);
    const [row] = await rows(
      "select secret_ciphertext, previous_secret_ciphertext from internal.webhook_endpoints where id = $1",
      [created.id],
    );
    const box = loadSecretBox(app.config);
    assert.equal(box.decrypt(String(row?.secret_ciphertext)), rotated.secret);
    assert.equal(box.decrypt(String(row?.previous_secret_ciphertext)), created.secret);
    // What the dispatcher signs with while both are in force verifies with either secret.
    const { signatureHeaders } = await import("../src/webhooks/signing.ts");
    const body = JSON.stringify({ id: "e1", type: "release.live" });
    const ts = Math.floor(Date.now() / 1000);
    const headers = signatureHeaders([rotated.secret, created.secret], "e1", ts, body);
    for (const secret of [created.secret, rotated.secret]) {
      assert.deepEqual(new Webhook(secret).verify(body, headers), { id: "e1", type: "release.live" });
    }
    const now = expectStatus(
      await api("POST", `/webhooks/${created.id}/rotate-secret`, { previous_secret_hours: 0 }),
      200,
    ) as Obj;
    assert.equal(now.previous_secret_expires_at, null, "0 hours: the previous secret stops at once");
    assertProblem(await api("POST", `/webhooks/${A_UUID}/rotate-secret`), 404, "resource_missing");
  });

  // Issue 26: a retried create made two endpoints; a retried rotation lost the secret.
  test("Idempotency-Key: a retried registration makes one endpoint and answers the same secret again", async () => {
    const { api, account } = await keyed();
    const body = { url: "https://hooks.example.com/once", events: ["release.live"] };
    const headers = { "idempotency-key": "register-once" };
    const first = await api<Obj & { id: string; secret: string }>("POST", "/webhooks", body, headers);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.headers.get("idempotent-replayed"), null);
    const again = await api<Obj & { id: string; secret: string }>("POST", "/webhooks", body, headers);
    assert.equal(again.status, 201);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(again.body, first.body, "the same answer, the secret shown once included");
    assert.deepEqual(
      (await rows("select id from internal.webhook_endpoints where account_id = $1", [account.id])).map(
        (r) => r.id,
      ),
      [first.body.id],
    );

    // Kept only encrypted: no column of the record holds the secret.
    const kept = await rows(
      "select response_body, response_ciphertext from internal.idempotency_keys where key = 'register-once'",
    );
    assert.equal(kept.length, 1);
    assert.equal(kept[0]?.response_body, null);
    assert.ok(!JSON.stringify(kept).includes(first.body.secret.slice(6)), "no plain secret in the table");
    assert.deepEqual(
      JSON.parse(loadSecretBox(app.config).decrypt(String(kept[0]?.response_ciphertext))),
      first.body,
    );

    // Another key of the account reusing the Idempotency-Key never gets the secret.
    const sibling = await issueTestKey(t().db, account);
    const other = await publicApi(app.url, sibling.secret)("POST", "/webhooks", body, headers);
    assertProblem(other, 422, "idempotency_key_reused");
    assert.equal(JSON.stringify(other.body).includes(first.body.secret), false);
    // Sealed under a master key the server no longer has: a clear 409, never a 500 or a second endpoint.
    await rows("update internal.idempotency_keys set response_ciphertext = $1 where key = 'register-once'", [
      new SecretBox(randomBytes(32)).encrypt(JSON.stringify(first.body)),
    ]);
    assertProblem(await api("POST", "/webhooks", body, headers), 409, "idempotency_response_unavailable");
    assert.equal(
      (await rows("select id from internal.webhook_endpoints where account_id = $1", [account.id])).length,
      1,
    );
    // The same key with another body is refused as for every POST.
    assertProblem(
      await api("POST", "/webhooks", { ...body, url: "https://hooks.example.com/twice" }, headers),
      422,
      "idempotency_key_reused",
    );
  });

  test("Idempotency-Key: a retried rotation rotates once and answers the same new secret again", async () => {
    const { api } = await keyed();
    const created = await register(api);
    const path = `/webhooks/${created.id}/rotate-secret`;
    const headers = { "idempotency-key": `rotate-${created.id}` };
    const first = await api<Obj & { secret: string }>("POST", path, { previous_secret_hours: 1 }, headers);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const again = await api<Obj & { secret: string }>("POST", path, { previous_secret_hours: 1 }, headers);
    assert.deepEqual([again.status, again.headers.get("idempotent-replayed")], [200, "true"]);
    assert.deepEqual(again.body, first.body);
    const [row] = await rows(
      "select secret_ciphertext, previous_secret_ciphertext from internal.webhook_endpoints where id = $1",
      [created.id],
    );
    const box = loadSecretBox(app.config);
    assert.equal(
      box.decrypt(String(row?.secret_ciphertext)),
      first.body.secret,
      "the secret the client holds",
    );
    assert.equal(
      box.decrypt(String(row?.previous_secret_ciphertext)),
      created.secret,
      "rotated once, not twice",
    );
    const [kept] = await rows(
      "select response_body, response_ciphertext from internal.idempotency_keys where key = $1",
      [headers["idempotency-key"]],
    );
    assert.equal(kept?.response_body, null);
    assert.ok(!JSON.stringify(kept).includes(first.body.secret.slice(6)));
    // Without the header, each call rotates.
    const fresh = expectStatus(await api("POST", path, {}), 200) as Obj;
    assert.notEqual(fresh.secret, first.body.secret);
  });

  test("test event and the delivery log; retry of a delivery", async () => {
    const { api, account } = await keyed();
    const created = await register(api, { url: "http://127.0.0.1:9/unreachable" });
    const sent = expectStatus(await api("POST", `/webhooks/${created.id}/test`), 202) as Obj;
    assert.deepEqual(
      [sent.object, sent.event_type, sent.status, sent.endpoint_id],
      ["webhook_delivery", "webhook.test", "pending", created.id],
    );
    const [event] = await rows("select account_id, type, data from internal.events where id = $1", [
      sent.event_id,
    ]);
    assert.equal(event?.account_id, account.id);
    assert.equal((event?.data as { object: Obj } | undefined)?.object.endpoint_id, created.id);

    const log = expectStatus(await api("GET", `/webhooks/${created.id}/deliveries`), 200) as {
      data: Obj[];
      total: number;
    };
    assert.deepEqual(
      log.data.map((d) => [d.id, d.event_type, d.attempt_log]),
      [[sent.id, "webhook.test", []]],
    );
    assert.deepEqual(
      (
        expectStatus(await api("GET", `/webhooks/${created.id}/deliveries?status=succeeded`), 200) as {
          data: Obj[];
        }
      ).data,
      [],
    );
    const retried = expectStatus(
      await api("POST", `/webhooks/${created.id}/deliveries/${sent.id}/retry`),
      202,
    ) as Obj;
    assert.equal(retried.status, "pending");
    await t().db.asService((tx) =>
      tx.query(
        "update internal.webhook_deliveries set status = 'succeeded', completed_at = now() where id = $1",
        [sent.id],
      ),
    );
    assertProblem(
      await api("POST", `/webhooks/${created.id}/deliveries/${sent.id}/retry`),
      409,
      "delivery_succeeded",
    );
    assertProblem(
      await api("POST", `/webhooks/${created.id}/deliveries/${A_UUID}/retry`),
      404,
      "resource_missing",
    );
  });

  test("an event reaches the deliveries of the endpoints that subscribed to it, in its own transaction", async () => {
    const { api, account, tenant } = await keyed();
    const live = await register(api, { events: ["release.live"] });
    const rejected = await register(api, { events: ["release.rejected"] });
    const off = await register(api, { events: ["release.live"] });
    expectStatus(await api("PATCH", `/webhooks/${off.id}`, { enabled: false }), 200);
    const [event] = await t().db.asService(async (tx) => {
      const r = await tx.query<{ id: string }>(
        "insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, 'release.live', '{\"object\": {}}') returning id",
        [tenant.id, account.id],
      );
      return r.rows;
    });
    const deliveries = await rows("select endpoint_id from internal.webhook_deliveries where event_id = $1", [
      event?.id,
    ]);
    assert.deepEqual(
      deliveries.map((d) => d.endpoint_id),
      [live.id],
    );
    assert.ok(rejected.id);
    // A transaction that rolls back leaves neither the event nor its deliveries.
    await assert.rejects(
      t().db.asService(async (tx) => {
        await tx.query(
          "insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, 'release.live', '{\"object\": {}}')",
          [tenant.id, account.id],
        );
        throw new Error("rolled back");
      }),
    );
    assert.equal(
      (await rows("select id from internal.webhook_deliveries where endpoint_id = $1", [live.id])).length,
      1,
    );
  });

  test("royalties.imported needs royalties:read as well: it carries the account's revenue", async () => {
    const hooks = await keyed(["webhooks:manage", "catalog:read"]);
    const refused = assertProblem(
      await hooks.api("POST", "/webhooks", {
        url: "https://hooks.example.com/backline",
        events: ["release.live", "royalties.imported"],
      }),
      403,
      "insufficient_scope",
    );
    assert.equal(refused.param, "events");
    const endpoint = await register(hooks.api, { events: ["release.live"] });
    const patched = await hooks.api("PATCH", `/webhooks/${endpoint.id}`, { events: ["royalties.imported"] });
    assert.equal(assertProblem(patched, 403, "insufficient_scope").param, "events");
    assert.match(patched.headers.get("www-authenticate") ?? "", /scope="royalties:read"/);
    const [row] = await rows("select events from internal.webhook_endpoints where id = $1", [endpoint.id]);
    assert.deepEqual(row?.events, ["release.live"], "nothing changed");
    const both = await keyed(["webhooks:manage", "royalties:read"]);
    await register(both.api, { events: ["royalties.imported"] });
  });

  test("release events need catalog:read: a key without it registers none", async () => {
    const royaltiesOnly = await keyed(["webhooks:manage", "royalties:read"]);
    const res = await royaltiesOnly.api("POST", "/webhooks", {
      url: "https://hooks.example.com/backline",
      events: ["release.live"],
    });
    assert.equal(assertProblem(res, 403, "insufficient_scope").param, "events");
    assert.match(
      res.headers.get("www-authenticate") ?? "",
      /error="insufficient_scope", scope="catalog:read"/,
    );
    assert.deepEqual(
      await rows("select id from internal.webhook_endpoints where account_id = $1", [
        royaltiesOnly.account.id,
      ]),
      [],
    );
  });

  // Issue 26: a key with webhooks:manage alone pointed the account's royalties endpoint at itself.
  test("a key that may not read royalties cannot change, rotate or remove an endpoint that carries them", async (ctx) => {
    const owner = await keyed(); // every scope but keys:manage
    const revenue = await register(owner.api, {
      url: "https://erp.example.com/royalties",
      events: ["royalties.imported", "release.live"],
    });
    const weak = await issueTestKey(t().db, owner.account, { scopes: ["webhooks:manage"] });
    const catalogHooks = await issueTestKey(t().db, owner.account, {
      scopes: ["webhooks:manage", "catalog:read"],
    });
    const [before] = await rows("select * from internal.webhook_endpoints where id = $1", [revenue.id]);
    const attacks: [name: string, method: string, path: string, body?: Obj][] = [
      ["redirect its URL", "PATCH", `/webhooks/${revenue.id}`, { url: "https://attacker.example.net/steal" }],
      ["change its description", "PATCH", `/webhooks/${revenue.id}`, { description: "mine now" }],
      ["disable it", "PATCH", `/webhooks/${revenue.id}`, { enabled: false }],
      ["drop royalties from it", "PATCH", `/webhooks/${revenue.id}`, { events: ["release.live"] }],
      ["rotate its secret", "POST", `/webhooks/${revenue.id}/rotate-secret`, {}],
      ["delete it", "DELETE", `/webhooks/${revenue.id}`],
    ];
    for (const [secretName, secret] of [
      ["webhooks:manage", weak.secret],
      ["webhooks:manage + catalog:read", catalogHooks.secret],
    ] as const) {
      for (const [name, method, path, body] of attacks) {
        await ctx.test(`${secretName}: ${name}`, async () => {
          const res = await publicApi(app.url, secret)(method, path, body);
          const problem = assertProblem(res, 403, "insufficient_scope");
          assert.match(problem.detail, /royalties\.imported/);
          assert.match(res.headers.get("www-authenticate") ?? "", /scope="(catalog:read )?royalties:read"/);
          assert.equal("secret" in (res.body as Obj), false);
        });
      }
    }
    const [after] = await rows("select * from internal.webhook_endpoints where id = $1", [revenue.id]);
    assert.deepEqual(after, before, "the endpoint is exactly as it was");
    // It may still see the endpoint (webhooks:manage), and a key that may read royalties changes it.
    expectStatus(await publicApi(app.url, weak.secret)("GET", `/webhooks/${revenue.id}`), 200);
    const moved = expectStatus(
      await owner.api("PATCH", `/webhooks/${revenue.id}`, { url: "https://erp.example.com/v2" }),
      200,
    ) as Obj;
    assert.equal(moved.url, "https://erp.example.com/v2");
  });

  test("security: another account's endpoints are 404; keys without webhooks:manage are 403", async () => {
    const mine = await keyed();
    const endpoint = await register(mine.api);
    const sent = expectStatus(await mine.api("POST", `/webhooks/${endpoint.id}/test`), 202) as Obj;
    const sameTenant = await keyed(undefined, mine.tenant);
    const otherTenant = await keyed();
    for (const other of [sameTenant, otherTenant]) {
      assert.deepEqual((expectStatus(await other.api("GET", "/webhooks"), 200) as { data: Obj[] }).data, []);
      for (const [method, path, body] of [
        ["GET", `/webhooks/${endpoint.id}`, undefined],
        ["PATCH", `/webhooks/${endpoint.id}`, { enabled: false }],
        ["DELETE", `/webhooks/${endpoint.id}`, undefined],
        ["POST", `/webhooks/${endpoint.id}/rotate-secret`, undefined],
        ["GET", `/webhooks/${endpoint.id}/deliveries`, undefined],
        ["POST", `/webhooks/${endpoint.id}/deliveries/${sent.id}/retry`, undefined],
        ["POST", `/webhooks/${endpoint.id}/test`, undefined],
      ] as const) {
        assertProblem(await other.api(method, path, body), 404, "resource_missing");
      }
    }
    const [still] = await rows(
      "select enabled, secret_ciphertext from internal.webhook_endpoints where id = $1",
      [endpoint.id],
    );
    assert.equal(still?.enabled, true, "nothing changed");

    const catalogOnly = await keyed(["catalog:read", "catalog:write"], mine.tenant);
    for (const [method, path] of [
      ["GET", "/webhooks"],
      ["POST", "/webhooks"],
      ["GET", `/webhooks/${endpoint.id}`],
    ] as const) {
      assertProblem(
        await catalogOnly.api(
          method,
          path,
          method === "POST" ? { url: "https://a.example.com", events: ["release.live"] } : undefined,
        ),
        403,
        "insufficient_scope",
      );
    }
  });
});
