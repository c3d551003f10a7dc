import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { INVOICE_JOB_KIND } from "../src/billing/jobs.ts";
import { Db } from "../src/db/db.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import type { Job } from "../src/jobs/queue.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { decideReview, ReviewError, reviewQueue, reviewRelease } from "../src/pipeline/review.ts";
import { loadSecretBox } from "../src/secrets/box.ts";
import { type Account, createAccount, createTenant, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { copyMigratedDatabase, describeEachEngine } from "./support/db.ts";
import { NODE_BASELINE_FLAGS, ROOT, runCli, tempDir } from "./support/process.ts";
import {
  completeRelease,
  expectStatus,
  isrcs,
  issueTestKey,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import { seedAccount, seedUser, userClaims } from "./support/seed.ts";

/**
 * Review (src/pipeline/review.ts): the `release.review` job a submission queues, run by a real
 * Worker over the test database, with releases made as accounts make them (the public API over
 * HTTP, or /rest/v1's SQL as a member); the operator's decisions (decideReview) and review queue;
 * and the operator's commands (`backline releases queue|review`, `backline worker`) as processes
 * on an embedded database of their own.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

const nextIsrc = isrcs("QZRVW");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it answers something other than undefined; fails with `what` and the last answer. */
async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

describeEachEngine("release review", (t) => {
  const db = () => t().db;

  async function rows<T extends Obj>(sql: string, params: unknown[] = []): Promise<T[]> {
    return db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  }

  async function statusOf(id: string): Promise<string | undefined> {
    return (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]
      ?.status;
  }

  /** Waits until release `id` is `status`; fails naming where it got stuck. */
  async function waitForStatus(id: string, status: string, timeoutMs = 20_000): Promise<void> {
    let last: string | undefined;
    try {
      await until(
        `release ${id} to be ${status}`,
        async () => {
          last = await statusOf(id);
          return last === status ? true : undefined;
        },
        timeoutMs,
      );
    } catch {
      assert.fail(`release ${id} is ${last}, not ${status}, after ${timeoutMs} ms`);
    }
  }

  /** Waits until no review job of release `id` is queued or running (the job ran, whatever it did). */
  async function reviewJobsDone(id: string): Promise<void> {
    await until(`the review jobs of ${id} to finish`, async () => {
      const open = await rows(
        `select 1 from internal.jobs where kind = 'release.review' and payload ->> 'release_id' = $1
           and status in ('queued', 'running')`,
        [id],
      );
      return open.length === 0 ? true : undefined;
    });
  }

  const jobsOf = (id: string) =>
    rows<{
      id: string;
      kind: string;
      payload: Obj;
      status: string;
      dedupe_key: string | null;
      attempts: number;
      last_error: string | null;
    }>(
      `select id, kind, payload, status, dedupe_key, attempts, last_error from internal.jobs
       where payload ->> 'release_id' = $1 order by id`,
      [id],
    );
  const historyOf = (id: string) =>
    rows<{ from_status: string | null; to_status: string; reason: string | null; actor_role: string }>(
      "select from_status, to_status, reason, actor_role from internal.release_history where release_id = $1 order by id",
      [id],
    );
  const eventsOf = (id: string) =>
    rows<{ type: string; account_id: string; data: { object: Obj } }>(
      "select type, account_id, data from internal.events where data -> 'object' ->> 'id' = $1 order by created_at, type",
      [id],
    );
  const releaseOf = async (id: string) =>
    (
      await rows<{ status: string; status_reason: string | null; submitted_at: Date | null }>(
        "select status, status_reason, submitted_at from public.releases where id = $1",
        [id],
      )
    )[0];

  // A real worker with the pipeline's handlers for every test of this engine. An inner suite, so
  // it stops before describeEachEngine's after() closes the database.
  describe("with a worker", () => {
    let app: RunningApp;
    let worker: Worker;
    before(async () => {
      app = await startApp(t());
      // Review only: what happens after approval is test/pipeline-delivery.test.ts's.
      const review = pipelineHandlers(db())["release.review"];
      assert.ok(review);
      worker = new Worker({ db: db(), handlers: { "release.review": review }, pollMs: 20 });
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

    async function newTenant(settings: Obj = {}): Promise<Tenant> {
      const limits = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
      return (await tenantWithKeys(t(), { settings: { ...limits, ...settings } })).tenant;
    }

    async function keyed(tenant: Tenant): Promise<{ account: Account; api: Api }> {
      const k = await keyedAccount(db(), { tenant });
      return { account: k.account, api: publicApi(app.url, k.key.secret) };
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

    /** A complete release, submitted through POST /releases/{id}/submit. */
    async function submitted(api: Api, overrides: Obj = {}): Promise<string> {
      const id = await completeDraft(api, overrides);
      assert.equal(expectStatus(await api<Obj>("POST", `/releases/${id}/submit`), 200).status, "submitted");
      return id;
    }

    /** A complete release of a tenant reviewing by hand, once its review job left it in review. */
    async function inReview(api: Api, overrides: Obj = {}): Promise<string> {
      const id = await submitted(api, overrides);
      await waitForStatus(id, "in_review");
      await reviewJobsDone(id);
      return id;
    }

    test("auto_review: a complete release goes submitted -> in_review -> approved, with history, events and its delivery job", async () => {
      const tenant = await newTenant({ auto_review: true });
      const { api, account } = await keyed(tenant);
      const id = await submitted(api);
      await waitForStatus(id, "approved");
      await reviewJobsDone(id);

      const release = await releaseOf(id);
      assert.equal(release?.status_reason, null);
      assert.deepEqual(
        (await historyOf(id)).map((h) => [h.from_status, h.to_status, h.actor_role]),
        [
          [null, "draft", "authenticated"],
          ["draft", "submitted", "authenticated"],
          ["submitted", "in_review", "service_role"],
          ["in_review", "approved", "service_role"],
        ],
      );
      const events = await eventsOf(id);
      assert.deepEqual(
        events.map((e) => [e.type, e.account_id, e.data.object.status]),
        [
          ["release.submitted", account.id, "submitted"],
          ["release.approved", account.id, "approved"],
        ],
      );
      const jobs = await jobsOf(id);
      assert.deepEqual(
        jobs.map((j) => [j.kind, j.status, j.payload, j.dedupe_key, j.last_error]),
        [
          ["release.review", "succeeded", { release_id: id }, id, null],
          ["release.deliver", "queued", { release_id: id }, id, null],
        ],
      );
      assert.equal(jobs[0]?.attempts, 1, "the review succeeded at its first attempt");

      const status = expectStatus(await api<Obj>("GET", `/releases/${id}/status`), 200);
      assert.deepEqual(
        [status.status, status.approval, status.rejection_reason],
        ["approved", "approved", null],
      );
    });

    test("a sandbox account's release (test-mode key) is approved automatically without auto_review", async () => {
      const tenant = await newTenant();
      const { account, api: liveApi } = await keyed(tenant);
      const testKey = await issueTestKey(db(), account, { mode: "test" });
      const sandboxApi = publicApi(app.url, testKey.secret);

      const sandboxRelease = await submitted(sandboxApi);
      const liveRelease = await submitted(liveApi);
      await waitForStatus(sandboxRelease, "approved");
      const [owner] = await rows<{ is_sandbox: boolean; sandbox_of: string | null }>(
        `select a.is_sandbox, a.sandbox_of from public.releases r join internal.accounts a on a.id = r.account_id
         where r.id = $1`,
        [sandboxRelease],
      );
      assert.deepEqual(owner, { is_sandbox: true, sandbox_of: account.id });
      assert.deepEqual(
        (await jobsOf(sandboxRelease)).map((j) => [j.kind, j.status]),
        [
          ["release.review", "succeeded"],
          ["release.deliver", "queued"],
        ],
      );

      // The live twin's release, in the same tenant, waits for the operator.
      await waitForStatus(liveRelease, "in_review");
      await reviewJobsDone(liveRelease);
      assert.equal(await statusOf(liveRelease), "in_review");
    });

    test("without auto_review a release waits in review; decideReview approves it (delivery queued) or rejects it with a reason", async () => {
      const tenant = await newTenant();
      const { api, account } = await keyed(tenant);
      const toApprove = await inReview(api);
      const toReject = await inReview(api);
      assert.deepEqual(
        (await jobsOf(toApprove)).map((j) => [j.kind, j.status]),
        [["release.review", "succeeded"]],
        "nothing to deliver yet",
      );
      assert.equal(
        expectStatus(await api<Obj>("GET", `/releases/${toApprove}/status`), 200).approval,
        "in_review",
      );

      assert.deepEqual(await decideReview(db(), toApprove, { approve: true }), {
        id: toApprove,
        status: "approved",
        status_reason: null,
      });
      assert.deepEqual(
        (await jobsOf(toApprove)).map((j) => [j.kind, j.status, j.payload]),
        [
          ["release.review", "succeeded", { release_id: toApprove }],
          ["release.deliver", "queued", { release_id: toApprove }],
        ],
      );
      assert.deepEqual(
        (await eventsOf(toApprove)).map((e) => e.type),
        ["release.submitted", "release.approved"],
      );
      assert.deepEqual((await historyOf(toApprove)).slice(-1), [
        { from_status: "in_review", to_status: "approved", reason: null, actor_role: "service_role" },
      ]);

      const reason = "Cover art has a URL";
      assert.deepEqual(await decideReview(db(), toReject, { approve: false, reason }), {
        id: toReject,
        status: "rejected",
        status_reason: reason,
      });
      const events = await eventsOf(toReject);
      assert.deepEqual(
        events.map((e) => [e.type, e.account_id, e.data.object.status, e.data.object.status_reason]),
        [
          ["release.submitted", account.id, "submitted", null],
          ["release.rejected", account.id, "rejected", reason],
        ],
      );
      assert.deepEqual((await historyOf(toReject)).slice(-1), [
        { from_status: "in_review", to_status: "rejected", reason, actor_role: "service_role" },
      ]);
      assert.deepEqual(
        (await jobsOf(toReject)).map((j) => j.kind),
        ["release.review"],
        "a rejected release is not delivered",
      );
      const status = expectStatus(await api<Obj>("GET", `/releases/${toReject}/status`), 200);
      assert.deepEqual([status.approval, status.rejection_reason], ["rejected", reason]);
    });

    test("decideReview refuses a release that is not in review, and one that does not exist (ReviewError, nothing changes)", async () => {
      const tenant = await newTenant();
      const { api } = await keyed(tenant);
      const draft = await completeDraft(api);
      const approved = await inReview(api);
      await decideReview(db(), approved, { approve: true });

      for (const [id, status] of [
        [draft, "draft"],
        [approved, "approved"],
      ] as const) {
        await assert.rejects(
          decideReview(db(), id, { approve: true }),
          (e: unknown) => e instanceof ReviewError && e.message.includes(`is ${status}`),
        );
        await assert.rejects(
          decideReview(db(), id, { approve: false, reason: "Too late" }),
          (e: unknown) => e instanceof ReviewError && e.message.includes(`is ${status}`),
        );
        assert.equal(await statusOf(id), status);
      }
      assert.equal(
        (await jobsOf(approved)).filter((j) => j.kind === "release.deliver").length,
        1,
        "one delivery job",
      );
      const missing = randomUUID();
      await assert.rejects(
        decideReview(db(), missing, { approve: true }),
        (e: unknown) => e instanceof ReviewError && e.message === `no release ${missing}`,
      );
      // A rejection without a reason would leave the account guessing.
      const waiting = await inReview(api);
      for (const reason of ["", "   "]) {
        await assert.rejects(
          decideReview(db(), waiting, { approve: false, reason }),
          (e: unknown) => e instanceof ReviewError && e.message.startsWith("a rejection needs a reason"),
        );
      }
      assert.equal(await statusOf(waiting), "in_review");
    });

    test("approving a release whose checks fail now throws ReviewError and leaves it in review; it can still be rejected", async () => {
      const tenant = await newTenant();
      const { api } = await keyed(tenant);
      const id = await inReview(api);
      await db().asService((tx) => tx.query("delete from public.tracks where release_id = $1", [id]));

      await assert.rejects(
        decideReview(db(), id, { approve: true }),
        (e: unknown) =>
          e instanceof ReviewError &&
          /cannot be approved/.test(e.message) &&
          e.message.includes("a release needs at least one track"),
      );
      assert.equal(await statusOf(id), "in_review");
      assert.deepEqual(
        (await jobsOf(id)).map((j) => j.kind),
        ["release.review"],
        "no delivery job for a release that failed its checks",
      );
      assert.deepEqual(
        (await eventsOf(id)).map((e) => e.type),
        ["release.submitted"],
      );
      assert.equal((await decideReview(db(), id, { approve: false, reason: "No audio" })).status, "rejected");
    });

    test("a release with problems submitted through /rest/v1's SQL is rejected by the job; the account fixes it, resubmits, and it is approved", async () => {
      const tenant = await newTenant({ auto_review: true });
      const account = await seedAccount(db(), tenant);
      const member = await seedUser(db(), tenant, [{ account, role: "member" }]);
      const asMember = <T extends Obj>(sql: string, params: unknown[] = []) =>
        db().withRequestContext(userClaims(member), async (tx) => (await tx.query<T>(sql, params)).rows);

      const [artist] = await asMember<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, 'Luna Vale') returning id",
        [account.id],
      );
      const [release] = await asMember<{ id: string }>(
        `insert into public.releases (artist_id, title, release_date, primary_genre, licensed_territories_include)
         values ($1, 'No Tracks Yet', current_date + 60, 'pop', 'WW') returning id`,
        [artist?.id],
      );
      const id = release?.id as string;
      await asMember("update public.releases set status = 'submitted' where id = $1", [id]);

      await waitForStatus(id, "rejected");
      const rejected = await releaseOf(id);
      assert.ok(rejected?.status_reason?.startsWith("Automatic checks: "), rejected?.status_reason ?? "");
      assert.match(rejected?.status_reason ?? "", /a release needs at least one track/);
      assert.deepEqual(
        (await historyOf(id)).slice(1).map((h) => [h.from_status, h.to_status, h.actor_role]),
        [
          ["draft", "submitted", "authenticated"],
          ["submitted", "in_review", "service_role"],
          ["in_review", "rejected", "service_role"],
        ],
      );
      assert.equal((await historyOf(id)).at(-1)?.reason, rejected?.status_reason);
      const events = await eventsOf(id);
      assert.deepEqual(
        events.map((e) => e.type),
        ["release.submitted", "release.rejected"],
      );
      assert.equal(events[1]?.data.object.status_reason, rejected?.status_reason);
      await reviewJobsDone(id);

      // The member sees why, edits the release again and resubmits: a new review job runs.
      const [seen] = await asMember<{ status: string; status_reason: string }>(
        "select status, status_reason from public.releases where id = $1",
        [id],
      );
      assert.deepEqual(seen, { status: "rejected", status_reason: rejected?.status_reason });
      await asMember(
        "insert into public.tracks (release_id, title, isrc, track_number) values ($1, 'Song', $2, 1)",
        [id, nextIsrc()],
      );
      await asMember("update public.releases set title = 'Now With Tracks' where id = $1", [id]);
      await asMember("update public.releases set status = 'submitted' where id = $1", [id]);
      await waitForStatus(id, "approved");
      await reviewJobsDone(id);

      const approved = await releaseOf(id);
      assert.equal(approved?.status_reason, null);
      const jobs = await jobsOf(id);
      assert.deepEqual(
        jobs.map((j) => [j.kind, j.status]),
        [
          ["release.review", "succeeded"],
          ["release.review", "succeeded"],
          ["release.deliver", "queued"],
        ],
      );
      assert.deepEqual(
        (await eventsOf(id)).map((e) => e.type),
        ["release.submitted", "release.rejected", "release.submitted", "release.approved"],
      );
    });

    test("the job is idempotent: the handler run twice approves once with one delivery job; a job for a deleted release succeeds", async () => {
      const tenant = await newTenant({ auto_review: true });
      const { api } = await keyed(tenant);
      let id = "";
      let withdrawn = "";
      await withWorkerStopped(async () => {
        id = await submitted(api);
        withdrawn = await submitted(api);
        const [job] = await rows<{
          id: string;
          kind: string;
          payload: Obj;
          attempts: number;
          max_attempts: number;
        }>(
          `select id::text as id, kind, payload, attempts, max_attempts from internal.jobs
           where kind = 'release.review' and payload ->> 'release_id' = $1`,
          [id],
        );
        assert.ok(job, "the submission queued its review job");
        const handle = pipelineHandlers(db())["release.review"];
        assert.ok(handle);
        const ctx = { signal: new AbortController().signal };
        await handle({ ...job, attempts: 1 } as Job, ctx);
        await handle({ ...job, attempts: 2 } as Job, ctx);
        assert.equal(await reviewRelease(db(), id), "skipped", "an approved release is left alone");

        // Withdrawing a submission deletes it; its review job is still queued.
        assert.deepEqual(expectStatus(await api<Obj>("DELETE", `/releases/${withdrawn}`), 200), {
          id: withdrawn,
          object: "release",
          deleted: true,
        });
        assert.equal(await reviewRelease(db(), withdrawn), "skipped");
      });

      // The worker now runs both queued review jobs: nothing more happens, and neither fails.
      await reviewJobsDone(id);
      await reviewJobsDone(withdrawn);
      for (const release of [id, withdrawn]) {
        const [review] = (await jobsOf(release)).filter((j) => j.kind === "release.review");
        assert.deepEqual([review?.status, review?.attempts, review?.last_error], ["succeeded", 1, null]);
      }
      assert.equal(await statusOf(id), "approved");
      assert.deepEqual(
        (await historyOf(id)).map((h) => h.to_status),
        ["draft", "submitted", "in_review", "approved"],
      );
      assert.deepEqual(
        (await jobsOf(id)).map((j) => [j.kind, j.status]),
        [
          ["release.review", "succeeded"],
          ["release.deliver", "queued"],
        ],
      );
      assert.deepEqual(
        (await eventsOf(id)).map((e) => e.type),
        ["release.submitted", "release.approved"],
      );
      assert.equal(await statusOf(withdrawn), undefined);
      assert.deepEqual(
        (await historyOf(withdrawn)).map((h) => h.to_status),
        ["draft", "submitted", "deleted"],
      );
      assert.equal(
        (await jobsOf(withdrawn)).some((j) => j.kind === "release.deliver"),
        false,
      );
      const status = expectStatus(await api<Obj>("GET", `/releases/${id}/status`), 200);
      assert.deepEqual([status.status, status.approval], ["approved", "approved"]);
      expectStatus(await api("GET", `/releases/${withdrawn}/status`), 404);
    });

    test("decideReview on a submitted release whose job has not run yet decides it; the job then leaves it alone", async () => {
      const tenant = await newTenant();
      const { api } = await keyed(tenant);
      let id = "";
      await withWorkerStopped(async () => {
        id = await submitted(api);
        assert.equal((await decideReview(db(), id, { approve: true })).status, "approved");
      });
      await reviewJobsDone(id);
      assert.equal(await statusOf(id), "approved");
      assert.deepEqual(
        (await historyOf(id)).map((h) => [h.from_status, h.to_status]),
        [
          [null, "draft"],
          ["draft", "submitted"],
          ["submitted", "in_review"],
          ["in_review", "approved"],
        ],
      );
      assert.deepEqual(
        (await jobsOf(id)).map((j) => [j.kind, j.status, j.last_error]),
        [
          ["release.review", "succeeded", null],
          ["release.deliver", "queued", null],
        ],
      );
    });

    test("reviewQueue lists a tenant's releases in review, oldest first, with their problems", async () => {
      const mine = await newTenant();
      const theirs = await newTenant();
      const { api } = await keyed(mine);
      const { api: otherApi } = await keyed(theirs);
      const first = await inReview(api);
      const second = await inReview(api);
      const broken = await inReview(api);
      const other = await inReview(otherApi);
      await completeDraft(api); // a draft is not in the queue
      const decided = await inReview(api);
      await decideReview(db(), decided, { approve: false, reason: "Blurry artwork" }); // nor a decided one
      await db().asService((tx) => tx.query("delete from public.tracks where release_id = $1", [broken]));

      const queue = await reviewQueue(db(), mine.id);
      assert.deepEqual(
        queue.map((r) => [r.id, r.tenant, r.status, r.title]),
        [
          [first, mine.slug, "in_review", "Night Drive"],
          [second, mine.slug, "in_review", "Night Drive"],
          [broken, mine.slug, "in_review", "Night Drive"],
        ],
      );
      assert.deepEqual(queue[0]?.problems, []);
      assert.deepEqual(queue[1]?.problems, []);
      assert.deepEqual(
        queue[2]?.problems.map((p) => [p.param, p.code, p.message]),
        [["tracks", "no_tracks", "a release needs at least one track"]],
      );
      for (const r of queue) assert.ok(r.submitted_at instanceof Date || typeof r.submitted_at === "string");

      assert.deepEqual(
        (await reviewQueue(db(), theirs.id)).map((r) => [r.id, r.tenant]),
        [[other, theirs.slug]],
      );
      const everyone = (await reviewQueue(db())).map((r) => r.id);
      assert.deepEqual(
        everyone.filter((x) => [first, second, broken, other].includes(x)),
        [first, second, broken, other],
        "every tenant's, oldest first",
      );
      assert.deepEqual(await reviewQueue(db(), (await newTenant()).id), []);

      await decideReview(db(), first, { approve: true });
      assert.deepEqual(
        (await reviewQueue(db(), mine.id)).map((r) => r.id),
        [second, broken],
      );
    });
  });
});

// ---------------------------------------------------------------------------------------------
// The operator's commands, as processes on an embedded database of their own.

/** The environment a child runs with: this one minus Backline's settings (as support/process.ts does), plus `env`. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^(PORT|HOST|DATA_DIR|DATABASE_URL|MIGRATION_DATABASE_URL|DEV_TENANT|LOG_LEVEL|PUBLIC_URL|MIGRATE_ON_START|WORKER|WORKER_CONCURRENCY)$/.test(
          k,
        ),
    ),
  );
  return { ...base, LOG_LEVEL: "warn", ...env };
}

/** Opens DATA_DIR's embedded database in this process (no `backline` process may hold it), runs `fn`, closes it. */
async function withDataDir<T>(dataDir: string, fn: (db: Db) => Promise<T>): Promise<T> {
  const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
  const db = new Db(engine, { secrets: loadSecretBox({ encryptionKey: undefined, dataDir }) });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** A release of `accountId` on the service path, walked to `status` one transaction per step. */
async function serviceRelease(
  db: Db,
  accountId: string,
  options: { title: string; tracks: number; status: "submitted" | "in_review" },
): Promise<string> {
  const id = await db.asService(async (tx) => {
    const artist = (
      await tx.query<{ id: string }>(
        "insert into public.artist_profiles (account_id, name) values ($1, $2) returning id",
        [accountId, `Artist of ${options.title}`],
      )
    ).rows[0]?.id;
    const release = (
      await tx.query<{ id: string }>(
        `insert into public.releases (account_id, artist_id, title, release_date, primary_genre, licensed_territories_include)
         values ($1, $2, $3, current_date + 60, 'pop', 'WW') returning id`,
        [accountId, artist, options.title],
      )
    ).rows[0]?.id as string;
    for (let n = 1; n <= options.tracks; n++) {
      await tx.query(
        "insert into public.tracks (release_id, title, isrc, track_number) values ($1, $2, $3, $4)",
        [release, `Song ${n}`, nextIsrc(), n],
      );
    }
    return release;
  });
  await db.asService((tx) => tx.query("update public.releases set status = 'submitted' where id = $1", [id]));
  if (options.status === "in_review") {
    await db.asService((tx) =>
      tx.query("update public.releases set status = 'in_review' where id = $1", [id]),
    );
  }
  return id;
}

describe("backline releases queue|review", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  const fails = async (args: string[], message: RegExp) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 1, `backline ${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  };
  /** A usage error: one line naming the mistake and the help to read, exit status 2. */
  const misused = async (args: string[], message: string) => {
    const r = await runCli(args, env);
    assert.equal(r.code, 2, `backline ${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stderr, `backline: ${message} (see \`backline releases review --help\`)\n`);
  };
  // A migrated database to start from: this suite is about the commands, not a first start.
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const ids: Record<string, string> = {};
  let tenant: { id: string; slug: string };
  let other: { id: string; slug: string };

  test("an empty queue; mistakes end with one line and exit code 1 (2 for a usage error)", async () => {
    tenant = await json("tenants", "create", "--name", "Review Records");
    other = await json("tenants", "create", "--name", "Other Records");
    ids.account = (await json("accounts", "create", "--tenant", tenant.slug, "--name", "Night Owl")).id;
    ids.otherAccount = (await json("accounts", "create", "--tenant", other.slug, "--name", "Day Owl")).id;
    assert.deepEqual(await json("releases", "queue"), []);
    assert.deepEqual(await json("releases", "queue", "--tenant", tenant.slug), []);
    const text = await runCli(["releases", "queue"], env);
    assert.equal(text.stdout, "(none)\n");

    const missing = randomUUID();
    await fails(
      ["releases", "review", missing, "--approve"],
      new RegExp(`^backline: no release ${missing}\\n$`),
    );
    await fails(["releases", "review", "not-a-uuid", "--approve"], /^backline: no release not-a-uuid\n$/);
    await misused(["releases", "review", missing], "say --approve or --reject");
    await misused(
      ["releases", "review", missing, "--approve", "--reject", "--reason", "x"],
      "say --approve or --reject",
    );
    await misused(["releases", "review", missing, "--reject"], "--reject needs --reason");
    await misused(["releases", "review", missing, "--reject", "--reason", "  "], "--reject needs --reason");
    await fails(["releases", "queue", "--tenant", "nope"], /^backline: no tenant nope\n$/);
  });

  test("the queue lists releases in review oldest first with their checks; review approves or rejects them", async () => {
    assert.ok(tenant, "the previous test made the tenants");
    // Only one process may open the data directory: the CLI commands above have all exited.
    await withDataDir(dataDir, async (db) => {
      // These releases carry no uploaded media: the checks listed are the catalog's.
      await db.asService((tx) =>
        tx.query(
          `update internal.tenants set settings = settings || '{"require_media": false, "gs1_company_prefix": "2000000"}' where id = $1`,
          [tenant.id],
        ),
      );
      ids.cover = await serviceRelease(db, ids.account as string, {
        title: "Cover",
        tracks: 1,
        status: "in_review",
      });
      ids.clean = await serviceRelease(db, ids.account as string, {
        title: "Clean",
        tracks: 1,
        status: "in_review",
      });
      ids.empty = await serviceRelease(db, ids.account as string, {
        title: "Empty",
        tracks: 0,
        status: "in_review",
      });
      ids.elsewhere = await serviceRelease(db, ids.otherAccount as string, {
        title: "Elsewhere",
        tracks: 1,
        status: "in_review",
      });
    });

    const queue = (await json("releases", "queue", "--tenant", tenant.slug)) as {
      id: string;
      tenant: string;
      account_id: string;
      title: string;
      status: string;
      submitted_at: string;
      problems: { param: string; code: string; message: string }[];
    }[];
    assert.deepEqual(
      queue.map((r) => [r.id, r.tenant, r.account_id, r.title, r.status]),
      [
        [ids.cover, tenant.slug, ids.account, "Cover", "in_review"],
        [ids.clean, tenant.slug, ids.account, "Clean", "in_review"],
        [ids.empty, tenant.slug, ids.account, "Empty", "in_review"],
      ],
    );
    assert.deepEqual(
      queue.map((r) => r.problems.map((p) => `${p.param} ${p.code}: ${p.message}`)),
      [[], [], ["tracks no_tracks: a release needs at least one track"]],
    );
    assert.ok(queue.every((r) => !Number.isNaN(Date.parse(r.submitted_at))));
    assert.deepEqual(
      ((await json("releases", "queue", "--tenant", other.id)) as { id: string }[]).map((r) => r.id),
      [ids.elsewhere],
    );
    assert.deepEqual(
      ((await json("releases", "queue")) as { id: string }[]).map((r) => r.id),
      [ids.cover, ids.clean, ids.empty, ids.elsewhere],
    );
    const text = await runCli(["releases", "queue", "--tenant", tenant.slug], env);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^id\s+tenant\s+title\s+artist_name\s+status\s+submitted_at\s+checks\n/);
    assert.match(text.stdout, new RegExp(`${ids.clean}.*\\bok\\n`));
    assert.match(text.stdout, new RegExp(`${ids.empty}.*a release needs at least one track`));

    assert.deepEqual(
      await json("releases", "review", ids.cover as string, "--reject", "--reason", "Cover art has a URL"),
      { id: ids.cover, status: "rejected", status_reason: "Cover art has a URL" },
    );
    const approved = await runCli(["releases", "review", ids.clean as string, "--approve"], env);
    assert.equal(approved.code, 0, approved.stderr);
    assert.equal(approved.stdout, `Release ${ids.clean} is approved\n`);

    await fails(
      ["releases", "review", ids.empty as string, "--approve"],
      new RegExp(
        `^backline: release ${ids.empty} cannot be approved: a release needs at least one track\\n$`,
      ),
    );
    await fails(
      ["releases", "review", ids.cover as string, "--approve"],
      new RegExp(
        `^backline: release ${ids.cover} is rejected; only submitted and in_review releases are reviewed\\n$`,
      ),
    );
    assert.deepEqual(
      ((await json("releases", "queue", "--tenant", tenant.slug)) as { id: string }[]).map((r) => r.id),
      [ids.empty],
    );

    // What the commands wrote, read back once no process holds the data directory.
    await withDataDir(dataDir, async (db) => {
      const rows = await db.asService(
        async (tx) =>
          (
            await tx.query<{
              id: string;
              status: string;
              status_reason: string | null;
              deliver: number;
              events: string[];
            }>(
              `select r.id, r.status, r.status_reason,
                 (select count(*)::int from internal.jobs j where j.kind = 'release.deliver' and j.payload ->> 'release_id' = r.id::text) as deliver,
                 (select coalesce(array_agg(e.type order by e.created_at), '{}') from internal.events e
                   where e.data -> 'object' ->> 'id' = r.id::text) as events
               from public.releases r where r.id = any($1::uuid[]) order by r.title`,
              [[ids.cover, ids.clean, ids.empty]],
            )
          ).rows,
      );
      assert.deepEqual(
        rows.map((r) => [r.id, r.status, r.status_reason, r.deliver, r.events]),
        [
          [ids.clean, "approved", null, 1, ["release.submitted", "release.approved"]],
          [ids.cover, "rejected", "Cover art has a URL", 0, ["release.submitted", "release.rejected"]],
          [ids.empty, "in_review", null, 0, ["release.submitted"]],
        ],
      );
    });
  });
});

describe("backline worker", () => {
  const dataDir = tempDir();
  let child: ChildProcess | undefined;
  after(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test("reviews the submitted releases of its data directory until SIGTERM, then exits 0", async () => {
    // A data directory holding a tenant that reviews automatically and two submitted releases.
    // Prepared in this process and closed before the worker starts: only one process may open it.
    await copyMigratedDatabase(dataDir);
    const engine = await PgliteEngine.open({ dataDir: path.join(dataDir, "pgdata") });
    const db = new Db(engine, { secrets: loadSecretBox({ encryptionKey: undefined, dataDir }) });
    let complete = "";
    let empty = "";
    try {
      const { tenant } = await createTenant(db, {
        name: "Auto Review",
        slug: `auto-${randomUUID().slice(0, 8)}`,
        settings: {
          auto_review: true,
          delivery_adapter: "sandbox",
          require_media: false,
          gs1_company_prefix: "2000000",
        },
      });
      const account = await createAccount(db, { tenantId: tenant.id, name: "Night Owl" });
      complete = await serviceRelease(db, account.id, { title: "Complete", tracks: 1, status: "submitted" });
      empty = await serviceRelease(db, account.id, { title: "Empty", tracks: 0, status: "submitted" });
    } finally {
      await db.close();
    }

    const proc = spawn(
      process.execPath,
      [...NODE_BASELINE_FLAGS, path.join(ROOT, "bin/backline.js"), "worker"],
      {
        cwd: ROOT,
        env: childEnv({ DATA_DIR: dataDir, LOG_LEVEL: "info" }),
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    child = proc;
    let out = "";
    proc.stdout?.on("data", (d) => {
      out += d;
    });
    proc.stderr?.on("data", (d) => {
      out += d;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      proc.on("exit", (code, signal) => resolve({ code, signal })),
    );
    const running = () => proc.exitCode === null && proc.signalCode === null;

    await until(
      "the worker to start",
      async () => {
        if (!running())
          throw new Error(`backline worker exited with ${proc.exitCode} before it started:\n${out}`);
        return /worker started/.test(out) ? true : undefined;
      },
      60_000,
    );
    // It claims at once, and again as soon as a job ends: a few seconds are plenty for two reviews
    // and the complete release's way through the sandbox store.
    await sleep(8000);
    assert.ok(
      running(),
      `backline worker exited by itself (code ${proc.exitCode}, signal ${proc.signalCode}) instead of running until stopped:\n${out}`,
    );
    proc.kill("SIGTERM");
    const end = await Promise.race([
      exited,
      sleep(30_000).then(() => {
        throw new Error(`backline worker did not exit within 30 s of SIGTERM:\n${out}`);
      }),
    ]);
    assert.deepEqual(end, { code: 0, signal: null }, out);
    assert.match(out, /worker stopping/);

    await withDataDir(dataDir, async (db) => {
      const rows = await db.asService(
        async (tx) =>
          (
            await tx.query<{ id: string; status: string; status_reason: string | null }>(
              "select id, status, status_reason from public.releases where id = any($1::uuid[])",
              [[complete, empty]],
            )
          ).rows,
      );
      const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
      assert.equal(byId[complete]?.status, "live", out);
      assert.equal(byId[empty]?.status, "rejected", out);
      assert.match(
        byId[empty]?.status_reason ?? "",
        /^Automatic checks: .*a release needs at least one track/,
      );
      const jobs = await db.asService(
        async (tx) =>
          (
            await tx.query<{ kind: string; status: string; release_id: string }>(
              "select kind, status, payload ->> 'release_id' as release_id from internal.jobs order by id",
            )
          ).rows,
      );
      assert.deepEqual(
        jobs.filter((j) => j.kind.startsWith("release.")).map((j) => [j.kind, j.status, j.release_id]),
        [
          ["release.review", "succeeded", complete],
          ["release.review", "succeeded", empty],
          ["release.deliver", "succeeded", complete],
        ],
      );
      // Then one send and one live report per store, every one done.
      assert.ok(jobs.some((j) => j.kind === "delivery.send"));
      // (The monthly invoice run, src/billing/jobs.ts, waits queued for the 1st of next month.)
      assert.deepEqual(
        [...new Set(jobs.filter((j) => j.kind !== INVOICE_JOB_KIND).map((j) => j.status))],
        ["succeeded"],
        out,
      );
    });
  });
});
