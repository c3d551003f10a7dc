import type { Command } from "commander";
import { type Cli, integer, table, UsageError } from "./context.ts";

/** `backline audit`: the audit log (docs/operator.md, "The audit log"); over HTTP: GET /admin/v1/audit. */
export function register(program: Command, cli: Cli): void {
  program
    .command("audit")
    .description('the audit log (docs/operator.md, "The audit log"); over HTTP: GET /admin/v1/audit')
    .command("list")
    .description("the newest rows of a tenant's audit log (or the installation's own with --platform)")
    .option("--tenant <slug|id>", "the tenant")
    .option("--platform", "rows about the installation (stores, platform settings)")
    .option("--actor <actor>", "a user id, key id or cli:<command>")
    .option("--object <id>", "a row's id")
    .option("--limit <n>", "how many (1-1000)", integer(1, 1000), 50)
    .action(
      async (opts: {
        tenant?: string;
        platform?: boolean;
        actor?: string;
        object?: string;
        limit: number;
      }) => {
        if (!opts.tenant && !opts.platform) throw new UsageError("name a tenant (--tenant) or --platform");
        await cli.withDb(async (db) => {
          const tenantId = opts.tenant ? (await cli.requireTenant(db, opts.tenant)).id : null;
          const rows = await db.asService(
            async (tx) =>
              (
                await tx.query<Record<string, unknown>>(
                  `select id, at, actor_type, actor, actor_detail, ip, action, object_table, object_id, before, after
                   from internal.audit_log
                   where tenant_id is not distinct from $1::uuid and ($2::text is null or actor = $2)
                     and ($3::text is null or object_id = $3)
                   order by id desc limit $4`,
                  [tenantId, opts.actor ?? null, opts.object ?? null, opts.limit],
                )
              ).rows,
            { readOnly: true },
          );
          cli.output(table(rows, ["id", "at", "actor", "action", "object_table", "object_id", "ip"]), rows);
        });
      },
    );
}
