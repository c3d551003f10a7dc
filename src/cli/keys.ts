import type { Command } from "commander";
import { DEFAULT_SCOPES, SCOPES } from "./choices.ts";
import { type Cli, CliError, choice, integer, notFound, table, UsageError } from "./context.ts";

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../public-api/keys/service.ts")),
});

/** `backline keys`: public-API keys of accounts (the operator's side). */
export function register(program: Command, cli: Cli): void {
  const keys = program.command("keys").description("public-API keys of accounts (the operator's side)");
  keys
    .command("issue")
    .description(
      "issue an active API key for an account and print its secret once; --mode test issues a sandbox key " +
        "(for the account's sandbox twin, created on first use)",
    )
    .requiredOption("--account <id>", "account id")
    .option("--mode <mode>", "live or test", choice(["live", "test"] as const), "test")
    .option("--name <name>", "a name for the key", "")
    .option("--scopes <scopes>", `comma-separated, of ${SCOPES.join(", ")}`, DEFAULT_SCOPES.join(","))
    .option("--expires-in-days <days>", "expire the key after this many days", integer(1, 3650))
    .action(
      async (opts: {
        account: string;
        mode: "live" | "test";
        name: string;
        scopes: string;
        expiresInDays?: number;
      }) => {
        const s = await services();
        const scopes = opts.scopes.split(",").map((x) => x.trim());
        const bad = scopes.find((x) => !(SCOPES as readonly string[]).includes(x));
        if (bad) throw new UsageError(`unknown scope ${bad}; expected some of ${SCOPES.join(", ")}`);
        if (!/^[0-9a-f-]{36}$/i.test(opts.account)) throw notFound("account", opts.account);
        await cli.withDb(async (db) => {
          const exists = await db.asService((tx) =>
            tx.query("select 1 from internal.accounts where id = $1", [opts.account]),
          );
          if (exists.rowCount === 0) throw notFound("account", opts.account);
          const { row, secret } = await s.issueKey(db, {
            accountId: opts.account,
            mode: opts.mode,
            name: opts.name,
            scopes,
            ...(opts.expiresInDays
              ? { expiresAt: new Date(Date.now() + opts.expiresInDays * 86_400_000) }
              : {}),
          });
          cli.output(
            [
              `Issued ${opts.mode} key ${row.id} for account ${row.account_id}${opts.mode === "test" ? " (sandbox)" : ""}.`,
              "The secret is shown only now:",
              "",
              `  ${secret}`,
            ].join("\n"),
            { ...row, secret },
          );
        });
      },
    );

  keys
    .command("list")
    .description("list the API keys of an account (never their secrets)")
    .requiredOption("--account <id>", "account id (its sandbox twin's keys are listed too)")
    .action(async (opts: { account: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const rows = (
          await db.asService((tx) =>
            tx.query<Record<string, unknown>>(
              `select ${s.KEY_COLUMNS.join(", ")} from internal.api_keys
               where account_id = $1::uuid or account_id = (select id from internal.accounts where sandbox_of = $1::uuid)
               order by created_at desc`,
              [opts.account],
            ),
          )
        ).rows;
        cli.output(
          table(rows, ["id", "account_id", "mode", "prefix", "name", "status", "last_used_at"]),
          rows,
        );
      });
    });

  for (const [name, status, description] of [
    ["freeze", "frozen", "freeze a key at once (requests with it answer 401 api_key_frozen)"],
    ["unfreeze", "active", "unfreeze a frozen key"],
    ["revoke", "revoked", "revoke a key for good"],
  ] as const) {
    keys
      .command(name)
      .description(description)
      .argument("<id>", "key id")
      .action(async (id: string) => {
        const s = await services();
        if (!/^[0-9a-f-]{36}$/i.test(id)) throw notFound("API key", id);
        await cli.withDb(async (db) => {
          const row = (
            await db.asService((tx) =>
              tx.query<Record<string, unknown>>(
                `update internal.api_keys set status = $2 where id = $1 and status <> 'revoked'
                   and ($2 <> 'active' or status = 'frozen') and ($2 <> 'frozen' or status = 'active')
                 returning ${s.KEY_COLUMNS.join(", ")}`,
                [id, status],
              ),
            )
          ).rows[0];
          if (!row) throw new CliError(`no API key ${id} that can be set ${status}`, "invalid_state");
          cli.output(`Key ${id} is ${status}`, row);
        });
      });
  }
}
