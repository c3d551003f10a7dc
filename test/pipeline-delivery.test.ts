import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Db } from "../src/db/db.ts";
import { asDbError } from "../src/db/errors.ts";
import { enqueue, type Job } from "../src/jobs/queue.ts";
import { type Handlers, Worker } from "../src/jobs/worker.ts";
import {
  deliverRelease,
  deliveryLive,
  processTakedown,
  redeliverRelease,
  sendDelivery,
} from "../src/pipeline/delivery.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { decideReview } from "../src/pipeline/review.ts";
import type { Account, Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  completeRelease,
  expectStatus,
  isrcs,
  issueTestKey,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import { forceReleaseStatus } from "./support/seed.ts";

/**
 * Delivery and takedown (src/pipeline/delivery.ts, docs/operator.md "Delivery"): an approved
 * release gets one delivery record per store, each sent by its own `delivery.send` job through
 * the sandbox store adapter, and the release follows its stores (delivering -> delivered -> live).
 * Metadata corrections send `update` deliveries, takedowns `takedown` deliveries. Run by a real
 * Worker with the pipeline's handlers over the test database, with releases made as accounts make
 * them (the public API over HTTP).
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

interface Delivery {
  id: string;
  release_id: string;
  store: string;
  action: "insert" | "update" | "takedown";
  status: string;
  message: string | null;
  store_reference: string | null;
  attempts: number;
  delivered_at: Date | null;
  live_at: Date | null;
  taken_down_at: Date | null;
  confirmed_by: string | null;
  confirmed_via: string | null;
  created_at: Date;
}

interface JobRow {
  id: string;
  kind: string;
  payload: Obj;
  status: string;
  attempts: number;
  last_error: string | null;
  run_at: Date;
}

interface StoreStatus {
  store: string;
  action: string;
  status: string;
  message: string | null;
  delivered_at: string | null;
  live_at: string | null;
  taken_down_at: string | null;
  confirmed_by: string | null;
  updated_at: string;
}

interface StatusReport {
  object: string;
  id: string;
  status: string;
  approval: string;
  live: boolean;
  stores: StoreStatus[];
  takedown: (Obj & { status: string; completed_at: string | null }) | null;
}

const nextIsrc = isrcs("QZDLV");

/** The tenant settings of most tests: review and delivery run by themselves, to the sandbox store. */
const DELIVERING = { auto_review: true, delivery_adapter: "sandbox" };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Reads until `ok` holds; fails with `what` and the last value read. */
async function poll<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  timeoutMs = 20_000,
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

const byStore = <T extends { store: string }>(list: T[]) =>
  [...list].sort((a, b) => (a.store < b.store ? -1 : a.store > b.store ? 1 : 0));

describeEachEngine("release delivery", (t) => {
  const db = () => t().db;

  async function rows<T extends Obj>(sql: string, params: unknown[] = []): Promise<T[]> {
    return db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  }

  const statusOf = async (id: string) =>
    (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]?.status;

  const waitForStatus = (id: string, status: string, timeoutMs = 20_000) =>
    poll(
      `release ${id} to be ${status}`,
      () => statusOf(id),
      (s) => s === status,
      timeoutMs,
    );

  /** The delivery records of release `id`, by store (as JavaScript sorts codes), then oldest first. */
  const deliveriesOf = async (id: string) => {
    const actions = ["insert", "update", "takedown"];
    return (
      await rows<Delivery & Obj>(
        `select id::text as id, release_id::text as release_id, store, action, status, message, store_reference,
                attempts, delivered_at, live_at, taken_down_at, confirmed_by, confirmed_via, created_at
         from internal.release_deliveries where release_id = $1`,
        [id],
      )
    ).sort(
      (a, b) =>
        (a.store < b.store ? -1 : a.store > b.store ? 1 : 0) ||
        a.created_at.getTime() - b.created_at.getTime() ||
        actions.indexOf(a.action) - actions.indexOf(b.action),
    );
  };

  /** Every job of release `id`: its review, delivery and takedown jobs and those of its deliveries. */
  const jobsOf = (id: string) =>
    rows<JobRow & Obj>(
      `select j.id::text as id, j.kind, j.payload, j.status, j.attempts, j.last_error, j.run_at
       from internal.jobs j
       where j.payload ->> 'release_id' = $1::text
          or j.payload ->> 'delivery_id' in (select d.id::text from internal.release_deliveries d where d.release_id = $1::uuid)
          or j.payload ->> 'takedown_request_id' in
            (select r.id::text from public.takedown_requests r where r.release_id = $1::uuid)
       order by j.id`,
      [id],
    );

  /** Waits until none of release `id`'s jobs is queued or running. */
  const jobsSettled = (id: string, timeoutMs = 20_000) =>
    poll(
      `the jobs of release ${id} to finish`,
      () => jobsOf(id),
      (jobs) => jobs.every((j) => j.status !== "queued" && j.status !== "running"),
      timeoutMs,
    );

  const historyOf = async (id: string) =>
    (
      await rows<{ from_status: string | null; to_status: string; actor_role: string }>(
        "select from_status, to_status, actor_role from internal.release_history where release_id = $1 order by id",
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

  const enabledStores = async () =>
    (await rows<{ code: string }>("select code from internal.stores where enabled order by code")).map(
      (s) => s.code,
    );

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

  // A real worker with the pipeline's handlers for every test of this engine. An inner suite, so
  // it stops before describeEachEngine's after() closes the database.
  describe("with a worker", () => {
    let app: RunningApp;
    let worker: Worker;
    before(async () => {
      app = await startApp(t());
      worker = new Worker({ db: db(), handlers: pipelineHandlers(db()), pollMs: 20 });
      worker.start();
    });
    after(async () => {
      await worker?.stop();
      await app?.close();
    });

    /** Runs `fn` with the worker stopped (its jobs stay queued), then starts it again. */
    async function withWorkerStopped(fn: () => Promise<void>): Promise<void> {
      await worker.stop();
      try {
        await fn();
      } finally {
        worker.start();
      }
    }

    async function newTenant(settings: Obj): Promise<Tenant> {
      const limits = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
      return (await tenantWithKeys(t(), { settings: { ...limits, ...settings } })).tenant;
    }

    async function keyed(tenant: Tenant, url = app.url): Promise<{ account: Account; api: Api }> {
      const k = await keyedAccount(db(), { tenant });
      return { account: k.account, api: publicApi(url, k.key.secret) };
    }

    /** A complete release (one track with an ISRC), as a draft. */
    async function completeDraft(api: Api, overrides: Obj = {}): Promise<string> {
      const release = expectStatus(
        await api<Obj & { id: string }>("POST", "/releases", completeRelease(overrides)),
        201,
      );
      expectStatus(
        await api("POST", `/releases/${release.id}/tracks`, {
          title: "Night Drive",
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

    /** A complete release, submitted through POST /releases/{id}/submit. */
    async function submitted(api: Api, overrides: Obj = {}): Promise<string> {
      const id = await completeDraft(api, overrides);
      await submit(api, id);
      return id;
    }

    /** A release live in its stores (default: spotify and apple_music), its jobs all done. */
    async function liveRelease(api: Api, overrides: Obj = {}): Promise<string> {
      const id = await submitted(api, overrides);
      await waitForStatus(id, "live");
      await jobsSettled(id);
      return id;
    }

    const statusReport = async (api: Api, id: string) =>
      expectStatus(await api<StatusReport>("GET", `/releases/${id}/status`), 200);

    /**
     * Store rows of the test's own, with unique codes, and an app started after them: the public
     * API validates `services` against a catalogue it caches for a minute, so only an app started
     * now knows them. The stores are disabled afterwards: the stores are the whole test database's,
     * and a later release naming no store must not go to them.
     */
    async function withOwnStores(
      settings: Obj[],
      fn: (stores: { codes: string[]; names: string[]; url: string }) => Promise<void>,
    ): Promise<void> {
      const codes = settings.map(() => `test_${randomUUID().replaceAll("-", "").slice(0, 10)}`);
      const names = codes.map((code) => `Test Store ${code}`);
      await db().asService(async (tx) => {
        for (const [i, code] of codes.entries()) {
          await tx.query(
            "insert into internal.stores (code, name, sort, settings) values ($1, $2, 1000, $3)",
            [code, names[i], JSON.stringify(settings[i])],
          );
        }
      });
      const own = await startApp(t());
      try {
        await fn({ codes, names, url: own.url });
      } finally {
        await own.close();
        await db().asService((tx) =>
          tx.query("update internal.stores set enabled = false where code = any($1::text[])", [codes]),
        );
      }
    }

    const setStoreSettings = (code: string, settings: Obj) =>
      db().asService((tx) =>
        tx.query("update internal.stores set settings = $2 where code = $1", [
          code,
          JSON.stringify(settings),
        ]),
      );

    /** What a release live in `stores` (each by one insert delivery) looks like everywhere. */
    async function assertLiveIn(api: Api, id: string, stores: string[]): Promise<void> {
      assert.equal(await statusOf(id), "live");
      const deliveries = await deliveriesOf(id);
      assert.deepEqual(
        deliveries.map((d) => [d.store, d.action, d.status, d.message, d.attempts]),
        [...stores].sort().map((s) => [s, "insert", "live", null, 1]),
      );
      for (const d of deliveries) {
        assert.ok(d.delivered_at instanceof Date, `${d.store}: delivered_at`);
        assert.ok(d.live_at instanceof Date, `${d.store}: live_at`);
        assert.ok(d.live_at.getTime() >= d.delivered_at.getTime(), `${d.store}: live after delivered`);
        assert.equal(d.store_reference, `sandbox-${d.store}-${d.id}`);
      }
      assert.deepEqual(await historyOf(id), THROUGH_TO_LIVE);
      assert.deepEqual(await eventTypes(id), ["release.submitted", "release.approved", "release.live"]);

      const jobs = await jobsOf(id);
      assert.deepEqual(
        jobs.map((j) => [j.kind, j.status, j.attempts, j.last_error]).sort(),
        [
          ["release.review", "succeeded", 1, null],
          ["release.deliver", "succeeded", 1, null],
          ...deliveries.flatMap((): [string, string, number, null][] => [
            ["delivery.send", "succeeded", 1, null],
            ["delivery.live", "succeeded", 1, null],
          ]),
        ].sort(),
      );
      for (const d of deliveries) {
        assert.equal(
          jobs.filter((j) => j.payload.delivery_id === d.id && j.kind === "delivery.send").length,
          1,
          `one send job for ${d.store}`,
        );
      }

      const report = await statusReport(api, id);
      assert.deepEqual(
        [report.object, report.id, report.status, report.approval, report.live, report.takedown],
        ["release_status", id, "live", "approved", true, null],
      );
      assert.deepEqual(
        byStore(report.stores).map((s) => [s.store, s.action, s.status, s.message]),
        [...stores].sort().map((s) => [s, "insert", "live", null]),
      );
      for (const s of report.stores) {
        const d = deliveries.find((x) => x.store === s.store);
        assert.equal(s.delivered_at && Date.parse(s.delivered_at), d?.delivered_at?.getTime());
        assert.equal(s.live_at && Date.parse(s.live_at), d?.live_at?.getTime());
      }
    }

    test("happy path: submit -> review -> delivering -> delivered -> live, one insert delivery per store named in services", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api, { services: ["spotify", "apple_music"] });
      await assertLiveIn(api, id, ["spotify", "apple_music"]);
    });

    test("happy path: a release naming no store goes to every enabled store", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const stores = await enabledStores();
      assert.ok(stores.length >= 19, `the platform's stores: ${stores.join(", ")}`);
      const id = await liveRelease(api, { services: [] });
      await assertLiveIn(api, id, stores);
    });

    test("a sandbox account (test-mode key) of a tenant without delivery_adapter goes live in the sandbox store; its live twin's deliveries wait for an adapter", async () => {
      // Neither automatic review nor the sandbox adapter: only the account being a sandbox.
      const tenant = await newTenant({});
      const { account, api: liveApi } = await keyed(tenant);
      const testKey = await issueTestKey(db(), account, { mode: "test" });
      const sandboxApi = publicApi(app.url, testKey.secret);

      const sandboxRelease = await liveRelease(sandboxApi);
      await assertLiveIn(sandboxApi, sandboxRelease, ["spotify", "apple_music"]);

      // The same release by the live account, approved by the operator: the platform's stores
      // have no adapter configured, so nothing goes out.
      const twinRelease = await submitted(liveApi);
      await poll(
        `${twinRelease} in review`,
        () => statusOf(twinRelease),
        (s) => s === "in_review",
      );
      await jobsSettled(twinRelease);
      await decideReview(db(), twinRelease, { approve: true });
      const errored = await poll(
        "the live account's deliveries to fail for want of an adapter",
        () => deliveriesOf(twinRelease),
        (ds) => ds.length === 2 && ds.every((d) => d.status === "error"),
      );
      assert.deepEqual(
        errored.map((d) => [d.store, d.message]),
        ["apple_music", "spotify"].map((s) => [
          s,
          `store ${s} has no delivery adapter configured (internal.stores.settings.adapter)`,
        ]),
      );
      await jobsSettled(twinRelease);
      assert.equal(await statusOf(twinRelease), "delivering");
    });

    test("stores without an adapter: deliveries end in error naming it, not retried; configured and re-sent, the release goes live", async () => {
      const tenant = await newTenant({ auto_review: true });
      await withOwnStores([{}, { adapter: "carrier_pigeon" }], async ({ codes, url }) => {
        const [bare, unknown] = codes as [string, string];
        const { api } = await keyed(tenant, url);
        const id = await submitted(api, { services: codes });
        const errored = await poll(
          "both deliveries to fail",
          () => deliveriesOf(id),
          (ds) => ds.length === 2 && ds.every((d) => d.status === "error"),
        );
        await jobsSettled(id);
        assert.deepEqual(
          byStore(errored).map((d) => [d.store, d.action, d.status, d.message, d.attempts, d.delivered_at]),
          byStore([
            {
              store: bare,
              message: `store ${bare} has no delivery adapter configured (internal.stores.settings.adapter)`,
            },
            { store: unknown, message: `store ${unknown} names an unknown delivery adapter: carrier_pigeon` },
          ]).map((d) => [d.store, "insert", "error", d.message, 1, null]),
        );
        assert.equal(await statusOf(id), "delivering");
        const sends = (await jobsOf(id)).filter((j) => j.kind === "delivery.send");
        assert.deepEqual(
          sends.map((j) => [j.status, j.attempts, j.last_error]),
          [
            ["succeeded", 1, null],
            ["succeeded", 1, null],
          ],
          "a missing configuration waits for the operator: the send jobs are not retried",
        );
        assert.equal((await jobsOf(id)).filter((j) => j.kind === "delivery.live").length, 0);
        const report = await statusReport(api, id);
        assert.deepEqual([report.status, report.live], ["delivering", false]);
        assert.deepEqual(
          byStore(report.stores).map((s) => [s.store, s.action, s.status, s.message]),
          byStore(errored).map((d) => [d.store, "insert", "error", d.message]),
        );

        // The operator configures the stores and re-sends each errored delivery.
        for (const code of codes) await setStoreSettings(code, { adapter: "sandbox" });
        await db().asService(async (tx) => {
          for (const d of errored) {
            await enqueue(tx, "delivery.send", { delivery_id: d.id }, { dedupeKey: d.id });
          }
        });
        worker.wake();
        await waitForStatus(id, "live");
        await jobsSettled(id);
        const deliveries = await deliveriesOf(id);
        assert.deepEqual(
          byStore(deliveries).map((d) => [d.id, d.store, d.action, d.status, d.message, d.attempts]),
          byStore(errored).map((d) => [d.id, d.store, "insert", "live", null, 2]),
          "the same delivery records, sent a second time",
        );
        for (const d of deliveries) assert.equal(d.store_reference, `sandbox-${d.store}-${d.id}`);
        assert.deepEqual((await historyOf(id)).slice(-3), [
          ["approved", "delivering"],
          ["delivering", "delivered"],
          ["delivered", "live"],
        ]);
        assert.equal((await eventTypes(id)).filter((e) => e === "release.live").length, 1);
        assert.ok((await jobsOf(id)).every((j) => j.status === "succeeded"));
      });
    });

    test("a store that refuses: its delivery is in error with the store's message and retried while the others go live; once it accepts, the release goes live", async () => {
      const tenant = await newTenant(DELIVERING);
      await withOwnStores(
        [{ adapter: "sandbox", sandbox: { fail: "Artwork too small" } }],
        async ({ codes, names, url }) => {
          const [failing] = codes as [string];
          const { api } = await keyed(tenant, url);
          const id = await submitted(api, { services: ["spotify", "apple_music", failing] });
          const refusal = `${names[0]} (sandbox) refused the delivery: Artwork too small`;

          const sendJob = async () => {
            const d = (await deliveriesOf(id)).find((x) => x.store === failing);
            return (
              await rows<JobRow & Obj & { updated_at: Date }>(
                `select id::text as id, kind, payload, status, attempts, last_error, run_at, updated_at
                 from internal.jobs where kind = 'delivery.send' and payload ->> 'delivery_id' = $1::text`,
                [d?.id ?? ""],
              )
            )[0];
          };
          const pullForward = (jobId: string | undefined) =>
            db().asService((tx) =>
              tx.query("update internal.jobs set run_at = now() where id = $1", [jobId]),
            );

          // The first attempt failed: queued again for after the backoff, with the error.
          const firstFailure = await poll(
            "the refused delivery's job to be queued for a retry",
            sendJob,
            (j) => j?.status === "queued" && j.attempts >= 1 && j.last_error !== null,
          );
          assert.match(firstFailure?.last_error ?? "", /Artwork too small/);
          if (firstFailure?.attempts === 1) {
            // Queued with the first backoff (2 s +-20%) from when it failed.
            const backoff = (firstFailure.run_at.getTime() ?? 0) - firstFailure.updated_at.getTime();
            assert.ok(backoff >= 1500 && backoff <= 2500, `retried ${backoff} ms after the failure`);
          }
          // The other stores go on regardless.
          const others = await poll(
            "spotify and apple_music to go live",
            () => deliveriesOf(id),
            (ds) => ds.filter((d) => d.store !== failing).every((d) => d.status === "live"),
          );
          const refused = others.find((d) => d.store === failing);
          assert.deepEqual(
            [refused?.action, refused?.status, refused?.message, refused?.delivered_at, refused?.live_at],
            ["insert", "error", refusal, null, null],
          );
          assert.equal(await statusOf(id), "delivering");
          const report = await statusReport(api, id);
          assert.equal(report.status, "delivering");
          assert.equal(report.live, true, "live in at least one store");
          assert.deepEqual(
            byStore(report.stores).map((s) => [s.store, s.status, s.message]),
            byStore([
              { store: "apple_music", status: "live", message: null },
              { store: "spotify", status: "live", message: null },
              { store: failing, status: "error", message: refusal },
            ]).map((s) => [s.store, s.status, s.message]),
          );

          // Another attempt (the backoff skipped) is refused again.
          await pullForward(firstFailure?.id);
          const second = await poll(
            "another attempt to fail",
            sendJob,
            (j) => j?.status === "queued" && j.attempts >= 2,
          );
          assert.match(second?.last_error ?? "", /Artwork too small/);
          assert.equal(await statusOf(id), "delivering");
          const stillRefused = (await deliveriesOf(id)).filter((d) => d.store === failing);
          assert.deepEqual(
            stillRefused.map((d) => [d.id, d.status, d.message]),
            [[refused?.id, "error", refusal]],
            "retries reuse the delivery record",
          );

          // The store accepts again: the next attempt goes through and the release goes live.
          await setStoreSettings(failing, { adapter: "sandbox" });
          await pullForward(firstFailure?.id);
          await waitForStatus(id, "live");
          await jobsSettled(id);
          const done = (await deliveriesOf(id)).find((d) => d.store === failing);
          const job = await sendJob();
          assert.deepEqual(
            [done?.status, done?.message, done?.store_reference, job?.status, job?.last_error],
            ["live", null, `sandbox-${failing}-${done?.id}`, "succeeded", null],
          );
          assert.ok((job?.attempts ?? 0) >= 3, `attempts: ${job?.attempts}`);
          assert.equal(done?.attempts, job?.attempts, "one send per attempt");
          assert.deepEqual(await historyOf(id), THROUGH_TO_LIVE);
          assert.deepEqual(await eventTypes(id), ["release.submitted", "release.approved", "release.live"]);
        },
      );
    });

    test("live_after_ms: a slow store has the release delivered first and live only later; the release is delivered in between", async () => {
      const tenant = await newTenant(DELIVERING);
      // One store live 1.5 s after delivery, and one a minute after, which the test then hurries:
      // the release is delivered for as long as the test looks, however slow the machine.
      await withOwnStores(
        [
          { adapter: "sandbox", sandbox: { live_after_ms: 1500 } },
          { adapter: "sandbox", sandbox: { live_after_ms: 60_000 } },
        ],
        async ({ codes, url }) => {
          const [slow, slower] = codes as [string, string];
          const { api } = await keyed(tenant, url);
          const id = await submitted(api, { services: ["spotify", slow, slower] });

          const deliveries = await poll(
            "spotify and the 1.5 s store to go live",
            () => deliveriesOf(id),
            (ds) => ds.length === 3 && ds.filter((d) => d.store !== slower).every((d) => d.status === "live"),
          );
          const [fast, late, later] = ["spotify", slow, slower].map((s) =>
            deliveries.find((d) => d.store === s),
          );
          assert.ok(fast?.delivered_at && fast.live_at && late?.delivered_at && late.live_at);
          const waited = late.live_at.getTime() - late.delivered_at.getTime();
          assert.ok(waited >= 1490, `live ${waited} ms after delivered; the store said 1500`);
          assert.ok(late.live_at > fast.live_at, "the slow store went live after spotify");
          assert.deepEqual([later?.status, later?.live_at], ["delivered", null]);
          assert.equal(await statusOf(id), "delivered", "delivered in every store, not yet live in all");
          assert.deepEqual((await historyOf(id)).slice(-2), [
            ["approved", "delivering"],
            ["delivering", "delivered"],
          ]);
          const report = await statusReport(api, id);
          assert.deepEqual([report.status, report.live], ["delivered", true]);
          assert.deepEqual(
            byStore(report.stores).map((s) => [s.store, s.status, s.live_at === null]),
            byStore([
              { store: "spotify", status: "live", pending: false },
              { store: slow, status: "live", pending: false },
              { store: slower, status: "delivered", pending: true },
            ]).map((s) => [s.store, s.status, s.pending]),
          );

          // The minute store's live step is queued for a minute after its delivery.
          const [liveJob] = await rows<{ id: string; status: string; run_at: Date }>(
            `select id::text as id, status, run_at from internal.jobs
             where kind = 'delivery.live' and payload ->> 'delivery_id' = $1::text`,
            [later?.id],
          );
          const delay = (liveJob?.run_at.getTime() ?? 0) - (later?.delivered_at?.getTime() ?? 0);
          assert.equal(liveJob?.status, "queued");
          assert.ok(delay >= 59_990 && delay < 75_000, `live step ${delay} ms after delivery`);
          await db().asService((tx) =>
            tx.query("update internal.jobs set run_at = now() where id = $1", [liveJob?.id]),
          );

          await waitForStatus(id, "live");
          await jobsSettled(id);
          assert.ok((await deliveriesOf(id)).every((d) => d.status === "live"));
          assert.deepEqual(await historyOf(id), THROUGH_TO_LIVE);
          assert.deepEqual(await eventTypes(id), ["release.submitted", "release.approved", "release.live"]);
          const jobs = await jobsOf(id);
          assert.ok(
            jobs.every((j) => j.status === "succeeded" && j.attempts === 1),
            JSON.stringify(jobs),
          );
        },
      );
    });

    test("takedown: a live release gets a takedown delivery per store, then is taken_down with its request completed", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api);

      const request = expectStatus(
        await api<Obj & { id: string; status: string }>("POST", `/releases/${id}/takedown`, {
          reason: "Rights dispute",
        }),
        202,
      );
      assert.equal(request.status, "pending");
      await waitForStatus(id, "taken_down");
      await jobsSettled(id);

      const deliveries = await deliveriesOf(id);
      assert.deepEqual(
        deliveries.map((d) => [d.store, d.action, d.status, d.message]),
        [
          ["apple_music", "insert", "live", null],
          ["apple_music", "takedown", "taken_down", null],
          ["spotify", "insert", "live", null],
          ["spotify", "takedown", "taken_down", null],
        ],
      );
      for (const d of deliveries.filter((x) => x.action === "takedown")) {
        assert.ok(d.delivered_at instanceof Date);
        assert.equal(d.live_at, null);
        assert.equal(d.store_reference, `sandbox-${d.store}-${d.id}`);
        // The sandbox store confirmed the removal by itself, after it was sent.
        assert.ok(d.taken_down_at instanceof Date);
        assert.ok((d.taken_down_at as Date).getTime() >= (d.delivered_at as Date).getTime());
        assert.deepEqual([d.confirmed_by, d.confirmed_via], ["sandbox", "sandbox"]);
      }
      const [takedown] = await rows<{
        status: string;
        completed_at: Date | null;
        reason: string;
        stores: Obj[];
      }>("select status, completed_at, reason, stores from public.takedown_requests where id = $1", [
        request.id,
      ]);
      assert.equal(takedown?.status, "completed");
      assert.ok(takedown?.completed_at instanceof Date, "completed_at set");
      assert.deepEqual(
        takedown?.stores.map((s) => [s.store, s.status, s.confirmed_by]),
        [
          ["apple_music", "taken_down", "sandbox"],
          ["spotify", "taken_down", "sandbox"],
        ],
      );
      // The event carries the request with each store's times.
      const [event] = await rows<{ data: { takedown: Obj & { stores: Obj[] } } }>(
        "select data from internal.events where type = 'release.takedown_completed' and data -> 'object' ->> 'id' = $1",
        [id],
      );
      assert.deepEqual(
        [event?.data.takedown.id, event?.data.takedown.status, event?.data.takedown.stores.length],
        [request.id, "completed", 2],
      );
      for (const s of event?.data.takedown.stores ?? []) {
        const d = deliveries.find((x) => x.store === s.store && x.action === "takedown");
        assert.equal(Date.parse(String(s.taken_down_at)), d?.taken_down_at?.getTime());
        assert.equal(Date.parse(String(s.sent_at)), d?.delivered_at?.getTime());
      }
      assert.deepEqual((await historyOf(id)).slice(-2), [
        ["live", "takedown_requested"],
        ["takedown_requested", "taken_down"],
      ]);
      const events = await eventTypes(id);
      assert.equal(events.filter((e) => e === "release.takedown_completed").length, 1);
      assert.equal(events.filter((e) => e === "release.live").length, 1);

      const jobs = await jobsOf(id);
      assert.ok(
        jobs.every((j) => j.status === "succeeded" && j.attempts === 1),
        JSON.stringify(jobs),
      );
      assert.equal(jobs.filter((j) => j.kind === "takedown.process").length, 1);
      assert.equal(
        jobs.filter((j) => j.kind === "delivery.live").length,
        2,
        "a takedown has no live step: only the inserts' live jobs",
      );
      assert.equal(jobs.filter((j) => j.kind === "delivery.removed").length, 2, "one confirmation per store");

      const report = await statusReport(api, id);
      assert.deepEqual([report.status, report.live], ["taken_down", false]);
      assert.deepEqual(
        byStore(report.stores).map((s) => [s.store, s.action, s.status, s.confirmed_by]),
        [
          ["apple_music", "takedown", "taken_down", "sandbox"],
          ["spotify", "takedown", "taken_down", "sandbox"],
        ],
      );
      for (const s of report.stores) assert.ok(s.taken_down_at && s.delivered_at);
      assert.deepEqual([report.takedown?.id, report.takedown?.status], [request.id, "completed"]);
      assert.ok(report.takedown?.completed_at);
      assert.deepEqual(
        byStore(report.takedown?.stores as { store: string; status: string }[]).map((s) => [
          s.store,
          s.status,
        ]),
        [
          ["apple_music", "taken_down"],
          ["spotify", "taken_down"],
        ],
      );
    });

    test("the database refuses delivery states that cannot be: a takedown live or delivered, an insert taken down, a confirmation without its time and source", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api, account } = await keyed(tenant);
      const id = await completeDraft(api);
      const cases: [string, Obj, string | null][] = [
        ["a takedown live", { action: "takedown", status: "live" }, "23514"],
        ["a takedown delivered", { action: "takedown", status: "delivered" }, "23514"],
        ["an insert takedown_sent", { action: "insert", status: "takedown_sent" }, "23514"],
        ["an update taken_down", { action: "update", status: "taken_down" }, "23514"],
        ["a takedown taken_down without a time", { action: "takedown", status: "taken_down" }, "23514"],
        [
          "a takedown taken_down by nobody",
          { action: "takedown", status: "taken_down", taken_down_at: new Date().toISOString() },
          "23514",
        ],
        [
          "a takedown confirmed by someone unknown",
          {
            action: "takedown",
            status: "taken_down",
            taken_down_at: new Date().toISOString(),
            confirmed_by: "rumour",
            confirmed_via: "cli",
          },
          "23514",
        ],
        ["a takedown takedown_sent", { action: "takedown", status: "takedown_sent" }, null],
        [
          "a takedown confirmed by the operator",
          {
            action: "takedown",
            status: "taken_down",
            taken_down_at: new Date().toISOString(),
            confirmed_by: "operator",
            confirmed_via: "admin_api",
          },
          null,
        ],
      ];
      for (const [what, values, expected] of cases) {
        const row = { release_id: id, account_id: account.id, store: "spotify", ...values };
        const keys = Object.keys(row);
        const got = await db()
          .asService(async (tx) => {
            await tx.query(
              `insert into internal.release_deliveries (${keys.join(", ")}) values (${keys.map((_, i) => `$${i + 1}`).join(", ")})`,
              Object.values(row),
            );
            // Rolled back: each case starts from nothing.
            throw new Error("inserted");
          })
          .catch((error: unknown) =>
            error instanceof Error && error.message === "inserted"
              ? null
              : (asDbError(error)?.sqlstate ?? String(error)),
          );
        assert.equal(got, expected, what);
      }
    });

    test("takedown of a release forced live without any delivery record completes at once", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await completeDraft(api);
      await forceReleaseStatus(db(), id, "live");
      const request = expectStatus(await api<Obj & { id: string }>("POST", `/releases/${id}/takedown`), 202);
      await waitForStatus(id, "taken_down");
      await jobsSettled(id);
      assert.deepEqual(await deliveriesOf(id), []);
      const [takedown] = await rows<{ status: string; completed_at: Date | null }>(
        "select status, completed_at from public.takedown_requests where id = $1",
        [request.id],
      );
      assert.equal(takedown?.status, "completed");
      assert.ok(takedown?.completed_at instanceof Date);
      assert.deepEqual(
        (await jobsOf(id)).map((j) => [j.kind, j.status, j.attempts]),
        [["takedown.process", "succeeded", 1]],
      );
      assert.deepEqual(await eventTypes(id), ["release.live", "release.takedown_completed"]);
      const report = await statusReport(api, id);
      assert.deepEqual(
        [report.status, report.stores, report.takedown?.status],
        ["taken_down", [], "completed"],
      );
    });

    test("metadata correction of a live release sends an update delivery to each store, each reaching live; the release stays live", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api);
      const historyBefore = await historyOf(id);

      const corrected = expectStatus(
        await api<Obj>("PATCH", `/releases/${id}/metadata`, { title: "Night Drive (Remastered)" }),
        200,
      );
      assert.deepEqual([corrected.title, corrected.status], ["Night Drive (Remastered)", "live"]);
      const deliveries = await poll(
        "the update deliveries to go live",
        () => deliveriesOf(id),
        (ds) => ds.filter((d) => d.action === "update" && d.status === "live").length === 2,
      );
      await jobsSettled(id);
      assert.deepEqual(
        deliveries.map((d) => [d.store, d.action, d.status, d.message, d.attempts]),
        [
          ["apple_music", "insert", "live", null, 1],
          ["apple_music", "update", "live", null, 1],
          ["spotify", "insert", "live", null, 1],
          ["spotify", "update", "live", null, 1],
        ],
      );
      for (const d of deliveries.filter((x) => x.action === "update")) {
        assert.ok(d.delivered_at instanceof Date && d.live_at instanceof Date);
        assert.equal(d.store_reference, `sandbox-${d.store}-${d.id}`);
      }
      assert.equal(await statusOf(id), "live");
      assert.deepEqual(await historyOf(id), historyBefore, "the release never left live");
      assert.equal((await eventTypes(id)).filter((e) => e === "release.live").length, 1);
      const jobs = await jobsOf(id);
      assert.equal(jobs.filter((j) => j.kind === "release.update_delivery").length, 1);
      assert.ok(
        jobs.every((j) => j.status === "succeeded" && j.attempts === 1),
        JSON.stringify(jobs),
      );
      const [title] = await rows<{ title: string }>("select title from public.releases where id = $1", [id]);
      assert.equal(title?.title, "Night Drive (Remastered)");

      const report = await statusReport(api, id);
      assert.deepEqual([report.status, report.live], ["live", true]);
      assert.deepEqual(
        byStore(report.stores).map((s) => [s.store, s.action, s.status]),
        [
          ["apple_music", "update", "live"],
          ["spotify", "update", "live"],
        ],
      );
    });

    test("a takedown cancels update deliveries still on their way; the release is taken down", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api);
      await withWorkerStopped(async () => {
        expectStatus(await api("PATCH", `/releases/${id}/metadata`, { title: "Night Drive (Edit)" }), 200);
        // The update job's work, done now: update deliveries queued but not yet sent ...
        await redeliverRelease(db(), id);
        // ... when the account asks for a takedown.
        expectStatus(await api("POST", `/releases/${id}/takedown`), 202);
      });
      await waitForStatus(id, "taken_down");
      await jobsSettled(id);
      assert.deepEqual(
        (await deliveriesOf(id)).map((d) => [d.store, d.action, d.status, d.message]),
        [
          ["apple_music", "insert", "live", null],
          ["apple_music", "update", "error", "Cancelled: the release is being taken down."],
          ["apple_music", "takedown", "taken_down", null],
          ["spotify", "insert", "live", null],
          ["spotify", "update", "error", "Cancelled: the release is being taken down."],
          ["spotify", "takedown", "taken_down", null],
        ],
      );
      const jobs = await jobsOf(id);
      assert.ok(
        jobs.every((j) => j.status === "succeeded" && j.attempts === 1),
        JSON.stringify(jobs),
      );
      assert.equal((await eventTypes(id)).filter((e) => e === "release.takedown_completed").length, 1);
      const report = await statusReport(api, id);
      assert.deepEqual(
        byStore(report.stores).map((s) => [s.store, s.action, s.status]),
        [
          ["apple_music", "takedown", "taken_down"],
          ["spotify", "takedown", "taken_down"],
        ],
      );
    });

    test("idempotence: sendDelivery, deliveryLive, deliverRelease and processTakedown run again over finished work change nothing", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api);

      const snapshot = async () => ({
        release: await rows("select * from public.releases where id = $1", [id]),
        deliveries: await rows(
          "select * from internal.release_deliveries where release_id = $1 order by id",
          [id],
        ),
        jobs: await rows("select * from internal.jobs order by id"),
        events: await rows(
          "select id, type from internal.events where data -> 'object' ->> 'id' = $1 order by id",
          [id],
        ),
        history: await rows("select * from internal.release_history where release_id = $1 order by id", [id]),
        takedowns: await rows("select * from public.takedown_requests where release_id = $1 order by id", [
          id,
        ]),
      });
      const handlers = pipelineHandlers(db());
      const ctx = { signal: new AbortController().signal };
      const run = (kind: string, payload: Obj) =>
        handlers[kind]?.({ id: "0", kind, payload, attempts: 2, max_attempts: 10 } as Job, ctx);

      /** Every step again, directly and through the job handlers, with the worker stopped. */
      async function again(takedownId?: string): Promise<void> {
        await withWorkerStopped(async () => {
          const before = await snapshot();
          for (let round = 0; round < 2; round++) {
            for (const d of await deliveriesOf(id)) {
              await sendDelivery(db(), d.id);
              await deliveryLive(db(), d.id);
              await run("delivery.send", { delivery_id: d.id });
              await run("delivery.live", { delivery_id: d.id });
              await run("delivery.removed", { delivery_id: d.id, by: "sandbox" });
            }
            await deliverRelease(db(), id);
            await run("release.deliver", { release_id: id });
            if (takedownId) {
              await processTakedown(db(), takedownId);
              await run("takedown.process", { takedown_request_id: takedownId });
            }
          }
          assert.deepEqual(await snapshot(), before);
        });
      }

      await again();
      assert.equal(await statusOf(id), "live");

      const request = expectStatus(await api<Obj & { id: string }>("POST", `/releases/${id}/takedown`), 202);
      await waitForStatus(id, "taken_down");
      await jobsSettled(id);
      await again(request.id);
      assert.equal(await statusOf(id), "taken_down");
      const events = await eventTypes(id);
      assert.deepEqual(events, [
        "release.submitted",
        "release.approved",
        "release.live",
        "release.takedown_completed",
      ]);
    });

    test("idempotence: the update job run again after its update deliveries went out sends nothing more", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api);
      expectStatus(
        await api("PATCH", `/releases/${id}/metadata`, { title: "Night Drive (Remastered)" }),
        200,
      );
      await poll(
        "the update deliveries to go live",
        () => deliveriesOf(id),
        (ds) => ds.filter((d) => d.action === "update" && d.status === "live").length === 2,
      );
      await jobsSettled(id);
      const [updateJob] = (await jobsOf(id)).filter((j) => j.kind === "release.update_delivery");
      assert.ok(updateJob);
      const before = await deliveriesOf(id);

      // The job again, as after a crash between its transaction and its completion.
      await withWorkerStopped(async () => {
        const handle = pipelineHandlers(db())["release.update_delivery"];
        await handle?.({ ...updateJob, attempts: 2, max_attempts: 10 } as Job, {
          signal: new AbortController().signal,
        });
      });
      await jobsSettled(id);
      assert.deepEqual(
        (await deliveriesOf(id)).map((d) => [d.store, d.action, d.status]),
        before.map((d) => [d.store, d.action, d.status]),
        "the correction already went to every store: nothing is sent twice",
      );
    });

    test("a second correction made while an update is on its way to a store reaches that store too", async () => {
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const id = await liveRelease(api);
      /** The titles each store was sent, in order. */
      const sent: Record<string, string[]> = {};
      /**
       * The Db as sendDelivery uses it, recording what each send carries to the store; with `gate`,
       * the send waits after the store's call (its second transaction) until the gate opens: a store
       * taking its time to answer.
       */
      const recording = (gate?: Promise<void>): Db => {
        let calls = 0;
        const real = db();
        return {
          asService: async <T>(fn: (tx: never) => Promise<T>, options?: { readOnly?: boolean }) => {
            calls++;
            if (calls === 2 && gate) await gate;
            const result = await real.asService(fn as never, options);
            const sending = result as { d?: { store: string }; release?: { title: string } } | undefined;
            if (calls === 1 && sending?.d && sending.release) {
              sent[sending.d.store] = [...(sent[sending.d.store] ?? []), sending.release.title];
            }
            return result as T;
          },
        } as unknown as Db;
      };
      const pendingUpdates = async () =>
        (await deliveriesOf(id)).filter(
          (d) => d.action === "update" && d.status !== "delivered" && d.status !== "live",
        );

      await withWorkerStopped(async () => {
        expectStatus(await api("PATCH", `/releases/${id}/metadata`, { title: "First Fix" }), 200);
        await redeliverRelease(db(), id); // the update job's work
        const spotify = (await pendingUpdates()).find((d) => d.store === "spotify");
        assert.ok(spotify);

        // The update is on its way to spotify (read and sent, the store not yet answering) ...
        let open = () => {};
        const gate = new Promise<void>((resolve) => {
          open = resolve;
        });
        const inFlight = sendDelivery(recording(gate), spotify.id);
        await poll(
          "the send to spotify to be in flight",
          async () => sent.spotify,
          (v) => v !== undefined,
        );
        // ... when the account corrects the release again, and the update job runs for it.
        expectStatus(await api("PATCH", `/releases/${id}/metadata`, { title: "Second Fix" }), 200);
        await redeliverRelease(db(), id);
        open();
        await inFlight;

        // Every update still to go is sent (as the worker would), until none is left.
        for (let round = 0; round < 5; round++) {
          const left = await pendingUpdates();
          if (left.length === 0) break;
          for (const d of left) await sendDelivery(recording(), d.id);
        }
        assert.deepEqual(await pendingUpdates(), []);
        assert.equal(sent.apple_music?.at(-1), "Second Fix");
        assert.deepEqual(
          sent.spotify?.at(-1),
          "Second Fix",
          `spotify was sent ${JSON.stringify(sent.spotify)}: the second correction never reached it`,
        );
      });
      await jobsSettled(id);
    });

    test("a takedown before a store reports the release live: its late live report does not mark the removed release live there", async () => {
      const tenant = await newTenant(DELIVERING);
      await withOwnStores(
        [{ adapter: "sandbox", sandbox: { live_after_ms: 60_000 } }],
        async ({ codes, url }) => {
          const [slow] = codes as [string];
          const { api } = await keyed(tenant, url);
          const id = await submitted(api, { services: ["spotify", slow] });
          await waitForStatus(id, "delivered");
          const insert = (await deliveriesOf(id)).find((d) => d.store === slow && d.action === "insert");
          assert.deepEqual([insert?.status, insert?.live_at], ["delivered", null]);

          expectStatus(await api("POST", `/releases/${id}/takedown`, { reason: "Wrong artwork" }), 202);
          await waitForStatus(id, "taken_down");
          // The store's report of the insert, due in a minute, comes now: after the removal.
          const liveJob = (await jobsOf(id)).find(
            (j) => j.kind === "delivery.live" && j.payload.delivery_id === insert?.id,
          );
          assert.equal(liveJob?.status, "queued");
          await db().asService((tx) =>
            tx.query("update internal.jobs set run_at = now() where id = $1", [liveJob?.id]),
          );
          await jobsSettled(id);

          assert.equal(await statusOf(id), "taken_down");
          const events = await eventTypes(id);
          assert.deepEqual(events, ["release.submitted", "release.approved", "release.takedown_completed"]);
          const report = await statusReport(api, id);
          assert.deepEqual([report.status, report.live], ["taken_down", false]);
          const after = (await deliveriesOf(id)).filter((d) => d.store === slow);
          assert.deepEqual(
            after.map((d) => [d.action, d.status, d.live_at]),
            [
              ["insert", "delivered", null],
              ["takedown", "taken_down", null],
            ],
            "the store removed the release before it went live: its insert must not be recorded live afterwards",
          );
        },
      );
    });

    test("PostgreSQL: two workers racing over eight releases submitted at once deliver each once; no job runs twice", async (c) => {
      if (t().kind !== "postgres") {
        c.skip(
          "needs PostgreSQL: PGlite is one in-process connection, so two workers never claim side by side",
        );
        return;
      }
      const tenant = await newTenant(DELIVERING);
      const { api } = await keyed(tenant);
      const stores = ["spotify", "apple_music", "deezer"];
      const runs: { job: string; kind: string; worker: string; start: number; end: number }[] = [];
      const instrumented = (workerId: string): Handlers =>
        Object.fromEntries(
          Object.entries(pipelineHandlers(db())).map(([kind, handle]) => [
            kind,
            async (job: Job, ctx: { signal: AbortSignal }) => {
              const start = performance.now();
              try {
                await handle(job, ctx);
              } finally {
                runs.push({ job: job.id, kind, worker: workerId, start, end: performance.now() });
              }
            },
          ]),
        );

      let ids: string[] = [];
      await withWorkerStopped(async () => {
        const workers = ["race-a", "race-b"].map(
          (id) => new Worker({ db: db(), handlers: instrumented(id), pollMs: 10, concurrency: 4, id }),
        );
        try {
          ids = await Promise.all(Array.from({ length: 8 }, () => completeDraft(api, { services: stores })));
          for (const w of workers) w.start();
          await Promise.all(ids.map((id) => submit(api, id)));
          for (const id of ids) await waitForStatus(id, "live", 60_000);
          for (const id of ids) await jobsSettled(id, 30_000);
        } finally {
          await Promise.all(workers.map((w) => w.stop()));
        }
      });

      for (const id of ids) {
        assert.equal(await statusOf(id), "live");
        assert.deepEqual(await historyOf(id), THROUGH_TO_LIVE, `history of ${id}`);
      }
      const perStore = await rows<{ release_id: string; store: string; action: string; n: number }>(
        `select release_id::text as release_id, store, action, count(*)::int as n from internal.release_deliveries
         where release_id = any($1::uuid[]) group by release_id, store, action`,
        [ids],
      );
      assert.deepEqual(
        perStore.map((r) => [r.release_id, r.store, r.action, r.n]).sort(),
        ids.flatMap((id) => stores.map((s) => [id, s, "insert", 1])).sort(),
      );
      const [live] = await rows<{ n: number }>(
        `select count(*)::int as n from internal.events where type = 'release.live'
         and data -> 'object' ->> 'id' = any($1::text[])`,
        [ids],
      );
      assert.equal(live?.n, ids.length, "one release.live event per release");

      const jobs = (await Promise.all(ids.map((id) => jobsOf(id)))).flat();
      assert.equal(jobs.length, ids.length * (2 + 2 * stores.length));
      assert.deepEqual(
        jobs.filter((j) => j.status !== "succeeded" || j.attempts !== 1 || j.last_error !== null),
        [],
        "every job succeeded at its first attempt",
      );
      // Each job ran exactly once, by one of the two workers.
      const jobIds = new Set(jobs.map((j) => j.id));
      const ours = runs.filter((r) => jobIds.has(r.job));
      assert.equal(ours.length, jobs.length, "every job ran once");
      assert.equal(new Set(ours.map((r) => r.job)).size, jobs.length, "no job ran twice");
      const workersUsed = new Set(ours.map((r) => r.worker));
      assert.deepEqual([...workersUsed].sort(), ["race-a", "race-b"], "both workers took jobs");
    });
  });
});
