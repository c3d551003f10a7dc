import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { decodeJwt } from "jose";
import { copyMigratedDatabase } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";

/** The `backline` command as an operator runs it, on an embedded database of its own. */
describe("backline CLI", () => {
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

  test("--help lists the commands", async () => {
    const r = await runCli(["--help"], env);
    assert.equal(r.code, 0);
    for (const command of ["serve", "migrate", "db", "tenants", "accounts"])
      assert.match(r.stdout, new RegExp(`\\n  ${command}\\b`));
  });

  test("tenants create prints the URL and keys signed for the tenant; list and keys agree", async () => {
    const created = await json("tenants", "create", "--name", "Acme Distribution", "--policy", "owner-only");
    assert.equal(created.slug, "acme-distribution");
    assert.equal(created.policy_preset, "owner-only");
    assert.equal(created.url, "https://api.example.com");
    assert.deepEqual(
      { role: decodeJwt(created.anon_key).role, tenant: decodeJwt(created.anon_key).tenant_id },
      { role: "anon", tenant: created.id },
    );
    assert.equal(decodeJwt(created.service_role_key).role, "service_role");
    assert.equal("jwt_secret" in created, false, "the signing secret is never printed");

    const listed = await json("tenants", "list");
    assert.deepEqual(
      listed.map((t: { id: string }) => t.id),
      [created.id],
    );
    const keys = await json("tenants", "keys", "acme-distribution");
    assert.equal(keys.anon_key, created.anon_key);
    assert.equal(keys.service_role_key, created.service_role_key);
  });

  test("accounts create and list, by tenant slug or id", async () => {
    const [tenant] = await json("tenants", "list");
    const label = await json("accounts", "create", "--tenant", tenant.slug, "--name", "Night Owl Records");
    const artist = await json(
      "accounts",
      "create",
      "--tenant",
      tenant.id,
      "--name",
      "Mira Vale",
      "--kind",
      "artist",
      "--sandbox",
    );
    assert.equal(label.kind, "label");
    assert.deepEqual([artist.kind, artist.is_sandbox], ["artist", true]);
    const listed = await json("accounts", "list", "--tenant", tenant.slug);
    assert.deepEqual(
      listed.map((a: { name: string }) => a.name),
      ["Night Owl Records", "Mira Vale"],
    );
    const text = await runCli(["accounts", "list"], env);
    assert.match(text.stdout, /^id\s+tenant_id\s+name\s+kind/);
  });

  // Status 1: the command could not do it; 2: it was called wrongly (docs/cli.md).
  const errors: { name: string; args: string[]; message: RegExp; status: 1 | 2 }[] = [
    {
      name: "an unknown tenant",
      args: ["accounts", "create", "--tenant", "nope", "--name", "X"],
      message: /^backline: no tenant nope$/m,
      status: 1,
    },
    {
      name: "a bad account kind",
      args: ["accounts", "create", "--tenant", "x", "--name", "X", "--kind", "band"],
      message: /argument 'band' is invalid\. expected one of label, artist/,
      status: 2,
    },
    {
      name: "a bad policy preset",
      args: ["tenants", "create", "--name", "X", "--policy", "everyone"],
      message: /Allowed choices are account-members, owner-only/,
      status: 2,
    },
    {
      name: "a missing required option",
      args: ["tenants", "create"],
      message: /required option '--name <name>' not specified/,
      status: 2,
    },
    {
      name: "a duplicate slug",
      args: ["tenants", "create", "--name", "Acme Distribution"],
      message: /^backline: a tenant with slug acme-distribution exists already$/m,
      status: 1,
    },
    {
      name: "an invalid slug",
      args: ["tenants", "create", "--name", "X", "--slug", "Not A Slug"],
      message: /^backline: --slug must be 1 to 63 lower-case letters, digits and hyphens/m,
      status: 2,
    },
  ];
  for (const c of errors) {
    test(`refuses ${c.name} with exit code ${c.status}, one line and no stack trace`, async () => {
      const r = await runCli(c.args, env);
      assert.equal(r.code, c.status, r.stderr);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(r.stderr, c.message);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });
  }

  test("db setup-sql prints the role setup a superuser runs once", async () => {
    const r = await runCli(["db", "setup-sql", "--login", "backline_api"], env);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /create role service_role nologin noinherit bypassrls/);
    assert.match(r.stdout, /grant anon, authenticated, tenant_service, service_role to backline_api;/);
  });
});
