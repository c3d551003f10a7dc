import type { Command } from "commander";
import type { Cli } from "./context.ts";

/** `backline migrate` and `backline db`: the database's schema and roles. */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../db/migrate.ts")),
  ...(await import("../db/pglite.ts")),
  ...(await import("../db/postgres.ts")),
  ...(await import("../db/roles.ts")),
  ...(await import("../start/process.ts")),
});
export function register(program: Command, cli: Cli): void {
  program
    .command("migrate")
    .description(
      "apply pending database migrations (MIGRATION_DATABASE_URL, else DATABASE_URL, else the embedded database)",
    )
    .option("--status", "only show which migrations are applied and pending")
    .option(
      "--dry-run",
      "apply the pending migrations in a transaction that is rolled back: each one's time and the table locks it takes",
    )
    .action(async (opts: { status?: boolean; dryRun?: boolean }) => {
      const s = await services();
      const config = s.loadConfigOrDie();
      const dbc = config.database;
      const engine =
        dbc.engine === "pglite"
          ? await s.PgliteEngine.open({ dataDir: dbc.dataDir })
          : new s.PostgresEngine({
              url: dbc.migrationUrl,
              poolSize: 1,
              applicationName: "backline migrate",
            });
      try {
        if (opts.dryRun) {
          const steps = await s.dryRunMigrations(engine);
          const human = steps.length
            ? [
                ...steps.map(
                  (m) =>
                    `${String(m.version).padStart(4, "0")} ${m.name}: ${m.ms} ms` +
                    (m.locks.length
                      ? `; locks ${m.locks.map((l) => `${l.table} (${l.mode})`).join(", ")}`
                      : ""),
                ),
                "dry run: rolled back, nothing applied",
              ].join("\n")
            : "nothing pending";
          cli.output(human, { dry_run: true, pending: steps });
          return;
        }
        const applied = opts.status ? [] : await s.migrate(engine);
        const status = await engine.transaction((tx) => s.migrationStatus(tx), { readOnly: true });
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
    .action(async (opts: { login: string }) => {
      const { rolesSetupSql } = await import("../db/roles.ts");
      const sql = rolesSetupSql(opts.login);
      cli.output(sql.trimEnd(), { sql });
    });
}
