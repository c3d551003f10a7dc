import type { Command } from "commander";
import { type Cli, notFound, refusal, table, UsageError } from "./context.ts";

/** `backline oac`: Official Artist Channel requests. */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../pipeline/errors.ts")),
  ...(await import("../pipeline/oac.ts")),
});
export function register(program: Command, cli: Cli): void {
  const oac = program.command("oac").description("Official Artist Channel requests");
  oac
    .command("queue")
    .description("requests waiting for a decision, oldest first")
    .action(async () => {
      const s = await services();
      await cli.withDb(async (db) => {
        const rows = await s.oacQueue(db);
        cli.output(
          table(rows as unknown as Record<string, unknown>[], [
            "id",
            "tenant",
            "artist_name",
            "store",
            "status",
            "channel_url",
            "created_at",
          ]),
          rows,
        );
      });
    });
  oac
    .command("review")
    .description("approve a request (the channel is granted) or reject it with a reason")
    .argument("<id>", "OAC request id")
    .option("--approve", "approve it")
    .option("--reject", "reject it (needs --reason)")
    .option("--reason <reason>", "why it is rejected (or a note with --approve), shown to the account")
    .action(async (id: string, opts: { approve?: boolean; reject?: boolean; reason?: string }) => {
      const s = await services();
      if (Boolean(opts.approve) === Boolean(opts.reject)) throw new UsageError("say --approve or --reject");
      if (opts.reject && !opts.reason?.trim()) throw new UsageError("--reject needs --reason");
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw notFound("OAC request", id);
      await cli.withDb(async (db) => {
        const decision = opts.approve
          ? ({ approve: true, ...(opts.reason ? { note: opts.reason } : {}) } as const)
          : ({ approve: false, reason: opts.reason ?? "" } as const);
        const row = await s.decideOac(db, id, decision).catch(refusal(s.OperatorError));
        cli.output(
          `OAC request ${id} is ${row.status}${row.status_reason ? `: ${row.status_reason}` : ""}`,
          row,
        );
      });
    });
}
