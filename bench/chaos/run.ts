// Issue 20, item 9: chaos on PostgreSQL at full size (`npm run chaos`). Three API processes and two
// `backline worker` processes on a fresh database, 200 releases driven from draft to taken_down
// while a process is killed with SIGKILL every few seconds and started again (test/support/chaos.ts
// says what is checked; test/chaos.test.ts runs it reduced in the test suite). Prints the figures
// and exits 1 when a check fails. Figures in bench/README.md ("bench/chaos").
import { randomBytes } from "node:crypto";
import os from "node:os";
import pg from "pg";
import { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import { SecretBox } from "../../src/secrets/box.ts";
import { runChaos } from "../../test/support/chaos.ts";
import { ADMIN_URL, withDatabase } from "../support.ts";

const RELEASES = Number(process.env.CHAOS_RELEASES ?? 200);
const CONCURRENCY = Number(process.env.CHAOS_CONCURRENCY ?? 20);
/** Kills the releases are spread over (they start in this many + 1 batches, one after each kill). */
const SPREAD = Number(process.env.CHAOS_SPREAD ?? Math.max(3, Math.round(RELEASES / 10)));
const KILL_MIN_MS = Number(process.env.CHAOS_KILL_MIN_MS ?? 2000);
const KILL_MAX_MS = Number(process.env.CHAOS_KILL_MAX_MS ?? 5000);
const LEASE_MS = Number(process.env.CHAOS_LEASE_MS ?? 10_000);

const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");

async function main(): Promise<number> {
  const dbName = `backline_chaos_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(rolesSetupSql("authenticator"));
  await admin.query(`create database ${dbName}`);
  const owner = new PostgresEngine({ url: withDatabase(ADMIN_URL, dbName), poolSize: 2 });
  const key = randomBytes(32).toString("base64");
  const loginUrl = withDatabase(ADMIN_URL, dbName, "authenticator");
  const db = new Db(new PostgresEngine({ url: loginUrl, poolSize: 3, applicationName: "chaos" }), {
    secrets: new SecretBox(Buffer.from(key, "base64")),
  });
  try {
    await migrate(owner);
    const version = (await admin.query<{ v: string }>("select current_setting('server_version') as v"))
      .rows[0]?.v;
    console.log(
      `chaos: ${RELEASES} releases, ${CONCURRENCY} at once, spread over ${SPREAD} kills every ${KILL_MIN_MS}-${KILL_MAX_MS} ms; ` +
        `lease ${LEASE_MS} ms; PostgreSQL ${version}; ${os.cpus().length} cores; load average ${load()}`,
    );
    const started = Date.now();
    const report = await runChaos({
      loginUrl,
      db,
      owner,
      encryptionKey: key,
      releases: RELEASES,
      concurrency: CONCURRENCY,
      spreadOverKills: SPREAD,
      killEveryMs: [KILL_MIN_MS, KILL_MAX_MS],
      leaseMs: LEASE_MS,
      releaseTimeoutMs: 600_000,
      log: (line) => console.log(`  ${((Date.now() - started) / 1000).toFixed(1)} s  ${line}`),
    });
    const { kills, unexcusedFailures, overlaps, missingEvents, notFinal, deadJobs, ...figures } = report;
    const byKind = (k: string) => kills.filter((x) => x.kind === k).length;
    const restarts = kills.map((k) => k.restartMs).sort((a, b) => a - b);
    console.log(
      JSON.stringify(
        {
          ...figures,
          kills: { total: kills.length, api: byKind("api"), worker: byKind("worker") },
          restartMs: { p50: restarts[Math.floor(restarts.length / 2)], max: restarts.at(-1) },
          loadAverageAfter: load(),
        },
        null,
        2,
      ),
    );
    const problems: [string, unknown[]][] = [
      ["releases not taken down", notFinal],
      ["client failures on a process that was not killed", unexcusedFailures],
      ["jobs run twice at once", overlaps],
      ["dead jobs", deadJobs],
      ["events that never reached the endpoint", missingEvents],
    ];
    let failed = false;
    for (const [what, list] of problems) {
      if (list.length === 0) continue;
      failed = true;
      console.log(`FAIL ${list.length} ${what}:\n${JSON.stringify(list.slice(0, 20), null, 2)}`);
    }
    if (report.badSignatures > 0 || report.deliveriesNotSucceeded > 0) {
      failed = true;
      console.log(
        `FAIL ${report.badSignatures} bad signatures, ${report.deliveriesNotSucceeded} deliveries not succeeded`,
      );
    }
    console.log(failed ? "chaos: FAILED" : "chaos: every check passed");
    return failed ? 1 : 0;
  } finally {
    await db.close();
    await owner.close();
    await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
