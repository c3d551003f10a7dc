import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, afterEach, before, test } from "node:test";
import { Db } from "../src/db/db.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type DispatcherOptions, WebhookDispatcher } from "../src/webhooks/dispatcher.ts";
import { thisProcess } from "../src/webhooks/instances.ts";
import { newSigningSecret, SecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { copyMigratedDatabase, describeEachEngine, TEST_ENCRYPTION_KEY } from "./support/db.ts";
import { tempDir } from "./support/process.ts";
import { assertFieldErrors, expectStatus, keyedAccount, publicApi } from "./support/public-api.ts";
import { anonClaims, seedAccount, seedTenant, seedUser, userClaims } from "./support/seed.ts";
import { type Received, type Route, WebhookReceiver } from "./support/webhook-receiver.ts";
import { startWorkerProcess, type WorkerProcess } from "./support/worker-process.ts";

/**
 * Webhook order and crash recovery (docs/webhooks.md, "Order" and "When a dispatcher dies";
 * migration 0014): a release's events numbered by the database, strict endpoints held behind a
 * failing delivery, best-effort ones not; a dead dispatcher's claims taken over as soon as it is
 * known dead (its heartbeat stopped, its process gone from this host, or — on PGlite — any claim
 * older than the process); and `backline worker` killed with SIGKILL mid-batch and started again,
 * with what each endpoint saw checked.
 */

type Obj = Record<string, unknown>;

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

const sql = async <T = Obj>(db: Db, text: string, params: unknown[] = []): Promise<T[]> =>
  db.asService(async (tx) => (await tx.query<T & Obj>(text, params)).rows);

interface World {
  tenant: Tenant;
  account: Account;
}

async function endpoint(
  db: Db,
  box: SecretBox,
  world: World,
  route: Route,
  ordering: "strict" | "best_effort",
): Promise<{ id: string; route: Route }> {
  const secret = newSigningSecret();
  route.secrets.push(secret);
  const [row] = await sql<{ id: string }>(
    db,
    `insert into internal.webhook_endpoints (account_id, url, events, secret_ciphertext, ordering)
     values ($1, $2, $3, $4, $5) returning id`,
    [world.account.id, route.url, ["release.approved", "release.live"], box.encrypt(secret), ordering],
  );
  if (!row) throw new Error("no endpoint");
  return { id: row.id, route };
}

interface EventRow {
  id: string;
  seq: string;
  subject_id: string | null;
}

async function emit(db: Db, world: World, type: string, releaseId: string): Promise<EventRow> {
  const [row] = await sql<EventRow>(
    db,
    `insert into internal.events (tenant_id, account_id, type, data)
     values ($1, $2, $3, jsonb_build_object('object', jsonb_build_object('id', $4::text, 'title', 'Tidal')))
     returning id, seq, subject_id`,
    [world.tenant.id, world.account.id, type, releaseId],
  );
  if (!row) throw new Error("no event");
  return row;
}

interface Payload {
  id: string;
  type: string;
  created: string;
  sequence: number;
  data: { object: { id: string } };
}

const payloads = (received: Received[]) => received.map((r) => JSON.parse(r.body) as Payload);

/** No request of a release arrived after a request of a later event of that release. */
function assertReleaseOrder(received: Received[], what: string): void {
  const highest = new Map<string, number>();
  for (const p of payloads(received)) {
    const release = p.data.object.id;
    const seen = highest.get(release) ?? 0;
    assert.ok(
      p.sequence >= seen,
      `${what}: ${p.type} (sequence ${p.sequence}) of ${release} after sequence ${seen}`,
    );
    highest.set(release, p.sequence);
  }
}

describeEachEngine("webhook order", (t) => {
  const db = (): Db => t().db;
  const box = new SecretBox(randomBytes(32));
  let receiver: WebhookReceiver;
  let world: World;
  const dispatchers: WebhookDispatcher[] = [];

  before(async () => {
    receiver = await WebhookReceiver.start();
    const tenant = await seedTenant(db());
    world = { tenant, account: await seedAccount(db(), tenant, "Low Tide Records") };
  });

  afterEach(async () => {
    receiver.release();
    await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
    await sql(db(), "delete from internal.webhook_endpoints");
    await sql(db(), "delete from internal.webhook_dispatchers");
  });

  after(async () => {
    await receiver?.close();
  });

  function dispatcher(options: Partial<DispatcherOptions> = {}): WebhookDispatcher {
    const d = new WebhookDispatcher({ db: db(), secrets: box, allowPrivate: true, ...options });
    dispatchers.push(d);
    return d;
  }

  test("a release's events are numbered 1, 2, 3… by the database, also when written at once from several connections", async () => {
    const release = randomUUID();
    const pools =
      t().kind === "postgres"
        ? [1, 2, 3].map(() => new Db(new PostgresEngine({ url: t().url as string, poolSize: 3 })))
        : [db()];
    try {
      const written = await Promise.all(
        Array.from({ length: 30 }, (_, n) =>
          emit(pools[n % pools.length] as Db, world, n % 2 ? "release.live" : "release.approved", release),
        ),
      );
      assert.deepEqual(
        written.map((e) => Number(e.seq)).sort((a, b) => a - b),
        Array.from({ length: 30 }, (_, n) => n + 1),
        "no number given twice, none skipped",
      );
      assert.ok(written.every((e) => e.subject_id === release));
    } finally {
      if (t().kind === "postgres") await Promise.all(pools.map((p) => p.close()));
    }
    // Another release starts at 1; an event that is not a release's is 1.
    assert.equal(Number((await emit(db(), world, "release.approved", randomUUID())).seq), 1);
    const [other] = await sql<EventRow>(
      db(),
      `insert into internal.events (tenant_id, account_id, type, data)
       values ($1, $2, 'royalties.imported', jsonb_build_object('object', jsonb_build_object('id', $3::text)))
       returning id, seq, subject_id`,
      [world.tenant.id, world.account.id, release],
    );
    assert.deepEqual([Number(other?.seq), other?.subject_id], [1, null]);
    // A client's value is not taken: the trigger numbers.
    const [forged] = await sql<EventRow>(
      db(),
      `insert into internal.events (tenant_id, account_id, type, data, seq)
       values ($1, $2, 'release.live', jsonb_build_object('object', jsonb_build_object('id', $3::text)), 1)
       returning id, seq, subject_id`,
      [world.tenant.id, world.account.id, release],
    );
    assert.equal(Number(forged?.seq), 31);
  });

  test("strict: a failing delivery holds the later ones until it succeeds; best effort sends them meanwhile", async () => {
    const failFirst = (_r: Received, n: number) => (n === 1 ? { status: 500 } : { status: 200 });
    const strict = await endpoint(
      db(),
      box,
      world,
      receiver.route("strict", { respond: failFirst }),
      "strict",
    );
    const loose = await endpoint(
      db(),
      box,
      world,
      receiver.route("loose", { respond: failFirst }),
      "best_effort",
    );
    const r1 = randomUUID();
    const r2 = randomUUID();
    const events = [
      await emit(db(), world, "release.approved", r1),
      await emit(db(), world, "release.approved", r2),
      await emit(db(), world, "release.live", r1),
      await emit(db(), world, "release.live", r2),
    ];
    const ids = (route: Route) => route.received.map((r) => r.headers["webhook-id"]);
    const t0 = Date.now() + 1000;
    // The first attempt of the first event fails: 4-6 s until its retry.
    await dispatcher({ now: () => new Date(t0) }).runDue();
    assert.deepEqual(ids(strict.route), [events[0]?.id], "strict: the others wait behind the failed one");
    assert.deepEqual(
      new Set(ids(loose.route)),
      new Set(events.map((e) => e.id)),
      "best effort: the others went",
    );
    assert.equal(await dispatcher({ now: () => new Date(t0 + 2000) }).runDue(), 0, "still held");

    // Retried and succeeded: the held ones follow, one at a time, in order.
    await dispatcher({ now: () => new Date(t0 + 10_000) }).runDue();
    assert.deepEqual(ids(strict.route), [events[0]?.id, ...events.map((e) => e.id)]);
    assert.deepEqual(
      payloads(strict.route.received).map((p) => [p.type, p.sequence]),
      [
        ["release.approved", 1],
        ["release.approved", 1],
        ["release.approved", 1],
        ["release.live", 2],
        ["release.live", 2],
      ],
    );
    assertReleaseOrder(strict.route.received, "strict");
    assert.ok(strict.route.received.every((r) => r.verifiedBy[0]));
  });

  test("strict: a delivery that fails for good lets the next one go", async () => {
    const strict = await endpoint(
      db(),
      box,
      world,
      receiver.route("strict-fail", { respond: (_r, n) => (n === 1 ? { status: 500 } : { status: 200 }) }),
      "strict",
    );
    const release = randomUUID();
    const first = await emit(db(), world, "release.approved", release);
    const second = await emit(db(), world, "release.live", release);
    // Its ninth failure is behind it: the next attempt is its last.
    await sql(db(), "update internal.webhook_deliveries set attempts = 9 where event_id = $1", [first.id]);
    const t0 = Date.now() + 1000;
    await dispatcher({ now: () => new Date(t0) }).runDue();
    const [row] = await sql<{ status: string }>(
      db(),
      "select status from internal.webhook_deliveries where event_id = $1",
      [first.id],
    );
    assert.equal(row?.status, "failed");
    assert.deepEqual(
      strict.route.received.map((r) => r.headers["webhook-id"]),
      [first.id, second.id],
      "given up, it holds nothing",
    );
  });

  test("a dispatcher whose heartbeat stops is dead after its dead_after_ms: its claims are taken at once, not after their lease", async () => {
    const route = receiver.route("orphan");
    await endpoint(db(), box, world, route, "best_effort");
    const d = dispatcher({ heartbeatMs: 100, deadAfterMs: 500, pollMs: 100 });
    d.start();
    await until(
      "registered",
      async () =>
        (await sql(db(), "select 1 from internal.webhook_dispatchers where id = $1", [d.id])).length === 1,
    );
    // A dispatcher of another host (this one cannot see its process), beating, holding a delivery for an hour.
    await sql(
      db(),
      `insert into internal.webhook_dispatchers (id, host, host_key, pid, proc_start, dead_after_ms)
       values ('far-away', 'elsewhere', 'another-kernel', 1, '1', 1500)`,
    );
    const event = await db().asService(async (tx) => {
      const e = await tx.query<{ id: string }>(
        `insert into internal.events (tenant_id, account_id, type, data)
         values ($1, $2, 'release.live', jsonb_build_object('object', jsonb_build_object('id', gen_random_uuid())))
         returning id`,
        [world.tenant.id, world.account.id],
      );
      const id = e.rows[0]?.id as string;
      await tx.query(
        `update internal.webhook_deliveries set locked_by = 'far-away', locked_until = now() + interval '1 hour'
         where event_id = $1`,
        [id],
      );
      return id;
    });
    // While it beats, its claim is its own.
    const beatUntil = Date.now() + 2000;
    let lastBeat = Date.now();
    while (Date.now() < beatUntil) {
      lastBeat = Date.now();
      await sql(db(), "update internal.webhook_dispatchers set heartbeat_at = now() where id = 'far-away'");
      await sleep(100);
    }
    assert.equal(route.received.length, 0, "a live dispatcher's claim is not taken");
    await receiver.waitFor(route, 1, 5000);
    const after = (route.received[0]?.at ?? 0) - lastBeat;
    assert.ok(after >= 1450, `taken ${after} ms after the last heartbeat: not before it was dead (1.5 s)`);
    assert.ok(after < 3500, `taken ${after} ms after the last heartbeat`);
    assert.equal(route.received[0]?.headers["webhook-id"], event);
    assert.deepEqual(
      await sql(db(), "select id from internal.webhook_dispatchers where id = 'far-away'"),
      [],
      "the dead one's row is gone",
    );
  });

  test("a starting dispatcher releases the claims of processes that are gone (on PGlite: every claim older than it)", async () => {
    const route = receiver.route("restart");
    await endpoint(db(), box, world, route, "best_effort");
    const me = thisProcess();
    // This host's processes that are no more: a pid now another process's (a restarted container is
    // PID 1 again; here, this very pid with another start time), and a pid that has exited.
    const exited = spawn(process.execPath, ["-e", ""]);
    const gonePid = await new Promise<number>((resolve) =>
      exited.once("exit", () => resolve(exited.pid as number)),
    );
    await sql(
      db(),
      `insert into internal.webhook_dispatchers (id, host, host_key, pid, proc_start, dead_after_ms) values
         ('before-restart', $1, $2, $3, 'an earlier start', 600000),
         ('exited', $1, $2, $4, '1', 600000)`,
      [me.host, me.hostKey, me.pid, gonePid],
    );
    const claimers = ["before-restart", "exited"];
    const events: string[] = [];
    for (const claimer of claimers) {
      const e = await emit(db(), world, "release.live", randomUUID());
      events.push(e.id);
      await sql(
        db(),
        `update internal.webhook_deliveries set locked_by = $2, locked_until = now() + interval '1 hour'
         where event_id = $1`,
        [e.id, claimer],
      );
    }
    const started = Date.now();
    dispatcher({ pollMs: 100 }).start();
    await receiver.waitFor(route, 2, 5000);
    assert.ok(Date.now() - started < 2000, "at once");
    assert.deepEqual(new Set(route.received.map((r) => r.headers["webhook-id"])), new Set(events));
    assert.deepEqual(
      await sql(db(), "select id from internal.webhook_dispatchers where id = any($1)", [claimers]),
      [],
    );
  });

  test("no client reads or writes the dispatchers, the sequence counters or an event's number", async () => {
    const owner = await seedUser(db(), world.tenant, [{ account: world.account, role: "owner" }]);
    const route = receiver.route("rls");
    const e = await endpoint(db(), box, world, route, "best_effort");
    const event = await emit(db(), world, "release.live", randomUUID());
    await sql(
      db(),
      `insert into internal.webhook_dispatchers (id, host, host_key, pid, proc_start, dead_after_ms)
       values ('someone', 'h', null, 1, null, 10000)`,
    );
    const attempts: [string, unknown[]][] = [
      ["select * from internal.webhook_dispatchers", []],
      ["delete from internal.webhook_dispatchers", []],
      ["insert into internal.webhook_dispatchers (id, host, pid, dead_after_ms) values ('x', 'h', 1, 1)", []],
      ["select * from internal.event_sequences", []],
      ["update internal.event_sequences set last_seq = 0", []],
      ["update internal.events set seq = 1 where id = $1", [event.id]],
      [
        "update internal.webhook_deliveries set position = 0, locked_by = null where endpoint_id = $1",
        [e.id],
      ],
    ];
    for (const claims of [userClaims(owner), anonClaims(world.tenant)]) {
      for (const [text, params] of attempts) {
        await assert.rejects(
          db().withRequestContext(claims, (tx) => tx.query(text, params)),
          /permission denied/,
          `${claims.role}: ${text}`,
        );
      }
    }
    // The events are the server's (migration 0030): the owner reads none, not even its number,
    // which reaches them in each delivery's payload; they set the endpoint's ordering (their own only).
    await assert.rejects(
      db().withRequestContext(userClaims(owner), (tx) =>
        tx.query("select seq from internal.events where id = $1", [event.id]),
      ),
      /permission denied/,
    );
    await db().withRequestContext(userClaims(owner), (tx) =>
      tx.query("update internal.webhook_endpoints set ordering = 'strict' where id = $1", [e.id]),
    );
    const [row] = await sql<{ ordering: string }>(
      db(),
      "select ordering from internal.webhook_endpoints where id = $1",
      [e.id],
    );
    assert.equal(row?.ordering, "strict");
    await assert.rejects(
      db().withRequestContext(userClaims(owner), (tx) =>
        tx.query("update internal.webhook_endpoints set ordering = 'fifo' where id = $1", [e.id]),
      ),
      /check constraint/,
    );
  });

  test("the public API sets an endpoint's ordering: best_effort by default, strict on request", async () => {
    const app: RunningApp = await startApp(t(), { WEBHOOK_ALLOW_PRIVATE: "true" });
    try {
      const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
      const k = await keyedAccount(db(), { tenant: (await tenantWithKeys(t(), { settings })).tenant });
      const api = publicApi(app.url, k.key.secret);
      const body = { url: "https://hooks.example.com/in-order", events: ["release.live"] };
      const plain = expectStatus(await api("POST", "/webhooks", body), 201) as Obj;
      assert.equal(plain.ordering, "best_effort");
      const strict = expectStatus(
        await api("POST", "/webhooks", { ...body, ordering: "strict" }),
        201,
      ) as Obj;
      assert.equal(strict.ordering, "strict");
      assert.equal((expectStatus(await api("GET", `/webhooks/${strict.id}`), 200) as Obj).ordering, "strict");
      const patched = expectStatus(
        await api("PATCH", `/webhooks/${strict.id}`, { ordering: "best_effort" }),
        200,
      ) as Obj;
      assert.equal(patched.ordering, "best_effort");
      assertFieldErrors(await api("POST", "/webhooks", { ...body, ordering: "fifo" }), [
        ["ordering", "invalid_choice"],
      ]);
      assertFieldErrors(await api("PATCH", `/webhooks/${strict.id}`, { ordering: null }), [
        ["ordering", "invalid_choice"],
      ]);
    } finally {
      await app.close();
    }
  });

  test("backline worker killed with SIGKILL mid-batch and started again: strict endpoints in order, the takeover in seconds", async () => {
    // The child seals and opens with the test run's key, as the test database's secrets are sealed.
    const key = Buffer.from(TEST_ENCRYPTION_KEY, "base64");
    const childBox = new SecretBox(key);
    const dataDir = tempDir("backline-webhook-order-");
    // On PGlite the worker owns the database: it is written here, then handed to the worker.
    let local: Db | undefined;
    if (t().kind === "pglite") {
      await copyMigratedDatabase(dataDir);
      const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
      local = new Db(engine, { secrets: childBox });
    }
    const setupDb = local ?? db();
    const env: Record<string, string> =
      t().kind === "pglite"
        ? { DATA_DIR: dataDir }
        : { DATABASE_URL: t().url as string, MIGRATE_ON_START: "false", DATA_DIR: dataDir };
    Object.assign(env, {
      ENCRYPTION_KEY: key.toString("base64"),
      WEBHOOK_ALLOW_PRIVATE: "true",
      WORKER_CONCURRENCY: "1",
    });

    // Until the kill, every request is held open: the worker is mid-batch when it dies.
    let phase: "hold" | "answer" = "hold";
    const respond = () => (phase === "hold" ? ("hang" as const) : { status: 200 });
    const tenant = await seedTenant(setupDb);
    const w: World = { tenant, account: await seedAccount(setupDb, tenant, "Crash Test Records") };
    const strict = await endpoint(
      setupDb,
      childBox,
      w,
      receiver.route("crash-strict", { respond }),
      "strict",
    );
    const loose = await endpoint(
      setupDb,
      childBox,
      w,
      receiver.route("crash-loose", { respond }),
      "best_effort",
    );
    const releases = Array.from({ length: 6 }, () => randomUUID());
    const written: EventRow[] = [];
    for (const type of ["release.approved", "release.live"]) {
      for (const r of releases) written.push(await emit(setupDb, w, type, r));
    }
    const total = written.length;
    await local?.close();

    const workers: WorkerProcess[] = [];
    try {
      const first = await startWorkerProcess(env);
      workers.push(first);
      await receiver.waitFor(loose.route, total, 20_000);
      await receiver.waitFor(strict.route, 1, 20_000);
      await sleep(300);
      assert.equal(strict.route.received.length, 1, "strict: one at a time, the first event first");
      first.child.kill("SIGKILL");
      await first.exited;
      phase = "answer";
      receiver.release(undefined, 200);
      const before = { strict: strict.route.received.length, loose: loose.route.received.length };

      const second = await startWorkerProcess(env);
      workers.push(second);
      const restarted = Date.now();
      await receiver.waitFor(loose.route, before.loose + 1, 10_000);
      const takeover = (loose.route.received[before.loose]?.at ?? 0) - restarted;
      assert.ok(takeover < 3000, `the dead worker's claims taken over ${takeover} ms after the restart`);

      const unique = (route: Route) => new Set(route.received.map((r) => r.headers["webhook-id"])).size;
      await until(
        "every event at both endpoints",
        () => unique(strict.route) === total && unique(loose.route) === total,
        20_000,
      );
      // An event the killed worker sent but could not record is sent again after the takeover: it
      // may still be on its way when every event has arrived once. Wait until the endpoints have
      // been quiet for a while, so the stop below finds no send in flight.
      for (let quiet = 0, seen = -1, tries = 0; quiet < 3 && tries < 40; tries++) {
        const now = strict.route.received.length + loose.route.received.length;
        quiet = now === seen ? quiet + 1 : 0;
        seen = now;
        await sleep(500);
      }

      // Strict: no event after a later event of its release, and overall in the order they happened.
      assertReleaseOrder(strict.route.received, "strict");
      const firstSeen: string[] = [];
      for (const r of strict.route.received) {
        const id = r.headers["webhook-id"] as string;
        if (!firstSeen.includes(id)) firstSeen.push(id);
      }
      assert.deepEqual(
        firstSeen,
        written.map((e) => e.id),
        "strict: in the order the events happened",
      );

      // Best effort: every payload carries the event's time and sequence, as written.
      const bySeq = new Map(written.map((e) => [e.id, Number(e.seq)]));
      for (const p of payloads(loose.route.received)) {
        assert.equal(p.sequence, bySeq.get(p.id), `${p.id}: its sequence`);
        assert.ok(!Number.isNaN(Date.parse(p.created)), `${p.id}: its time`);
      }
      assert.ok([...strict.route.received, ...loose.route.received].every((r) => r.verifiedBy[0]));

      await second.stop("SIGTERM");
      const logs = second.logs().map((l) => l.msg);
      assert.ok(
        logs.includes(
          t().kind === "pglite"
            ? "webhooks: released the deliveries claimed before this process started"
            : "webhooks: dispatchers found dead; their deliveries released",
        ),
        second.output(),
      );

      // Afterwards: every delivery recorded once succeeded, and no dispatcher left registered.
      let check: Db = db();
      if (t().kind === "pglite") {
        check = new Db(await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") }));
      }
      try {
        const rows = await sql<{ status: string; n: string }>(
          check,
          `select status, count(*) as n from internal.webhook_deliveries where endpoint_id = any($1) group by status`,
          [[strict.id, loose.id]],
        );
        assert.deepEqual(
          rows.map((r) => [r.status, Number(r.n)]),
          [["succeeded", 2 * total]],
        );
        assert.deepEqual(await sql(check, "select id from internal.webhook_dispatchers"), []);
      } finally {
        if (check !== db()) await check.close();
      }
    } finally {
      for (const w of workers) w.child.kill("SIGKILL");
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
