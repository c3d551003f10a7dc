import type { Command } from "commander";
import { ACCOUNT_KINDS, MEMBERSHIP_ROLES } from "./choices.ts";
import { type Cli, CliError, choice, notFound, table, UsageError, UUID } from "./context.ts";

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../mail/mailer.ts")),
  ...(await import("../tenancy/memberships.ts")),
  ...(await import("../tenancy/tenants.ts")),
});

/** `backline accounts`: labels' and artists' accounts inside a tenant, and their members. */
export function register(program: Command, cli: Cli): void {
  const accounts = program.command("accounts").description("labels' and artists' accounts inside a tenant");
  accounts
    .command("create")
    .description("create an account in a tenant")
    .requiredOption("--tenant <tenant>", "tenant id or slug")
    .requiredOption("--name <name>", "account name")
    .option("--kind <kind>", `one of ${ACCOUNT_KINDS.join(", ")}`, choice(ACCOUNT_KINDS), "label")
    .option("--sandbox", "a sandbox account (simulated stores only)")
    .action(
      async (opts: {
        tenant: string;
        name: string;
        kind: (typeof ACCOUNT_KINDS)[number];
        sandbox?: boolean;
      }) => {
        const s = await services();
        await cli.withDb(async (db) => {
          const tenant = await cli.requireTenant(db, opts.tenant);
          const account = await s.createAccount(db, {
            tenantId: tenant.id,
            name: opts.name,
            kind: opts.kind,
            isSandbox: opts.sandbox ?? false,
          });
          cli.output(`Created account ${account.name} (${account.id}) in ${tenant.slug}`, account);
        });
      },
    );

  accounts
    .command("list")
    .description("list accounts")
    .option("--tenant <tenant>", "only this tenant (id or slug)")
    .action(async (opts: { tenant?: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const tenantId = opts.tenant ? (await cli.requireTenant(db, opts.tenant)).id : undefined;
        const rows = await s.listAccounts(db, tenantId);
        cli.output(
          table(rows as unknown as Record<string, unknown>[], [
            "id",
            "tenant_id",
            "name",
            "kind",
            "is_sandbox",
            "created_at",
          ]),
          rows,
        );
      });
    });

  accounts
    .command("add-member")
    .description(
      "add the user with this (proven) e-mail address to an account, or mail the address an invite link",
    )
    .requiredOption("--account <id>", "account id")
    .requiredOption("--email <email>", "the member's e-mail address")
    .option("--role <role>", `one of ${MEMBERSHIP_ROLES.join(", ")}`, choice(MEMBERSHIP_ROLES), "member")
    .action(async (opts: { account: string; email: string; role: (typeof MEMBERSHIP_ROLES)[number] }) => {
      const s = await services();
      if (!UUID.test(opts.account)) throw notFound("account", opts.account);
      await cli.withDb(async (db, config) => {
        // The invite link goes out by mail (or stays in the local mailbox without SMTP_URL).
        const mailer = new s.Mailer(db, { smtpUrl: config.mail.smtpUrl, from: config.mail.from });
        try {
          const result = await s
            .addMember(
              db,
              { accountId: opts.account, email: opts.email, role: opts.role },
              { mailer, publicUrl: config.publicUrl },
            )
            .catch((e: unknown) => {
              if (!(e instanceof s.MembershipError)) throw e;
              throw e.message.startsWith("no account")
                ? new CliError(e.message, "not_found")
                : new UsageError(e.message);
            });
          cli.output(
            result.status === "added"
              ? `Added ${opts.email} to ${opts.account} as ${opts.role}`
              : `Invited ${result.email} to ${opts.account} as ${opts.role}: the invite link is mailed to them; they join when they use it`,
            result,
          );
        } finally {
          await mailer.close();
        }
      });
    });
}
