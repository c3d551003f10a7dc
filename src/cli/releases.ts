import type { Command } from "commander";
import { type Cli, notFound, refusal, table, UsageError } from "./context.ts";

/** `backline releases`: the operator's review of submitted releases. */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../pipeline/errors.ts")),
  ...(await import("../pipeline/review.ts")),
});
export function register(program: Command, cli: Cli): void {
  const releases = program.command("releases").description("the operator's review of submitted releases");
  releases
    .command("queue")
    .description("releases waiting for review, oldest first, with what the checks say now")
    .option("--tenant <tenant>", "only this tenant (id or slug)")
    .action(async (opts: { tenant?: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const tenantId = opts.tenant ? (await cli.requireTenant(db, opts.tenant)).id : undefined;
        const rows = await s.reviewQueue(db, tenantId);
        const human = rows.map((r) => ({
          ...r,
          checks: r.problems.length === 0 ? "ok" : r.problems.map((p) => p.message).join("; "),
        }));
        cli.output(
          table(human, ["id", "tenant", "title", "artist_name", "status", "submitted_at", "checks"]),
          rows,
        );
      });
    });
  releases
    .command("review")
    .description(
      "approve a release in review (it goes to delivery) or reject it with a reason (it is editable again)",
    )
    .argument("<id>", "release id")
    .option("--approve", "approve it")
    .option("--reject", "reject it (needs --reason)")
    .option("--reason <reason>", "why it is rejected, shown to the account")
    .action(async (id: string, opts: { approve?: boolean; reject?: boolean; reason?: string }) => {
      const s = await services();
      if (Boolean(opts.approve) === Boolean(opts.reject)) throw new UsageError("say --approve or --reject");
      if (opts.reject && !opts.reason?.trim()) throw new UsageError("--reject needs --reason");
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw notFound("release", id);
      await cli.withDb(async (db) => {
        const decision = opts.approve
          ? ({ approve: true } as const)
          : ({ approve: false, reason: (opts.reason ?? "").trim() } as const);
        const row = await s.decideReview(db, id, decision).catch(refusal(s.OperatorError));
        cli.output(`Release ${id} is ${row.status}${row.status_reason ? `: ${row.status_reason}` : ""}`, row);
      });
    });
}
