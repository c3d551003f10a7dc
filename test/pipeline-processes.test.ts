import assert from "node:assert/strict";
import { after, afterEach, before, describe, test } from "node:test";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { createTestDb, ENGINES, type TestDb } from "./support/db.ts";
import { completeRelease, expectStatus, isrcs, keyedAccount, publicApi } from "./support/public-api.ts";
import { type SeedUser, seedUser } from "./support/seed.ts";
import { startWorkerProcess, type WorkerProcess } from "./support/worker-process.ts";

/**
 * The operator backend as operators run it on PostgreSQL (docs/operator.md, "Workers"): several
 * `backline worker` processes side by side over one database, and a worker that dies mid-job.
 * Real OS processes (`node src/start/cli.ts worker`) logging in as the non-superuser login role;
 * releases made as accounts make them (the public API over HTTP, served in this process).
 *
 * Which worker claimed what: internal.jobs.locked_by is cleared when a job succeeds, so this file's
 * database records every claim (a job going to running with one more attempt) in
 * test_audit.claims, by a trigger installed here; each worker process names its Worker's id in its
 * "worker started" log line.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

const SKIP = ENGINES.includes("postgres")
  ? false
  : "worker processes race on PostgreSQL only: TEST_DATABASE_URL is not set (or TEST_ENGINES leaves it out)";

const nextIsrc = isrcs("QZPRC");

/** The tenant settings: review and delivery run by themselves, to the sandbox store. */
const DELIVERING = { auto_review: true, delivery_adapter: "sandbox" };

/** This file's stores: its database is its own, so no other release goes to them. */
const RACE_STORES = ["race_one", "race_two"];
const SLOW_STORES = ["slow_one", "slow_two"];

const PIPELINE_KINDS = ["release.review", "release.deliver", "delivery.send", "delivery.live"];

/** The history of a release that went straight through review and delivery. */
const THROUGH_TO_LIVE = [
  [null, "draft"],
  ["draft", "submitted"],
  ["submitted", "in_review"],
  ["in_review", "approved"],
  ["approved", "delivering"],
  ["delivering", "delivered"],
  ["delivered", "live"],
];

const AUDIT_SQL = `
  create schema test_audit;
  create table test_audit.claims (
    n bigint generated always as identity primary key,
    job_id bigint not null,
    kind text not null,
    worker text not null,
    attempt integer not null,
    at timestamptz not null default clock_timestamp()
  );
  create function test_audit.record_claim() returns trigger
  language plpgsql security definer set search_path = ''
  as $$
  begin
    insert into test_audit.claims (job_id, kind, worker, attempt) values (new.id, new.kind, new.locked_by, new.attempts);
    return null;
  end
  $$;
  create trigger test_audit_claims after update on internal.jobs
    for each row when (new.status = 'running' and new.attempts > old.attempts)
    execute function test_audit.record_claim();
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Reads until `ok` holds; fails with `what` and the last value read. */
async function poll<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) {
      assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value)}`);
    }
    await sleep(25);
  }
}

/** A worker's log lines at warn or above (pino levels: 40 warn, 50 error, 60 fatal). */
const complaints = (w: WorkerProcess) => w.logs().filter((l) => Number(l.level) >= 40);

describe("backline worker processes [postgres]", () => {
  let t: TestDb | undefined;
  let app: RunningApp | undefined;
  const spawned: WorkerProcess[] = [];

  before(async () => {
    if (SKIP) return;
    t = await createTestDb("postgres");
    await t.owner.transaction((tx) => tx.exec(AUDIT_SQL), { readOnly: false });
    await t.db.asService(async (tx) => {
      for (const code of [...RACE_STORES, ...SLOW_STORES]) {
        await tx.query("insert into internal.stores (code, name, sort) values ($1, $2, 1000)", [
          code,
          `Test Store ${code}`,
        ]);
      }
    });
    // Started after the stores: the public API validates `services` against a catalogue it caches.
    app = await startApp(t);
  });

  // A test that failed may leave its workers running: never let one outlive its test.
  afterEach(async () => {
    await Promise.all(spawned.splice(0).map((w) => w.stop("SIGKILL")));
  });

  after(async () => {
    await app?.close();
    await t?.close();
  });

  const tdb = () => {
    if (!t) throw new Error("test database not ready");
    return t;
  };

  async function worker(env: Record<string, string> = {}): Promise<WorkerProcess> {
    const url = tdb().url;
    assert.ok(url, "a PostgreSQL test database has a login URL");
    const w = await startWorkerProcess({
      DATABASE_URL: url,
      MIGRATE_ON_START: "false",
      WORKER_CONCURRENCY: "4",
      ...env,
    });
    spawned.push(w);
    return w;
  }

  async function rows<T extends Obj>(sql: string, params: unknown[] = []): Promise<T[]> {
    return tdb().db.asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  }

  const setSandbox = (codes: string[], sandbox: Obj) =>
    tdb().db.asService((tx) =>
      tx.query("update internal.stores set settings = $2 where code = any($1::text[])", [
        codes,
        JSON.stringify({ sandbox }),
      ]),
    );

  /** A tenant delivering by itself, an account with a key, two members, and an artist. */
  async function label(): Promise<{ tenant: Tenant; account: Account; api: Api; members: SeedUser[] }> {
    const settings = {
      ...UNLIMITED,
      public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 },
      ...DELIVERING,
    };
    const { tenant } = await tenantWithKeys(tdb(), { settings });
    const { account, key } = await keyedAccount(tdb().db, { tenant });
    const members = [
      await seedUser(tdb().db, tenant, [{ account, role: "owner" }]),
      await seedUser(tdb().db, tenant, [{ account, role: "member" }]),
    ];
    const url = app?.url;
    assert.ok(url);
    return { tenant, account, api: publicApi(url, key.secret), members };
  }

  /** A complete release of `artistId` (one track with an ISRC) for `stores`, as a draft. */
  async function completeDraft(api: Api, artistId: string, stores: string[], n: number): Promise<string> {
    const release = expectStatus(
      await api<Obj & { id: string }>(
        "POST",
        "/releases",
        completeRelease({ title: `Night Drive ${n}`, artist_id: artistId, services: stores }),
      ),
      201,
    );
    expectStatus(
      await api("POST", `/releases/${release.id}/tracks`, {
        title: `Night Drive ${n}`,
        isrc: nextIsrc(),
        duration: 200,
      }),
      201,
    );
    return release.id;
  }

  async function submit(api: Api, id: string): Promise<void> {
    assert.equal(expectStatus(await api<Obj>("POST", `/releases/${id}/submit`), 200).status, "submitted");
  }

  const artist = async (api: Api) =>
    expectStatus(await api<Obj & { id: string }>("POST", "/artists", { name: "Luna Vale" }), 201).id;

  const statuses = async (ids: string[]) =>
    rows<{ id: string; status: string }>(
      "select id::text as id, status from public.releases where id = any($1::uuid[]) order by id",
      [ids],
    );

  /** Every job of the pipeline's kinds for these releases: their review and delivery jobs and those of their deliveries. */
  const jobsOf = (ids: string[]) =>
    rows<{
      id: string;
      kind: string;
      release_id: string;
      status: string;
      attempts: number;
      last_error: string | null;
    }>(
      `select j.id::text as id, j.kind, coalesce(j.payload ->> 'release_id', d.release_id::text) as release_id,
              j.status, j.attempts, j.last_error
       from internal.jobs j
       left join internal.release_deliveries d on d.id::text = j.payload ->> 'delivery_id'
       where j.kind = any($2::text[])
         and coalesce(j.payload ->> 'release_id', d.release_id::text) = any($1::text[])
       order by j.id`,
      [ids, PIPELINE_KINDS],
    );

  /** Waits until none of these releases' jobs is queued or running. */
  const jobsSettled = (ids: string[]) =>
    poll(
      "the releases' jobs to finish",
      () => jobsOf(ids),
      (jobs) => jobs.every((j) => j.status !== "queued" && j.status !== "running"),
    );

  /** Every claim of these jobs, in order: which worker took it, for which attempt. */
  const claimsOf = async (jobIds: string[]) =>
    (
      await tdb().owner.transaction(
        (tx) =>
          tx.query<{ job_id: string; kind: string; worker: string; attempt: number; at: Date }>(
            "select job_id::text as job_id, kind, worker, attempt, at from test_audit.claims where job_id = any($1::bigint[]) order by n",
            [jobIds],
          ),
        { readOnly: true },
      )
    ).rows;

  const deliveriesOf = (ids: string[]) =>
    rows<{
      id: string;
      release_id: string;
      store: string;
      action: string;
      status: string;
      message: string | null;
      attempts: number;
      store_reference: string | null;
    }>(
      `select id::text as id, release_id::text as release_id, store, action, status, message, attempts, store_reference
       from internal.release_deliveries where release_id = any($1::uuid[]) order by release_id, store, created_at`,
      [ids],
    );

  const historyOf = async (id: string) =>
    (
      await rows<{ from_status: string | null; to_status: string }>(
        "select from_status, to_status from internal.release_history where release_id = $1 order by id",
        [id],
      )
    ).map((h) => [h.from_status, h.to_status]);

  const eventTypes = async (id: string) =>
    (
      await rows<{ type: string }>(
        "select type from internal.events where data -> 'object' ->> 'id' = $1 order by created_at, id",
        [id],
      )
    ).map((e) => e.type);

  /** Each member's notifications about these releases, as "kind release store" keys, sorted. */
  async function notificationsOf(account: Account, member: SeedUser): Promise<string[]> {
    return (
      await rows<{ kind: string; data: Obj }>(
        "select kind, data from public.notifications where account_id = $1 and user_id = $2",
        [account.id, member.id],
      )
    )
      .map((n) => `${n.kind} ${String(n.data.release_id)} ${String(n.data.store ?? "-")}`)
      .sort();
  }

  /** What each member hears of releases that went live in `stores`: each once. */
  const expectedNotifications = (ids: string[], stores: string[]) =>
    ids
      .flatMap((id) => [
        `release.approved ${id} -`,
        `release.live ${id} -`,
        ...stores.map((s) => `delivery.live ${id} ${s}`),
      ])
      .sort();

  test("two `backline worker` processes racing over 20 releases run every job once, and both do some of it", {
    timeout: 120_000,
  }, async (ctx) => {
    if (SKIP) return ctx.skip(SKIP);
    // Each send waits a little for the store, so one worker (4 jobs at once) cannot drain the queue
    // before the other's next look (every second while idle).
    await setSandbox(RACE_STORES, { ack_after_ms: 250 });
    const { account, api, members } = await label();
    const artistId = await artist(api);
    const ids: string[] = [];
    for (let n = 1; n <= 20; n++) ids.push(await completeDraft(api, artistId, RACE_STORES, n));

    const [a, b] = await Promise.all([worker(), worker()]);
    assert.ok(a && b);
    assert.notEqual(a.id, b.id);
    const started = Date.now();
    // Five at a time, as many as the app has connections: twenty at once made the last ones wait
    // past the database's bounded wait (1 s, then 503) whenever the machine was busy, which is
    // the admission queue's test (test/reliability.test.ts), not this one's.
    for (let i = 0; i < ids.length; i += 5)
      await Promise.all(ids.slice(i, i + 5).map((id) => submit(api, id)));

    await poll(
      "every release to be live",
      () => statuses(ids),
      (list) => list.length === ids.length && list.every((r) => r.status === "live"),
    );
    const jobs = await jobsSettled(ids);
    ctx.diagnostic(`20 releases live in ${Date.now() - started} ms`);

    // Every job ran once: succeeded at its first attempt, claimed once.
    assert.equal(jobs.length, 20 * (2 + 2 * RACE_STORES.length));
    assert.deepEqual(
      jobs.filter((j) => j.status !== "succeeded" || j.attempts !== 1 || j.last_error !== null),
      [],
      "every job succeeded at its first attempt",
    );
    for (const id of ids) {
      assert.deepEqual(
        jobs
          .filter((j) => j.release_id === id)
          .map((j) => j.kind)
          .sort(),
        [
          "delivery.live",
          "delivery.live",
          "delivery.send",
          "delivery.send",
          "release.deliver",
          "release.review",
        ],
        `the jobs of release ${id}`,
      );
    }
    const claims = await claimsOf(jobs.map((j) => j.id));
    assert.deepEqual(
      claims.map((c) => [c.job_id, c.attempt]).sort(),
      jobs.map((j) => [j.id, 1]).sort(),
      "each job claimed exactly once",
    );

    // Both processes did some of the work.
    const byWorker = new Map<string, number>();
    for (const c of claims) byWorker.set(c.worker, (byWorker.get(c.worker) ?? 0) + 1);
    ctx.diagnostic(`jobs claimed by worker: ${JSON.stringify(Object.fromEntries(byWorker))}`);
    assert.deepEqual([...byWorker.keys()].sort(), [a.id, b.id].sort(), "both workers claimed jobs");

    // One insert delivery per release and store, sent once, live.
    const deliveries = await deliveriesOf(ids);
    assert.deepEqual(
      deliveries.map((d) => [d.release_id, d.store, d.action, d.status, d.message, d.attempts]),
      [...ids].sort().flatMap((id) => RACE_STORES.map((s) => [id, s, "insert", "live", null, 1])),
    );
    for (const d of deliveries) assert.equal(d.store_reference, `sandbox-${d.store}-${d.id}`);

    // One transition of each kind (one approval) per release, one event of each.
    for (const id of ids) {
      assert.deepEqual(await historyOf(id), THROUGH_TO_LIVE, `history of ${id}`);
      assert.deepEqual(
        await eventTypes(id),
        ["release.submitted", "release.approved", "release.live"],
        `events of ${id}`,
      );
    }
    // Each member hears of each approval, store and release once.
    for (const m of members) {
      assert.deepEqual(await notificationsOf(account, m), expectedNotifications(ids, RACE_STORES));
    }

    // SIGTERM: each stops claiming, finishes what it holds, and exits 0.
    const [exitA, exitB] = await Promise.all([a.stop("SIGTERM"), b.stop("SIGTERM")]);
    assert.deepEqual(exitA, { code: 0, signal: null }, a.output());
    assert.deepEqual(exitB, { code: 0, signal: null }, b.output());
    assert.deepEqual([...complaints(a), ...complaints(b)], [], "no warnings from either worker");
    for (const w of [a, b]) {
      assert.ok(
        w.logs().some((l) => l.msg === "worker stopping" && l.signal === "SIGTERM"),
        w.output(),
      );
    }
  });

  test("a worker killed with SIGKILL mid-delivery: another sends it again when the lease runs out, nothing twice", {
    timeout: 120_000,
  }, async (ctx) => {
    if (SKIP) return ctx.skip(SKIP);
    // The stores take 3 s to acknowledge: long enough to kill the worker while it waits.
    await setSandbox(SLOW_STORES, { ack_after_ms: 3000 });
    const { account, api, members } = await label();
    const id = await completeDraft(api, await artist(api), SLOW_STORES, 1);

    const a = await worker({ WORKER_LEASE_MS: "2000" });
    await submit(api, id);
    const sending = await poll(
      "both deliveries to be in progress",
      () => deliveriesOf([id]),
      (ds) => ds.length === SLOW_STORES.length && ds.every((d) => d.status === "in_progress"),
    );
    assert.deepEqual(
      sending.map((d) => [d.store, d.action, d.attempts]),
      SLOW_STORES.map((s) => [s, "insert", 1]),
    );

    assert.deepEqual(await a.stop("SIGKILL"), { code: null, signal: "SIGKILL" });
    const killedAt = new Date();
    // What the dead worker left: its sends running, still its own until the lease runs out.
    const left = (await jobsOf([id])).filter((j) => j.kind === "delivery.send");
    assert.deepEqual(
      left.map((j) => [j.status, j.attempts]),
      SLOW_STORES.map(() => ["running", 1]),
    );
    const leases = await rows<{ id: string; locked_by: string; locked_until: Date }>(
      "select id::text as id, locked_by, locked_until from internal.jobs where id = any($1::bigint[]) order by id",
      [left.map((j) => j.id)],
    );
    assert.deepEqual(
      leases.map((l) => l.locked_by),
      SLOW_STORES.map(() => a.id),
    );
    assert.equal((await statuses([id]))[0]?.status, "delivering");

    const b = await worker();
    await poll(
      "the release to be live",
      () => statuses([id]),
      (list) => list[0]?.status === "live",
    );
    const jobs = await jobsSettled([id]);
    ctx.diagnostic(`live ${Date.now() - killedAt.getTime()} ms after the kill`);

    // The sends ran again (attempt 2, by worker B, once the lease had run out); everything else once.
    assert.deepEqual(
      jobs.map((j) => [j.kind, j.status, j.attempts, j.last_error]).sort(),
      [
        ["release.review", "succeeded", 1, null],
        ["release.deliver", "succeeded", 1, null],
        ...SLOW_STORES.flatMap(() => [
          ["delivery.send", "succeeded", 2, null],
          ["delivery.live", "succeeded", 1, null],
        ]),
      ].sort(),
    );
    const claims = await claimsOf(jobs.map((j) => j.id));
    for (const j of jobs) {
      const mine = claims.filter((c) => c.job_id === j.id);
      if (j.kind === "delivery.send") {
        assert.deepEqual(
          mine.map((c) => [c.worker, c.attempt]),
          [
            [a.id, 1],
            [b.id, 2],
          ],
          `${j.kind} ${j.id}: worker A, then worker B`,
        );
        const lease = leases.find((l) => l.id === j.id)?.locked_until;
        assert.ok(lease && mine[1] && mine[1].at >= lease, "claimed again only after the lease ran out");
      } else {
        assert.equal(mine.length, 1, `${j.kind} claimed once`);
        assert.equal(
          mine[0]?.worker,
          j.kind === "delivery.live" ? b.id : a.id,
          `${j.kind} ran on its worker`,
        );
      }
    }

    // One insert delivery per store, sent twice (the first send never acknowledged), live.
    const deliveries = await deliveriesOf([id]);
    assert.deepEqual(
      deliveries.map((d) => [d.store, d.action, d.status, d.message, d.attempts]),
      SLOW_STORES.map((s) => [s, "insert", "live", null, 2]),
    );
    assert.deepEqual(await historyOf(id), THROUGH_TO_LIVE);
    assert.deepEqual(await eventTypes(id), ["release.submitted", "release.approved", "release.live"]);
    for (const m of members) {
      assert.deepEqual(await notificationsOf(account, m), expectedNotifications([id], SLOW_STORES));
    }

    assert.deepEqual(await b.stop("SIGTERM"), { code: 0, signal: null }, b.output());
    assert.deepEqual(complaints(b), [], "no warnings from worker B");
  });
});
