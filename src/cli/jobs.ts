import type { Command } from "commander";
import { JOB_STATUSES } from "./choices.ts";
import { type Cli, CliError, choice, integer, table } from "./context.ts";

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../jobs/queue.ts")),
  ...(await import("../start/process.ts")),
});

/** `backline worker` and `backline jobs`: the operator backend's job queue and what runs it. */
export function registerWorker(program: Command, _cli: Cli): void {
  program
    .command("worker")
    .description(
      "run only the operator backend's worker (review, and more as it lands); several may run side by side",
    )
    .action(async () => {
      const s = await services();
      const config = s.loadConfigOrDie();
      const { workUntilSignalled } = await import("../start/serve.ts");
      await workUntilSignalled(config, s.createLogger(config));
    });
}

export function register(program: Command, cli: Cli): void {
  const jobs = program.command("jobs").description("the operator backend's job queue");
  jobs
    .command("list")
    .description("jobs, newest first: --status dead shows what failed for good, with its last error")
    .option("--status <status>", `one of ${JOB_STATUSES.join(", ")}`, choice(JOB_STATUSES))
    .option("--kind <kind>", "only this kind, e.g. delivery.send")
    .option("--limit <n>", "at most this many (default 100)", integer(1, 10_000))
    .action(async (opts: { status?: (typeof JOB_STATUSES)[number]; kind?: string; limit?: number }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const rows = await s.listJobs(db, opts);
        const human = rows.map((r) => ({
          ...r,
          payload: JSON.stringify(r.payload),
          last_error: r.last_error?.split("\n")[0] ?? null,
        }));
        cli.output(
          table(human, ["id", "kind", "status", "attempts", "payload", "run_at", "last_error"]),
          rows,
        );
      });
    });
  jobs
    .command("retry")
    .description("queue a dead job again with fresh attempts (after fixing what made it fail)")
    .argument("<id>", "job id (from jobs list)")
    .action(async (id: string) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const row = await s.retryDeadJob(db, id);
        if (!row) throw new CliError(`no dead job ${id} (or the same work is already queued)`, "not_found");
        cli.output(`Job ${id} (${row.kind}) is queued again`, row);
      });
    });
}
