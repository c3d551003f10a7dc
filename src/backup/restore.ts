import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import type { Config } from "../config.ts";
import { loadMigrations } from "../db/migrate.ts";
import { describeUrl } from "../db/open.ts";
import { keyIdOf } from "../secrets/box.ts";
import { BackupError, FORMAT, type Manifest, runPgTool } from "./backup.ts";
import { DamagedArchiveError, fileSink, readTar } from "./tar.ts";

/**
 * `backline restore FILE` (docs/operations.md, "Backups and restores"): into the data directory
 * DATA_DIR names, which must be empty (or not exist), and on PostgreSQL into the empty database
 * DATABASE_URL names (restored as MIGRATION_DATABASE_URL's role when set).
 *
 * The archive is unpacked into a folder beside DATA_DIR and every part checked against the
 * manifest (size and SHA-256) before anything is put in place; the embedded database is then
 * unpacked by PGlite there, a PostgreSQL dump loaded by `pg_restore` in one transaction, and only
 * then are the files moved into DATA_DIR. Any failure before that leaves DATA_DIR and the database
 * as they were.
 */

export interface RestoreProgress {
  phase: "read" | "database" | "files";
  done: number;
  total: number;
}

export interface RestoreReport {
  data_dir: string;
  database: string;
  seconds: number;
  manifest: Manifest;
  /** What the operator must still do (the key kept apart). */
  key_warning: string | undefined;
}

/** Entries a backup may hold, and where each goes below the staging folder. */
function stagedPath(name: string): string | undefined {
  if (name === "manifest.json") return ".backup/manifest.json";
  if (name === "database/pgdata.tar") return ".backup/pgdata.tar";
  if (name === "database/postgres.dump") return ".backup/postgres.dump";
  if (name === "secrets/encryption.key") return "encryption.key";
  if (name === "secrets/encryption.key.next") return "encryption.key.next";
  if (name === "files/dev-tenant.json") return "dev-tenant.json";
  if (
    /^storage\/[A-Za-z0-9._/-]+$/.test(name) &&
    !name.split("/").some((p) => p === ".." || p === "." || p === "")
  )
    return name;
  return undefined;
}

function entriesOf(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    if ((error as NodeJS.ErrnoException).code === "ENOTDIR")
      throw new BackupError(`DATA_DIR ${dir} is a file, not a folder`);
    throw error;
  }
}

async function postgresIsEmpty(url: string): Promise<{ empty: boolean; rolesMissing: string[] }> {
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
  } catch (error) {
    throw new BackupError(
      `Cannot connect to PostgreSQL at ${describeUrl(url)}: ${(error as Error).message}`,
      "unavailable",
    );
  }
  try {
    const objects = await client.query<{ n: string }>(
      `select count(*)::text as n from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast') and n.nspname not like 'pg\\_%'`,
    );
    const roles = await client.query<{ rolname: string }>(
      "select rolname from pg_roles where rolname = any($1::text[])",
      [["anon", "authenticated", "tenant_service", "service_role"]],
    );
    const have = new Set(roles.rows.map((r) => r.rolname));
    return {
      empty: objects.rows[0]?.n === "0",
      rolesMissing: ["anon", "authenticated", "tenant_service", "service_role"].filter((r) => !have.has(r)),
    };
  } finally {
    await client.end();
  }
}

/**
 * Unpacks PGlite's own tar of its data directory (what `dumpDataDir` wrote, checked by now
 * against the manifest) into `dir`: folders 0700, files 0600, as PostgreSQL keeps them.
 */
async function unpackDataDir(tarFile: string, dir: string): Promise<void> {
  fs.mkdirSync(dir, { mode: 0o700 });
  await readTar(
    fs.createReadStream(tarFile, { highWaterMark: 1 << 20 }),
    (entry) => {
      const rel = entry.name.replace(/^\/+/, "").replace(/^pgdata\//, "");
      if (rel.split("/").some((p) => p === ".." || p === "."))
        throw new DamagedArchiveError(`unexpected path in the database: ${entry.name}`);
      const dest = path.join(dir, rel);
      if (entry.type === "5") {
        fs.mkdirSync(dest, { recursive: true, mode: 0o700 });
        return null;
      }
      if (entry.type !== "0")
        throw new DamagedArchiveError(`unexpected entry in the database: ${entry.name}`);
      fs.mkdirSync(path.dirname(dest), { recursive: true, mode: 0o700 });
      return fileSink(dest, 0o600);
    },
    () => {},
  );
  if (!fs.existsSync(path.join(dir, "PG_VERSION")))
    throw new BackupError(
      "the backup's database has no PG_VERSION: not a PostgreSQL data directory",
      "damaged",
    );
}

/** Restores the backup in `file` into `config`'s DATA_DIR (and database). */
export async function restoreBackup(
  config: Config,
  file: string,
  progress: (p: RestoreProgress) => void = () => {},
): Promise<RestoreReport> {
  const started = performance.now();
  const archive = path.resolve(file);
  let size: number;
  try {
    const st = fs.statSync(archive);
    if (!st.isFile()) throw new BackupError(`${archive} is not a file`, "not_found");
    size = st.size;
  } catch (error) {
    if (error instanceof BackupError) throw error;
    throw new BackupError(`no backup file ${archive}`, "not_found");
  }
  const target = path.resolve(config.dataDir);
  const existing = entriesOf(target);
  // The embedded database lives in DATA_DIR: it must be empty before anything is read.
  if (config.database.engine === "pglite" && existing.length > 0)
    throw new BackupError(
      `DATA_DIR ${target} is not empty (${existing.length} entries): a restore goes into an empty or new data directory; nothing was changed`,
      "conflict",
    );
  const pgUrl = config.database.engine === "postgres" ? config.database.migrationUrl : undefined;
  if (pgUrl) {
    const state = await postgresIsEmpty(pgUrl);
    if (!state.empty)
      throw new BackupError(
        `the database ${describeUrl(pgUrl)} is not empty: a restore goes into a new, empty database; nothing was changed`,
        "conflict",
      );
    if (state.rolesMissing.length)
      throw new BackupError(
        `the roles ${state.rolesMissing.join(", ")} do not exist on this PostgreSQL server: run \`backline db setup-sql\`'s SQL as a superuser first (docs/database.md); nothing was changed`,
        "invalid_state",
      );
  }

  fs.mkdirSync(path.dirname(target), { recursive: true });
  const staging = path.join(
    path.dirname(target),
    `.${path.basename(target)}.restoring-${randomBytes(4).toString("hex")}`,
  );
  fs.mkdirSync(staging, { mode: 0o700 });
  try {
    // 1. Unpack into the staging folder, hashing every entry.
    const hashes = new Map<string, { bytes: number; sha256: string }>();
    let read = 0;
    let shown = 0;
    const input = fs.createReadStream(archive, { highWaterMark: 1 << 20 });
    input.on("data", (chunk) => {
      read += chunk.length;
      if (read - shown >= 4 << 20 || read === size) {
        shown = read;
        progress({ phase: "read", done: read, total: size });
      }
    });
    const gunzip = zlib.createGunzip();
    input.pipe(gunzip);
    input.on("error", (error) => gunzip.destroy(error));
    try {
      await readTar(
        gunzip,
        (entry) => {
          if (entry.type !== "0")
            throw new DamagedArchiveError(`unexpected entry ${JSON.stringify(entry.name)}`);
          const rel = stagedPath(entry.name);
          if (!rel) throw new DamagedArchiveError(`unexpected entry ${JSON.stringify(entry.name)}`);
          if (hashes.has(entry.name)) throw new DamagedArchiveError(`entry ${entry.name} appears twice`);
          const dest = path.join(staging, rel);
          fs.mkdirSync(path.dirname(dest), { recursive: true, mode: 0o700 });
          const secret =
            rel.startsWith("encryption.key") || rel === "dev-tenant.json" || rel.startsWith(".backup/");
          return fileSink(dest, secret ? 0o600 : 0o640);
        },
        (entry, sha256) => hashes.set(entry.name, { bytes: entry.size, sha256 }),
      );
    } catch (error) {
      if (error instanceof DamagedArchiveError)
        throw new BackupError(`${archive} is damaged: ${error.message}`, "damaged");
      const code = (error as { code?: string }).code;
      if (typeof code === "string" && code.startsWith("Z_"))
        throw new BackupError(
          `${archive} is damaged: not a gzip stream or corrupted (${(error as Error).message})`,
          "damaged",
        );
      throw error;
    } finally {
      input.destroy();
    }

    // 2. Check it all against the manifest before anything is put in place.
    const manifestFile = path.join(staging, ".backup/manifest.json");
    if (!fs.existsSync(manifestFile))
      throw new BackupError(
        `${archive} has no manifest.json: not a Backline backup, or cut short`,
        "damaged",
      );
    let manifest: Manifest;
    try {
      manifest = JSON.parse(fs.readFileSync(manifestFile, "utf8")) as Manifest;
    } catch {
      throw new BackupError(`${archive}'s manifest.json is not JSON`, "damaged");
    }
    if (manifest.format !== FORMAT || !Array.isArray(manifest.parts))
      throw new BackupError(`${archive} is not a Backline backup`, "damaged");
    if (manifest.format_version > 1)
      throw new BackupError(
        `${archive} is a backup of format ${manifest.format_version}, written by a newer Backline (${manifest.backline_version}); this one reads format 1`,
        "invalid_state",
      );
    const listed = new Set<string>();
    for (const part of manifest.parts) {
      listed.add(part.path);
      const got = hashes.get(part.path);
      if (!got) throw new BackupError(`${archive} is damaged: ${part.path} is missing`, "damaged");
      if (got.bytes !== part.bytes || got.sha256 !== part.sha256)
        throw new BackupError(
          `${archive} is damaged: ${part.path} does not match its checksum (sha256 ${got.sha256.slice(0, 12)}…, the manifest says ${part.sha256.slice(0, 12)}…)`,
          "damaged",
        );
    }
    for (const name of hashes.keys())
      if (name !== "manifest.json" && !listed.has(name))
        throw new BackupError(`${archive} is damaged: ${name} is not in its manifest`, "damaged");
    const known = loadMigrations();
    const newest = known[known.length - 1]?.version ?? 0;
    if (manifest.migration && manifest.migration.version > newest)
      throw new BackupError(
        `${archive} was written by a newer Backline (${manifest.backline_version}, migration ${manifest.migration.version}; this one knows up to ${newest}): restore it with that version or newer`,
        "invalid_state",
      );
    if (manifest.engine !== config.database.engine)
      throw new BackupError(
        manifest.engine === "pglite"
          ? `${archive} is a backup of the embedded database: unset DATABASE_URL to restore it into DATA_DIR`
          : `${archive} is a backup of a PostgreSQL database: set DATABASE_URL to the new, empty database to restore it into`,
        "invalid_state",
      );
    const localEntries = fs.readdirSync(staging).filter((n) => n !== ".backup");
    if (localEntries.length > 0 && existing.length > 0)
      throw new BackupError(
        `DATA_DIR ${target} is not empty (${existing.length} entries), and the backup has files for it (${localEntries.join(", ")}); nothing was changed`,
        "conflict",
      );
    let keyWarning: string | undefined;
    if (!manifest.key.included) {
      const envKey = config.encryptionKey ? keyIdOf(Buffer.from(config.encryptionKey, "base64")) : undefined;
      if (envKey !== manifest.key.key_id)
        keyWarning = `The master key is not in this backup: put the key with id ${manifest.key.key_id} (kept apart, from ${manifest.key.source}) at ${path.join(target, "encryption.key")} (mode 0600) or in ENCRYPTION_KEY before starting the server.`;
    } else if (config.encryptionKey) {
      keyWarning = `ENCRYPTION_KEY is set: the server uses it, not the restored ${path.join(target, "encryption.key")} (key id ${manifest.key.key_id}); unset it, or set it to that key.`;
    }

    // 3. The database.
    progress({ phase: "database", done: 0, total: 1 });
    if (manifest.engine === "pglite") {
      const tarFile = path.join(staging, ".backup/pgdata.tar");
      await unpackDataDir(tarFile, path.join(staging, "pgdata"));
      fs.rmSync(tarFile);
    } else {
      await runPgTool("pg_restore", pgUrl as string, [
        "--exit-on-error",
        "--single-transaction",
        "--no-owner",
        "--no-password",
        path.join(staging, ".backup/postgres.dump"),
      ]);
    }
    progress({ phase: "database", done: 1, total: 1 });

    // 4. The files into DATA_DIR (the embedded database's folder among them, made just now).
    const moving = fs.readdirSync(staging).filter((n) => n !== ".backup");
    fs.mkdirSync(target, { recursive: true, mode: 0o700 });
    for (const name of moving) fs.renameSync(path.join(staging, name), path.join(target, name));
    progress({ phase: "files", done: moving.length, total: moving.length });
    return {
      data_dir: target,
      database: manifest.engine === "pglite" ? path.join(target, "pgdata") : describeUrl(pgUrl as string),
      seconds: (performance.now() - started) / 1000,
      manifest,
      key_warning: keyWarning,
    };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}
