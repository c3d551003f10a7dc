import type { Command } from "commander";
import { type Cli, notFound, refusal, table, UsageError } from "./context.ts";

/** `backline deliveries`: a release's deliveries to its stores, and the stores' reports on them. */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../pipeline/delivery.ts")),
  ...(await import("../pipeline/errors.ts")),
  ...(await import("../pipeline/store-inbox.ts")),
});
export function register(program: Command, cli: Cli): void {
  const deliveries = program.command("deliveries").description("a release's deliveries to its stores");
  deliveries
    .command("list")
    .description("every delivery record of a release, newest first")
    .requiredOption("--release <id>", "release id")
    .action(async (opts: { release: string }) => {
      const s = await services();
      if (!/^[0-9a-f-]{36}$/i.test(opts.release)) throw notFound("release", opts.release);
      await cli.withDb(async (db) => {
        const records = await s.deliveriesOf(db, opts.release).catch(refusal(s.OperatorError));
        // The store's acknowledgement files about each delivery, set-aside ones with their error.
        const acks = await s.acknowledgementsOf(
          db,
          records.map((r) => r.id),
        );
        const rows = records.map((r) => ({
          ...r,
          acknowledgements: acks.filter((a) => a.delivery_id === r.id),
        }));
        const latest = (r: (typeof rows)[number]) => {
          const a = r.acknowledgements[0];
          return a ? `${a.outcome}: ${a.file}${a.error ? ` (${a.error})` : ""}` : "";
        };
        cli.output(
          table(
            rows.map((r) => ({ ...r, acknowledgement: latest(r) })) as unknown as Record<string, unknown>[],
            ["id", "store", "action", "status", "attempts", "message", "acknowledgement", "updated_at"],
          ),
          rows,
        );
      });
    });
  deliveries
    .command("retry")
    .description(
      "send again every delivery of a release that ended in error (after fixing the store's settings)",
    )
    .requiredOption("--release <id>", "release id")
    .action(async (opts: { release: string }) => {
      const s = await services();
      if (!/^[0-9a-f-]{36}$/i.test(opts.release)) throw notFound("release", opts.release);
      await cli.withDb(async (db) => {
        const n = await s.retryDeliveries(db, opts.release).catch(refusal(s.OperatorError));
        cli.output(`${n} deliver${n === 1 ? "y" : "ies"} queued again`, {
          release_id: opts.release,
          retried: n,
        });
      });
    });

  deliveries
    .command("report")
    .description(
      "record a store's report on a delivery it received: --live (on sale there), --error with the store's message, " +
        "or --taken-down with a --note saying who confirmed the takedown and how (recorded as by hand)",
    )
    .argument("<delivery-id>", "delivery id (from deliveries list)")
    .option("--live", "the store has it live")
    .option("--error", "the store's ingestion refused it (needs --message)")
    .option("--message <message>", "what the store said, shown to the account")
    .option("--taken-down", "the store confirmed the takedown it was sent (needs --note)")
    .option(
      "--note <note>",
      "for --taken-down: who confirmed it and how (e.g. the store's e-mail and its date)",
    )
    .action(
      async (
        id: string,
        opts: { live?: boolean; error?: boolean; takenDown?: boolean; message?: string; note?: string },
      ) => {
        const s = await services();
        if ([opts.live, opts.error, opts.takenDown].filter(Boolean).length !== 1) {
          throw new UsageError("say --live, --error or --taken-down");
        }
        if (opts.error && !opts.message?.trim()) throw new UsageError("--error needs --message");
        if (opts.takenDown && !opts.note?.trim()) {
          throw new UsageError("--taken-down needs --note: who confirmed the takedown, and how");
        }
        if (!/^[0-9a-f-]{36}$/i.test(id)) throw notFound("delivery", id);
        await cli.withDb(async (db) => {
          const report = opts.live
            ? ({ status: "live" } as const)
            : opts.takenDown
              ? ({ status: "taken_down", note: opts.note ?? "" } as const)
              : ({ status: "error", message: opts.message ?? "" } as const);
          const row = await s.reportDelivery(db, id, report, { via: "cli" }).catch(refusal(s.OperatorError));
          cli.output(`Delivery ${id} to ${row.store} is ${row.status}`, row);
        });
      },
    );
}
