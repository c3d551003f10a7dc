import type { Command } from "commander";
import { migrate, migrationStatus } from "../db/migrate.ts";
import { PgliteEngine } from "../db/pglite.ts";
import { PostgresEngine } from "../db/postgres.ts";
import { rolesSetupSql } from "../db/roles.ts";
import { loadConfigOrDie } from "../start/process.ts";
import type { Cli } from "./context.ts";

/** `backline migrate` and `backline db`: the database's schema and roles. */
export function register(program: Command, cli: Cli): void {
  program
    .command("migrate")
    .description(
      "apply pending database migrations (MIGRATION_DATABASE_URL, else DATABASE_URL, else the embedded database)",
    )
    .option("--status", "only show which migrations are applied and pending")
    .action(async (opts: { status?: boolean }) => {
      const config = loadConfigOrDie();
      const dbc = config.database;
      const engine =
        dbc.engine === "pglite"
          ? await PgliteEngine.open({ dataDir: dbc.dataDir })
          : new PostgresEngine({ url: dbc.migrationUrl, poolSize: 1, applicationName: "backline migrate" });
      try {
        const applied = opts.status ? [] : await migrate(engine);
        const status = await engine.transaction((tx) => migrationStatus(tx), { readOnly: true });
        const human = [
          ...applied.map((m) => `applied ${String(m.version).padStart(4, "0")} ${m.name}`),
          `${status.applied.length} applied, ${status.pending.length} pending` +
            (status.pending.length
              ? `: ${status.pending.map((m) => `${m.version} ${m.name}`).join(", ")}`
              : ""),
        ].join("\n");
        cli.output(human, {
          applied_now: applied.map((m) => ({ version: m.version, name: m.name })),
          applied: status.applied.map((m) => ({ version: m.version, name: m.name, applied_at: m.appliedAt })),
          pending: status.pending.map((m) => ({ version: m.version, name: m.name })),
        });
      } finally {
        await engine.close();
      }
    });

  const db = program.command("db").description("PostgreSQL setup");
  db.command("setup-sql")
    .description("print the SQL a superuser runs once to create Backline's roles (pipe it into psql)")
    .option("--login <role>", "name of the login role the server connects as", "authenticator")
    .action((opts: { login: string }) => {
      const sql = rolesSetupSql(opts.login);
      cli.output(sql.trimEnd(), { sql });
    });
}
