import path from "node:path";
import type { Command } from "commander";
import type { BackupProgress } from "../backup/backup.ts";
import type { RestoreProgress } from "../backup/restore.ts";
import { type Cli, refusal } from "./context.ts";

/**
 * `backline backup` and `backline restore` (docs/operations.md, "Backups and restores"). While the
 * embedded server runs, `backup` runs inside it through its socket (it holds the data directory);
 * `restore` never does: it writes a new data directory, which no server may hold yet.
 */

function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** Progress on stderr: JSON lines with --json, a bar redrawn on a terminal, nothing otherwise. */
function reporter(cli: Cli) {
  let barShown = false;
  const show = (p: BackupProgress | RestoreProgress, what: string) => {
    if (cli.json) {
      cli.io.stderr(`${JSON.stringify({ event: "progress", ...p })}\n`);
    } else if (cli.io.stderrIsTTY) {
      const share = p.total > 0 ? Math.min(1, p.done / p.total) : 1;
      const width = 30;
      const filled = Math.round(share * width);
      const amount = p.total > 1 ? `  ${mb(p.done)}/${mb(p.total)}` : "";
      cli.io.stderr(
        `\r[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(share * 100).toFixed(0).padStart(3)}%  ${what}${amount}\u001b[K`,
      );
      barShown = true;
    }
  };
  return {
    show,
    end() {
      if (barShown) cli.io.stderr("\n");
    },
  };
}

const BACKUP_PHASES: Record<BackupProgress["phase"], string> = {
  database: "database snapshot",
  write: "writing",
};
const RESTORE_PHASES: Record<RestoreProgress["phase"], string> = {
  read: "reading and checking",
  database: "database",
  files: "files",
};

export function register(program: Command, cli: Cli): void {
  program
    .command("backup")
    .description(
      "write a consistent backup (database, media, master key) to one file while the server runs (docs/operations.md)",
    )
    .option("--out <file>", "the archive to write (default: backline-<time>.tar.gz here)")
    .option(
      "--without-key",
      "leave the master key (DATA_DIR/encryption.key) out; it must then be kept apart, safely",
    )
    .action(async (opts: { out?: string; withoutKey?: boolean }) => {
      const b = await import("../backup/backup.ts");
      await cli.withDb(async (db, config) => {
        const out = cli.path(opts.out ?? b.backupFileName());
        const bar = reporter(cli);
        const report = await b
          .createBackup(db, config, {
            out: path.resolve(cli.io.cwd, out),
            withoutKey: opts.withoutKey === true,
            progress: (p) => bar.show(p, BACKUP_PHASES[p.phase]),
          })
          .catch(refusal(b.BackupError))
          .finally(() => bar.end());
        if (report.key_warning && !cli.json) cli.io.stderr(`${report.key_warning}\n`);
        const m = report.manifest;
        cli.output(
          [
            `Backup written to ${report.file} (${mb(report.bytes)}, ${report.seconds.toFixed(1)} s)`,
            `  engine: ${m.engine}, migration ${m.migration?.version ?? "none"}`,
            `  media: ${m.storage.driver === "local" ? `${m.storage.objects} objects, ${mb(m.storage.bytes)}` : "in the S3 bucket (not in the backup: its versioning keeps them)"}`,
            `  master key: ${m.key.included ? "included (keep this file as safe as the key)" : `not included (key id ${m.key.key_id})`}`,
          ].join("\n"),
          {
            file: report.file,
            bytes: report.bytes,
            seconds: report.seconds,
            key_warning: report.key_warning ?? null,
            manifest: m,
          },
        );
      });
    });

  program
    .command("restore")
    .description(
      "restore a backup into the empty data directory DATA_DIR names (and, with DATABASE_URL, into an empty database)",
    )
    .argument("<file>", "the backup archive")
    .action(async (file: string) => {
      const { loadConfig } = await import("../config.ts");
      const r = await import("../backup/restore.ts");
      const { BackupError } = await import("../backup/backup.ts");
      const config = loadConfig(process.env);
      const bar = reporter(cli);
      const report = await r
        .restoreBackup(config, cli.path(file), (p) => bar.show(p, RESTORE_PHASES[p.phase]))
        .catch(refusal(BackupError))
        .finally(() => bar.end());
      if (report.key_warning && !cli.json) cli.io.stderr(`${report.key_warning}\n`);
      const m = report.manifest;
      cli.output(
        [
          `Restored the backup of ${m.created_at} (Backline ${m.backline_version}, ${m.engine}, migration ${m.migration?.version ?? "none"}) in ${report.seconds.toFixed(1)} s`,
          `  data directory: ${report.data_dir}`,
          `  database: ${report.database}`,
          `  every part matched its checksum (${m.parts.length} parts); start the server to serve it`,
        ].join("\n"),
        {
          data_dir: report.data_dir,
          database: report.database,
          seconds: report.seconds,
          key_warning: report.key_warning ?? null,
          manifest: m,
        },
      );
    });
}
