import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import { after, before, describe, test } from "node:test";
import { copyMigratedDatabase } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";

/**
 * The operator's commands for multi-factor sign-in and the audit log, as an operator runs them on
 * an embedded database of their own: each command is the actor of what it changes
 * ("cli:<command>" with the OS user).
 */
describe("backline CLI: auth mfa and audit list", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir, PUBLIC_URL: "https://api.example.com" };
  const json = async (...args: string[]) => {
    const r = await runCli(["--json", ...args], env);
    assert.equal(r.code, 0, `backline ${args.join(" ")} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  // A migrated database to start from: this suite is about the commands, not a first start.
  before(() => copyMigratedDatabase(dataDir));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test("require aal2 of a tenant's staff and of an account's members; the audit log names the command", async () => {
    const tenant = await json("tenants", "create", "--name", "Night Owl Distribution");
    const account = await json("accounts", "create", "--tenant", tenant.slug, "--name", "Night Owl Records");
    assert.deepEqual(await json("auth", "mfa", "require", "--tenant", tenant.slug, "on"), {
      tenant_id: tenant.id,
      require_staff_aal2: true,
    });
    assert.deepEqual(await json("auth", "mfa", "require-account", account.id, "on"), {
      account_id: account.id,
      require_aal2: true,
    });
    const rows = await json("audit", "list", "--tenant", tenant.slug);
    const byActor = (actor: string) => rows.find((r: { actor: string }) => r.actor === actor);
    const staff = byActor("cli:auth mfa require");
    assert.ok(staff, JSON.stringify(rows));
    assert.equal(staff.object_table, "internal.tenants");
    assert.deepEqual(
      [staff.before, staff.after],
      [{ require_staff_aal2: false }, { require_staff_aal2: true }],
    );
    assert.equal(staff.actor_detail.os_user, os.userInfo().username);
    const acct = byActor("cli:auth mfa require-account");
    assert.ok(acct);
    assert.deepEqual(
      [acct.object_table, acct.object_id, acct.after],
      ["internal.accounts", account.id, { require_aal2: true }],
    );
  });

  test("auth mfa reset: an unknown tenant is a one-line error", async () => {
    const r = await runCli(["auth", "mfa", "reset", "--tenant", "nope", "--email", "a@example.com"], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no tenant nope/);
  });
});
