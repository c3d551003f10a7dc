import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";
import {
  dryRunMigrations,
  loadMigrations,
  MigrationError,
  migrate,
  migrationStatus,
} from "../src/db/migrate.ts";
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

  test("an upgrade from an earlier version: --dry-run says each step's time and locks and changes nothing; then the rows come through", async () => {
    // Migrations are never edited once merged, so a database at an earlier release's level is
    // the prefix of today's list: here 0032, the level of the stop that landed on 2026-12-04.
    const at = 32;
    const engine = await PgliteEngine.open();
    try {
      await migrate(engine, all.slice(0, at));
      const ids = await engine.transaction(
        async (tx) => {
          const one = async (sql: string, params: unknown[]) =>
            ((await tx.query<{ id: string }>(sql, params)).rows[0] as { id: string }).id;
          const tenant = await one(
            "insert into internal.tenants (slug, name, jwt_secret) values ('upgrade', 'Upgrade', repeat('s', 40)) returning id",
            [],
          );
          const account = await one(
            "insert into internal.accounts (tenant_id, name) values ($1, 'Old Label') returning id",
            [tenant],
          );
          const artist = await one(
            "insert into public.artist_profiles (account_id, name) values ($1, 'Old Artist') returning id",
            [account],
          );
          const release = await one(
            "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Old Release') returning id",
            [account, artist],
          );
          await tx.query(
            "insert into public.tracks (account_id, release_id, title, track_number, splits) values ($1, $2, 'Old Track', 1, $3)",
            [
              account,
              release,
              JSON.stringify([{ name: "Old Artist", email: "old@example.com", share: 100 }]),
            ],
          );
          return { tenant, account, release };
        },
        { readOnly: false },
      );

      const steps = await dryRunMigrations(engine);
      assert.deepEqual(
        steps.map((m) => m.version),
        all.slice(at).map((m) => m.version),
      );
      for (const m of steps) assert.ok(m.ms >= 0 && Array.isArray(m.locks), `${m.version}`);
      // 0040 replaces triggers on public.releases: it locks that table while it runs.
      const replaced = steps.find((m) => m.version === 40);
      assert.ok(
        replaced?.locks.some((l) => l.table === "public.releases" && /Exclusive/.test(l.mode)),
        JSON.stringify(replaced),
      );
      // Rolled back: nothing applied, nothing left behind.
      assert.equal((await status(engine)).pending.length, all.length - at);
      const left = await engine.transaction(
        (tx) => tx.query<{ t: string | null }>("select to_regclass('internal.payees')::text as t"),
        { readOnly: true },
      );
      assert.equal(left.rows[0]?.t, null, "0036's tables are not there after the dry run");

      // The real upgrade: every step, and the old rows still there and working under today's rules.
      assert.equal((await migrate(engine)).length, all.length - at);
      const after = await engine.transaction(
        (tx) =>
          tx.query<{ title: string; tracks: number; payees: number }>(
            `select r.title, (select count(*)::int from public.tracks t where t.release_id = r.id) as tracks,
               (select count(*)::int from internal.payees p where p.account_id = r.account_id) as payees
             from public.releases r where r.id = $1`,
            [ids.release],
          ),
        { readOnly: true },
      );
      // 0036 made the account a payee and the split's person another, from the track's splits.
      assert.deepEqual(after.rows[0], { title: "Old Release", tracks: 1, payees: 2 });
      assert.deepEqual(await dryRunMigrations(engine), []);
    } finally {
      await engine.close();
    }
  });

  // The same from older levels, back to the first with a catalogue (0003): a label's release and
  // track written then come through every later migration, and today's rules read them. Each
  // level is an earlier stop's (migrations are never edited once merged).
  for (const at of [3, 7, 14, 20, 26]) {
    test(`an upgrade from migration ${String(at).padStart(4, "0")}: the catalogue written then comes through`, async () => {
      const engine = await PgliteEngine.open();
      try {
        await migrate(engine, all.slice(0, at));
        const release = await engine.transaction(
          async (tx) => {
            const one = async (sql: string, params: unknown[]) =>
              ((await tx.query<{ id: string }>(sql, params)).rows[0] as { id: string }).id;
            const tenant = await one(
              "insert into internal.tenants (slug, name, jwt_secret) values ('old', 'Old', repeat('s', 40)) returning id",
              [],
            );
            const account = await one(
              "insert into internal.accounts (tenant_id, name) values ($1, 'Old Label') returning id",
              [tenant],
            );
            const artist = await one(
              "insert into public.artist_profiles (account_id, name) values ($1, 'Old Artist') returning id",
              [account],
            );
            const id = await one(
              "insert into public.releases (account_id, artist_id, title) values ($1, $2, 'Old Release') returning id",
              [account, artist],
            );
            await tx.query(
              "insert into public.tracks (account_id, release_id, title, track_number) values ($1, $2, 'Old Track', 1)",
              [account, id],
            );
            return id;
          },
          { readOnly: false },
        );
        assert.equal((await migrate(engine)).length, all.length - at);
        const after = await engine.transaction(
          (tx) =>
            tx.query<{ title: string; status: string; tracks: number; problems: string }>(
              `select r.title, r.status, (select count(*)::int from public.tracks t where t.release_id = r.id) as tracks,
                 jsonb_typeof(internal.release_problems(r.id)) as problems
               from public.releases r where r.id = $1`,
              [release],
            ),
          { readOnly: true },
        );
        // Still a draft with its track, and today's submission rules read it (a list of problems).
        assert.deepEqual(after.rows[0], {
          title: "Old Release",
          status: "draft",
          tracks: 1,
          problems: "array",
        });
        assert.equal((await status(engine)).pending.length, 0);
      } finally {
        await engine.close();
      }
    });
  }

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
      const dry = await runCli(["--json", "migrate", "--dry-run"], { DATA_DIR: dataDir });
      assert.equal(dry.code, 0, dry.stderr);
      assert.deepEqual(JSON.parse(dry.stdout), { dry_run: true, pending: [] });
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
