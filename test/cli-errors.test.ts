import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { copyMigratedDatabase } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";

/**
 * How `backline` ends when it cannot do what it was asked (docs/cli.md): one line on stderr, a JSON
 * object with --json, exit status 2 for a command called wrongly and 1 for one that failed; never a
 * raw database error, never a stack.
 */
describe("backline CLI: errors", () => {
  const dataDir = tempDir();
  const env = { DATA_DIR: dataDir };
  const missing = "6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c";
  let slug = "";
  before(async () => {
    // A migrated database to start from: this suite is about the commands, not a first start.
    await copyMigratedDatabase(dataDir);
    const r = await runCli(["--json", "tenants", "create", "--name", "Errors Distribution"], env);
    assert.equal(r.code, 0, r.stderr);
    slug = JSON.parse(r.stdout).slug;
  });
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  interface Case {
    name: string;
    args: () => string[];
    env?: Record<string, string>;
    /** The one line, after `backline: ` (and before the pointer to --help for a usage error). */
    message: RegExp;
    code: string;
    /** For usage errors: the command whose --help is named. */
    help?: string;
  }

  const usage: Case[] = [
    {
      name: "a group without its command",
      args: () => ["tenants"],
      message:
        /^tenants needs a command: create, list, keys, rotate-keys, signing-keys, set-lead-days, set-portal-domains, set-identifiers$/,
      code: "usage",
      help: "backline tenants --help",
    },
    {
      name: "an unknown command",
      args: () => ["frobnicate"],
      message: /^unknown command 'frobnicate'$/,
      code: "usage",
      help: "backline --help",
    },
    {
      name: "an unknown subcommand",
      args: () => ["tenants", "frob"],
      message: /^unknown command 'frob'$/,
      code: "usage",
      help: "backline tenants --help",
    },
    {
      name: "a missing required option",
      args: () => ["tenants", "create"],
      message: /^required option '--name <name>' not specified$/,
      code: "usage",
      help: "backline tenants create --help",
    },
    {
      name: "an unknown option",
      args: () => ["tenants", "create", "--name", "X", "--bogus"],
      message: /^unknown option '--bogus'$/,
      code: "usage",
      help: "backline tenants create --help",
    },
    {
      name: "an argument too many",
      args: () => ["tenants", "list", "extra"],
      message: /^too many arguments for 'list'/,
      code: "usage",
      help: "backline tenants list --help",
    },
    {
      name: "a value out of range",
      args: () => ["jobs", "list", "--limit", "0"],
      message: /^option '--limit <n>' argument '0' is invalid\. expected 1 to 10000$/,
      code: "usage",
      help: "backline jobs list --help",
    },
    {
      name: "a missing choice between options",
      args: () => ["releases", "review", missing],
      message: /^say --approve or --reject$/,
      code: "usage",
      help: "backline releases review --help",
    },
    {
      name: "an unknown scope",
      args: () => ["keys", "issue", "--account", missing, "--scopes", "catalog:read,nope"],
      message: /^unknown scope nope; expected some of /,
      code: "usage",
      help: "backline keys issue --help",
    },
    {
      name: "a malformed slug",
      args: () => ["tenants", "create", "--name", "X", "--slug", "Not A Slug"],
      message: /^--slug must be 1 to 63 lower-case letters, digits and hyphens/,
      code: "usage",
      help: "backline tenants create --help",
    },
  ];

  const failures: Case[] = [
    {
      name: "add-member to an account id that is no id",
      args: () => ["accounts", "add-member", "--account", "nope", "--email", "a@b.co"],
      message: /^no account nope$/,
      code: "not_found",
    },
    {
      name: "add-member to an account that does not exist",
      args: () => ["accounts", "add-member", "--account", missing, "--email", "a@b.co"],
      message: new RegExp(`^no account ${missing}$`),
      code: "not_found",
    },
    {
      name: "an unknown tenant",
      args: () => ["tenants", "keys", "nope"],
      message: /^no tenant nope$/,
      code: "not_found",
    },
    {
      name: "a tenant that exists already",
      args: () => ["tenants", "create", "--name", "Errors Distribution"],
      message: /^a tenant with slug errors-distribution exists already$/,
      code: "conflict",
    },
    {
      name: "a release that does not exist",
      args: () => ["releases", "review", missing, "--approve"],
      message: new RegExp(`^no release ${missing}$`),
      code: "not_found",
    },
    {
      name: "a dead job that does not exist",
      args: () => ["jobs", "retry", missing],
      message: /^no dead job /,
      code: "not_found",
    },
    {
      name: "a report file that cannot be read",
      args: () => ["royalties", "import", "no-such-report.csv", "--tenant", slug, "--format", "backline"],
      message: /^cannot read no-such-report\.csv$/,
      code: "refused",
    },
    {
      name: "a database that cannot be reached",
      args: () => ["tenants", "list"],
      env: { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" },
      message: /^Cannot connect to PostgreSQL at nobody@127\.0\.0\.1:1\/none/,
      code: "database_unavailable",
    },
  ];

  for (const [status, cases] of [
    [2, usage],
    [1, failures],
  ] as const) {
    for (const c of cases) {
      test(`${c.name}: one line, exit status ${status}`, async () => {
        const r = await runCli(c.args(), { ...env, ...c.env });
        assert.equal(r.code, status, r.stderr);
        assert.equal(r.stdout, "");
        const lines = r.stderr.split("\n");
        assert.deepEqual([lines.length, lines[1]], [2, ""], `one line: ${r.stderr}`);
        const [, text = ""] = /^backline: (.*)$/.exec(lines[0] ?? "") ?? [];
        const [, message = text] = c.help ? (/^(.*) \(see `(.*)`\)$/.exec(text) ?? []) : [];
        assert.match(message, c.message);
        if (c.help) assert.ok(text.endsWith(`(see \`${c.help}\`)`), text);
        assert.doesNotMatch(r.stderr, /violates|relation "|invalid input syntax|\n\s+at /);
      });
      test(`${c.name}, with --json: the error as JSON, exit status ${status}`, async () => {
        const r = await runCli(["--json", ...c.args()], { ...env, ...c.env });
        assert.equal(r.code, status, r.stderr);
        assert.equal(r.stdout, "");
        const body = JSON.parse(r.stderr) as { error: { code: string; message: string; help?: string } };
        assert.deepEqual(Object.keys(body), ["error"]);
        assert.equal(body.error.code, c.code);
        assert.match(body.error.message, c.message);
        assert.equal(body.error.help, c.help);
      });
    }
  }

  test("no command at all: the help on stderr, exit status 2", async () => {
    const r = await runCli([], env);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^Usage: backline \[options\] \[command\]/);
  });

  test("--help: the help on stdout, exit status 0", async () => {
    const r = await runCli(["tenants", "--help"], env);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage: backline tenants/);
    assert.equal(r.stderr, "");
  });
});
