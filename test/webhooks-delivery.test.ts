import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { Db } from "../src/db/db.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import { Mailer } from "../src/mail/mailer.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type DispatcherOptions, retryDeliveryNow, WebhookDispatcher } from "../src/webhooks/dispatcher.ts";
import { envelopeBody, toEnvelope } from "../src/webhooks/envelope.ts";
import { JITTER, MAX_ATTEMPTS, nextDelayMs, RETRY_DELAYS_MS } from "../src/webhooks/schedule.ts";
import { newSigningSecret, SecretBox } from "../src/webhooks/secrets.ts";
import { describeEachEngine } from "./support/db.ts";
import { ROOT } from "./support/process.ts";
import { type SeedUser, seedAccount, seedTenant, seedUser } from "./support/seed.ts";
import { type Received, type Route, WebhookReceiver } from "./support/webhook-receiver.ts";

/**
 * Webhook delivery (src/webhooks/dispatcher.ts, docs/webhooks.md) to a real receiver on
 * 127.0.0.1 that verifies every request with the `standardwebhooks` package, as a customer's
 * would: signatures and rotation, the envelope, retries on the schedule (an injected clock jumps
 * ahead), Retry-After, 410, five days of failures, timeouts, the 1 KiB log, leases, and — on
 * PostgreSQL — dispatchers racing, throughput, and a dispatcher process killed mid-send.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** A clock tests move by hand. */
function clock(start = Date.now() + 1000) {
  let t = start;
  return {
    now: () => new Date(t),
    get ms() {
      return t;
    },
    set(ms: number) {
      t = ms;
    },
  };
}

describe("the retry schedule and the envelope", () => {
  test("ten attempts: at once, then 5 s … 24 h with ±20% jitter, about three days in all", () => {
    assert.equal(MAX_ATTEMPTS, 10);
    assert.equal(
      nextDelayMs(0, () => 0.99),
      0,
      "no jitter before the first attempt",
    );
    assert.deepEqual(
      RETRY_DELAYS_MS.map((_, i) => nextDelayMs(i + 1, () => 0.5)),
      [5_000, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 14 * HOUR, 20 * HOUR, 24 * HOUR],
    );
    assert.equal(
      nextDelayMs(1, () => 0),
      4_000,
    );
    assert.equal(
      nextDelayMs(9, () => 0.999999),
      Math.round(24 * HOUR * (1 + JITTER * 0.999998)),
    );
    assert.equal(nextDelayMs(10), undefined, "nothing after the last attempt");
    const total = RETRY_DELAYS_MS.reduce((a, b) => a + b, 0);
    assert.ok(total > 3 * DAY && total < 3.5 * DAY, String(total / DAY));
    assert.throws(() => nextDelayMs(-1));
  });

  test("the envelope is {id, type, created, sequence, account_id, data: {object}}", () => {
    const event = {
      id: "7d1c6c3e-9b39-4c09-8f2e-2a4b1c0d5e6f",
      type: "release.live",
      account_id: "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
      data: { object: { id: "r1", title: "Midnight Signals" } },
      created_at: new Date("2026-11-22T09:00:00.123Z"),
      seq: "3",
    };
    assert.deepEqual(toEnvelope(event), {
      id: event.id,
      type: "release.live",
      created: "2026-11-22T09:00:00.123Z",
      sequence: 3,
      account_id: event.account_id,
      data: { object: { id: "r1", title: "Midnight Signals" } },
    });
    assert.equal(envelopeBody(event), JSON.stringify(toEnvelope(event)));
    assert.throws(() => toEnvelope({ ...event, seq: 0 }), /no valid seq/);
  });
});

describeEachEngine("webhook delivery", (t) => {
  const db = (): Db => t().db;
  const sql = async <T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> =>
    db().asService(async (tx) => (await tx.query<T & Record<string, unknown>>(text, params)).rows);

  const box = new SecretBox(randomBytes(32));
  let receiver: WebhookReceiver;
  let tenant: Tenant;
  let account: Account;
  let owner: SeedUser;
  let viewer: SeedUser;
  const dispatchers: WebhookDispatcher[] = [];

  before(async () => {
    receiver = await WebhookReceiver.start();
    tenant = await seedTenant(db());
    account = await seedAccount(db(), tenant, "Night Owl Records");
    owner = await seedUser(db(), tenant, [{ account, role: "owner" }]);
    viewer = await seedUser(db(), tenant, [{ account, role: "viewer" }]);
  });

  afterEach(async () => {
    receiver.release();
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    // Each test's endpoints go, and their deliveries with them: the next test's clock finds nothing of this one's.
    await sql("delete from internal.webhook_endpoints");
  });

  after(async () => {
    await receiver?.close();
  });

  function dispatcher(options: Partial<DispatcherOptions> = {}): WebhookDispatcher {
    const d = new WebhookDispatcher({ db: db(), secrets: box, allowPrivate: true, ...options });
    dispatchers.push(d);
    return d;
  }

  interface Endpoint {
    id: string;
    secret: string;
    route: Route;
  }

  async function endpoint(
    route: Route,
    options: { events?: string[]; previous?: { secret: string; expiresAt: Date } } = {},
  ): Promise<Endpoint> {
    const secret = newSigningSecret();
    if (route.secrets.length === 0) route.secrets.push(secret);
    const [row] = await sql<{ id: string }>(
      `insert into internal.webhook_endpoints
         (account_id, url, events, secret_ciphertext, previous_secret_ciphertext, previous_secret_expires_at)
       values ($1, $2, $3, $4, $5, $6) returning id`,
      [
        account.id,
        route.url,
        options.events ?? ["release.live"],
        box.encrypt(secret),
        options.previous ? box.encrypt(options.previous.secret) : null,
        options.previous?.expiresAt.toISOString() ?? null,
      ],
    );
    if (!row) throw new Error("no endpoint");
    return { id: row.id, secret, route };
  }

  interface EventRow {
    id: string;
    type: string;
    account_id: string;
    data: { object: Record<string, unknown> };
    created_at: Date;
    seq: string;
  }

  async function emit(type = "release.live", object: Record<string, unknown> = {}): Promise<EventRow> {
    const [row] = await sql<EventRow>(
      `insert into internal.events (tenant_id, account_id, type, data) values ($1, $2, $3, $4::jsonb)
       returning id, type, account_id, data, created_at, seq`,
      [
        tenant.id,
        account.id,
        type,
        JSON.stringify({
          object: { id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21", title: "Midnight Signals", ...object },
        }),
      ],
    );
    if (!row) throw new Error("no event");
    return row;
  }

  interface DeliveryRow {
    id: string;
    event_id: string;
    status: string;
    attempts: number;
    next_attempt_at: Date;
    last_status_code: number | null;
    last_error: string | null;
    completed_at: Date | null;
    locked_by: string | null;
  }

  const deliveriesOf = (e: Endpoint) =>
    sql<DeliveryRow>(
      "select * from internal.webhook_deliveries where endpoint_id = $1 order by created_at, id",
      [e.id],
    );

  async function deliveryOf(e: Endpoint): Promise<DeliveryRow> {
    const [row, more] = await deliveriesOf(e);
    assert.ok(row && !more, "one delivery");
    return row;
  }

  const attemptsOf = (deliveryId: string) =>
    sql<{
      attempt: number;
      started_at: Date;
      duration_ms: number;
      status_code: number | null;
      outcome: string;
      error: string | null;
      response_body: string | null;
    }>("select * from internal.webhook_attempts where delivery_id = $1 order by attempt", [deliveryId]);

  const endpointRow = async (e: Endpoint) =>
    (
      await sql<{
        enabled: boolean;
        disabled_reason: string | null;
        failing_since: Date | null;
        last_success_at: Date | null;
      }>(
        "select enabled, disabled_reason, failing_since, last_success_at from internal.webhook_endpoints where id = $1",
        [e.id],
      )
    )[0];

  const ids = (received: Received[]) => received.map((r) => r.headers["webhook-id"]);

  test("an event is delivered signed, verifiable with standardwebhooks, in its envelope", async () => {
    const e = await endpoint(receiver.route("hello"));
    const other = await endpoint(receiver.route("not-subscribed"), { events: ["release.rejected"] });
    const event = await emit("release.live", { status: "live" });
    const c = clock();
    assert.equal(await dispatcher({ now: c.now }).runDue(), 1);

    const [got] = e.route.received;
    assert.ok(got);
    assert.deepEqual(got.verifiedBy, [true]);
    assert.equal(got.headers["webhook-id"], event.id);
    assert.match(got.headers["webhook-timestamp"] ?? "", /^\d{10}$/);
    assert.ok(Math.abs(Number(got.headers["webhook-timestamp"]) - Date.now() / 1000) < 60, "the wall clock");
    assert.match(got.headers["webhook-signature"] ?? "", /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.equal(got.headers["content-type"], "application/json");
    assert.equal(got.headers["user-agent"], "Backline-Webhooks/1");
    assert.deepEqual(JSON.parse(got.body), {
      id: event.id,
      type: "release.live",
      created: event.created_at.toISOString(),
      sequence: Number(event.seq),
      account_id: account.id,
      data: {
        object: { id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21", title: "Midnight Signals", status: "live" },
      },
    });
    assert.equal(other.route.received.length, 0, "an endpoint gets only what it subscribed to");

    const d = await deliveryOf(e);
    assert.deepEqual([d.status, d.attempts, d.last_status_code, d.locked_by], ["succeeded", 1, 204, null]);
    assert.equal(d.completed_at?.getTime(), c.ms);
    const [attempt] = await attemptsOf(d.id);
    assert.deepEqual([attempt?.attempt, attempt?.outcome, attempt?.status_code], [1, "ok", 204]);
    assert.equal((await endpointRow(e))?.last_success_at?.getTime(), c.ms);
    assert.deepEqual(await deliveriesOf(other), []);
  });

  test("a started dispatcher is woken by the fan-out's notice, and stop() waits for the send in flight", async () => {
    const e = await endpoint(
      receiver.route("woken", { respond: (_r, n) => (n === 2 ? "hang" : { status: 200 }) }),
    );
    // Polling once a minute: only the notice can make it look in time.
    const d = dispatcher({ pollMs: 60_000 });
    d.start();
    await sleep(300);
    const first = await emit();
    await receiver.waitFor(e.route, 1, 5000);
    await sleep(100);
    await emit();
    await receiver.waitFor(e.route, 2, 5000);
    let stopped = false;
    const stopping = d.stop().then(() => {
      stopped = true;
    });
    await sleep(150);
    assert.equal(stopped, false, "stop waits for the answer");
    receiver.release(e.route.path, 200);
    await stopping;
    const rows = await deliveriesOf(e);
    assert.deepEqual(
      rows.map((r) => r.status),
      ["succeeded", "succeeded"],
    );
    assert.equal(rows[0]?.event_id, first.id);
  });

  test("failures are retried on the schedule with the same webhook-id; a success clears failing_since", async () => {
    const e = await endpoint(
      receiver.route("flaky", {
        respond: (_r, n) => (n <= 3 ? { status: 500, body: "down" } : { status: 200 }),
      }),
    );
    const event = await emit();
    const c = clock();
    const t0 = c.ms;
    const d = dispatcher({ now: c.now });
    for (let attempt = 1; attempt <= 3; attempt++) {
      assert.equal(await d.runDue(), 1, `attempt ${attempt}`);
      const row = await deliveryOf(e);
      assert.deepEqual(
        [row.status, row.attempts, row.last_status_code, row.last_error],
        ["pending", attempt, 500, "HTTP 500"],
      );
      const base = RETRY_DELAYS_MS[attempt - 1] ?? 0;
      const wait = row.next_attempt_at.getTime() - c.ms;
      assert.ok(wait >= base * 0.8 && wait <= base * 1.2, `attempt ${attempt}: waits ${wait} ms for ${base}`);
      assert.equal((await endpointRow(e))?.failing_since?.getTime(), t0, "failing since the first failure");
      assert.equal(await d.runDue(), 0, "not before its time");
      c.set(row.next_attempt_at.getTime());
    }
    assert.equal(await d.runDue(), 1);
    const done = await deliveryOf(e);
    assert.deepEqual(
      [done.status, done.attempts, done.last_status_code, done.last_error],
      ["succeeded", 4, 200, null],
    );
    const ep = await endpointRow(e);
    assert.equal(ep?.failing_since, null);
    assert.equal(ep?.last_success_at?.getTime(), c.ms);
    assert.deepEqual(ids(e.route.received), [event.id, event.id, event.id, event.id]);
    assert.ok(e.route.received.every((r) => r.verifiedBy[0]));
    assert.deepEqual(
      (await attemptsOf(done.id)).map((a) => [a.attempt, a.outcome, a.status_code, a.response_body]),
      [
        [1, "http_status", 500, "down"],
        [2, "http_status", 500, "down"],
        [3, "http_status", 500, "down"],
        [4, "ok", 200, ""],
      ],
    );
  });

  test("after the tenth attempt the delivery has failed; retry-now gives it one more", async () => {
    const e = await endpoint(receiver.route("broken", { respond: () => ({ status: 502 }) }));
    const event = await emit();
    const c = clock();
    const d = dispatcher({ now: c.now });
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      assert.equal(await d.runDue(), 1, `attempt ${attempt}`);
      const row = await deliveryOf(e);
      if (attempt < MAX_ATTEMPTS) {
        const base = RETRY_DELAYS_MS[attempt - 1] ?? 0;
        const wait = row.next_attempt_at.getTime() - c.ms;
        assert.ok(
          wait >= base * 0.8 && wait <= base * 1.2,
          `attempt ${attempt}: waits ${wait} ms for ${base}`,
        );
        assert.equal(row.status, "pending");
        c.set(row.next_attempt_at.getTime());
      }
    }
    const failed = await deliveryOf(e);
    assert.deepEqual([failed.status, failed.attempts, failed.last_status_code], ["failed", 10, 502]);
    assert.equal(failed.completed_at?.getTime(), c.ms);
    assert.ok(c.ms - Date.now() > 3 * DAY * 0.8, "over about three days");
    c.set(c.ms + DAY);
    assert.equal(await d.runDue(), 0, "a failed delivery is not tried again by itself");
    assert.equal((await endpointRow(e))?.enabled, true, "failing for four days: still enabled");
    assert.equal(e.route.received.length, 10);
    assert.equal(new Set(ids(e.route.received)).size, 1);
    assert.equal(ids(e.route.received)[0], event.id);

    const retried = await retryDeliveryNow(db(), failed.id, c.now());
    assert.deepEqual([retried?.status, retried?.attempts], ["pending", 10]);
    assert.equal(await d.runDue(), 1);
    const again = await deliveryOf(e);
    assert.deepEqual([again.status, again.attempts], ["failed", 11]);
    assert.equal((await attemptsOf(again.id)).length, 11);

    const ok = await endpoint(receiver.route("fine"));
    await emit();
    assert.equal(await d.runDue(), 2, "to the broken endpoint and the fine one");
    assert.equal(
      await retryDeliveryNow(db(), (await deliveryOf(ok)).id),
      undefined,
      "a success is not retried",
    );
    assert.equal(await retryDeliveryNow(db(), "not-a-uuid"), undefined);
    assert.equal(await retryDeliveryNow(db(), "00000000-0000-4000-8000-000000000000"), undefined);
  });

  test("429 and 503 with Retry-After wait at least that long (seconds or a date, at most 24 h)", async () => {
    const date = new Date(Date.now() + 3 * HOUR).toUTCString();
    const answers = [
      { status: 429, headers: { "retry-after": "120" } },
      { status: 503, headers: { "retry-after": date } },
      { status: 429, headers: { "retry-after": "99999999" } },
      { status: 429, headers: { "retry-after": "1" } },
      { status: 200 },
    ];
    const e = await endpoint(
      receiver.route("busy", { respond: (_r, n) => answers[n - 1] ?? { status: 200 } }),
    );
    await emit();
    const c = clock();
    const d = dispatcher({ now: c.now });
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      assert.equal(await d.runDue(), 1);
      const row = await deliveryOf(e);
      waits.push(row.next_attempt_at.getTime() - c.ms);
      c.set(row.next_attempt_at.getTime());
    }
    const [w1 = 0, w2 = 0, w3 = 0, w4 = 0] = waits;
    assert.equal(w1, 120_000, "120 s, more than the schedule's 5 s");
    assert.ok(w2 > 3 * HOUR - 5_000 && w2 <= 3 * HOUR, `an HTTP date three hours ahead: ${w2}`);
    assert.equal(w3, 24 * HOUR, "capped at 24 h");
    assert.ok(w4 >= 2 * HOUR * 0.8 && w4 <= 2 * HOUR * 1.2, `never sooner than the schedule: ${w4}`);
    assert.equal(await d.runDue(), 1);
    assert.equal((await deliveryOf(e)).status, "succeeded");
  });

  test("410 Gone disables the endpoint at once and fails the delivery; the account is told", async () => {
    const mailer = new Mailer(db(), { smtpUrl: undefined, from: "backline@example.com" });
    const e = await endpoint(
      receiver.route("gone", { respond: () => ({ status: 410, body: "no such hook" }) }),
    );
    await emit();
    const c = clock();
    assert.equal(await dispatcher({ now: c.now, mailer }).runDue(), 1);
    const d = await deliveryOf(e);
    assert.deepEqual([d.status, d.attempts, d.last_status_code], ["failed", 1, 410]);
    const ep = await endpointRow(e);
    assert.equal(ep?.enabled, false);
    assert.match(ep?.disabled_reason ?? "", /410 Gone/);
    const told = await sql<{ user_id: string; data: Record<string, unknown> }>(
      "select user_id, data from public.notifications where kind = 'webhook.disabled' and data ->> 'endpoint_id' = $1",
      [e.id],
    );
    assert.deepEqual(told.map((n) => n.user_id).sort(), [owner.id, viewer.id].sort());
    assert.deepEqual(told[0]?.data, { endpoint_id: e.id, url: e.route.url });

    await emit();
    assert.equal((await deliveriesOf(e)).length, 1, "a disabled endpoint gets no new deliveries");
    c.set(c.ms + DAY);
    assert.equal(await dispatcher({ now: c.now }).runDue(), 0);
    assert.equal(e.route.received.length, 1);
  });

  test("a disabled endpoint's deliveries wait and go when it is enabled; deleting it deletes them", async () => {
    const e = await endpoint(receiver.route("paused"));
    await emit();
    await emit();
    await sql(
      "update internal.webhook_endpoints set enabled = false, disabled_reason = 'paused by owner' where id = $1",
      [e.id],
    );
    const c = clock();
    const d = dispatcher({ now: c.now });
    assert.equal(await d.runDue(), 0);
    assert.equal(e.route.received.length, 0);
    await sql("update internal.webhook_endpoints set enabled = true where id = $1", [e.id]);
    assert.equal(await d.runDue(), 2);
    assert.deepEqual(
      (await deliveriesOf(e)).map((r) => r.status),
      ["succeeded", "succeeded"],
    );

    const gone = await endpoint(receiver.route("deleted", { respond: () => ({ status: 500 }) }));
    await emit();
    assert.equal(await d.runDue(), 2, "one to each endpoint");
    const [pending] = await deliveriesOf(gone);
    await sql("delete from internal.webhook_endpoints where id = $1", [gone.id]);
    assert.deepEqual(await sql("select 1 from internal.webhook_deliveries where id = $1", [pending?.id]), []);
    assert.deepEqual(
      await sql("select 1 from internal.webhook_attempts where delivery_id = $1", [pending?.id]),
      [],
    );
  });

  test("a claim's lease is a heap-only update: no index is written for it (migration 0062)", async () => {
    await endpoint(receiver.route("heap-only"));
    for (let i = 0; i < 5; i++) await emit();
    const c = clock();
    // This connection's counts not yet sent to the statistics, before and after the claim.
    const { taken, hot, updated } = await db().asService(async (tx) => {
      const counts = async () =>
        (
          await tx.query<{ hot: number; updated: number }>(
            `select pg_stat_get_xact_tuples_hot_updated('internal.webhook_deliveries'::regclass)::int as hot,
                    pg_stat_get_xact_tuples_updated('internal.webhook_deliveries'::regclass)::int as updated`,
          )
        ).rows[0] as { hot: number; updated: number };
      const before = await counts();
      const claimed = await tx.query(
        "select id from internal.claim_webhook_deliveries('heap-only-test', $1, '{}', '{}', '{}', 10, 10, 60000)",
        [c.now().toISOString()],
      );
      const after = await counts();
      return {
        taken: claimed.rowCount,
        hot: after.hot - before.hot,
        updated: after.updated - before.updated,
      };
    });
    assert.equal(taken, 5);
    assert.equal(updated, 5);
    assert.equal(hot, 5, "each lease stayed on its page, with no new index entry");
  });

  test("events claimed together reach every endpoint whole, in each endpoint's payload version", async () => {
    // An event's body is made once per payload version and kept for its other deliveries
    // (WebhookDispatcher.bodyOf): each endpoint still gets each event, in its own version.
    const routes = [1, 2, 3].map((n) => receiver.route(`shared-data-${n}`));
    const endpoints = await Promise.all(routes.map((r) => endpoint(r)));
    await sql("update internal.webhook_endpoints set payload_version = '1.0' where id = $1", [
      endpoints[1]?.id,
    ]);
    const events = [
      await emit("release.live", { title: "First of two", total_units: 1 }),
      await emit("release.live", { title: "Second of two", total_units: 2 }),
    ];
    const d = dispatcher({ now: clock().now });
    assert.equal(await d.runDue(), 6);
    for (const e of endpoints) {
      const bodies = e.route.received.map(
        (r) => JSON.parse(r.body) as { id: string; data: { object: { title: string } } },
      );
      assert.deepEqual(
        bodies.map((b) => [b.id, b.data.object.title]).sort(),
        events.map((ev) => [ev.id, ev.data.object.title]).sort(),
        `endpoint ${e.route.url}`,
      );
    }
  });

  test("during a rotation both secrets sign; after it only the new one does", async () => {
    const old = newSigningSecret();
    const fresh = receiver.route("rotating");
    const c = clock();
    const e = await endpoint(fresh, { previous: { secret: old, expiresAt: new Date(c.ms + HOUR) } });
    fresh.secrets.push(old); // verify with [new, old]
    const d = dispatcher({ now: c.now });
    await emit();
    assert.equal(await d.runDue(), 1);
    const during = e.route.received[0];
    assert.equal(during?.headers["webhook-signature"]?.split(" ").length, 2);
    assert.deepEqual(during?.verifiedBy, [true, true], "a receiver with only the old secret verifies too");

    c.set(c.ms + 2 * HOUR);
    await emit();
    assert.equal(await d.runDue(), 1);
    const afterwards = e.route.received[1];
    assert.equal(afterwards?.headers["webhook-signature"]?.split(" ").length, 1);
    assert.deepEqual(afterwards?.verifiedBy, [true, false], "the old secret no longer verifies");
  });

  test("five days of failures disable the endpoint: a notification to members, an e-mail to owners", async () => {
    const mailer = new Mailer(db(), { smtpUrl: undefined, from: "backline@example.com" });
    const e = await endpoint(receiver.route("dead", { respond: () => ({ status: 500 }) }));
    await emit();
    const c = clock();
    const t0 = c.ms;
    const d = dispatcher({ now: c.now, mailer });
    assert.equal(await d.runDue(), 1);
    assert.equal((await endpointRow(e))?.failing_since?.getTime(), t0);

    c.set(t0 + 4 * DAY);
    assert.equal(await d.runDue(), 1);
    assert.equal((await endpointRow(e))?.enabled, true, "four days: still trying");

    c.set(t0 + 5 * DAY + MINUTE);
    assert.equal(await d.runDue(), 1);
    const ep = await endpointRow(e);
    assert.equal(ep?.enabled, false);
    assert.match(ep?.disabled_reason ?? "", /five days/);
    assert.equal(ep?.failing_since?.getTime(), t0);

    const told = await sql<{ user_id: string; title: string; body: string; data: Record<string, unknown> }>(
      "select user_id, title, body, data from public.notifications where kind = 'webhook.disabled' and data ->> 'endpoint_id' = $1",
      [e.id],
    );
    assert.deepEqual(told.map((n) => n.user_id).sort(), [owner.id, viewer.id].sort());
    assert.deepEqual(told[0]?.data, { endpoint_id: e.id, url: e.route.url });
    assert.match(told[0]?.body ?? "", /five days/);
    const mail = await sql<{ to_address: string; subject: string; text_body: string; status: string }>(
      "select to_address, subject, text_body, status from internal.mail_outbox where kind = 'webhook.disabled' and text_body like $1",
      [`%${e.route.url}%`],
    );
    assert.deepEqual(
      mail.map((m) => [m.to_address, m.status]),
      [[owner.email, "stored"]],
      "the owners only",
    );
    assert.match(mail[0]?.subject ?? "", /Night Owl Records/);

    const left = await deliveryOf(e);
    assert.deepEqual([left.status, left.attempts], ["pending", 3], "it waits for the endpoint");
    c.set(t0 + 10 * DAY);
    assert.equal(await d.runDue(), 0);
  });

  test("a receiver that does not answer in time is a timeout", async () => {
    const e = await endpoint(receiver.route("silent", { respond: () => "hang" }));
    await emit();
    const d = dispatcher({ now: clock().now, timeoutMs: 300, leaseMs: 5000 });
    assert.equal(await d.runDue(), 1);
    const row = await deliveryOf(e);
    assert.deepEqual([row.status, row.attempts, row.last_status_code], ["pending", 1, null]);
    assert.match(row.last_error ?? "", /within 300 ms/);
    const [attempt] = await attemptsOf(row.id);
    assert.equal(attempt?.outcome, "timeout");
    assert.equal(attempt?.status_code, null);
    assert.ok(
      (attempt?.duration_ms ?? 0) >= 290 && (attempt?.duration_ms ?? 0) < 3000,
      String(attempt?.duration_ms),
    );
  });

  test("the attempt log keeps the first 1 KiB of an answer", async () => {
    const big = await endpoint(
      receiver.route("big", { respond: () => ({ status: 500, body: "é".repeat(5000) }) }),
    );
    const small = await endpoint(
      receiver.route("small", { respond: () => ({ status: 200, body: "thanks" }) }),
    );
    await emit();
    assert.equal(await dispatcher({ now: clock().now }).runDue(), 2);
    const [bigAttempt] = await attemptsOf((await deliveryOf(big)).id);
    assert.equal(Buffer.byteLength(bigAttempt?.response_body ?? ""), 1024, "1 KiB, é being two bytes");
    assert.equal(bigAttempt?.response_body, "é".repeat(512));
    const [smallAttempt] = await attemptsOf((await deliveryOf(small)).id);
    assert.equal(smallAttempt?.response_body, "thanks");
  });

  test("a delivery whose dispatcher stalls is claimed again after its lease; the stalled result is ignored", async () => {
    const e = await endpoint(
      receiver.route("stall", { respond: (_r, n) => (n === 1 ? "hang" : { status: 200, body: "second" }) }),
    );
    const event = await emit();
    const t0 = Date.now() + 1000;
    const a = dispatcher({ id: "stalled", now: () => new Date(t0), timeoutMs: 30_000, leaseMs: 60_000 });
    const stalled = a.runDue();
    await receiver.waitFor(e.route, 1);
    assert.equal((await deliveryOf(e)).locked_by, "stalled");
    assert.equal(
      await dispatcher({ now: () => new Date(t0 + 59_000) }).runDue(),
      0,
      "held while the lease lasts",
    );
    assert.equal(await dispatcher({ id: "rescuer", now: () => new Date(t0 + 61_000) }).runDue(), 1);
    assert.deepEqual(ids(e.route.received), [event.id, event.id]);
    let row = await deliveryOf(e);
    assert.deepEqual([row.status, row.attempts], ["succeeded", 1]);

    receiver.release(e.route.path, 500);
    assert.equal(await stalled, 1);
    row = await deliveryOf(e);
    assert.deepEqual([row.status, row.attempts, row.last_status_code], ["succeeded", 1, 200]);
    assert.deepEqual(
      (await attemptsOf(row.id)).map((x) => [x.attempt, x.outcome, x.response_body]),
      [[1, "ok", "second"]],
    );
  });

  test("several dispatchers racing over 500 deliveries send each exactly once", async (ctx) => {
    if (t().kind !== "postgres") return ctx.skip("PGlite has one connection: nothing races");
    const url = t().url as string;
    const endpoints = await Promise.all([1, 2, 3, 4, 5].map((n) => endpoint(receiver.route(`race-${n}`))));
    const pools = [1, 2, 3, 4].map(() => new Db(new PostgresEngine({ url, poolSize: 4 })));
    try {
      const racers = pools.map((pool, n) =>
        dispatcher({ db: pool, id: `racer-${n}`, concurrency: 20, pollMs: 20 }),
      );
      for (const r of racers) r.start();
      await sql(
        `insert into internal.events (tenant_id, account_id, type, data)
         select $1, $2, 'release.live', jsonb_build_object('object', jsonb_build_object('n', g))
         from generate_series(1, 100) g`,
        [tenant.id, account.id],
      );
      const total = () => endpoints.reduce((n, e) => n + e.route.received.length, 0);
      await until("500 deliveries", () => total() >= 500, 30_000);
      await until(
        "500 recorded",
        async () =>
          Number(
            (
              await sql<{ n: string }>(
                "select count(*) as n from internal.webhook_deliveries where status = 'succeeded'",
              )
            )[0]?.n,
          ) === 500,
      );
      await Promise.all(racers.map((r) => r.stop()));
      assert.equal(total(), 500, "nothing sent twice");
      for (const e of endpoints) {
        assert.equal(new Set(ids(e.route.received)).size, 100);
        assert.ok(e.route.received.every((r) => r.verifiedBy[0]));
      }
      const [attempts] = await sql<{ n: string }>("select count(*) as n from internal.webhook_attempts");
      assert.equal(Number(attempts?.n), 500);
    } finally {
      await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
      await Promise.all(pools.map((p) => p.close()));
    }
  });

  test("an endpoint that hangs holds at most its cap of sends: the other endpoint's deliveries all go meanwhile", async () => {
    const slow = await endpoint(receiver.route("hangs-capped", { respond: () => "hang" }));
    const fast = await endpoint(receiver.route("fast-beside"));
    for (let i = 0; i < 6; i++) await emit();
    // Each event goes to both endpoints; four slots, at most two of them for any one endpoint.
    const d = dispatcher({ concurrency: 4, perEndpoint: 2, pollMs: 50, timeoutMs: 10_000 });
    d.start();
    await until("the fast endpoint's six deliveries", async () => fast.route.received.length === 6, 5000);
    assert.equal(slow.route.received.length, 2, "the hanging endpoint got only its cap");
    // Claimed: its two sends, and at most as many again waiting for one of its slots.
    const [row] = await sql<{ locked: string }>(
      "select count(*) filter (where locked_by is not null) as locked from internal.webhook_deliveries where endpoint_id = $1",
      [slow.id],
    );
    assert.ok(Number(row?.locked) >= 2 && Number(row?.locked) <= 4, `${row?.locked} claimed`);
    receiver.release();
  });

  // Alone on a two-core machine this measures 1,700–2,400 deliveries/s (receiver in this process,
  // verifying each one). The rate is printed, not asserted: on a shared machine no rate holds
  // (bench:webhooks measures it beside its floor); what is asserted is that each goes once.
  test("one dispatcher sends three thousand deliveries at 50 at once, each once", async (ctx) => {
    if (t().kind !== "postgres") return ctx.skip("throughput is measured on PostgreSQL");
    const url = t().url as string;
    const endpoints = await Promise.all([1, 2, 3, 4].map((n) => endpoint(receiver.route(`fast-${n}`))));
    const pool = new Db(new PostgresEngine({ url, poolSize: 10 }));
    try {
      await sql(
        `insert into internal.events (tenant_id, account_id, type, data)
         select $1, $2, 'release.live', jsonb_build_object('object', jsonb_build_object('n', g))
         from generate_series(1, 750) g`,
        [tenant.id, account.id],
      );
      const started = performance.now();
      const d = dispatcher({ db: pool, concurrency: 50, pollMs: 100 });
      d.start();
      const succeeded = async () =>
        Number(
          (
            await sql<{ n: string }>(
              "select count(*) as n from internal.webhook_deliveries where status = 'succeeded'",
            )
          )[0]?.n,
        );
      await until("3000 deliveries", async () => (await succeeded()) === 3000, 120_000);
      const seconds = (performance.now() - started) / 1000;
      const rate = Math.round(3000 / seconds);
      ctx.diagnostic(`3000 deliveries in ${seconds.toFixed(2)} s: ${rate}/s`);
      await d.stop();
      assert.equal(
        endpoints.reduce((n, e) => n + e.route.received.length, 0),
        3000,
      );
      for (const e of endpoints) assert.equal(new Set(ids(e.route.received)).size, 750);
    } finally {
      await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
      await pool.close();
    }
  });

  test("a dispatcher process killed mid-send: a dispatcher on the same host takes its delivery over at once, not after its lease", async (ctx) => {
    if (t().kind !== "postgres") return ctx.skip("processes share a database on PostgreSQL only");
    const e = await endpoint(
      receiver.route("killed", { respond: (_r, n) => (n === 1 ? "hang" : { status: 200, body: "again" }) }),
    );
    const event = await emit();
    const key = randomBytes(32);
    // The endpoint's secret, sealed under the child's key: the child is a dispatcher of its own.
    await sql("update internal.webhook_endpoints set secret_ciphertext = $2 where id = $1", [
      e.id,
      new SecretBox(key).encrypt(e.secret),
    ]);
    const mod = (p: string) => JSON.stringify(pathToFileURL(path.join(ROOT, p)).href);
    const code = `
      import { Db } from ${mod("src/db/db.ts")};
      import { PostgresEngine } from ${mod("src/db/postgres.ts")};
      import { SecretBox } from ${mod("src/webhooks/secrets.ts")};
      import { WebhookDispatcher } from ${mod("src/webhooks/dispatcher.ts")};
      const db = new Db(new PostgresEngine({ url: process.env.TEST_URL, poolSize: 2 }));
      const d = new WebhookDispatcher({ db, secrets: new SecretBox(Buffer.from(process.env.TEST_KEY, "base64")),
        allowPrivate: true, leaseMs: 60000, timeoutMs: 2500, pollMs: 50, id: "doomed" });
      d.start();
    `;
    let child: ChildProcess | undefined = spawn(process.execPath, ["--input-type=module", "-e", code], {
      cwd: ROOT,
      env: { ...process.env, TEST_URL: t().url, TEST_KEY: key.toString("base64") },
      stdio: ["ignore", "inherit", "inherit"],
    });
    const exited = new Promise((resolve) => child?.once("exit", resolve));
    try {
      await receiver.waitFor(e.route, 1, 20_000);
      assert.equal((await deliveryOf(e)).locked_by, "doomed");
      child.kill("SIGKILL");
      await exited;
      child = undefined;
      const killedAt = Date.now();

      // Its process is gone and this host can see it (instances.ts): the 60 s lease is not waited out.
      const rescuer = dispatcher({ secrets: new SecretBox(key), pollMs: 100 });
      rescuer.start();
      await receiver.waitFor(e.route, 2, 10_000);
      const [, second] = e.route.received;
      assert.ok(
        (second?.at ?? 0) - killedAt < 3000,
        `taken over ${(second?.at ?? 0) - killedAt} ms after the kill`,
      );
      assert.deepEqual(ids(e.route.received), [event.id, event.id]);
      assert.ok(e.route.received.every((r) => r.verifiedBy[0]));
      await until("recorded", async () => (await deliveryOf(e)).status === "succeeded", 5000);
      const row = await deliveryOf(e);
      assert.deepEqual([row.attempts, row.last_status_code], [1, 200], "the lost attempt is not counted");
      assert.deepEqual(
        (await attemptsOf(row.id)).map((a) => [a.attempt, a.outcome]),
        [[1, "ok"]],
      );
    } finally {
      child?.kill("SIGKILL");
    }
  });
});
