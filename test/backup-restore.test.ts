import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { BACKUP_JOB_KIND, backupHandlers, scheduleBackups } from "../src/backup/scheduled.ts";
import { loadConfig } from "../src/config.ts";
import { artworkJpeg } from "../src/storage/samples.ts";
import {
  copyMigratedDatabase,
  createEmptyPostgresDb,
  createTestDb,
  ENGINES,
  TEST_ENCRYPTION_KEY,
  type TestDb,
} from "./support/db.ts";
import { type RunningServer, runCli, startServer, tempDir } from "./support/process.ts";

/**
 * The restore drill (docs/operations.md, "Backups and restores"): a real server takes writes from
 * several clients at once (releases through the public API, a media upload); `backline backup`
 * runs in the middle of them and the writes go on; the backup is restored into a new data directory
 * (embedded) or a new, empty database (PostgreSQL), a server started on it, and everything
 * acknowledged before the backup began must be there, the media byte for byte, the tenants' sealed
 * signing secrets opening with the restored key. Small data: the figures at scale are bench/backup.
 */

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

interface Dev {
  api_key: string;
  anon_key: string;
}

function devTenant(dataDir: string): Dev {
  return JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8")) as Dev;
}

/**
 * A client of the public API that retries what the server refused as busy: a 503 (the database
 * was held for the snapshot past DATABASE_QUEUE_TIMEOUT_MS) says the request was not started, so
 * it is sent again under a new idempotency key (the old one may stay reserved for a while).
 */
async function call(base: string, key: string, method: string, route: string, body?: unknown) {
  let idem = randomUUID();
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`${base}/api/public/v1${route}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body ? { "content-type": "application/json", "idempotency-key": idem } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const answer = { status: res.status, body: (await res.json()) as Record<string, unknown> };
    // Busy while the embedded database is held for the snapshot: retried, as the answer says.
    const retry =
      res.status === 503 ||
      res.status === 429 ||
      (res.status === 409 && answer.body.code === "idempotency_request_in_progress");
    if (retry && attempt < 100) {
      if (res.status === 503) idem = randomUUID();
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    return answer;
  }
}

function releaseBody(artist: string, title: string) {
  const date = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
  return {
    title,
    release_type: "single",
    artist_id: artist,
    primary_genre: "electronic",
    release_date: date,
    licensed_territories_include: "WW",
    services: ["spotify"],
    copyright: "2026 Drill Records",
  };
}

interface Engine {
  kind: "pglite" | "postgres";
  /** The server's environment, the restore's, and how to clean up. */
  source(): Promise<Record<string, string>>;
  target(): Promise<Record<string, string>>;
  cleanup(): Promise<void>;
}

function embedded(): Engine {
  const dirs: string[] = [];
  return {
    kind: "pglite",
    async source() {
      const dir = tempDir("backline-drill-");
      dirs.push(dir);
      await copyMigratedDatabase(dir);
      return { DATA_DIR: dir };
    },
    async target() {
      const dir = path.join(tempDir("backline-drill-restored-"), "data");
      dirs.push(path.dirname(dir));
      return { DATA_DIR: dir };
    },
    async cleanup() {
      for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    },
  };
}

function postgres(): Engine {
  const dirs: string[] = [];
  const drops: (() => Promise<void>)[] = [];
  const make = async () => {
    const db = await createEmptyPostgresDb();
    drops.push(db.drop);
    const dir = tempDir("backline-drill-pg-");
    dirs.push(dir);
    return {
      DATA_DIR: dir,
      DATABASE_URL: db.loginUrl,
      MIGRATION_DATABASE_URL: db.ownerUrl,
      DEV_TENANT: "true",
    };
  };
  return {
    kind: "postgres",
    source: make,
    target: make,
    async cleanup() {
      for (const drop of drops) await drop().catch(() => {});
      for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    },
  };
}

for (const kind of ENGINES) {
  describe(`the restore drill [${kind}]`, () => {
    const engine = kind === "pglite" ? embedded() : postgres();
    let server: RunningServer | undefined;
    let restored: RunningServer | undefined;
    let env: Record<string, string>;
    const work = tempDir("backline-drill-out-");
    const archive = path.join(work, "drill.tar.gz");

    before(async () => {
      env = await engine.source();
      server = await startServer(env);
    });
    after(async () => {
      await server?.stop();
      await restored?.stop();
      await engine.cleanup();
      fs.rmSync(work, { recursive: true, force: true });
    });

    test("a backup taken under writes restores everything acknowledged before it, and the restored server serves", async () => {
      assert.ok(server);
      const base = server.url;
      const dev = devTenant(env.DATA_DIR as string);
      const artist = await call(base, dev.api_key, "POST", "/artists", { name: "Drill Artist" });
      assert.equal(artist.status, 201, JSON.stringify(artist.body));
      const artistId = artist.body.id as string;

      // A media upload, acknowledged before the backup.
      const cover = await artworkJpeg();
      const withCover = await call(
        base,
        dev.api_key,
        "POST",
        "/releases",
        releaseBody(artistId, "With cover"),
      );
      assert.equal(withCover.status, 201, JSON.stringify(withCover.body));
      const slot = await call(
        base,
        dev.api_key,
        "POST",
        `/releases/${withCover.body.id}/artwork-upload-url`,
        {
          filename: "cover.jpg",
        },
      );
      assert.equal(slot.status, 201, JSON.stringify(slot.body));
      const put = await fetch(slot.body.upload_url as string, {
        method: "PUT",
        headers: { "content-type": "image/jpeg" },
        body: cover,
      });
      assert.equal(put.status, 200, await put.clone().text());
      assert.equal(((await put.json()) as { sha256: string }).sha256, sha256(cover));

      // Three clients write releases until told to stop; each acknowledgement is noted with its time.
      const acked: { id: string; sent: number; at: number }[] = [
        { id: withCover.body.id as string, sent: 0, at: performance.now() },
      ];
      let stop = false;
      const failures: string[] = [];
      const writer = async (n: number) => {
        for (let i = 0; !stop; i++) {
          const sent = performance.now();
          const r = await call(base, dev.api_key, "POST", "/releases", releaseBody(artistId, `W${n} #${i}`));
          if (r.status === 201) acked.push({ id: r.body.id as string, sent, at: performance.now() });
          else failures.push(`${r.status} ${JSON.stringify(r.body)}`);
        }
      };
      const writers = [1, 2, 3].map(writer);
      while (acked.length < 8) await new Promise((r) => setTimeout(r, 20));

      const backupStarted = performance.now();
      const before = acked.filter((a) => a.at < backupStarted).map((a) => a.id);
      const b = await runCli(["--json", "backup", "--out", archive], env, 120_000);
      const backupEnded = performance.now();
      assert.equal(b.code, 0, b.stderr);
      // Progress on stderr, as JSON lines with --json.
      assert.match(b.stderr, /^\{"event":"progress","phase":"database"/m);
      const report = JSON.parse(b.stdout) as {
        file: string;
        manifest: {
          engine: string;
          key: { included: boolean };
          storage: { objects: number };
          parts: { path: string }[];
        };
      };
      assert.equal(report.manifest.engine, kind);
      assert.equal(report.manifest.key.included, true);
      assert.ok(report.manifest.storage.objects >= 1);
      // Writes go on after the backup.
      const afterCount = acked.length;
      while (acked.length < afterCount + 3) await new Promise((r) => setTimeout(r, 20));
      stop = true;
      await Promise.all(writers);
      assert.deepEqual(failures, []);
      assert.ok(
        acked.some((a) => a.at > backupStarted && a.at < backupEnded),
        "writes were acknowledged while the backup ran",
      );

      // The archive is a plain tar.gz with its manifest.
      const listing = execFileSync("tar", ["-tzf", archive], { encoding: "utf8" }).trim().split("\n");
      assert.ok(listing.includes("manifest.json"));
      assert.ok(listing.includes(kind === "pglite" ? "database/pgdata.tar" : "database/postgres.dump"));
      assert.ok(listing.includes("secrets/encryption.key"));

      // Restore into a new data directory / database, and serve it.
      const targetEnv = await engine.target();
      const r = await runCli(["restore", archive], targetEnv, 120_000);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /every part matched its checksum/);
      restored = await startServer(targetEnv);
      const rbase = restored.url;
      // The tenant's anon key is checked against its signing secret, sealed with the restored key.
      const settings = await fetch(`${rbase}/auth/v1/settings`, { headers: { apikey: dev.anon_key } });
      assert.equal(settings.status, 200);
      const missing: string[] = [];
      for (const id of before) {
        const got = await call(rbase, dev.api_key, "GET", `/releases/${id}`);
        if (got.status !== 200) missing.push(`${id}: ${got.status}`);
      }
      assert.deepEqual(missing, [], "every release acknowledged before the backup is restored");
      // One point in time: what was sent after the backup ended is not in it.
      const later = acked.filter((a) => a.sent > backupEnded);
      assert.ok(later.length > 0);
      for (const a of later)
        assert.equal((await call(rbase, dev.api_key, "GET", `/releases/${a.id}`)).status, 404, a.id);

      // The media, byte for byte.
      const storage = path.join(targetEnv.DATA_DIR as string, "storage");
      const files = (fs.readdirSync(storage, { recursive: true }) as string[])
        .map((f) => path.join(storage, f))
        .filter((f) => fs.statSync(f).isFile());
      assert.ok(
        files.some((f) => sha256(fs.readFileSync(f)) === sha256(cover)),
        "the uploaded cover is restored byte for byte",
      );
      const upload = await call(rbase, dev.api_key, "GET", `/uploads/${slot.body.asset_id}`);
      assert.equal(upload.status, 200);
      assert.notEqual(upload.body.status, "pending");
    });

    if (kind === "pglite") {
      test("--without-key leaves the key out and says where it must be kept", async () => {
        const out = path.join(work, "nokey.tar.gz");
        const b = await runCli(["backup", "--without-key", "--out", out], env, 120_000);
        assert.equal(b.code, 0, b.stderr);
        assert.match(
          b.stderr,
          /The master key is not in this backup \(--without-key\): keep .*encryption\.key/,
        );
        const listing = execFileSync("tar", ["-tzf", out], { encoding: "utf8" });
        assert.doesNotMatch(listing, /encryption\.key/);
        const keyId = /key id ([0-9a-f]{8})/.exec(b.stderr)?.[1];
        assert.ok(keyId);
        // Restored without its key, the server refuses to start: the sealed secrets do not open.
        const target = path.join(tempDir("backline-drill-nokey-"), "data");
        const r = await runCli(["restore", out], { DATA_DIR: target });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, new RegExp(`put the key with id ${keyId} .* before starting the server`));
        await assert.rejects(
          startServer({ DATA_DIR: target }),
          new RegExp(`sealed with key ${keyId}, which this server does not have`),
        );
        fs.rmSync(path.dirname(target), { recursive: true, force: true });
        // An existing file is never overwritten.
        const again = await runCli(["backup", "--out", out], env, 120_000);
        assert.equal(again.code, 1);
        assert.match(again.stderr, /exists already/);
      });

      test("restore refuses a data directory that is not empty, and changes nothing", async () => {
        const dir = tempDir("backline-drill-full-");
        fs.writeFileSync(path.join(dir, "keep.txt"), "mine");
        const r = await runCli(["restore", archive], { DATA_DIR: dir });
        assert.equal(r.code, 1);
        assert.match(r.stderr, /^backline: DATA_DIR .* is not empty .*nothing was changed\n$/);
        assert.deepEqual(fs.readdirSync(dir), ["keep.txt"]);
        assert.deepEqual(
          fs.readdirSync(path.dirname(dir)).filter((n) => n.includes(".restoring-")),
          [],
        );
        fs.rmSync(dir, { recursive: true, force: true });
      });

      test("a damaged archive, a part that does not match its checksum, a missing file: clear errors, nothing made", async () => {
        const parent = tempDir("backline-drill-bad-");
        const target = { DATA_DIR: path.join(parent, "data") };
        // Bytes flipped in the middle of the compressed stream.
        const bytes = fs.readFileSync(archive);
        const flipped = Buffer.from(bytes);
        const middle = Math.floor(bytes.length / 2);
        for (let i = middle; i < middle + 64; i++) flipped[i] = (bytes[i] as number) ^ 0xff;
        fs.writeFileSync(path.join(parent, "flipped.tar.gz"), flipped);
        const a = await runCli(["--json", "restore", path.join(parent, "flipped.tar.gz")], target);
        assert.equal(a.code, 1);
        assert.equal(JSON.parse(a.stderr.trim().split("\n").pop() as string).error.code, "damaged");
        // A valid gzip whose tar holds a changed byte inside a part: only the checksum can tell.
        const tar = gunzipSync(bytes);
        const at = tar.indexOf(Buffer.from("ustar")) + 600; // inside the first entry's data
        tar[at] = (tar[at] as number) ^ 0x01;
        fs.writeFileSync(path.join(parent, "tampered.tar.gz"), gzipSync(tar));
        const t = await runCli(["restore", path.join(parent, "tampered.tar.gz")], target);
        assert.equal(t.code, 1);
        assert.match(t.stderr, /is damaged: database\/pgdata\.tar does not match its checksum/);
        // Cut short: no manifest.
        fs.writeFileSync(path.join(parent, "short.tar.gz"), gzipSync(tar.subarray(0, 4096)));
        const s = await runCli(["restore", path.join(parent, "short.tar.gz")], target);
        assert.equal(s.code, 1);
        assert.match(s.stderr, /damaged|no manifest/);
        const m = await runCli(["restore", path.join(parent, "nope.tar.gz")], target);
        assert.deepEqual(
          [m.code, m.stderr],
          [1, `backline: no backup file ${path.join(parent, "nope.tar.gz")}\n`],
        );
        // Nothing was made: no data directory, no staging folder left behind.
        assert.deepEqual(fs.readdirSync(parent).sort(), [
          "flipped.tar.gz",
          "short.tar.gz",
          "tampered.tar.gz",
        ]);
        fs.rmSync(parent, { recursive: true, force: true });
      });

      test("without a running server, backup opens DATA_DIR itself", async () => {
        assert.equal(await server?.stop(), 0);
        server = undefined;
        const out = path.join(work, "offline.tar.gz");
        const b = await runCli(["--json", "backup", "--out", out], env, 120_000);
        assert.equal(b.code, 0, b.stderr);
        const report = JSON.parse(b.stdout) as { manifest: { engine: string; key: { included: boolean } } };
        assert.deepEqual([report.manifest.engine, report.manifest.key.included], ["pglite", true]);
        assert.equal(fs.existsSync(path.join(env.DATA_DIR as string, "run", "cli.sock")), false);
      });
    } else {
      test("restore refuses a database that is not empty", async () => {
        const dir = tempDir("backline-drill-pgfull-");
        const r = await runCli(["restore", archive], { ...env, DATA_DIR: dir });
        assert.equal(r.code, 1);
        assert.match(
          r.stderr,
          /is not empty: a restore goes into a new, empty database; nothing was changed/,
        );
        assert.deepEqual(fs.readdirSync(dir), []);
        fs.rmSync(dir, { recursive: true, force: true });
      });
    }
  });
}

// In the process, on the embedded engine (the job and its retention are the same on both).
describe("scheduled backups [pglite]", { skip: !ENGINES.includes("pglite") }, () => {
  let t: TestDb | undefined;
  const dataDir = tempDir("backline-scheduled-");
  const backups = path.join(dataDir, "elsewhere");
  before(async () => {
    t = await createTestDb("pglite");
  });
  after(async () => {
    await t?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test("the worker's backup.run writes into BACKUP_DIR, keeps the newest BACKUP_KEEP, and says when it runs next", async () => {
    assert.ok(t);
    const config = loadConfig({
      DATA_DIR: dataDir,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      BACKUP_SCHEDULE: "6h",
      BACKUP_DIR: backups,
      BACKUP_KEEP: "2",
    });
    // The job is queued once, however many processes start.
    const first = await scheduleBackups(t.db, config);
    await scheduleBackups(t.db, config);
    const jobs = await t.db.asService((tx) =>
      tx.query<{ n: string; run_at: Date }>(
        "select count(*)::text as n, min(run_at) as run_at from internal.jobs where kind = $1 and status = 'queued'",
        [BACKUP_JOB_KIND],
      ),
    );
    assert.equal(jobs.rows[0]?.n, "1");
    assert.ok(first && Math.abs(first.getTime() - Date.now() - 6 * 3_600_000) < 60_000);
    // Two older backups and a file of someone else's in the folder.
    fs.mkdirSync(backups, { recursive: true });
    for (const name of ["backline-20250101T000000Z.tar.gz", "backline-20250102T000000Z.tar.gz", "notes.txt"])
      fs.writeFileSync(path.join(backups, name), "old");
    const handler = backupHandlers(t.db, config)[BACKUP_JOB_KIND];
    assert.ok(handler);
    const next = (await handler({} as never, { signal: new AbortController().signal })) as Date;
    assert.ok(next.getTime() - Date.now() > 5.9 * 3_600_000);
    const names = fs.readdirSync(backups).sort();
    assert.equal(names.length, 3, names.join(", "));
    assert.deepEqual([names[0], names[2]], ["backline-20250102T000000Z.tar.gz", "notes.txt"]);
    assert.match(names[1] as string, /^backline-\d{8}T\d{6}Z\.tar\.gz$/);
    const listing = execFileSync("tar", ["-tzf", path.join(backups, names[1] as string)], {
      encoding: "utf8",
    });
    // ENCRYPTION_KEY: the key is not in the backup.
    assert.deepEqual(listing.trim().split("\n"), ["database/pgdata.tar", "manifest.json"]);
    // Unset, the schedule ends.
    const off = backupHandlers(t.db, { ...config, backup: { ...config.backup, schedule: undefined } });
    assert.equal(
      await off[BACKUP_JOB_KIND]?.({} as never, { signal: new AbortController().signal }),
      undefined,
    );
  });
});
