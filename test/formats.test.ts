import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { timestamp } from "../src/http/formats.ts";
import { importRoyalties } from "../src/royalties/import.ts";
import { voidImport } from "../src/royalties/void.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import type { Tenant } from "../src/tenancy/tenants.ts";
import { WebhookDispatcher } from "../src/webhooks/dispatcher.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine, testSecrets } from "./support/db.ts";
import { schemaDepartures, TIMESTAMP_RE, valueDepartures } from "./support/formats.ts";
import { completeRelease, expectStatus, isrcs, keyedAccount, publicApi } from "./support/public-api.ts";
import { SAMPLES, seedSampleCatalog } from "./support/royalties.ts";
import { type Route, WebhookReceiver } from "./support/webhook-receiver.ts";

/**
 * One way to write a number and a time (docs/public-api.md, "Formats"; issue 29): on
 * /api/public/v1, /admin/v1 and in webhook payloads a time is RFC 3339 in UTC with milliseconds,
 * money a decimal string beside its currency, a count an integer. Held two ways: every schema of
 * the served OpenAPI documents (their webhooks section is the payloads' schema) is walked for a
 * departure; and real answers and real webhook deliveries, on each engine, are read against the
 * same rules, the payloads also against their schema.
 */

type Obj = Record<string, unknown>;
// ajv-formats is CommonJS: its default export is the function itself, or under .default.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

const noDepartures = (what: string, departures: { at: string; problem: string }[]) =>
  assert.deepEqual(
    departures.map((d) => `${d.at}: ${d.problem}`),
    [],
    `${what} departs from the formats (docs/public-api.md, "Formats")`,
  );

/**
 * A value's shape: times and amounts (strings of digits and punctuation) with every digit as 9,
 * other strings and scalars by their type. Two engines that write alike give the same shapes.
 */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shape);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, /(^|_)id$/.test(k) ? "id" : shape(v)]),
    );
  }
  if (typeof value === "string")
    return /^[-+.:TZ 0-9]+$/.test(value) ? value.replace(/[0-9]/g, "9") : "string";
  return typeof value;
}

describe("the walker finds what departs", () => {
  test("money as a number or without a currency, a count as a string, a time with an offset or no ms", () => {
    const doc = {
      openapi: "3.1.0",
      paths: {
        "/things": {
          get: {
            parameters: [{ name: "since", in: "query", schema: { type: "string", format: "date-time" } }],
            responses: {
              200: { content: { "application/json": { schema: { $ref: "#/components/schemas/Thing" } } } },
            },
          },
        },
      },
      webhooks: {
        "thing.done": {
          post: {
            requestBody: {
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: { units: { type: "string" }, created: { type: "string" } },
                  },
                },
              },
            },
          },
        },
      },
      components: {
        schemas: {
          Thing: {
            type: "object",
            properties: {
              revenue: { type: "number" },
              net: { type: "string", pattern: "^-?\\d+(\\.\\d+)?$" },
              streams: { anyOf: [{ type: "number" }, { type: "null" }] },
              updated_at: { type: "string", format: "date-time" },
              period_start: { type: "string" },
              // An amount under a count-like name is money when its schema says so, and then needs
              // its currency; a list named like money is a list.
              payments_total: { type: "string", pattern: "^-?\\d+(\\.\\d+)?$" },
              earnings: { type: "array", items: { type: "object" } },
            },
          },
          Statement: {
            type: "object",
            properties: {
              currency: { type: "string", pattern: "^[A-Z]{3}$" },
              payments_total: { type: "string", pattern: "^-?\\d+(\\.\\d+)?$" },
              earnings: { type: "array", items: { type: "object" } },
            },
          },
        },
      },
    };
    const problems = schemaDepartures(doc).map((d) => d.problem);
    const has = (re: RegExp) =>
      assert.ok(
        problems.some((p) => re.test(p)),
        `${re} in ${problems.join("\n")}`,
      );
    has(/Thing\.revenue: money must be the Money schema/);
    has(/Thing\.net: money must have a currency beside it/);
    has(/Thing\.streams: a count must be an integer/);
    has(/Thing\.updated_at: a time answered must be the Timestamp schema/);
    has(/Thing\.period_start: a date must be format: date/);
    has(/since: a time read must be the TimestampInput schema/);
    has(/units: a count must be an integer/);
    has(/created: a time answered must be the Timestamp schema/);
    has(/Thing\.payments_total: money must have a currency beside it/);
    assert.ok(!problems.some((p) => /payments_total: a count|earnings: money/.test(p)), problems.join("\n"));
    assert.ok(
      !problems.some((p) => p.includes("Statement.")),
      "a statement's amounts beside its currency pass",
    );
    const values = valueDepartures({
      created_at: "2026-11-26T03:45:12.345678+00:00",
      totals: [{ currency: "EUR", units: "12", net: 1.5 }],
      gross: "1.00",
      statement: { currency: "EUR", payments_total: "-100.00", earnings: [] },
    }).map((d) => `${d.at} ${d.problem}`);
    assert.equal(values.length, 5, values.join("\n"));
  });
});

const SHAPES = new Map<string, unknown>();

describeEachEngine("formats: times, money and counts", (t) => {
  let app: RunningApp;
  let receiver: WebhookReceiver;
  let dispatcher: WebhookDispatcher;
  let tenant: Tenant;
  let keys: TenantKeys;
  let api: ReturnType<typeof publicApi>;
  let accountId: string;
  let catalog: Awaited<ReturnType<typeof seedSampleCatalog>>;
  const nextIsrc = isrcs("QZFMT");

  before(async () => {
    receiver = await WebhookReceiver.start();
    app = await startApp(t(), { WEBHOOK_ALLOW_PRIVATE: "true" });
    ({ tenant, keys } = await tenantWithKeys(t(), {
      settings: { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } },
    }));
    const k = await keyedAccount(t().db, {
      tenant,
      scopes: ["catalog:read", "catalog:write", "royalties:read", "webhooks:manage", "keys:manage"],
    });
    accountId = k.account.id;
    api = publicApi(app.url, k.key.secret);
    dispatcher = new WebhookDispatcher({
      db: t().db,
      secrets: testSecrets(),
      allowPrivate: true,
      pollMs: 50,
    });
    dispatcher.start();
    // The sample reports' catalog, delivered, in this account: a royalty import credits it.
    catalog = await seedSampleCatalog(t().db, k.account);
  });
  after(async () => {
    await dispatcher?.stop();
    await app?.close();
    await receiver?.close();
  });

  const admin = async (path: string): Promise<Obj> => {
    const res = await fetch(`${app.url}/admin/v1${path}`, { headers: { apikey: keys.service_role_key } });
    assert.equal(res.status, 200, `GET /admin/v1${path}`);
    return (await res.json()) as Obj;
  };
  const documents = async () => ({
    public: (await (await fetch(`${app.url}/api/public/v1/openapi.json`)).json()) as Obj,
    admin: (await (await fetch(`${app.url}/admin/v1/openapi.json`)).json()) as Obj,
  });

  test("every schema of the served documents, the webhook payloads' included, keeps the formats", async () => {
    const docs = await documents();
    noDepartures("/api/public/v1/openapi.json", schemaDepartures(docs.public));
    noDepartures("/admin/v1/openapi.json", schemaDepartures(docs.admin));
    // The payloads' schemas are there, one per event type: what the next test validates against.
    const webhooks = Object.keys(docs.public.webhooks as Obj);
    for (const type of ["release.submitted", "royalties.imported", "royalties.voided"]) {
      assert.ok(webhooks.includes(type), type);
    }
  });

  test("real answers and webhook deliveries: RFC 3339 UTC ms, decimal strings with their currency, integers", async () => {
    const current = receiver.route("current");
    const legacy = receiver.route("legacy");
    const events = ["release.submitted", "royalties.imported", "royalties.voided"];
    const hook = expectStatus(await api<Obj>("POST", "/webhooks", { url: current.url, events }), 201);
    assert.equal(hook.payload_version, "1.1", "a new endpoint gets the current payload version");
    const old = expectStatus(
      await api<Obj>("POST", "/webhooks", { url: legacy.url, events, payload_version: "1.0" }),
      201,
    );
    assert.equal(old.payload_version, "1.0");

    // The catalog: a release with a track, submitted (release.submitted).
    const release = expectStatus(
      await api<Obj & { id: string }>("POST", "/releases", completeRelease()),
      201,
    );
    expectStatus(
      await api("POST", `/releases/${release.id}/tracks`, { title: "T", isrc: nextIsrc(), duration: 200 }),
      201,
    );
    expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
    // Royalties: the sample report imported (royalties.imported), then voided (royalties.voided).
    const imported = await importRoyalties(t().db, {
      tenantId: tenant.id,
      format: "backline",
      file: SAMPLES.backline,
    });
    assert.equal(imported.status, "completed");
    const importId = imported.status === "completed" ? imported.report.id : "";

    // A takedown with a store's times: they live in jsonb (takedown_requests.stores), PostgreSQL's text.
    expectStatus(await api("POST", `/releases/${catalog.nightDrive}/takedown`, { reason: "Formats" }), 202);
    await t().db.asService((tx) =>
      tx.query(
        `insert into internal.release_deliveries (release_id, account_id, store, action, status, delivered_at)
         values ($1, $2, 'spotify', 'takedown', 'takedown_sent', now())`,
        [catalog.nightDrive, accountId],
      ),
    );

    const answers: Record<string, unknown> = {
      takedown: expectStatus(await api("GET", `/releases/${catalog.nightDrive}/status`), 200),
      release: expectStatus(await api("GET", `/releases/${release.id}`), 200),
      releases: expectStatus(await api("GET", "/releases?limit=5"), 200),
      status: expectStatus(await api("GET", `/releases/${release.id}/status`), 200),
      keys: expectStatus(await api("GET", "/api-keys"), 200),
      webhooks: expectStatus(await api("GET", "/webhooks"), 200),
      royalties: expectStatus(await api("GET", "/royalties"), 200),
      byStore: expectStatus(await api("GET", "/royalties?group_by=store"), 200),
      review: await admin("/reviews"),
      adminRelease: await admin(`/releases/${release.id}`),
      imports: await admin("/royalty-imports"),
    };
    for (const [name, body] of Object.entries(answers)) noDepartures(name, valueDepartures(body));

    // Spot checks of the rules on fields every answer above has.
    const takedown = (answers.takedown as { takedown: { stores: Obj[] } }).takedown;
    assert.match(String(takedown.stores[0]?.sent_at), TIMESTAMP_RE, "a takedown store's sent_at, from jsonb");
    const r = answers.release as Obj;
    for (const k of ["created_at", "updated_at", "submitted_at"]) assert.match(String(r[k]), TIMESTAMP_RE, k);
    const royalties = answers.royalties as { data: Obj[]; totals: Obj[] };
    assert.ok(royalties.data.length > 0);
    assert.equal(typeof royalties.data[0]?.units, "number");
    assert.match(String(royalties.totals[0]?.net), /^-?\d+(\.\d+)?$/);
    const report = (
      answers.imports as { data: { id: string; totals: Obj[]; started_at: string }[] }
    ).data.find((i) => i.id === importId);
    assert.ok(report);
    assert.equal(typeof report.totals[0]?.units, "number", "an import's units are an integer on /admin/v1");
    assert.match(report.started_at, TIMESTAMP_RE);

    await voidImport(t().db, importId, { reason: "wrong period", via: "cli", tenantId: tenant.id });

    // What the endpoints received: payload 1.1 keeps the formats and its schema; 1.0 is as before.
    const got = async (route: Route) =>
      (await receiver.waitFor(route, 3, 20_000)).map(
        (x) => JSON.parse(x.body) as Obj & { type: string; data: Obj },
      );
    const sent = await got(current);
    const sentLegacy = await got(legacy);
    const schemas = (await documents()).public;
    const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
    ajv.addSchema(
      { $id: "urn:backline:formats:doc", components: schemas.components },
      "urn:backline:formats:doc",
    );
    for (const event of sent) {
      noDepartures(event.type, valueDepartures(event));
      const op = (schemas.webhooks as Obj)[event.type] as { post: { requestBody: { content: Obj } } };
      const schema = (op.post.requestBody.content["application/json"] as { schema: Obj }).schema;
      const validate = ajv.compile(
        JSON.parse(
          JSON.stringify(schema).replaceAll('"#/components', '"urn:backline:formats:doc#/components'),
        ),
      );
      assert.ok(validate(event), `${event.type}: ${ajv.errorsText(validate.errors)}`);
    }
    const byType = (list: typeof sent, type: string) =>
      list.find((e) => e.type === type) as Obj & { data: Obj };
    const submitted = byType(sent, "release.submitted").data.object as Obj;
    const submittedLegacy = byType(sentLegacy, "release.submitted").data.object as Obj;
    // 1.0 carries the row's times as PostgreSQL wrote them (microseconds, an offset); 1.1 the same
    // instants in the one format.
    assert.match(
      String(submittedLegacy.updated_at),
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}$/,
    );
    assert.equal(submitted.updated_at, timestamp(String(submittedLegacy.updated_at)));
    for (const type of ["royalties.imported", "royalties.voided"]) {
      const total = ((byType(sent, type).data.object as Obj).totals as Obj[])[0] as Obj;
      const totalLegacy = ((byType(sentLegacy, type).data.object as Obj).totals as Obj[])[0] as Obj;
      assert.equal(typeof total.units, "number", `${type}: units an integer in 1.1`);
      assert.equal(typeof totalLegacy.units, "string", `${type}: units a decimal string in 1.0, as before`);
      assert.equal(String(total.units), totalLegacy.units);
    }
    // An endpoint moves between payload versions by PATCH; another value is refused, naming the field.
    const moved = expectStatus(
      await api<Obj>("PATCH", `/webhooks/${old.id}`, { payload_version: "1.1" }),
      200,
    );
    assert.equal(moved.payload_version, "1.1");
    const refused = await api<{ code: string; errors: { param: string }[] }>("PATCH", `/webhooks/${old.id}`, {
      payload_version: "2.0",
    });
    assert.equal(refused.status, 422);
    assert.equal(refused.body.errors[0]?.param, "payload_version");

    const sentData = [...sent].sort((a, b) => a.type.localeCompare(b.type)).map((e) => e.data);
    SHAPES.set(t().kind, shape({ answers, sent: sentData }));
  });
});

test("both engines write every time, amount and count alike", (t) => {
  if (SHAPES.size < 2) {
    t.skip("one engine ran (set TEST_DATABASE_URL for PostgreSQL)");
    return;
  }
  const [a, b] = [...SHAPES.values()];
  assert.deepEqual(a, b);
});
