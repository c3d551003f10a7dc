import type { Command } from "commander";
import { type Cli, CliError, choice, integer, refusal } from "./context.ts";

/** `backline auth mfa`: multi-factor sign-in, the operator's side (docs/operator.md, "Multi-factor sign-in"). */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../auth/mfa-operator.ts")),
  ...(await import("../auth/settings-operator.ts")),
});

const ON_OFF = ["on", "off"] as const;

export function register(program: Command, cli: Cli): void {
  const auth = program.command("auth").description("sign-in for people (/auth/v1)");
  auth
    .command("anonymous")
    .description(
      "anonymous sign-ins (supabase-js signInAnonymously) for a tenant: off by default; an anonymous user " +
        "belongs to no account until it proves an e-mail address (docs/auth.md)",
    )
    .requiredOption("--tenant <slug|id>", "the tenant")
    .option("--per-hour <n>", "sign-ins per client address and hour (default 30)", integer(1, 100000))
    .argument("<on|off>", "on or off", choice(ON_OFF))
    .action(async (state: "on" | "off", opts: { tenant: string; perHour?: number }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const r = await s
          .setAnonymousSignIns(db, { tenant: opts.tenant, enabled: state === "on", perHour: opts.perHour })
          .catch(refusal(s.AuthSettingsError));
        cli.output(
          `Tenant ${opts.tenant}: anonymous sign-ins ${r.anonymous_users ? "on" : "off"} ` +
            `(${r.anonymous_per_ip.max} per client address and hour).`,
          r,
        );
      });
    });
  auth
    .command("settings")
    .description(
      "a tenant's auth settings (settings.auth, docs/auth.md): shown with their defaults, changed with --set " +
        "and --unset; the result is checked against the settings' schema before it is written",
    )
    .requiredOption("--tenant <slug|id>", "the tenant")
    .option(
      "--set <key=value>",
      "a setting, e.g. secure_password_change=true, mail_interval_seconds=120, " +
        'rate_limits.anonymous_per_ip={"max":10,"windowSeconds":3600} (repeatable; values are JSON or text)',
      (value: string, all: string[] = []) => [...all, value],
    )
    .option("--unset <key>", "back to the default (repeatable)", (value: string, all: string[] = []) => [
      ...all,
      value,
    ])
    .action(async (opts: { tenant: string; set?: string[]; unset?: string[] }) => {
      const s = await services();
      const set: Record<string, unknown> = {};
      for (const pair of opts.set ?? []) {
        const at = pair.indexOf("=");
        if (at <= 0) throw new CliError(`--set ${pair}: expected key=value`, "invalid_argument");
        set[pair.slice(0, at)] = s.parseSettingValue(pair.slice(at + 1));
      }
      await cli.withDb(async (db) => {
        const r = await s
          .updateAuthSettings(db, { tenant: opts.tenant, set, unset: opts.unset ?? [] })
          .catch(refusal(s.AuthSettingsError));
        cli.output(JSON.stringify(r.effective, null, 2), r);
      });
    });
  const mfa = auth.command("mfa").description("multi-factor sign-in: recovery and where it is required");
  mfa
    .command("reset")
    .description(
      "a user lost their second factor: remove their factors and end their sessions, after checking who asks " +
        "(they sign in with their password and enrol a new factor)",
    )
    .requiredOption("--tenant <slug|id>", "the tenant whose /auth/v1 the user signs in to")
    .requiredOption("--email <email>", "the user's e-mail address")
    .option("--reason <text>", "why (kept in the audit log)")
    .action(async (opts: { tenant: string; email: string; reason?: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const r = await s.resetMfa(db, opts).catch(refusal(s.MfaOperatorError));
        cli.output(
          `${opts.email}: ${r.factors_removed} factor(s) removed, ${r.sessions_ended} session(s) ended. ` +
            "They sign in with their password and enrol a new factor.",
          r,
        );
      });
    });
  mfa
    .command("require")
    .description(
      "require aal2 (a verified second factor) of staff: of one tenant's staff or of every tenant's",
    )
    .option("--tenant <slug|id>", "the tenant")
    .option("--platform", "every tenant's staff (the platform setting)")
    .argument("<on|off>", "on or off", choice(ON_OFF))
    .action(async (state: "on" | "off", opts: { tenant?: string; platform?: boolean }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const r = await s.requireStaffAal2(db, opts, state === "on").catch(refusal(s.MfaOperatorError));
        cli.output(
          `${r.tenant_id ? `Staff of tenant ${opts.tenant}` : "Staff of every tenant"} ${
            r.require_staff_aal2
              ? "need an aal2 session"
              : "no longer need an aal2 session (unless another setting says so)"
          }.`,
          r,
        );
      });
    });
  mfa
    .command("require-account")
    .description(
      "require aal2 of an account's members (what the account's owner decides; the operator may set it too)",
    )
    .argument("<account-id>", "the account")
    .argument("<on|off>", "on or off", choice(ON_OFF))
    .action(async (accountId: string, state: "on" | "off") => {
      const s = await services();
      await cli.withDb(async (db) => {
        const r = await s
          .requireAccountAal2(db, accountId, state === "on")
          .catch(refusal(s.MfaOperatorError));
        cli.output(`Account ${accountId}: members ${r.require_aal2 ? "need" : "do not need"} aal2.`, r);
      });
    });
}
