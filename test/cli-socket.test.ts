import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { copyMigratedDatabase } from "./support/db.ts";
import { type RunningServer, runCli, startServer, tempDir } from "./support/process.ts";

/**
 * `backline` while the embedded server runs (docs/cli.md): the command goes to the server through
 * DATA_DIR/run/cli.sock and prints exactly what it prints on its own, --json, errors and exit
 * status included. A real server process, real CLI processes.
 */
describe("backline CLI through a running server", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, PUBLIC_URL: "https://api.example.com" };
  let server: RunningServer | undefined;
  const socket = path.join(dataDir, "run", "cli.sock");

  before(async () => {
    // A migrated database to start from: this suite is about the socket, not a first start.
    await copyMigratedDatabase(dataDir);
    server = await startServer(env);
  });
  after(async () => {
    await server?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test("the socket is the server user's only: the folder 0700, the socket 0600", () => {
    assert.equal(fs.statSync(path.dirname(socket)).mode & 0o777, 0o700);
    const st = fs.statSync(socket);
    assert.ok(st.isSocket());
    assert.equal(st.mode & 0o777, 0o600);
  });

  let tenant: { id: string; slug: string; anon_key: string };
  test("commands run on the server's database: create, then list and keys agree", async () => {
    const created = await runCli(["--json", "tenants", "create", "--name", "Socket Records"], env);
    assert.equal(created.code, 0, created.stderr);
    tenant = JSON.parse(created.stdout);
    assert.equal(tenant.slug, "socket-records");
    const keys = await runCli(["--json", "tenants", "keys", "socket-records"], env);
    assert.equal(JSON.parse(keys.stdout).anon_key, tenant.anon_key);
    // The server answers with the tenant it now has: the same database.
    const res = await fetch(`${server?.url}/auth/v1/settings`, { headers: { apikey: tenant.anon_key } });
    assert.equal(res.status, 200);
  });

  test("errors: the same one line and exit status, and JSON with --json", async () => {
    const r = await runCli(["tenants", "keys", "nope"], env);
    assert.deepEqual([r.code, r.stdout, r.stderr], [1, "", "backline: no tenant nope\n"]);
    const j = await runCli(["--json", "tenants", "keys", "nope"], env);
    assert.equal(j.code, 1);
    assert.deepEqual(JSON.parse(j.stderr), { error: { code: "not_found", message: "no tenant nope" } });
    const dup = await runCli(["tenants", "create", "--name", "Socket Records"], env);
    assert.deepEqual(
      [dup.code, dup.stderr],
      [1, "backline: a tenant with slug socket-records exists already\n"],
    );
  });

  test("a royalty import keeps its progress (JSON lines on stderr) and its report", async () => {
    const file = path.join(tempDir("backline-socket-"), "report.csv");
    fs.writeFileSync(
      file,
      "reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency\n" +
        "2026-03,2026-02,spotify,US,,QZNOP2600001,stream,10,0.04,0.012,0.028,USD\n",
    );
    // Relative to the command's own working directory, as a local run would read it.
    const r = await runCli(
      [
        "--json",
        "royalties",
        "import",
        path.relative(process.cwd(), file),
        "--tenant",
        tenant.slug,
        "--format",
        "backline",
      ],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /^\{"event":"progress"/m);
    const out = JSON.parse(r.stdout) as {
      status: string;
      import: { lines_total: number; lines_unmatched: number };
    };
    assert.deepEqual([out.status, out.import.lines_total, out.import.lines_unmatched], ["completed", 1, 1]);
  });

  test("the master key is not rotated under a running server: one line saying to stop it", async () => {
    const r = await runCli(["secrets", "rotate-master-key"], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^backline: stop the server first/);
  });

  test("the text output is what the command prints on its own, once the server stopped", async () => {
    const through = await runCli(["tenants", "list"], env);
    assert.equal(through.code, 0, through.stderr);
    assert.equal(await server?.stop(), 0);
    server = undefined;
    assert.equal(fs.existsSync(socket), false, "a stopped server removes its socket");
    const alone = await runCli(["tenants", "list"], env);
    assert.equal(alone.code, 0, alone.stderr);
    assert.equal(through.stdout, alone.stdout);
  });

  test("a socket left by a killed server: the command opens the database itself", async () => {
    server = await startServer(env);
    assert.ok(fs.existsSync(socket));
    await server.stop("SIGKILL");
    server = undefined;
    assert.ok(fs.existsSync(socket), "kill -9 leaves the socket file");
    const r = await runCli(["--json", "tenants", "list"], env);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).length, 2);
  });
});
