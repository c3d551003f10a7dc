import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, describe, test } from "node:test";
import { decodeJwt } from "jose";
import { createTestDb, TEST_DATABASE_URL, TEST_ENCRYPTION_KEY, type TestDb } from "./support/db.ts";
import { ROOT, type RunningServer, runCli, runToEnd, startServer, tempDir } from "./support/process.ts";

/** `npm start` as a user runs it: a real process, a real socket, a real data directory. */

describe("first start on the embedded database", () => {
  const dataDir = tempDir();
  let server: RunningServer | undefined;
  after(async () => {
    await server?.stop("SIGKILL");
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test("serves /health and /ready and writes dev-tenant.json", async () => {
    server = await startServer({ DATA_DIR: dataDir });
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: "ok" });
    assert.match(health.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);

    const ready = await fetch(`${server.url}/ready`);
    assert.equal(ready.status, 200);
    const body = (await ready.json()) as { status: string; migrations: { pending: number[] } };
    assert.equal(body.status, "ready");
    assert.deepEqual(body.migrations.pending, []);

    const file = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8"));
    assert.deepEqual(Object.keys(file).sort(), [
      "account_id",
      "anon_key",
      "api_key",
      "service_role_key",
      "tenant_id",
      "url",
    ]);
    assert.equal(file.url, server.url);
    assert.equal(decodeJwt(file.anon_key).role, "anon");
    assert.equal(decodeJwt(file.service_role_key).role, "service_role");
    assert.equal(decodeJwt(file.anon_key).tenant_id, file.tenant_id);
    assert.equal(fs.statSync(path.join(dataDir, "dev-tenant.json")).mode & 0o777, 0o600);
    // The keys are printed too, as `supabase start` prints them.
    assert.ok(server.output().includes(file.anon_key));
    // The test-mode API key works on the public API at once (docs/public-api.md, quickstart).
    assert.match(file.api_key, /^bk_test_[0-9A-Za-z]{49}$/);
    const releases = await fetch(`${server.url}/api/public/v1/releases`, {
      headers: { authorization: `Bearer ${file.api_key}` },
    });
    assert.equal(releases.status, 200);
  });

  test("keeps a caller's X-Request-Id and answers unknown routes with a problem document", async () => {
    assert.ok(server);
    const res = await fetch(`${server.url}/no/such/route`, { headers: { "x-request-id": "trace-123" } });
    assert.equal(res.status, 404);
    assert.equal(res.headers.get("content-type"), "application/problem+json; charset=utf-8");
    assert.equal(res.headers.get("x-request-id"), "trace-123");
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.code, "not_found");
    assert.equal(body.request_id, "trace-123");
  });

  test("a second process on the same data directory is refused with one clear line", async () => {
    assert.ok(server);
    // (Commands that use the database run inside the server instead: test/cli-socket.test.ts.)
    const r = await runCli(["migrate", "--status"], { DATA_DIR: dataDir });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^backline: The embedded database in .* is in use by process \d+\./);
    assert.equal(r.stderr.trim().split("\n").length, 1);
  });

  test("stops gracefully on SIGTERM and keeps its data across a restart", async () => {
    assert.ok(server);
    const before = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8"));
    assert.equal(await server.stop("SIGTERM"), 0);

    const created = await runCli(["--json", "tenants", "create", "--name", "Kept Across Restarts"], {
      DATA_DIR: dataDir,
    });
    assert.equal(created.code, 0, created.stderr);

    server = await startServer({ DATA_DIR: dataDir });
    const afterRestart = JSON.parse(fs.readFileSync(path.join(dataDir, "dev-tenant.json"), "utf8"));
    assert.equal(afterRestart.tenant_id, before.tenant_id);
    assert.equal(afterRestart.anon_key, before.anon_key);
    assert.equal(afterRestart.service_role_key, before.service_role_key);
    assert.equal(afterRestart.api_key, before.api_key);
    assert.equal(await server.stop("SIGTERM"), 0);

    const list = await runCli(["--json", "tenants", "list"], { DATA_DIR: dataDir });
    const slugs = (JSON.parse(list.stdout) as { slug: string }[]).map((t) => t.slug);
    assert.deepEqual(slugs, ["dev", "kept-across-restarts"]);
    server = undefined;
  });
});

describe("a port in use", () => {
  test("is found before anything else: one line naming the port and the setting, no database, no dev-tenant.json", async () => {
    const dataDir = tempDir();
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const started = Date.now();
      const r = await runToEnd([path.join(ROOT, "src/start/server.ts")], {
        DATA_DIR: dataDir,
        PORT: String(port),
      });
      assert.equal(r.code, 1);
      assert.equal(
        r.stderr.trim(),
        `backline: Port ${port} on 127.0.0.1 is already in use: set PORT to another port.`,
      );
      assert.deepEqual(fs.readdirSync(dataDir), [], "nothing was written to DATA_DIR");
      assert.ok(Date.now() - started < 10_000);
    } finally {
      taken.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("start-up failures end with one clear line", () => {
  const cases: { name: string; env: Record<string, string>; message: RegExp }[] = [
    {
      name: "PORT=abc",
      env: { PORT: "abc" },
      message: /^backline: Invalid configuration: PORT must be a port number \(got "abc"\)$/,
    },
    {
      name: "PORT=70000",
      env: { PORT: "70000" },
      message: /^backline: Invalid configuration: PORT must be between 0 and 65535 \(got "70000"\)$/,
    },
    {
      name: "LOG_LEVEL=loud",
      env: { LOG_LEVEL: "loud" },
      message: /^backline: Invalid configuration: LOG_LEVEL /,
    },
    {
      name: "MIGRATE_ON_START=maybe",
      env: { MIGRATE_ON_START: "maybe" },
      message: /^backline: Invalid configuration: MIGRATE_ON_START must be true or false/,
    },
    {
      name: "DATABASE_URL=mysql://x",
      env: { DATABASE_URL: "mysql://x" },
      message:
        /^backline: Invalid configuration: DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/,
    },
    {
      name: "unreachable DATABASE_URL",
      env: { DATABASE_URL: "postgres://nobody:secret@127.0.0.1:1/backline" },
      message: /^backline: Cannot connect to PostgreSQL at nobody@127\.0\.0\.1:1\/backline: .*ECONNREFUSED/,
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const dataDir = tempDir();
      try {
        const r = await runToEnd([path.join(ROOT, "src/start/server.ts")], { DATA_DIR: dataDir, ...c.env });
        assert.equal(r.code, 1);
        const lines = r.stderr.trim().split("\n");
        assert.equal(lines.length, 1, r.stderr);
        assert.match(lines[0] ?? "", c.message);
        assert.doesNotMatch(r.stderr, /secret/, "the password is never printed");
      } finally {
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    });
  }
});

describe("on PostgreSQL", { skip: TEST_DATABASE_URL ? false : "TEST_DATABASE_URL is not set" }, () => {
  let t: TestDb | undefined;
  after(async () => t?.close());

  test("serves through the non-superuser login role and reports ready", async () => {
    t = await createTestDb("postgres");
    assert.ok(t.url);
    const dataDir = tempDir();
    const server = await startServer({
      DATA_DIR: dataDir,
      DATABASE_URL: t.url,
      DEV_TENANT: "true",
      // One key for every process on one database (each DATA_DIR would make its own).
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    });
    try {
      const ready = await fetch(`${server.url}/ready`);
      assert.equal(ready.status, 200);
      assert.equal(((await ready.json()) as { database: { engine: string } }).database.engine, "postgres");
      assert.ok(fs.existsSync(path.join(dataDir, "dev-tenant.json")));
    } finally {
      assert.equal(await server.stop(), 0);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("without DEV_TENANT no development tenant is created on PostgreSQL", async () => {
    assert.ok(t?.url);
    const dataDir = tempDir();
    const server = await startServer({
      DATA_DIR: dataDir,
      DATABASE_URL: t.url,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    });
    try {
      assert.equal(fs.existsSync(path.join(dataDir, "dev-tenant.json")), false);
    } finally {
      await server.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
