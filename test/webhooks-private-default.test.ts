import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { unsafeSettings, warnUnsafeSettings } from "../src/start/process.ts";
import { WebhookDispatcher } from "../src/webhooks/dispatcher.ts";
import { loadSecretBox, newSigningSecret } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { assertFieldErrors, expectStatus, keyedAccount, publicApi } from "./support/public-api.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";

/**
 * Issue 26, item 11: the server's own address as a webhook. With no WEBHOOK_ALLOW_PRIVATE set —
 * on the embedded database as on PostgreSQL — an API key holder can neither register a loopback,
 * private or link-local URL nor, through an endpoint that got past registration (a name that
 * resolved elsewhere then), make the dispatcher connect there; the delivery log keeps no answer.
 */

type Obj = Record<string, unknown>;

describe("WEBHOOK_ALLOW_PRIVATE", () => {
  test("is off on every engine unless set, and the server warns at start when it is on", () => {
    assert.equal(loadConfig({}).webhookAllowPrivate, false, "embedded database");
    assert.equal(loadConfig({ DATABASE_URL: "postgres://u@h/db" }).webhookAllowPrivate, false, "PostgreSQL");
    assert.deepEqual(unsafeSettings(loadConfig({})), []);
    const on = loadConfig({ WEBHOOK_ALLOW_PRIVATE: "true" });
    const lines: string[] = [];
    warnUnsafeSettings(on, { warn: (_obj: unknown, msg?: string) => void lines.push(String(msg)) } as never);
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? "", /^WEBHOOK_ALLOW_PRIVATE is on: .*loopback, private and link-local/);
  });
});

describeEachEngine("webhooks: private targets refused by default", (t) => {
  let app: RunningApp;
  let receiver: WebhookReceiver;
  before(async () => {
    app = await startApp(t());
    receiver = await WebhookReceiver.start();
  });
  after(async () => {
    await app?.close();
    await receiver?.close();
  });

  const rows = async (sql: string, params: unknown[] = []) =>
    t().db.asService(async (tx) => (await tx.query<Obj>(sql, params)).rows);

  async function keyed() {
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    const { tenant } = await tenantWithKeys(t(), { settings });
    const k = await keyedAccount(t().db, { tenant });
    return { ...k, api: publicApi(app.url, k.key.secret) };
  }

  test("the default config refuses loopback, private and link-local URLs at registration and on change", async () => {
    assert.equal(app.config.webhookAllowPrivate, false);
    const { api, account } = await keyed();
    const own = new URL(app.url);
    for (const [url, code] of [
      // The server's own API, as the attacker registered it.
      [`http://127.0.0.1:${own.port}/api/public/v1/releases`, "url_not_https"],
      [`https://127.0.0.1:${own.port}/api/public/v1/releases`, "url_blocked_address"],
      ["https://localhost/hook", "url_blocked_address"],
      ["https://[::1]/hook", "url_blocked_address"],
      ["https://[::ffff:127.0.0.1]/hook", "url_blocked_address"],
      ["https://0.0.0.0/hook", "url_blocked_address"],
      ["https://169.254.169.254/latest/meta-data/", "url_blocked_address"],
      ["https://[fe80::1]/hook", "url_blocked_address"],
      ["https://10.0.0.7/hook", "url_blocked_address"],
      ["https://172.16.5.4/hook", "url_blocked_address"],
      ["https://192.168.1.1/hook", "url_blocked_address"],
      ["https://[fd00::1]/hook", "url_blocked_address"],
    ] as const) {
      assertFieldErrors(await api("POST", "/webhooks", { url, events: ["release.live"] }), [["url", code]]);
    }
    const ok = expectStatus(
      await api("POST", "/webhooks", { url: "https://93.184.216.34/hook", events: ["release.live"] }),
      201,
    ) as Obj;
    assertFieldErrors(await api("PATCH", `/webhooks/${ok.id}`, { url: `https://127.0.0.1:${own.port}/x` }), [
      ["url", "url_blocked_address"],
    ]);
    const urls = (
      await rows("select url from internal.webhook_endpoints where account_id = $1", [account.id])
    ).map((r) => r.url);
    assert.deepEqual(urls, ["https://93.184.216.34/hook"]);
  });

  test("at send time, endpoints that point at local addresses get no request and no answer logged", async () => {
    const { account, tenant } = await keyed();
    const box = loadSecretBox(app.config);
    const route = receiver.route("inside", { respond: () => ({ status: 200, body: "internal secrets" }) });
    const port = new URL(route.url).port;
    // As if they passed registration (a name that resolved to a public address then): straight into the table.
    const urls = [
      route.url,
      `https://127.0.0.1:${port}${route.path}`,
      `https://localhost:${port}${route.path}`,
      `https://[::1]:${port}${route.path}`,
    ];
    for (const url of urls) {
      await rows(
        `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext)
         values ($1, $2, '{release.live}', $3)`,
        [account.id, url, box.encrypt(newSigningSecret())],
      );
    }
    await rows(
      `insert into internal.events (tenant_id, account_id, type, data)
       values ($1, $2, 'release.live', '{"object":{"id":"r"}}'::jsonb)`,
      [tenant.id, account.id],
    );
    // The dispatcher as serve.ts makes it: allowPrivate from the configuration, the system's resolver.
    const dispatcher = new WebhookDispatcher({
      db: t().db,
      secrets: box,
      allowPrivate: app.config.webhookAllowPrivate,
      now: () => new Date(Date.now() + 1000),
    });
    try {
      assert.equal(await dispatcher.runDue(), urls.length);
    } finally {
      await dispatcher.stop();
    }
    const attempts = await rows(
      `select e.url, a.outcome, a.status_code, a.response_body from internal.webhook_attempts a
       join internal.webhook_endpoints e on e.id = a.endpoint_id
       where e.account_id = $1 order by e.url`,
      [account.id],
    );
    assert.deepEqual(
      attempts,
      [...urls]
        .sort()
        .map((url) => ({ url, outcome: "blocked_address", status_code: null, response_body: null })),
    );
    assert.equal(route.received.length, 0, "the local receiver got nothing");
  });
});
