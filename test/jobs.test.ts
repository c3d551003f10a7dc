import assert from "node:assert/strict";
import { test } from "node:test";
import { claim, complete, enqueue, fail, listJobs, retryDeadJob } from "../src/jobs/queue.ts";
import { Worker } from "../src/jobs/worker.ts";
import { describeEachEngine } from "./support/db.ts";

/** The durable job queue (src/jobs): exactly-when-committed, retries, dead jobs, leases, graceful stop, races. */

const until = async (check: () => Promise<boolean>, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
};

describeEachEngine("job queue", (t) => {
  const db = () => t().db;
  const jobStatus = async (id: string) =>
    db().asService(
      async (tx) =>
        (
          await tx.query<{ status: string; attempts: number; last_error: string | null; future: boolean }>(
            "select status, attempts, last_error, run_at > now() as future from internal.jobs where id = $1",
            [id],
          )
        ).rows[0],
    );
  // Kinds are lower-case words and dots (a check constraint): a random letter suffix keeps tests apart.
  const kind = (name: string) =>
    `test.${name}_${Array.from({ length: 8 }, () => String.fromCharCode(97 + Math.floor(Math.random() * 26))).join("")}`;

  test("a job exists exactly when the transaction that wrote it commits", async () => {
    const k = kind("commit");
    await assert.rejects(
      db().asService(async (tx) => {
        await enqueue(tx, k, { n: 1 });
        throw new Error("roll back");
      }),
    );
    assert.deepEqual(await claim(db(), "w", [k], 10, 1000), []);
    const id = await db().asService((tx) => enqueue(tx, k, { n: 2 }));
    const claimed = await claim(db(), "w", [k], 10, 1000);
    assert.deepEqual(
      claimed.map((j) => [j.id, j.payload, j.attempts]),
      [[id, { n: 2 }, 1]],
    );
  });

  test("a dedupe key allows one open job per key, and a new one once it is done", async () => {
    const k = kind("dedupe");
    const first = await db().asService((tx) => enqueue(tx, k, {}, { dedupeKey: "release-1" }));
    assert.ok(first);
    assert.equal(await db().asService((tx) => enqueue(tx, k, {}, { dedupeKey: "release-1" })), undefined);
    const [job] = await claim(db(), "w", [k], 1, 1000);
    assert.ok(job);
    await complete(db(), job, "w");
    assert.ok(await db().asService((tx) => enqueue(tx, k, {}, { dedupeKey: "release-1" })));
  });

  test("a failure is retried after its backoff, and after the last attempt the job is dead with its error", async () => {
    const k = kind("retry");
    const id = (await db().asService((tx) => enqueue(tx, k, {}, { maxAttempts: 2 }))) as string;
    const [first] = await claim(db(), "w", [k], 1, 1000);
    assert.ok(first);
    assert.equal(await fail(db(), first, "w", new Error("store unreachable"), 60_000), "retry");
    assert.deepEqual(await jobStatus(id), {
      status: "queued",
      attempts: 1,
      last_error: (await jobStatus(id))?.last_error,
      future: true,
    });
    assert.match((await jobStatus(id))?.last_error ?? "", /store unreachable/);
    assert.deepEqual(await claim(db(), "w", [k], 1, 1000), [], "not before its time");
    await db().asService((tx) => tx.query("update internal.jobs set run_at = now() where id = $1", [id]));
    const [second] = await claim(db(), "w", [k], 1, 1000);
    assert.equal(second?.attempts, 2);
    assert.ok(second);
    assert.equal(await fail(db(), second, "w", new Error("still unreachable"), 0), "dead");
    const dead = await jobStatus(id);
    assert.equal(dead?.status, "dead");
    assert.match(dead?.last_error ?? "", /still unreachable/);
    assert.deepEqual(await claim(db(), "w", [k], 1, 1000), [], "a dead job is not claimed");
  });

  test("a job whose worker died is claimed again when its lease runs out; the dead worker can no longer finish it", async () => {
    const k = kind("lease");
    const id = (await db().asService((tx) => enqueue(tx, k, {}))) as string;
    // A lease long enough that a loaded machine still asks again inside it.
    const [mine] = await claim(db(), "a", [k], 1, 1500);
    assert.ok(mine);
    assert.deepEqual(await claim(db(), "b", [k], 1, 100), [], "held while the lease lasts");
    await new Promise((r) => setTimeout(r, 1700));
    const [theirs] = await claim(db(), "b", [k], 1, 60_000);
    assert.equal(theirs?.attempts, 2);
    await complete(db(), mine, "a");
    assert.equal((await jobStatus(id))?.status, "running", "worker a lost it: its completion is ignored");
    assert.ok(theirs);
    await complete(db(), theirs, "b");
    assert.equal((await jobStatus(id))?.status, "succeeded");
  });

  test("a job whose worker is lost at its last attempt is dead, not claimed again", async () => {
    const k = kind("lost");
    const id = (await db().asService((tx) => enqueue(tx, k, {}, { maxAttempts: 2 }))) as string;
    for (const worker of ["a", "b"]) {
      assert.equal((await claim(db(), worker, [k], 1, 50)).length, 1, `attempt by ${worker}`);
      await new Promise((r) => setTimeout(r, 120));
    }
    assert.deepEqual(await claim(db(), "c", [k], 1, 50), [], "not a third time");
    const row = await jobStatus(id);
    assert.equal(row?.status, "dead");
    assert.equal(row?.attempts, 2);
    assert.match(row?.last_error ?? "", /worker of the last attempt was lost/);
  });

  test("dead jobs are listed with their error; retrying one queues it with fresh attempts, once", async () => {
    const k = kind("dead");
    const id = (await db().asService((tx) =>
      enqueue(tx, k, { n: 1 }, { maxAttempts: 1, dedupeKey: "d1" }),
    )) as string;
    const [job] = await claim(db(), "a", [k], 1, 60_000);
    assert.ok(job);
    assert.equal(await fail(db(), job, "a", new Error("store unreachable")), "dead");
    const dead = await listJobs(db(), { status: "dead", kind: k });
    assert.deepEqual(
      dead.map((j) => [j.id, j.status, j.attempts, j.payload]),
      [[id, "dead", 1, { n: 1 }]],
    );
    assert.match(dead[0]?.last_error ?? "", /store unreachable/);
    assert.deepEqual(await listJobs(db(), { status: "queued", kind: k }), []);

    // The same work queued meanwhile: the dead one stays dead rather than running twice.
    const other = (await db().asService((tx) => enqueue(tx, k, { n: 2 }, { dedupeKey: "d1" }))) as string;
    assert.equal(await retryDeadJob(db(), id), undefined);
    const [otherJob] = await claim(db(), "a", [k], 1, 60_000);
    assert.equal(otherJob?.id, other);
    await complete(db(), otherJob as NonNullable<typeof otherJob>, "a");

    const retried = await retryDeadJob(db(), id);
    assert.deepEqual([retried?.status, retried?.attempts], ["queued", 0]);
    assert.equal(await retryDeadJob(db(), id), undefined, "no longer dead");
    assert.equal(await retryDeadJob(db(), "not-a-number"), undefined);
    const [again] = await claim(db(), "b", [k], 1, 60_000);
    assert.deepEqual([again?.id, again?.attempts], [id, 1]);
  });

  test("a worker runs the kinds it has handlers for, and stop() waits for the job in flight", async () => {
    const k = kind("worker");
    const other = kind("other");
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const seen: unknown[] = [];
    const worker = new Worker({
      db: db(),
      pollMs: 20,
      handlers: {
        [k]: async (job) => {
          seen.push(job.payload);
          await gate;
        },
      },
    });
    const id = (await db().asService((tx) => enqueue(tx, k, { title: "Night Drive" }))) as string;
    const otherId = (await db().asService((tx) => enqueue(tx, other, {}))) as string;
    worker.start();
    await until(async () => seen.length === 1);
    let stopped = false;
    const stopping = worker.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(stopped, false, "stop waits for the handler");
    release();
    await stopping;
    assert.deepEqual(seen, [{ title: "Night Drive" }]);
    assert.equal((await jobStatus(id))?.status, "succeeded");
    assert.equal((await jobStatus(otherId))?.status, "queued", "a kind without a handler is left alone");
  });

  test("a sleeping worker wakes when a job is committed, or a dead one retried, not at its next poll", async () => {
    const k = kind("wake");
    const started: number[] = [];
    let failNext = true;
    const worker = new Worker({
      db: db(),
      // Polling alone would take a minute: only the notice can start these jobs in time.
      pollMs: 60_000,
      handlers: {
        [k]: async () => {
          started.push(Date.now());
          if (failNext) {
            failNext = false;
            throw new Error("first run fails for good");
          }
        },
      },
    });
    worker.start();
    try {
      // Let the worker's first look (nothing to do) end, so it is asleep.
      await new Promise((r) => setTimeout(r, 300));
      const id = (await db().asService((tx) => enqueue(tx, k, {}, { maxAttempts: 1 }))) as string;
      const committed = Date.now();
      await until(async () => started.length === 1, 5000);
      assert.ok((started[0] as number) - committed < 5000);
      await until(async () => (await jobStatus(id))?.status === "dead", 5000);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(await retryDeadJob(db(), id));
      await until(async () => (await jobStatus(id))?.status === "succeeded", 5000);
      assert.equal(started.length, 2);
    } finally {
      await worker.stop();
    }
  });

  test("a worker that does not listen waits for its poll", async () => {
    const k = kind("nolisten");
    let ran = false;
    const worker = new Worker({
      db: db(),
      pollMs: 60_000,
      listen: false,
      handlers: {
        [k]: async () => {
          ran = true;
        },
      },
    });
    worker.start();
    try {
      await new Promise((r) => setTimeout(r, 300));
      await db().asService((tx) => enqueue(tx, k, {}));
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(ran, false, "a polling worker did not wake");
    } finally {
      await worker.stop();
    }
  });

  test("a per-store cap: a store whose sends hang holds one slot, the other store's jobs all run meanwhile", async () => {
    const k = kind("capped");
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let slowRunning = 0;
    let slowMax = 0;
    const fastDone: number[] = [];
    const worker = new Worker({
      db: db(),
      concurrency: 3,
      pollMs: 50,
      perGroup: { kinds: [k], field: "store", max: 1 },
      handlers: {
        [k]: async (job) => {
          if (job.payload.store === "slow") {
            slowRunning++;
            slowMax = Math.max(slowMax, slowRunning);
            await gate;
            slowRunning--;
          } else fastDone.push(Number(job.payload.n));
        },
      },
    });
    await db().asService(async (tx) => {
      for (let n = 0; n < 4; n++) await enqueue(tx, k, { store: "slow", n });
      for (let n = 0; n < 6; n++) await enqueue(tx, k, { store: "fast", n });
    });
    worker.start();
    try {
      await until(async () => fastDone.length === 6, 5000);
      assert.equal(slowMax, 1, "one slow send at a time");
      release();
      await until(
        async () =>
          (
            await db().asService((tx) =>
              tx.query("select 1 from internal.jobs where kind = $1 and status <> 'succeeded'", [k]),
            )
          ).rowCount === 0,
        5000,
      );
      assert.equal(slowMax, 1);
    } finally {
      release();
      await worker.stop();
    }
  });

  test("two workers racing over 120 jobs run each exactly once", async (ctx) => {
    if (t().kind !== "postgres") return ctx.skip("PGlite has one connection: nothing races");
    const k = kind("race");
    await db().asService(async (tx) => {
      for (let i = 0; i < 120; i++) await enqueue(tx, k, { i });
    });
    const runs = new Map<number, number>();
    const handler = async (job: { payload: Record<string, unknown> }) => {
      const i = job.payload.i as number;
      runs.set(i, (runs.get(i) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, Math.random() * 5));
    };
    const workers = [1, 2].map(
      (n) =>
        new Worker({ db: db(), id: `racer-${n}`, pollMs: 10, concurrency: 4, handlers: { [k]: handler } }),
    );
    for (const w of workers) w.start();
    await until(async () => runs.size === 120);
    await Promise.all(workers.map((w) => w.stop()));
    assert.equal(runs.size, 120);
    assert.ok(
      [...runs.values()].every((n) => n === 1),
      "no job ran twice",
    );
    const done = await db().asService(
      async (tx) =>
        (
          await tx.query<{ n: string; by: string }>(
            "select count(*)::text as n, count(distinct locked_by)::text as by from internal.jobs where kind = $1 and status = 'succeeded'",
            [k],
          )
        ).rows[0],
    );
    assert.equal(done?.n, "120");
  });
});
