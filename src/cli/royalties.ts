import type { Command } from "commander";
import { FORMAT_NAMES } from "../royalties/formats/index.ts";
import { findImport, ImportError, importRoyalties, listImports } from "../royalties/import.ts";
import { progressBar, progressJson, reportText, resultJson, resultText } from "../royalties/operator.ts";
import { VoidError, voidImport } from "../royalties/void.ts";
import { type Cli, choice, notFound, refusal, table, UUID } from "./context.ts";

/** `backline royalties`: store sales and usage reports (docs/royalties.md). */
export function register(program: Command, cli: Cli): void {
  const royalties = program
    .command("royalties")
    .description("store sales and usage reports (docs/royalties.md)");
  royalties
    .command("import")
    .description(
      "import a store report: lines are matched to the tenant's delivered tracks (ISRC) and releases (UPC); a report " +
        "with a malformed line is refused whole; the same report twice counts once",
    )
    .argument("<file>", "the report file")
    .requiredOption("--tenant <tenant>", "the tenant (id or slug)")
    .requiredOption("--format <name>", `one of ${FORMAT_NAMES.join(", ")}`, choice(FORMAT_NAMES))
    .option(
      "--period <YYYY-MM>",
      "the reporting month for lines that give none (video-ugc: every line's reporting month, and the sale " +
        "month when the file has no #Period line); recorded on the import",
    )
    .option("--store <code>", "the store, for formats whose lines do not name it")
    .action(
      async (file: string, opts: { tenant: string; format: string; period?: string; store?: string }) => {
        const { json } = cli;
        await cli.withDb(async (db) => {
          const tenant = await cli.requireTenant(db, opts.tenant);
          const tty = cli.io.stderrIsTTY && !json;
          const result = await importRoyalties(db, {
            tenantId: tenant.id,
            format: opts.format,
            file: cli.path(file),
            period: opts.period,
            store: opts.store,
            source: "cli",
            onProgress: (p) => {
              if (json) cli.io.stderr(`${progressJson(p)}\n`);
              else if (tty) cli.io.stderr(`\r${progressBar(p)}`);
            },
          }).catch(refusal(ImportError));
          if (tty) cli.io.stderr("\n");
          cli.output(resultText(result), resultJson(result));
          if (result.status === "rejected") cli.io.setExitCode(1);
        });
      },
    );
  royalties
    .command("imports")
    .description("the imports of a tenant, newest first")
    .option("--tenant <tenant>", "only this tenant (id or slug)")
    .action(async (opts: { tenant?: string }) => {
      await cli.withDb(async (db) => {
        const tenantId = opts.tenant ? (await cli.requireTenant(db, opts.tenant)).id : undefined;
        const rows = await listImports(db, { tenantId });
        cli.output(
          table(rows as unknown as Record<string, unknown>[], [
            "id",
            "format",
            "file_name",
            "status",
            "lines_total",
            "lines_matched",
            "lines_unmatched",
            "lines_malformed",
            "started_at",
          ]),
          rows,
        );
      });
    });
  royalties
    .command("show")
    .description("one import's report: totals per currency, unmatched identifiers, malformed lines")
    .argument("<id>", "import id")
    .action(async (id: string) => {
      // Only a well-formed UUID reaches the database (which would refuse anything else with its own error).
      if (!UUID.test(id)) throw notFound("import", id);
      await cli.withDb(async (db) => {
        const r = await db.asService((tx) => findImport(tx, id), { readOnly: true });
        if (!r) throw notFound("import", id);
        cli.output(reportText(r), r);
      });
    });
  royalties
    .command("void")
    .description(
      "void an import (wrong file, period or mapping): its lines stay for audit, reversed, and leave every total and " +
        "analytics figure; royalties.voided is sent; the same (or a corrected) file can then be imported again",
    )
    .argument("<id>", "import id")
    .requiredOption("--reason <reason>", "why: recorded on the import and told to the accounts")
    .action(async (id: string, opts: { reason: string }) => {
      if (!UUID.test(id)) throw notFound("royalty import", id);
      await cli.withDb(async (db) => {
        const r = await voidImport(db, id.toLowerCase(), { reason: opts.reason, via: "cli" }).catch(
          refusal(VoidError),
        );
        cli.output(reportText(r), r);
      });
    });
}
