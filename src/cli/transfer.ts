import { randomInt } from "node:crypto";
import type { Command } from "commander";
import type { Db } from "../db/db.ts";
import type { TransferProgress, TransferReport } from "../transfer/import.ts";
import { type Cli, CliError, choice, integer, notFound, refusal, UsageError, UUID } from "./context.ts";

/** The services behind these commands, loaded when one of them runs. */
const services = async () => ({
  ...(await import("../transfer/import.ts")),
  ...(await import("../transfer/sample.ts")),
});

/** `backline transfer`: a label's back catalogue brought from another distributor (docs/catalogue.md). */
export function register(program: Command, cli: Cli): void {
  const transfer = program
    .command("transfer")
    .description(
      "bring a label's back catalogue from another distributor, identifiers kept (docs/catalogue.md)",
    );
  transfer
    .command("import")
    .description(
      "import a catalogue: the CSV template, or a folder of ERN 4.3 / 3.8.2 messages with their media (or a .zip " +
        "of one); releases " +
        "arrive as drafts marked as transferred, matched by UPC and ISRC so the same import twice changes nothing",
    )
    .argument("<source>", "the CSV file, an ERN message, the folder of ERN messages, or a .zip archive of it")
    .option(
      "--account <id>",
      "the account the catalogue belongs to (default: the only account, if there is one)",
    )
    .option("--dry-run", "write nothing: say what would be created, what is already there, and every problem")
    .action(async (source: string, opts: { account?: string; dryRun?: boolean }) => {
      const s = await services();
      const { json } = cli;
      if (opts.account && !UUID.test(opts.account)) throw notFound("account", opts.account);
      await cli.withDb(async (db, config) => {
        const accountId = opts.account ?? (await onlyAccount(db));
        // The checked media go where uploads go (the installation's storage).
        const { openStorage } = await import("../storage/open.ts");
        const { loadSecretBox } = await import("../secrets/box.ts");
        const storage = openStorage(config, loadSecretBox(config));
        const tty = cli.io.stderrIsTTY && !json;
        let last = "";
        const report = await s
          .runTransfer(db, {
            accountId,
            input: cli.path(source),
            dryRun: opts.dryRun === true,
            via: "cli",
            media: { store: storage.store, limits: config.uploads },
            onProgress: (p) => {
              if (!tty) return;
              const line = progressBar(p);
              if (line !== last) cli.io.stderr(`\r${line}`);
              last = line;
            },
          })
          .catch(refusal(s.TransferError));
        if (tty && last) cli.io.stderr("\n");
        cli.output(reportText(report), report);
        if (report.counts.releases.problem > 0 || report.problems.some((p) => p.severity === "error"))
          cli.io.setExitCode(1);
      });
    });
  transfer
    .command("sample")
    .description(
      "write a realistic back catalogue to try an import with: singles, EPs and albums with UPCs, ISRCs, P and C " +
        "lines, genres, contributors and splits, as the CSV template or as a folder of ERN 4.3 messages",
    )
    .argument("<out>", "the CSV file (--format csv) or the folder (--format ern) to write")
    .option("--tracks <n>", "how many tracks (default 100)", integer(1, 1_000_000))
    .option("--format <format>", "csv or ern (default csv)", choice(["csv", "ern"] as const))
    .option("--media", "ern: write a short silent audio file per track, its MD5 in the message")
    .option(
      "--seed <n>",
      "the same seed writes the same catalogue (default: a new one)",
      integer(0, 2 ** 31 - 1),
    )
    .action(
      async (
        out: string,
        opts: { tracks?: number; format?: "csv" | "ern"; media?: boolean; seed?: number },
      ) => {
        const s = await services();
        const format = opts.format ?? "csv";
        if (opts.media && format !== "ern") throw new UsageError("--media goes with --format ern");
        const seed = opts.seed ?? randomInt(2 ** 31 - 1);
        const releases = s.sampleCatalogue(opts.tracks ?? 100, seed);
        const target = cli.path(out);
        if (format === "csv") await s.writeSampleCsv(target, releases);
        else await s.writeSampleErn(target, releases, { media: opts.media === true });
        const tracks = releases.reduce((n, r) => n + r.tracks.length, 0);
        cli.output(
          `Wrote ${releases.length} releases, ${tracks} tracks (${format}, seed ${seed}) to ${out}.\n` +
            `Try it: backline transfer import ${out} --account <id> --dry-run`,
          { file: out, format, seed, releases: releases.length, tracks },
        );
      },
    );
}

/** The one account of the installation, when there is exactly one (not a sandbox). */
async function onlyAccount(db: Db): Promise<string> {
  const rows = await db.asService(
    async (tx) =>
      (await tx.query<{ id: string }>("select id from internal.accounts where not is_sandbox limit 2")).rows,
    { readOnly: true },
  );
  if (rows.length === 1) return (rows[0] as { id: string }).id;
  if (rows.length === 0) throw new CliError("there is no account to import into", "not_found");
  throw new UsageError("name the account with --account <id> (backline accounts list --tenant <tenant>)");
}

function progressBar(p: TransferProgress, width = 30): string {
  const share = p.total > 0 ? Math.min(1, p.done / p.total) : 1;
  const filled = Math.round(share * width);
  const what =
    p.phase === "read"
      ? "messages read"
      : p.phase === "check"
        ? "media checked"
        : p.phase === "media"
          ? "media stored"
          : "releases written";
  return `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(share * 100).toFixed(0).padStart(3)}%  ${p.done.toLocaleString("en")}/${p.total.toLocaleString("en")} ${what}`;
}

/** The report as text: the counts, then each release with a problem, then the warnings by code. */
export function reportText(r: TransferReport): string {
  const c = r.counts;
  const out = [
    `${r.dry_run ? "Dry run of the transfer" : `Transfer ${r.transfer_id}`} of ${r.source} (${r.format}) into account ${r.account_id}:`,
    `  releases: ${c.releases.create} ${r.dry_run ? "to create" : "created"}, ${c.releases.exists} already there, ${c.releases.problem} with problems`,
    `  tracks:   ${c.tracks.create} ${r.dry_run ? "to create" : "created"}, ${c.tracks.exists} already there, ${c.tracks.problem} with problems`,
  ];
  if (!r.dry_run) out.push(`  artists created: ${c.artists_created}`);
  out.push(`  ${c.errors} errors, ${c.warnings} warnings (${r.seconds.toFixed(1)} s)`);
  const errors = [
    ...r.problems,
    ...r.releases.flatMap((x) => [...x.problems, ...x.tracks.flatMap((t) => t.problems)]),
  ].filter((p) => p.severity === "error");
  const shown = r.releases.slice(0, 20);
  for (const x of shown) {
    const creates = x.tracks.filter((t) => t.action === "create").length;
    const exists = x.tracks.filter((t) => t.action === "exists").length;
    out.push(
      `  ${x.action.padEnd(7)} ${(x.upc ?? x.key).padEnd(16)} ${x.title} — ${x.artist_name} (${x.tracks.length} tracks${creates && exists ? `: ${creates} new` : ""})`,
    );
  }
  if (r.releases.length > shown.length)
    out.push(`  ... ${r.releases.length - shown.length} more releases (--json lists them all)`);
  for (const p of errors.slice(0, 50)) out.push(`  error ${p.where}: ${p.message}`);
  if (errors.length > 50) out.push(`  ... ${errors.length - 50} more errors (--json lists them all)`);
  const warnings = new Map<string, { n: number; example: string }>();
  for (const p of [
    ...r.problems,
    ...r.releases.flatMap((x) => [...x.problems, ...x.tracks.flatMap((t) => t.problems)]),
  ]) {
    if (p.severity !== "warning") continue;
    const w = warnings.get(p.code) ?? { n: 0, example: `${p.where}: ${p.message}` };
    w.n++;
    warnings.set(p.code, w);
  }
  for (const [code, w] of warnings) out.push(`  warning ${code} (${w.n}×), e.g. ${w.example}`);
  if (r.dry_run && c.releases.create + c.tracks.create > 0)
    out.push("Nothing was written: run again without --dry-run.");
  return out.join("\n");
}
