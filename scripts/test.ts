import { globSync, writeFileSync } from "node:fs";
import { run } from "node:test";
import { spec } from "node:test/reporters";

/**
 * `npm test`: every test file under src/ and test/ (or the files and patterns given), two at a
 * time in their own processes, as `node --test --test-concurrency=2` runs them, but the longest
 * files first. `node --test` sorts the files by name, so a long file late in the alphabet ran on
 * one core while the other had nothing left; started first, the long files overlap and the short
 * ones fill in behind them, and both slots finish together (bench/README.md, "The `backline`
 * command and the test suite").
 *
 * LONGEST_FIRST is the measured order: first the fifteen slowest files by wall time on the embedded
 * engine in the gate of 2026-12-06 (what `npm test` prints at its end), then the earlier order by
 * CPU seconds per file; a file not in it runs after these, by name.
 * TEST_CONCURRENCY overrides the 2.
 */
const LONGEST_FIRST = [
  "test/docs-snippets.test.ts",
  "test/console/desk.test.ts",
  "test/console/operator.test.ts",
  "test/pipeline-review.test.ts",
  "test/portal/getting-in.test.ts",
  "test/portal/catalogue.test.ts",
  "test/console/money.test.ts",
  "test/console/store-dictionary.test.ts",
  "test/portal/money.test.ts",
  "test/admin-desk-scale.test.ts",
  "test/migrations.test.ts",
  "test/auth-cli.test.ts",
  "test/webhooks-order.test.ts",
  "test/backup-restore.test.ts",
  "test/portal/api-reference.test.ts",
  "test/portal/developers.test.ts",
  "test/portal/uploads-s3.test.ts",
  "test/chaos.test.ts",
  "test/public-api-contract.test.ts",
  "test/cli-catalogue.test.ts",
  "test/portal-domains.test.ts",
  "test/cli-errors.test.ts",
  "test/royalties-operator.test.ts",
  "test/server.test.ts",
  "test/public-api-keys.test.ts",
  "test/secrets-at-rest.test.ts",
  "test/cli.test.ts",
  "test/staff-cli.test.ts",
  "test/reliability-process.test.ts",
  "test/public-api-quickstart.test.ts",
  "test/rest-fuzz.test.ts",
  "test/rest-openapi.test.ts",
  "test/formats.test.ts",
  "test/metrics.test.ts",
  "test/cli-socket.test.ts",
  "test/console/refusals.test.ts",
  "test/auth.test.ts",
  "test/rls-matrix.test.ts",
  "test/pipeline-delivery.test.ts",
  "test/uploads-large.test.ts",
  "test/store-inbox.test.ts",
  "test/ddex-sftp.test.ts",
  "test/cli-mfa-audit.test.ts",
  "test/ddex.test.ts",
  "test/auth-invitations.test.ts",
  "test/downloads.test.ts",
  "test/catalog-rules.test.ts",
  "src/storage/inspect.test.ts",
  "test/auth-passkeys.test.ts",
  "test/ddex-choreography.test.ts",
];

const args = process.argv.slice(2);
const patterns = args.length > 0 ? args : ["src/**/*.test.ts", "test/**/*.test.ts"];
const files = [...new Set(patterns.flatMap((p) => globSync(p, { exclude: ["**/node_modules/**"] })))];
const rank = (file: string) => {
  const i = LONGEST_FIRST.indexOf(file);
  return i === -1 ? LONGEST_FIRST.length : i;
};
files.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
if (files.length === 0) {
  console.error(`No test files match ${patterns.join(" ")}`);
  process.exit(1);
}

// Each file's wall time, so LONGEST_FIRST can be kept in the measured order: the slowest are
// printed after the run (TEST_TIMINGS=<path> also writes every file's, as JSON).
const durations = new Map<string, number>();
const reporter = run({ files, concurrency: Number(process.env.TEST_CONCURRENCY ?? 2) })
  .on("test:summary", (summary) => {
    if (summary.file !== undefined) durations.set(summary.file, summary.duration_ms);
    // The run's own summary (no file): what `node --test` turns into its exit status.
    else if (!summary.success) process.exitCode = 1;
  })
  .compose(spec);
reporter.pipe(process.stdout);
reporter.on("end", () => {
  const cwd = `${process.cwd()}/`;
  const byTime = [...durations]
    .map(([file, ms]) => [file.startsWith(cwd) ? file.slice(cwd.length) : file, ms] as const)
    .sort((a, b) => b[1] - a[1]);
  if (byTime.length > 1) {
    console.log("\nThe slowest files (wall time, s):");
    for (const [file, ms] of byTime.slice(0, 15))
      console.log(`  ${(ms / 1000).toFixed(1).padStart(7)}  ${file}`);
  }
  if (process.env.TEST_TIMINGS)
    writeFileSync(process.env.TEST_TIMINGS, `${JSON.stringify(Object.fromEntries(byTime), null, 1)}\n`);
});
