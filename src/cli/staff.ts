import type { Command } from "commander";
import { STAFF_ROLES } from "./choices.ts";
import { type Cli, choice, refusal, table } from "./context.ts";

type StaffRole = (typeof STAFF_ROLES)[number];

/** `backline staff`: who works on a tenant (or every tenant) from the console and /admin/v1 (docs/console.md, "Staff roles"). */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../mail/mailer.ts")),
  ...(await import("../tenancy/dev-tenant.ts")),
  ...(await import("../tenancy/staff.ts")),
});

export function register(program: Command, cli: Cli): void {
  const staff = program
    .command("staff")
    .description("who works on a tenant (or every tenant) from the console and /admin/v1");
  staff
    .command("add")
    .description(
      "make the user with this address staff of a tenant (--tenant) or of every tenant (--platform); an address " +
        "with no user, or not proven yet, is mailed an invite link first (the local mailbox without SMTP_URL)",
    )
    .option("--tenant <slug|id>", "the tenant they work on")
    .option("--platform", "platform staff: the role on every tenant (platform admin also configures stores)")
    .requiredOption("--email <email>", "the user's e-mail address")
    .requiredOption("--role <role>", `one of ${STAFF_ROLES.join(", ")}`, choice(STAFF_ROLES))
    .option(
      "--user-tenant <slug|id>",
      "the tenant whose /auth/v1 the user signs in to (default: --tenant; for --platform, the development tenant)",
    )
    .action(
      async (opts: {
        tenant?: string;
        platform?: boolean;
        email: string;
        role: StaffRole;
        userTenant?: string;
      }) => {
        const s = await services();
        await cli.withDb(async (db, config) => {
          // `--tenant dev` before the first `npm start`: the development tenant is made here, as the server would.
          if (opts.tenant === "dev" && config.devTenant) {
            await s.ensureDevTenant(db, { dataDir: config.dataDir, url: config.publicUrl });
          }
          const mailer = new s.Mailer(db, { smtpUrl: config.mail.smtpUrl, from: config.mail.from });
          try {
            const result = await s
              .addStaff(db, opts, {
                mailer,
                publicUrl: config.publicUrl,
                redirectTo: `${config.publicUrl}/console/`,
              })
              .catch(refusal(s.StaffError));
            const where = result.staff.tenant_slug
              ? `of ${result.staff.tenant_slug}`
              : "of every tenant (platform)";
            const consoleUrl = `${config.publicUrl}/console/`;
            const lines =
              result.status === "added"
                ? [`${result.staff.email} is ${result.staff.role} ${where}. Sign in at ${consoleUrl}`]
                : [
                    `${result.staff.email} will be ${result.staff.role} ${where} once they prove the address: an invite link is mailed to them.`,
                    ...(config.mail.smtpUrl || !result.invite_link
                      ? []
                      : [
                          "No SMTP_URL: the mail stays in the local mailbox (backline mail list). Open its link to choose a password:",
                          `  ${result.invite_link}`,
                        ]),
                    `Then sign in at ${consoleUrl} (user of tenant ${result.staff.user_tenant}).`,
                  ];
            cli.output(lines.join("\n"), {
              status: result.status,
              ...result.staff,
              console_url: consoleUrl,
              // The link works once: shown only when the mail never leaves this machine.
              invite_link: config.mail.smtpUrl ? null : result.invite_link,
            });
          } finally {
            await mailer.close();
          }
        });
      },
    );
  staff
    .command("list")
    .description("staff of a tenant (with the platform staff who also reach it), platform staff, or everyone")
    .option("--tenant <slug|id>", "only who reaches this tenant")
    .option("--platform", "only platform staff")
    .action(async (opts: { tenant?: string; platform?: boolean }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const rows = await s.listStaff(db, opts).catch(refusal(s.StaffError));
        cli.output(
          table(
            rows.map((r) => ({
              ...r,
              tenant: r.tenant_slug ?? "(platform)",
              active: r.active ? "yes" : "not proven yet",
            })),
            ["email", "user_tenant", "tenant", "role", "active", "created_at"],
          ),
          rows,
        );
      });
    });
  staff
    .command("remove")
    .description("remove a staff role (takes effect at once)")
    .option("--tenant <slug|id>", "the tenant they worked on")
    .option("--platform", "their platform role")
    .requiredOption("--email <email>", "the user's e-mail address")
    .option("--user-tenant <slug|id>", "the tenant of the user, when the address is a user of several")
    .action(async (opts: { tenant?: string; platform?: boolean; email: string; userTenant?: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const removed = await s.removeStaff(db, opts).catch(refusal(s.StaffError));
        cli.output(
          `${removed.email} is no longer ${removed.role} ${removed.tenant_slug ? `of ${removed.tenant_slug}` : "of every tenant (platform)"}`,
          removed,
        );
      });
    });
}
