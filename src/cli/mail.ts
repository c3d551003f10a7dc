import { type Command, InvalidArgumentError } from "commander";
import type { Cli } from "./context.ts";

/** `backline mail`: the mailbox of every e-mail Backline wrote. */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../mail/mailer.ts")),
});
export function register(program: Command, cli: Cli): void {
  program
    .command("mail")
    .description("the mailbox: every e-mail Backline wrote, newest first (sent by SMTP when SMTP_URL is set)")
    .command("list")
    .description("list e-mails")
    .option("--tenant <tenant>", "only this tenant (id or slug)")
    .option("--to <email>", "only mail to this address")
    .option(
      "--limit <n>",
      "how many",
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1 || n > 1000)
          throw new InvalidArgumentError("expected a whole number from 1 to 1000");
        return n;
      },
      20,
    )
    .action(async (opts: { tenant?: string; to?: string; limit: number }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const tenantId = opts.tenant ? (await cli.requireTenant(db, opts.tenant)).id : undefined;
        const rows = await s.listMail(db, {
          limit: opts.limit,
          ...(tenantId ? { tenantId } : {}),
          ...(opts.to ? { to: opts.to } : {}),
        });
        const human = rows.length
          ? rows
              .map(
                (m) =>
                  `── ${m.created_at.toISOString()}  ${m.status}  to ${m.to_address}\nSubject: ${m.subject}\n\n${m.text_body}\n`,
              )
              .join("\n")
          : "(no mail)";
        cli.output(human, rows);
      });
    });
}
