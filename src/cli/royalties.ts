import { randomInt } from "node:crypto";
import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import type { Db } from "../db/db.ts";
import type { SampleRelease, SampleReport } from "../royalties/sample.ts";
import { FORMAT_NAMES, SAMPLE_FORMATS } from "./choices.ts";
import { type Cli, choice, integer, notFound, refusal, table, UsageError, UUID } from "./context.ts";

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../royalties/import.ts")),
  ...(await import("../royalties/normalise.ts")),
  ...(await import("../royalties/operator.ts")),
  ...(await import("../royalties/sample.ts")),
  ...(await import("../royalties/void.ts")),
});

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
    .option(
      "--store <code>",
      "the store, for formats whose lines do not name it (ddex-dsr: needed only when no store's ddex.recipient.dpid " +
        "is the sender's party id in the file's HEAD record)",
    )
    .action(
      async (file: string, opts: { tenant: string; format: string; period?: string; store?: string }) => {
        const s = await services();
        const { json } = cli;
        await cli.withDb(async (db) => {
          const tenant = await cli.requireTenant(db, opts.tenant);
          const tty = cli.io.stderrIsTTY && !json;
          const result = await s
            .importRoyalties(db, {
              tenantId: tenant.id,
              format: opts.format,
              file: cli.path(file),
              period: opts.period,
              store: opts.store,
              source: "cli",
              onProgress: (p) => {
                if (json) cli.io.stderr(`${s.progressJson(p)}\n`);
                else if (tty) cli.io.stderr(`\r${s.progressBar(p)}`);
              },
            })
            .catch(refusal(s.ImportError));
          if (tty) cli.io.stderr("\n");
          cli.output(s.resultText(result), s.resultJson(result));
          if (result.status === "rejected") cli.io.setExitCode(1);
        });
      },
    );
  royalties
    .command("sample")
    .description(
      "write a sample store report for one of your releases (backline, streaming-monthly, video-ugc or ddex-dsr): plausible stores, countries, " +
        "units and exact amounts, matching the release on import (once it is delivered)",
    )
    .requiredOption("--release <id>", "release id")
    .requiredOption("--format <name>", `one of ${SAMPLE_FORMATS.join(", ")}`, choice(SAMPLE_FORMATS))
    .option("--out <file>", "write the report to this file (default: print it on stdout)")
    .option("--period <YYYY-MM>", "the month of sale or use (default: last month); reported the month after")
    .option("--store <code>", "streaming-monthly, video-ugc and ddex-dsr: the store the report is from")
    .option(
      "--seed <n>",
      "the same seed writes the same report (default: a new report each time)",
      integer(0, 2 ** 31 - 1),
    )
    .action(
      async (opts: {
        release: string;
        format: string;
        out?: string;
        period?: string;
        store?: string;
        seed?: number;
      }) => {
        const s = await services();
        const period = opts.period ?? lastMonth();
        const problem = s.monthProblem(period);
        if (problem) throw new UsageError(`--period ${period} ${problem}`);
        if (cli.json && !opts.out)
          throw new UsageError("--json prints a summary: say --out <file> for the report");
        if (!UUID.test(opts.release)) throw notFound("release", opts.release);
        await cli.withDb(async (db) => {
          const { release, tenant, status } = await sampleReleaseOf(db, opts.release, opts.store);
          let report: SampleReport;
          try {
            report = s.sampleReport(release, {
              format: opts.format,
              salePeriod: period,
              seed: opts.seed ?? randomInt(2 ** 31 - 1),
              store: opts.store,
            });
          } catch (error) {
            throw refusal(s.SampleError)(error);
          }
          const matchable = (s.MATCHABLE_STATUSES as readonly string[]).includes(status);
          const note = matchable
            ? undefined
            : `the release is ${status}: a report matches only releases the stores have (${s.MATCHABLE_STATUSES.join(", ")})`;
          if (!opts.out) {
            cli.io.stdout(report.text);
            if (note) cli.io.stderr(`backline: note: ${note}\n`);
            return;
          }
          await writeFile(cli.path(opts.out), report.text);
          const command = [
            "npx backline royalties import",
            opts.out,
            `--tenant ${tenant}`,
            `--format ${report.format}`,
            ...(report.importStore ? [`--store ${report.importStore}`] : []),
          ].join(" ");
          cli.output(
            [
              `Wrote a ${report.format} report of ${report.lines} lines for ${JSON.stringify(release.title)} to ${opts.out}`,
              `  stores ${report.stores.join(", ")}; countries ${report.countries.join(", ")}; sales of ${report.salePeriod}, reported ${report.reportingPeriod}`,
              ...report.totals.map(
                (t) =>
                  `  ${t.currency}: ${t.lines} lines, ${t.units} units, gross ${t.gross}, fees ${t.fees}, net ${t.net}`,
              ),
              ...(note ? [`Note: ${note}.`] : []),
              `Import it: ${command}`,
            ].join("\n"),
            {
              file: cli.path(opts.out),
              format: report.format,
              release_id: release.id,
              tenant,
              stores: report.stores,
              store: report.importStore ?? null,
              countries: report.countries,
              sale_period: report.salePeriod,
              reporting_period: report.reportingPeriod,
              lines: report.lines,
              totals: report.totals,
              matchable,
              import_command: command,
            },
          );
        });
      },
    );
  royalties
    .command("imports")
    .description("the imports of a tenant, newest first")
    .option("--tenant <tenant>", "only this tenant (id or slug)")
    .action(async (opts: { tenant?: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const tenantId = opts.tenant ? (await cli.requireTenant(db, opts.tenant)).id : undefined;
        const rows = await s.listImports(db, { tenantId });
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
      const s = await services();
      // Only a well-formed UUID reaches the database (which would refuse anything else with its own error).
      if (!UUID.test(id)) throw notFound("import", id);
      await cli.withDb(async (db) => {
        const r = await db.asService((tx) => s.findImport(tx, id), { readOnly: true });
        if (!r) throw notFound("import", id);
        cli.output(s.reportText(r), r);
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
      const s = await services();
      if (!UUID.test(id)) throw notFound("royalty import", id);
      await cli.withDb(async (db) => {
        const r = await s
          .voidImport(db, id.toLowerCase(), { reason: opts.reason, via: "cli" })
          .catch(refusal(s.VoidError));
        cli.output(s.reportText(r), r);
      });
    });
}

/** Last month, YYYY-MM (UTC). */
function lastMonth(): string {
  const now = new Date();
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, "0")}`;
}

/** What a sample report needs of a release: its identifiers and titles, and the stores it went to. */
async function sampleReleaseOf(
  db: Db,
  id: string,
  store: string | undefined,
): Promise<{ release: SampleRelease; tenant: string; status: string }> {
  return db.asService(
    async (tx) => {
      const r = (
        await tx.query<{
          id: string;
          title: string;
          artist_name: string | null;
          upc: string | null;
          status: string;
          tenant: string;
        }>(
          `select r.id, r.title, r.artist_name, r.upc, r.status, t.slug as tenant
           from public.releases r join internal.accounts a on a.id = r.account_id join internal.tenants t on t.id = a.tenant_id
           where r.id = $1`,
          [id],
        )
      ).rows[0];
      if (!r) throw notFound("release", id);
      if (store !== undefined) {
        const known = await tx.query("select 1 from internal.stores where code = $1", [store]);
        if (known.rowCount === 0) throw notFound("store", store);
      }
      const tracks = await tx.query<{ title: string; isrc: string | null }>(
        "select title, isrc from public.tracks where release_id = $1 order by disc_number, track_number nulls last, created_at",
        [id],
      );
      // The stores that have it, else every enabled store.
      let stores = await tx.query<{ code: string; kind: string }>(
        `select s.code, s.kind from internal.stores s
         where s.code in (select store from internal.release_deliveries where release_id = $1 and status in ('delivered', 'live'))
         order by s.sort, s.code`,
        [id],
      );
      if (stores.rows.length === 0) {
        stores = await tx.query("select code, kind from internal.stores where enabled order by sort, code");
      }
      const parties = await tx.query<{ code: string; dpid: string }>(
        `select code, btrim(settings -> 'ddex' -> 'recipient' ->> 'dpid') as dpid from internal.stores
         where coalesce(btrim(settings -> 'ddex' -> 'recipient' ->> 'dpid'), '') <> ''`,
      );
      return {
        release: {
          id: r.id,
          title: r.title,
          artistName: r.artist_name ?? "",
          upc: r.upc,
          tracks: tracks.rows,
          stores: stores.rows,
          partyIds: Object.fromEntries(parties.rows.map((p) => [p.code, p.dpid])),
        },
        tenant: r.tenant,
        status: r.status,
      };
    },
    { readOnly: true },
  );
}
