import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { loadMigrations, migrationStatus } from "../src/db/migrate.ts";
import { openDatabase } from "../src/db/open.ts";
import { DataDirInUseError, PgliteEngine } from "../src/db/pglite.ts";
import { TEST_ENCRYPTION_KEY } from "./support/db.ts";
import { tempDir } from "./support/process.ts";

/**
 * A first start on the embedded database (src/db/open.ts, src/db/first-start.ts): initdb and the
 * migrations run in a child process while this one holds the data directory's lock, so what they
 * took goes back to the operating system; this process then opens the directory as a restart does.
 */

const dir = tempDir();
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function settings(name: string) {
  return loadConfig({
    DATA_DIR: path.join(dir, name),
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    LOG_LEVEL: "silent",
  });
}

function recorder() {
  const applied: number[] = [];
  return {
    applied,
    logger: {
      info(fields: unknown, message?: string) {
        if (message === "migration applied") applied.push((fields as { version: number }).version);
      },
    },
  };
}

test("a first start creates and migrates the database in a child process, then a restart applies nothing", async () => {
  const config = settings("fresh");
  const all = loadMigrations().map((m) => m.version);
  const first = recorder();
  const db = await openDatabase(config, { migrate: true, logger: first.logger });
  try {
    // The child's migrations are logged by this process, as they were when it ran them itself.
    assert.deepEqual(first.applied, all);
    const status = await db.asService((tx) => migrationStatus(tx), { readOnly: true });
    assert.equal(status.pending.length, 0);
    assert.deepEqual(
      status.applied.map((m) => m.version),
      all,
    );
    // The directory is this process's now, as after any start.
    if (config.database.engine !== "pglite") throw new Error("the embedded engine was expected");
    await assert.rejects(PgliteEngine.open({ dataDir: config.database.dataDir }), DataDirInUseError);
  } finally {
    await db.close();
  }
  const again = recorder();
  const restarted = await openDatabase(config, { migrate: true, logger: again.logger });
  await restarted.close();
  assert.deepEqual(again.applied, []);
});

test("the data directory stays locked by this process while the child prepares it", async () => {
  const dataDir = path.join(dir, "locked", "pgdata");
  let refused: unknown;
  const engine = await PgliteEngine.open({
    dataDir,
    prepare: async () => {
      refused = await PgliteEngine.open({ dataDir }).then(
        (other) => other.close(),
        (error: unknown) => error,
      );
    },
  });
  await engine.close();
  assert.ok(refused instanceof DataDirInUseError, `another opener was not refused: ${String(refused)}`);
});

test("a child that fails fails the start, ends, and leaves the directory unlocked", async () => {
  const config = settings("refused");
  if (config.database.engine !== "pglite") throw new Error("the embedded engine was expected");
  // Below PostgreSQL's minimum (128kB): the database in the child cannot start.
  const broken = { ...config, database: { ...config.database, sharedBuffers: "8kB" } };
  await assert.rejects(openDatabase(broken, { migrate: true }), /PGlite failed to initialize/);
  const db = await openDatabase(config, { migrate: true });
  await db.close();
});
