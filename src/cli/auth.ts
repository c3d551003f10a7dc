import { readFile } from "node:fs/promises";
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
  registerProviders(auth, cli);
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

/**
 * `backline auth providers`: a tenant's OpenID Connect providers (docs/auth.md, "OpenID Connect
 * providers"), as /admin/v1/auth/providers. The client secret is read from a file, never the
 * command line, and never shown.
 */
function registerProviders(auth: Command, cli: Cli): void {
  const load = () => import("../auth/oidc-operator.ts");
  const providers = auth
    .command("providers")
    .description("sign-in with OpenID Connect providers (signInWithOAuth): Google, Apple or any other");
  providers
    .command("list")
    .description("a tenant's providers (the secret shows only as client_secret_set)")
    .requiredOption("--tenant <slug|id>", "the tenant")
    .action(async (opts: { tenant: string }) => {
      const s = await load();
      await cli.withDb(async (db, config) => {
        const tenantId = await s.tenantIdOf(db, opts.tenant).catch(refusal(s.OidcProviderError));
        const list = await s.listProviders(db, tenantId, config.publicUrl);
        cli.output(
          list.length === 0
            ? `Tenant ${opts.tenant} has no OpenID Connect providers.`
            : list
                .map(
                  (p) =>
                    `${p.name}\t${p.enabled ? "on" : "off"}\t${p.display_name}\t${p.issuer}\t${p.client_id}`,
                )
                .join("\n"),
          list,
        );
      });
    });
  providers
    .command("set")
    .description(
      "set up a provider or change one (only the options given): google and apple need only --client-id and " +
        "--client-secret-file; another name needs --issuer. Register the callback URL it prints with the provider.",
    )
    .argument("<name>", "the name signInWithOAuth gives (google, apple, or your own)")
    .requiredOption("--tenant <slug|id>", "the tenant")
    .option("--issuer <url>", "the provider's issuer (https; its discovery document is under it)")
    .option("--client-id <id>", "the client id the provider gave")
    .option("--client-secret-file <path>", "a file holding the client secret (Apple: the client-secret JWT)")
    .option("--scopes <scopes>", "space-separated scopes (openid is always asked)")
    .option("--display-name <name>", "what the portal's button says after Continue with")
    .option("--disable", "turn sign-in with it off")
    .option("--enable", "turn sign-in with it on")
    .action(
      async (
        name: string,
        opts: {
          tenant: string;
          issuer?: string;
          clientId?: string;
          clientSecretFile?: string;
          scopes?: string;
          displayName?: string;
          disable?: boolean;
          enable?: boolean;
        },
      ) => {
        const s = await load();
        const parsedName = s.ProviderName.safeParse(name);
        if (!parsedName.success)
          throw new CliError(
            `provider name ${name}: ${parsedName.error.issues[0]?.message}`,
            "invalid_argument",
          );
        if (opts.disable && opts.enable)
          throw new CliError("--enable or --disable, not both", "invalid_argument");
        const secret = opts.clientSecretFile
          ? (
              await readFile(cli.path(opts.clientSecretFile), "utf8").catch(() => {
                throw new CliError(`cannot read ${opts.clientSecretFile}`, "unreadable_file");
              })
            ).trim()
          : undefined;
        const input = s.ProviderInput.safeParse({
          issuer: opts.issuer,
          client_id: opts.clientId,
          client_secret: secret,
          scopes: opts.scopes,
          display_name: opts.displayName,
          enabled: opts.disable ? false : opts.enable ? true : undefined,
        });
        if (!input.success) {
          const issue = input.error.issues[0];
          throw new CliError(`${issue?.path.join(".")}: ${issue?.message}`, "invalid_argument");
        }
        await cli.withDb(async (db, config) => {
          const tenantId = await s.tenantIdOf(db, opts.tenant).catch(refusal(s.OidcProviderError));
          const r = await s
            .putProvider(db, tenantId, name, input.data, config.publicUrl)
            .catch(refusal(s.OidcProviderError));
          cli.output(
            `Tenant ${opts.tenant}: provider ${name} ${r.created ? "set up" : "changed"} (${
              r.provider.enabled ? "on" : "off"
            }). Redirect URI to register with it: ${r.provider.callback_url}`,
            r.provider,
          );
        });
      },
    );
  providers
    .command("remove")
    .description(
      "remove a provider (its users keep their identities, and sign in with it again if it comes back)",
    )
    .argument("<name>", "the provider")
    .requiredOption("--tenant <slug|id>", "the tenant")
    .action(async (name: string, opts: { tenant: string }) => {
      const s = await load();
      await cli.withDb(async (db) => {
        const tenantId = await s.tenantIdOf(db, opts.tenant).catch(refusal(s.OidcProviderError));
        if (!(await s.removeProvider(db, tenantId, name)))
          throw new CliError(`tenant ${opts.tenant} has no provider ${name}`, "not_found");
        cli.output(`Tenant ${opts.tenant}: provider ${name} removed.`, { name, removed: true });
      });
    });
}
