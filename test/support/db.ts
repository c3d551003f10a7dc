import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe } from "node:test";
import { Db } from "../../src/db/db.ts";
import { loadMigrations, migrate } from "../../src/db/migrate.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { rolesSetupSql } from "../../src/db/roles.ts";
import type { Engine, EngineKind } from "../../src/db/types.ts";
import { SecretBox } from "../../src/secrets/box.ts";
import "./wasm-baseline.ts";

/**
 * Integration tests run on PGlite always and on PostgreSQL when TEST_DATABASE_URL is set
 * (TEST_ENGINES=pglite,postgres narrows the list). Every test file gets a fresh database cloned
 * from a migrated template: a PGlite snapshot file, or a PostgreSQL template database.
 *
 * On PostgreSQL the Db under test logs in as the non-superuser `authenticator` role, exactly as
 * in production; `owner` is the superuser connection, for setup the tests must not do as a caller.
 */

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;
export const LOGIN_ROLE = "authenticator";

/** The master key of every test database and app (test/support/app.ts), as one deployment shares one. */
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 42).toString("base64");
export const testSecrets = (): SecretBox => new SecretBox(Buffer.from(TEST_ENCRYPTION_KEY, "base64"));

export const ENGINES: EngineKind[] = (() => {
  const available: EngineKind[] = TEST_DATABASE_URL ? ["pglite", "postgres"] : ["pglite"];
  const only = process.env.TEST_ENGINES?.split(",").map((s) => s.trim());
  if (!only?.length) return available;
  if (only.includes("postgres") && !TEST_DATABASE_URL)
    throw new Error("TEST_ENGINES names postgres but TEST_DATABASE_URL is not set");
  return available.filter((e) => only.includes(e));
})();

export interface TestDb {
  kind: EngineKind;
  /** The request-facing database, as the app uses it. */
  db: Db;
  /** The schema owner (PGlite's superuser, or the PostgreSQL superuser from TEST_DATABASE_URL). */
  owner: Engine;
  /** Connection URL of this test database for the app's login role (PostgreSQL only). */
  url: string | undefined;
  close(): Promise<void>;
}

const schemaHash = createHash("sha256")
  .update(
    loadMigrations()
      .map((m) => m.checksum)
      .join(","),
  )
  .digest("hex")
  .slice(0, 12);

export async function createTestDb(kind: EngineKind): Promise<TestDb> {
  return kind === "pglite" ? createPgliteDb() : createPostgresDb();
}

export async function pgliteTemplate(): Promise<Blob> {
  const file = path.join(os.tmpdir(), `backline-test-template-${schemaHash}.tar`);
  if (!fs.existsSync(file)) {
    const engine = await PgliteEngine.open();
    await migrate(engine);
    const dump = await engine.dump();
    await engine.close();
    // Written then renamed, so a concurrent test process never reads half a file.
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, Buffer.from(await dump.arrayBuffer()));
    fs.renameSync(tmp, file);
  }
  return new Blob([fs.readFileSync(file)]);
}

/**
 * A migrated embedded data directory, unpacked once per schema from the template above: what
 * `copyMigratedDatabase` copies. Built beside its final name and renamed, so concurrent test processes
 * either find it whole or build their own and one rename wins.
 */
async function pgliteDataDirTemplate(): Promise<string> {
  const dir = path.join(os.tmpdir(), `backline-test-pgdata-${schemaHash}`);
  if (!fs.existsSync(dir)) {
    const building = `${dir}.${process.pid}.tmp`;
    fs.rmSync(building, { recursive: true, force: true });
    const engine = await PgliteEngine.open({ dataDir: building, loadDataDir: await pgliteTemplate() });
    await engine.close();
    try {
      fs.renameSync(building, dir);
    } catch (error) {
      // Another process renamed its copy first: use that one.
      fs.rmSync(building, { recursive: true, force: true });
      if (!fs.existsSync(dir)) throw error;
    }
  }
  return dir;
}

/**
 * Puts an already migrated embedded database into `dataDir` (as DATA_DIR/pgdata), for tests that
 * run `backline` or the server as processes: the first command then opens a migrated database
 * instead of creating one and applying every migration (about 5 s of CPU each time). Tests about a
 * first start on an empty DATA_DIR leave it empty.
 */
export async function copyMigratedDatabase(dataDir: string): Promise<void> {
  fs.cpSync(await pgliteDataDirTemplate(), path.join(dataDir, "pgdata"), { recursive: true });
}

/** PGlite's shared_buffers for test databases: the server's default (PGLITE_SHARED_BUFFERS, src/config.ts). */
const TEST_SHARED_BUFFERS = "32MB";

async function createPgliteDb(): Promise<TestDb> {
  const engine = await PgliteEngine.open({
    loadDataDir: await pgliteTemplate(),
    sharedBuffers: TEST_SHARED_BUFFERS,
  });
  return {
    kind: "pglite",
    db: new Db(engine, { secrets: testSecrets() }),
    owner: engine,
    url: undefined,
    close: () => engine.close(),
  };
}

function withDatabase(url: string, database: string, user?: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  if (user) {
    u.username = user;
    u.password = "";
  }
  return u.toString();
}

/** Runs one statement on the server from TEST_DATABASE_URL, outside any transaction (CREATE/DROP DATABASE). */
async function bare(sql: string): Promise<void> {
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function ensurePostgresTemplate(): Promise<string> {
  if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
  const template = `backline_tmpl_${schemaHash}`;
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    // One test process builds the template; the others wait on this lock, then find it built.
    await client.query("select pg_advisory_lock(4242002)");
    await client.query(rolesSetupSql(LOGIN_ROLE));
    const exists = await client.query("select 1 from pg_database where datname = $1", [template]);
    if (exists.rowCount === 0) {
      const building = `${template}_building`;
      await client.query(`drop database if exists ${building}`);
      await client.query(`create database ${building}`);
      const engine = new PostgresEngine({ url: withDatabase(TEST_DATABASE_URL, building), poolSize: 1 });
      try {
        await migrate(engine);
      } finally {
        await engine.close();
      }
      await client.query(`alter database ${building} rename to ${template}`);
    }
    await client.query("select pg_advisory_unlock(4242002)");
  } finally {
    await client.end();
  }
  return template;
}

async function createPostgresDb(): Promise<TestDb> {
  if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
  const template = await ensurePostgresTemplate();
  const name = `backline_test_${process.pid}_${randomBytes(4).toString("hex")}`;
  await bare(`create database ${name} template ${template}`);
  const url = withDatabase(TEST_DATABASE_URL, name, LOGIN_ROLE);
  const owner = new PostgresEngine({ url: withDatabase(TEST_DATABASE_URL, name), poolSize: 2 });
  const db = new Db(new PostgresEngine({ url, poolSize: 5 }), { secrets: testSecrets() });
  return {
    kind: "postgres",
    db,
    owner,
    url,
    async close() {
      await db.close();
      await owner.close();
      await bare(`drop database if exists ${name} with (force)`);
    },
  };
}

/** An empty PostgreSQL database (roles set up, nothing migrated): for migration and start-up tests. */
export async function createEmptyPostgresDb(): Promise<{
  ownerUrl: string;
  loginUrl: string;
  drop(): Promise<void>;
}> {
  if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
  await ensurePostgresTemplate(); // also sets up the roles
  const name = `backline_empty_${process.pid}_${randomBytes(4).toString("hex")}`;
  await bare(`create database ${name}`);
  return {
    ownerUrl: withDatabase(TEST_DATABASE_URL, name),
    loginUrl: withDatabase(TEST_DATABASE_URL, name, LOGIN_ROLE),
    drop: () => bare(`drop database if exists ${name} with (force)`),
  };
}

/**
 * Declares `fn`'s tests once per engine, each engine with its own fresh database.
 * `t()` returns the TestDb inside tests and hooks.
 */
export function describeEachEngine(name: string, fn: (t: () => TestDb) => void): void {
  for (const kind of ENGINES) {
    describe(`${name} [${kind}]`, () => {
      let current: TestDb | undefined;
      before(async () => {
        current = await createTestDb(kind);
      });
      after(async () => {
        await current?.close();
      });
      fn(() => {
        if (!current) throw new Error("test database not ready");
        return current;
      });
    });
  }
}
