import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import { loadMigrations, MigrationError, migrate, migrationStatus } from "../src/db/migrate.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import { PostgresEngine } from "../src/db/postgres.ts";
import type { Engine } from "../src/db/types.ts";
import { createEmptyPostgresDb, TEST_DATABASE_URL } from "./support/db.ts";
import { ROOT, runCli, runToEnd, tempDir } from "./support/process.ts";

const all = loadMigrations();

async function status(engine: Engine) {
  return engine.transaction((tx) => migrationStatus(tx), { readOnly: true });
}

describe("migration files", () => {
  test("are numbered 1..n, and each is checksummed", () => {
    assert.deepEqual(
      all.map((m) => m.version),
      all.map((_, i) => i + 1),
    );
    for (const m of all) assert.match(m.checksum, /^[0-9a-f]{64}$/);
  });

  const badDirs: { name: string; files: Record<string, string>; message: RegExp }[] = [
    {
      name: "a badly named file",
      files: { "0001_ok.sql": "select 1;", "2_bad.sql": "select 1;" },
      message: /must look like 0001_name\.sql/,
    },
    {
      name: "a gap in the numbers",
      files: { "0001_a.sql": "select 1;", "0003_c.sql": "select 1;" },
      message: /without gaps/,
    },
  ];
  for (const c of badDirs) {
    test(`refuses ${c.name}`, () => {
      const dir = tempDir();
      for (const [f, sql] of Object.entries(c.files)) fs.writeFileSync(path.join(dir, f), sql);
      assert.throws(() => loadMigrations(dir), c.message);
      fs.rmSync(dir, { recursive: true });
    });
  }
});

describe("migrating the embedded database", () => {
  test("applies every migration once, then nothing; detects edited and unknown migrations", async () => {
    const engine = await PgliteEngine.open();
    try {
      assert.deepEqual((await status(engine)).pending.length, all.length);
      assert.equal((await migrate(engine)).length, all.length);
      assert.deepEqual(await migrate(engine), []);
      assert.deepEqual((await status(engine)).pending, []);

      // An applied file that was edited afterwards stops the runner.
      const edited = all.map((m) => (m.version === 2 ? { ...m, checksum: "0".repeat(64) } : m));
      await assert.rejects(
        migrate(engine, edited),
        (e: unknown) => e instanceof MigrationError && /Migration 2 \(tenancy\) was edited/.test(e.message),
      );

      // A database migrated by a newer release is not touched by an older one.
      await assert.rejects(migrate(engine, all.slice(0, 3)), /migrated by a newer release/);
    } finally {
      await engine.close();
    }
  });

  test("a failing migration is rolled back whole and reported with its number", async () => {
    const engine = await PgliteEngine.open();
    try {
      const broken = [
        ...all,
        {
          version: all.length + 1,
          name: "broken",
          sql: "create table internal.half (id int); select 1/0;",
          checksum: "x",
        },
      ];
      await assert.rejects(
        migrate(engine, broken),
        new RegExp(`Migration ${all.length + 1} \\(broken\\) failed: division by zero`),
      );
      const left = await engine.transaction(
        (tx) => tx.query<{ t: string | null }>("select to_regclass('internal.half')::text as t"),
        { readOnly: true },
      );
      assert.equal(left.rows[0]?.t, null);
      assert.equal((await status(engine)).applied.length, all.length);
    } finally {
      await engine.close();
    }
  });

  test("`backline migrate` applies them to DATA_DIR and `--status --json` reports them", async () => {
    const dataDir = tempDir();
    try {
      const first = await runCli(["--json", "migrate"], { DATA_DIR: dataDir });
      assert.equal(first.code, 0, first.stderr);
      assert.equal(JSON.parse(first.stdout).applied_now.length, all.length);
      const again = await runCli(["--json", "migrate", "--status"], { DATA_DIR: dataDir });
      const report = JSON.parse(again.stdout);
      assert.equal(report.applied.length, all.length);
      assert.deepEqual(report.pending, []);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("migrating PostgreSQL", { skip: TEST_DATABASE_URL ? false : "TEST_DATABASE_URL is not set" }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const c of cleanups) await c();
  });

  test("two processes migrating at once apply each migration exactly once", async () => {
    const empty = await createEmptyPostgresDb();
    cleanups.push(empty.drop);
    const a = new PostgresEngine({ url: empty.ownerUrl, poolSize: 1 });
    const b = new PostgresEngine({ url: empty.ownerUrl, poolSize: 1 });
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      assert.equal(ra.length + rb.length, all.length);
      const rows = await a.transaction(
        (tx) => tx.query<{ n: string }>("select count(*) as n from internal.schema_migrations"),
        { readOnly: true },
      );
      assert.equal(rows.rows[0]?.n, String(all.length));
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("the server's non-superuser login cannot migrate: one clear line; with MIGRATION_DATABASE_URL it starts", async () => {
    const empty = await createEmptyPostgresDb();
    cleanups.push(empty.drop);
    const dataDir = tempDir();
    try {
      const refused = await runToEnd([path.join(ROOT, "src/start/server.ts")], {
        DATA_DIR: dataDir,
        DATABASE_URL: empty.loginUrl,
      });
      assert.equal(refused.code, 1);
      assert.match(
        refused.stderr.trim(),
        /^backline: Cannot apply migrations as this database login: permission denied .*MIGRATION_DATABASE_URL/,
      );
      assert.equal(refused.stderr.trim().split("\n").length, 1);

      const migrated = await runCli(["--json", "migrate"], {
        DATA_DIR: dataDir,
        DATABASE_URL: empty.loginUrl,
        MIGRATION_DATABASE_URL: empty.ownerUrl,
      });
      assert.equal(migrated.code, 0, migrated.stderr);
      assert.equal(JSON.parse(migrated.stdout).applied_now.length, all.length);

      // Now the login alone is enough: nothing is pending, so it does not try to migrate.
      const list = await runCli(["--json", "tenants", "list"], {
        DATA_DIR: dataDir,
        DATABASE_URL: empty.loginUrl,
      });
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual(JSON.parse(list.stdout), []);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
