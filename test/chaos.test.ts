import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type JobRunRow, jobOverlaps, runChaos } from "./support/chaos.ts";
import { createTestDb, ENGINES, TEST_ENCRYPTION_KEY } from "./support/db.ts";

/**
 * Chaos on PostgreSQL, reduced (issue 20, item 9; `npm run chaos` is the full size, 200 releases,
 * figures in bench/README.md): three API processes and two `backline worker` processes on one
 * database, 16 releases driven from draft to taken_down through the public API and the admin API
 * while a process is killed with SIGKILL every few seconds and started again. What is checked is
 * described in test/support/chaos.ts. Runs only with TEST_DATABASE_URL (CI's PostgreSQL run).
 */

const SKIP = ENGINES.includes("postgres")
  ? false
  : "chaos runs on PostgreSQL only: TEST_DATABASE_URL is not set (or TEST_ENGINES leaves it out)";

describe("the chaos run's check that no job ran twice at once", () => {
  const run = (job: string, worker: string, attempt: number, what: string, at: number): JobRunRow => ({
    job_id: job,
    kind: "delivery.send",
    worker,
    attempt,
    what,
    at: new Date(at),
  });

  test("a job taken over from a killed worker, and runs one after another, are fine", () => {
    const { overlaps, takeovers } = jobOverlaps(
      [
        run("1", "w-a", 1, "claim", 1000),
        run("1", "w-a", 1, "taken_over", 12_000),
        run("1", "w-b", 2, "claim", 12_000),
        run("1", "w-b", 2, "end:succeeded", 12_500),
        run("2", "w-b", 1, "claim", 1000),
        run("2", "w-b", 1, "end:queued", 1100),
        run("2", "w-a", 2, "claim", 3100),
        run("2", "w-a", 2, "end:succeeded", 3200),
      ],
      new Map([["w-a", 2000]]),
    );
    assert.deepEqual(overlaps, []);
    assert.equal(takeovers, 1);
  });

  test("a job taken over from a worker that was alive, or killed only later, ran twice at once", () => {
    const { overlaps } = jobOverlaps(
      [
        run("1", "w-a", 1, "claim", 1000),
        run("1", "w-a", 1, "taken_over", 12_000),
        run("1", "w-b", 2, "claim", 12_000),
        run("2", "w-c", 1, "claim", 1000),
        run("2", "w-c", 1, "taken_over", 12_000),
        run("2", "w-b", 2, "claim", 12_000),
      ],
      new Map([["w-c", 15_000]]),
    );
    assert.deepEqual(
      overlaps.map((o) => [o.jobId, o.worker]),
      [
        ["1", "w-a"],
        ["2", "w-c"],
      ],
    );
  });

  test("a claim while another run holds the job, or an end by a worker that does not hold it, is flagged", () => {
    const { overlaps } = jobOverlaps(
      [
        run("1", "w-a", 1, "claim", 1000),
        run("1", "w-b", 1, "claim", 1100),
        run("2", "w-a", 1, "claim", 1000),
        run("2", "w-b", 1, "end:succeeded", 1100),
      ],
      new Map(),
    );
    assert.equal(overlaps.length, 2, JSON.stringify(overlaps));
  });
});

describe("chaos [postgres]", () => {
  test("16 releases through to taken_down while processes are killed: nothing lost, nothing run twice at once, no failure on a live process", {
    timeout: 240_000,
  }, async (ctx) => {
    if (SKIP) return ctx.skip(SKIP);
    const began = Date.now();
    const t = await createTestDb("postgres");
    try {
      const url = t.url;
      assert.ok(url);
      const report = await runChaos({
        loginUrl: url,
        db: t.db,
        owner: t.owner,
        encryptionKey: TEST_ENCRYPTION_KEY,
        releases: 16,
        concurrency: 16,
        spreadOverKills: 2,
        killEveryMs: [1500, 3000],
        maxKills: 3,
        leaseMs: 10_000,
        releaseTimeoutMs: 150_000,
        log: (line) => ctx.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s ${line}`),
      });
      const { unexcusedFailures, overlaps, missingEvents, notFinal, deadJobs, ...figures } = report;
      ctx.diagnostic(JSON.stringify(figures));
      assert.deepEqual(notFinal, [], "every release is taken down");
      assert.equal(report.final, 16);
      assert.deepEqual(unexcusedFailures, [], "no failure on a process that was not killed");
      assert.deepEqual(overlaps, [], "no job run twice at the same time");
      assert.deepEqual(deadJobs, [], "no job died");
      assert.deepEqual(missingEvents, [], "every event reached the endpoint");
      // submitted, approved, live, takedown_completed: four per release.
      assert.equal(report.events, 16 * 4);
      assert.equal(report.badSignatures, 0);
      assert.equal(report.deliveriesNotSucceeded, 0);
      assert.ok(report.kills.length >= 2, `only ${report.kills.length} kills`);
      assert.ok(report.kills.some((k) => k.kind === "api") && report.kills.some((k) => k.kind === "worker"));
    } finally {
      await t.close();
    }
  });
});
