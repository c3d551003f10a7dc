import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import zlib from "node:zlib";
import type { Config } from "../config.ts";
import { DatabaseBusyError } from "../db/admission.ts";
import type { Db } from "../db/db.ts";
import { migrationStatus } from "../db/migrate.ts";
import { describeUrl } from "../db/open.ts";
import { keyFiles, keyIdOf } from "../secrets/box.ts";
import { TarWriter, type Written } from "./tar.ts";

/**
 * `backline backup` (docs/operations.md, "Backups and restores"): one file, a gzipped tar, holding
 *
 * - `database/pgdata.tar`: the embedded database's data directory, taken by PGlite itself inside a
 *   transaction of ours (the single connection is held, so it falls between two transactions:
 *   every transaction committed before it is in it, none after) after a CHECKPOINT, so it opens
 *   without recovery; or `database/postgres.dump`: `pg_dump --format=custom`, which reads the whole
 *   database in one repeatable-read transaction (one snapshot);
 * - `storage/<key>`: every media object of the local store, linked (not copied) while the embedded
 *   database is held, so the set is exactly the one the database snapshot knows (objects are never
 *   rewritten in place: a new file is renamed in, an old one removed after its commit);
 * - `secrets/encryption.key` (and `encryption.key.next` during a rotation), unless the key comes
 *   from ENCRYPTION_KEY or `--without-key` was given;
 * - `files/dev-tenant.json`, when there is one;
 * - `manifest.json`, last: the format, Backline's version, the engine, the migration level, the key
 *   id, and the size and SHA-256 of every other entry, which `backline restore` checks.
 */

export const FORMAT = "backline-backup";
export const FORMAT_VERSION = 1;

export interface Manifest {
  format: typeof FORMAT;
  format_version: number;
  backline_version: string;
  created_at: string;
  engine: "pglite" | "postgres";
  migration: { version: number; name: string } | null;
  /** Where the master key is: in the backup, or kept apart (its id says which key it must be). */
  key: { included: boolean; key_id: string; source: string };
  storage: { driver: "local" | "s3"; objects: number; bytes: number };
  parts: Written[];
}

export interface BackupProgress {
  /** The database's snapshot (with the media linked), then writing the archive. */
  phase: "database" | "write";
  done: number;
  total: number;
}

export interface BackupOptions {
  /** The archive to write; refused when it exists. */
  out: string;
  withoutKey?: boolean;
  progress?: (p: BackupProgress) => void;
  /** gzip level (1 fastest … 9 smallest); 6 by default. */
  level?: number;
}

export interface BackupReport {
  file: string;
  bytes: number;
  seconds: number;
  manifest: Manifest;
  /** Where the master key must be kept when it is not in the backup. */
  key_warning: string | undefined;
}

/** A backup or restore that cannot be done as asked: one line for the CLI, nothing left behind. */
export class BackupError extends Error {
  readonly code: string;

  constructor(message: string, code = "refused") {
    super(message);
    this.name = "BackupError";
    this.code = code;
  }
}

const PACKAGE_VERSION = (() => {
  try {
    const file = new URL("../../package.json", import.meta.url);
    return (JSON.parse(fs.readFileSync(file, "utf8")) as { version: string }).version;
  } catch {
    return "unknown";
  }
})();

/** `backline-20261206T071500Z.tar.gz`: sorts by time. */
export function backupFileName(at = new Date()): string {
  return `backline-${at
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z")}.tar.gz`;
}

interface MediaFile {
  key: string;
  file: string;
  bytes: number;
}

/** Every object file under the local store's root (not its `.uploads` in progress), by key. */
function listMedia(root: string): { key: string; file: string }[] {
  const out: { key: string; file: string }[] = [];
  const walk = (dir: string, prefix: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (!prefix && e.name.startsWith(".")) continue;
      const file = path.join(dir, e.name);
      const key = prefix ? `${prefix}/${e.name}` : e.name;
      if (e.isDirectory()) walk(file, key);
      else if (e.isFile()) out.push({ key, file });
    }
  };
  walk(root, "");
  return out;
}

/** Hard-links (or, across file systems, copies) every object into `dir`: instant, and later writes cannot touch them. */
function linkMedia(root: string, dir: string): MediaFile[] {
  const files: MediaFile[] = [];
  for (const { key, file } of listMedia(root)) {
    const target = path.join(dir, key);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    try {
      fs.linkSync(file, target);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") continue; // removed since it was listed: its removal was committed
      if (code !== "EXDEV" && code !== "EPERM") throw error;
      fs.copyFileSync(file, target);
    }
    files.push({ key, file: target, bytes: fs.statSync(target).size });
  }
  return files;
}

/** Runs a PostgreSQL client tool (pg_dump, pg_restore) with the URL's password in its environment, not its arguments. */
export async function runPgTool(tool: "pg_dump" | "pg_restore", url: string, args: string[]): Promise<void> {
  const u = new URL(url);
  const password = decodeURIComponent(u.password);
  u.password = "";
  const env = { ...process.env, ...(password ? { PGPASSWORD: password } : {}) };
  const child = spawn(tool, [...args, `--dbname=${u.toString()}`], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    if (stderr.length < 16_384) stderr += d;
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", resolve);
  }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT")
      throw new BackupError(
        `${tool} was not found on PATH: install PostgreSQL's client tools (the server's major version or newer)`,
        "unavailable",
      );
    throw error;
  });
  if (code !== 0)
    throw new BackupError(
      `${tool} failed on ${describeUrl(url)} (exit ${code}): ${stderr.trim().split("\n").slice(-3).join(" / ")}`,
      "failed",
    );
}

/** The embedded database's snapshot, waiting (a few tries) when the connection is busy past the queue's bound. */
async function snapshotEmbedded(db: Db, whileHeld: () => Promise<void>): Promise<Buffer> {
  for (let attempt = 1; ; attempt++) {
    try {
      const tar = await db.snapshot(whileHeld);
      if (!tar) throw new Error("this engine takes no snapshot");
      return Buffer.from(tar.buffer, tar.byteOffset, tar.byteLength);
    } catch (error) {
      if (!(error instanceof DatabaseBusyError) || attempt >= 20) throw error;
      await new Promise((r) => setTimeout(r, 250 * attempt));
    }
  }
}

/** Writes a backup of `db` (with `config`'s media and key) to `options.out`. */
export async function createBackup(db: Db, config: Config, options: BackupOptions): Promise<BackupReport> {
  const started = performance.now();
  const out = path.resolve(options.out);
  if (fs.existsSync(out)) throw new BackupError(`${out} exists already: name a new file with --out`);
  if (!fs.existsSync(path.dirname(out)))
    throw new BackupError(`the folder ${path.dirname(out)} does not exist`, "not_found");
  const progress = options.progress ?? (() => {});
  const migration = await db.asService(
    async (tx) => {
      const applied = (await migrationStatus(tx)).applied;
      const last = applied[applied.length - 1];
      return last ? { version: last.version, name: last.name } : null;
    },
    { readOnly: true },
  );
  const engine = db.kind;
  const localRoot = config.storage.driver === "local" ? config.storage.root : undefined;
  // The staging folder (media links, the PostgreSQL dump) sits in DATA_DIR/run: the same file
  // system as DATA_DIR/storage, so the links are links.
  const runDir = path.join(config.dataDir, "run");
  fs.mkdirSync(runDir, { recursive: true, mode: 0o700 });
  const staging = fs.mkdtempSync(path.join(runDir, "backup-"));
  const partial = `${out}.partial-${randomBytes(4).toString("hex")}`;
  try {
    let media: MediaFile[] = [];
    let database: { name: string; buffer?: Buffer; file?: string; bytes: number };
    progress({ phase: "database", done: 0, total: 1 });
    if (engine === "pglite") {
      const tar = await snapshotEmbedded(db, async () => {
        if (localRoot) media = linkMedia(localRoot, path.join(staging, "storage"));
      });
      database = { name: "database/pgdata.tar", buffer: tar, bytes: tar.length };
    } else {
      if (config.database.engine !== "postgres") throw new Error("a PostgreSQL database without its URL");
      const file = path.join(staging, "postgres.dump");
      // As the schema owner (MIGRATION_DATABASE_URL, else DATABASE_URL): the server's own login
      // reads through row security, which pg_dump refuses.
      await runPgTool("pg_dump", config.database.migrationUrl, [
        "--format=custom",
        "--compress=6",
        "--no-password",
        `--file=${file}`,
      ]);
      if (localRoot) media = linkMedia(localRoot, path.join(staging, "storage"));
      database = { name: "database/postgres.dump", file, bytes: fs.statSync(file).size };
    }
    progress({ phase: "database", done: 1, total: 1 });

    // The key: in the backup, or said where it must be kept.
    // The key the database's secrets are sealed with: the one this process opened it with.
    const keyId = db.secrets.keyId;
    const files = keyFiles(config.dataDir);
    let keyWarning: string | undefined;
    const keyParts: { name: string; file: string }[] = [];
    let keySource: string;
    if (config.encryptionKey) {
      keySource = "ENCRYPTION_KEY";
      keyWarning = `The master key is not in this backup: it is ENCRYPTION_KEY (key id ${keyId}). Keep it apart from the backup; a restore needs the same ENCRYPTION_KEY.`;
    } else if (options.withoutKey) {
      keySource = files.current;
      keyWarning = `The master key is not in this backup (--without-key): keep ${files.current} (key id ${keyId}) apart from it, safely; after a restore put it at DATA_DIR/encryption.key (mode 0600) or in ENCRYPTION_KEY, or the restored server refuses to start.`;
    } else {
      keySource = "secrets/encryption.key";
      keyParts.push({ name: "secrets/encryption.key", file: files.current });
      if (fs.existsSync(files.next)) keyParts.push({ name: "secrets/encryption.key.next", file: files.next });
    }
    const devTenant = path.join(config.dataDir, "dev-tenant.json");
    const mediaBytes = media.reduce((a, m) => a + m.bytes, 0);
    const total = database.bytes + mediaBytes;
    let done = 0;
    let lastShown = 0;
    const advance = (n: number) => {
      done += n;
      if (done - lastShown >= 4 << 20 || done === total) {
        lastShown = done;
        progress({ phase: "write", done, total });
      }
    };

    const fd = fs.openSync(partial, "wx", 0o600);
    fs.fchmodSync(fd, 0o600);
    const fileStream = fs.createWriteStream(partial, { fd, autoClose: true });
    const gzip = zlib.createGzip({ level: options.level ?? 6 });
    const written = pipeline(gzip, fileStream);
    const tar = new TarWriter(gzip);
    const parts: Written[] = [];
    try {
      if (database.buffer) parts.push(await tar.addBuffer(database.name, database.buffer, 0o600));
      else parts.push(await tar.addFile(database.name, database.file as string, database.bytes, 0o600));
      advance(database.bytes);
      for (const m of media)
        parts.push(await tar.addFile(`storage/${m.key}`, m.file, m.bytes, 0o640, advance));
      for (const k of keyParts) {
        const bytes = fs.readFileSync(k.file);
        // The key must be the one the database's secrets are sealed with.
        if (
          k.name.endsWith(".key") &&
          keyIdOf(Buffer.from(bytes.toString("utf8").trim(), "base64")) !== keyId
        )
          throw new BackupError(
            `${k.file} is not the key this database was opened with (key id ${keyId}): was it replaced while the server runs?`,
          );
        parts.push(await tar.addBuffer(k.name, bytes, 0o600));
      }
      if (fs.existsSync(devTenant))
        parts.push(await tar.addBuffer("files/dev-tenant.json", fs.readFileSync(devTenant), 0o600));
      const manifest: Manifest = {
        format: FORMAT,
        format_version: FORMAT_VERSION,
        backline_version: PACKAGE_VERSION,
        created_at: new Date().toISOString(),
        engine,
        migration,
        key: { included: keyParts.length > 0, key_id: keyId, source: keySource },
        storage: { driver: config.storage.driver, objects: media.length, bytes: mediaBytes },
        parts,
      };
      await tar.addBuffer("manifest.json", Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`), 0o644);
      await tar.finish();
      gzip.end();
      await written;
      const sync = fs.openSync(partial, "r");
      try {
        fs.fsyncSync(sync);
      } finally {
        fs.closeSync(sync);
      }
      if (fs.existsSync(out)) throw new BackupError(`${out} exists already: name a new file with --out`);
      fs.renameSync(partial, out);
      return {
        file: out,
        bytes: fs.statSync(out).size,
        seconds: (performance.now() - started) / 1000,
        manifest,
        key_warning: keyWarning,
      };
    } catch (error) {
      gzip.destroy();
      await written.catch(() => {});
      throw error;
    }
  } finally {
    fs.rmSync(partial, { force: true });
    fs.rmSync(staging, { recursive: true, force: true });
  }
}
