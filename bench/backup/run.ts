// Backup and restore of a 10,000-release catalogue (bench/README.md, "bench/backup"):
//
//   npm run bench:backup [-- pglite|postgres]
//
// For each engine: a fresh database (an embedded DATA_DIR, or a new PostgreSQL database beside
// BENCH_DATABASE_URL / TEST_DATABASE_URL), one tenant and account with BENCH_RELEASES releases
// (10,000) of BENCH_TRACKS tracks (2) each, and BENCH_MEDIA_FILES media objects (20) of
// BENCH_MEDIA_MB (1 MB) of random bytes (audio does not compress either) in local storage. Then
// `createBackup` (what `backline backup` runs, in the server's process on the embedded engine)
// and `restoreBackup` into a new DATA_DIR / database, each timed, with the archive's size, the
// time the embedded database is held for its snapshot (writes wait that long) and the peak RSS.
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { createBackup } from "../../src/backup/backup.ts";
import { restoreBackup } from "../../src/backup/restore.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { openDatabase } from "../../src/db/open.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { ADMIN_URL, withDatabase } from "../support.ts";

const RELEASES = Number(process.env.BENCH_RELEASES ?? 10_000);
const TRACKS = Number(process.env.BENCH_TRACKS ?? 2);
const MEDIA_FILES = Number(process.env.BENCH_MEDIA_FILES ?? 20);
const MEDIA_MB = Number(process.env.BENCH_MEDIA_MB ?? 1);
const KEY = Buffer.alloc(32, 7).toString("base64");

let peakRss = 0;
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
}, 50);

const mb = (n: number) => `${(n / (1024 * 1024)).toFixed(1)} MB`;
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function seed(db: Db, config: Config): Promise<void> {
  const { tenant } = await createTenant(db, { name: "Bench Backup", slug: `bench-backup-${Date.now()}` });
  const account = await createAccount(db, { tenantId: tenant.id, name: "Bench Records", kind: "label" });
  await db.asService(async (tx) => {
    const artist = await tx.query<{ id: string }>(
      "insert into public.artist_profiles (account_id, name) values ($1, 'Bench Artist') returning id",
      [account.id],
    );
    await tx.query(
      `insert into public.releases (account_id, artist_id, title, release_type, artist_name, primary_genre,
         release_date, licensed_territories_include, status)
       select $1, $2, 'Bench release ' || g, 'album', 'Bench Artist', 'electronic', current_date + 60, 'WW', 'draft'
       from generate_series(1, $3::int) g`,
      [account.id, artist.rows[0]?.id, RELEASES],
    );
    await tx.query(
      `insert into public.tracks (release_id, account_id, title, track_number, duration)
       select r.id, r.account_id, 'Track ' || t, t, 180 + t from public.releases r, generate_series(1, $2::int) t
       where r.account_id = $1`,
      [account.id, TRACKS],
    );
  });
  if (config.storage.driver !== "local") return;
  for (let i = 0; i < MEDIA_FILES; i++) {
    const file = path.join(config.storage.root, "audio", account.id, randomUUID(), `${randomUUID()}.wav`);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, randomBytes(MEDIA_MB * 1024 * 1024));
  }
}

async function count(db: Db): Promise<string> {
  const r = await db.asService(
    (tx) =>
      tx.query<{ r: string; t: string }>(
        "select (select count(*) from public.releases)::text as r, (select count(*) from public.tracks)::text as t",
      ),
    { readOnly: true },
  );
  return `${r.rows[0]?.r} releases, ${r.rows[0]?.t} tracks`;
}

async function bare(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function run(engine: "pglite" | "postgres"): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "backline-bench-backup-"));
  const names = [`bench_backup_${process.pid}_a`, `bench_backup_${process.pid}_b`];
  const env = (dir: string, dbName: string): Record<string, string> => ({
    DATA_DIR: dir,
    ENCRYPTION_KEY: KEY,
    LOG_LEVEL: "warn",
    ...(engine === "postgres" ? { DATABASE_URL: withDatabase(ADMIN_URL, dbName) } : {}),
  });
  try {
    if (engine === "postgres") for (const n of names) await bare(ADMIN_URL, `create database ${n}`);
    const source = loadConfig(env(path.join(work, "source"), names[0] as string));
    let t = performance.now();
    const db = await openDatabase(source, { migrate: true });
    await seed(db, source);
    const seeded = await count(db);
    console.log(
      `[${engine}] seeded ${seeded} and ${MEDIA_FILES} × ${MEDIA_MB} MB media in ${secs(performance.now() - t)}`,
    );
    if (engine === "pglite") {
      // How long writes wait: the snapshot alone, the connection held throughout.
      for (let i = 0; i < 2; i++) {
        t = performance.now();
        const tar = await db.snapshot();
        console.log(
          `[${engine}] snapshot (database held): ${secs(performance.now() - t)}, ${mb(tar?.byteLength ?? 0)}`,
        );
      }
    }
    peakRss = process.memoryUsage().rss;
    const rssBefore = peakRss;
    t = performance.now();
    const archive = path.join(work, "bench.tar.gz");
    const report = await createBackup(db, source, { out: archive });
    const backupMs = performance.now() - t;
    const database = report.manifest.parts.find((p) => p.path.startsWith("database/"));
    console.log(
      `[${engine}] backup: ${secs(backupMs)}, archive ${mb(report.bytes)} (database part ${mb(database?.bytes ?? 0)} before gzip, media ${mb(report.manifest.storage.bytes)}), peak RSS +${mb(peakRss - rssBefore)}`,
    );
    await db.close();

    const target = loadConfig(env(path.join(work, "restored", "data"), names[1] as string));
    peakRss = process.memoryUsage().rss;
    const rssBeforeRestore = peakRss;
    t = performance.now();
    await restoreBackup(target, archive);
    const restoreMs = performance.now() - t;
    console.log(`[${engine}] restore: ${secs(restoreMs)}, peak RSS +${mb(peakRss - rssBeforeRestore)}`);
    t = performance.now();
    const restored = await openDatabase(target, { migrate: false });
    const after = await count(restored);
    await restored.close();
    console.log(`[${engine}] the restored database opens (${secs(performance.now() - t)}): ${after}`);
    if (after !== seeded) throw new Error(`restored ${after}, expected ${seeded}`);
  } finally {
    if (engine === "postgres")
      for (const n of names)
        await bare(ADMIN_URL, `drop database if exists ${n} with (force)`).catch(() => {});
    fs.rmSync(work, { recursive: true, force: true });
  }
}

const which = process.argv[2];
const engines: ("pglite" | "postgres")[] =
  which === "pglite" || which === "postgres" ? [which] : ["pglite", "postgres"];
console.log(
  `load average before: ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
for (const engine of engines) await run(engine);
console.log(
  `load average after: ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
clearInterval(sampler);
