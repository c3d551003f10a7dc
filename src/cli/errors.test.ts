import assert from "node:assert/strict";
import { test } from "node:test";
import { CommanderError } from "commander";
import { asDbError } from "../db/errors.ts";
import { DataDirInUseError } from "../db/pglite.ts";
import { explain } from "../start/process.ts";
import { CliError, UsageError } from "./context.ts";
import { describeDbError, failureOf, wantsJson } from "./errors.ts";

// The fields both drivers give a database error (node-postgres and PGlite alike).
const dbError = (fields: Record<string, string>) =>
  asDbError(Object.assign(new Error(fields.message), fields));

test("database refusals read as words, never as SQL", () => {
  const cases: [Record<string, string>, { code: string; message: string }][] = [
    [
      {
        code: "23505",
        message: 'duplicate key value violates unique constraint "tenants_slug_key"',
        detail: "Key (slug)=(acme) already exists.",
        table: "tenants",
      },
      { code: "conflict", message: "a tenant with slug acme exists already" },
    ],
    [
      {
        code: "23503",
        message:
          'insert or update on table "memberships" violates foreign key constraint "memberships_account_id_fkey"',
        detail: 'Key (account_id)=(6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c) is not present in table "accounts".',
        table: "memberships",
      },
      { code: "not_found", message: "no account 6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c" },
    ],
    [
      { code: "22P02", message: 'invalid input syntax for type uuid: "nope"' },
      { code: "invalid_value", message: 'not a valid uuid: "nope"' },
    ],
    [
      {
        code: "23514",
        message: 'new row for relation "tenants" violates check constraint "tenants_slug_check"',
        constraint: "tenants_slug_check",
        table: "tenants",
      },
      { code: "invalid_value", message: "a value breaks the rule tenants_slug_check of tenants" },
    ],
    [
      { code: "BL002", message: "a release in draft cannot become live" },
      { code: "invalid_status_transition", message: "a release in draft cannot become live" },
    ],
  ];
  for (const [fields, expected] of cases) {
    const e = dbError(fields);
    assert.ok(e);
    assert.deepEqual(describeDbError(e), expected, fields.message);
  }
});

test("failures and usage errors: status, code and the help to read", () => {
  assert.deepEqual(failureOf(new UsageError("say --approve or --reject"), "releases review"), {
    status: 2,
    code: "usage",
    message: "say --approve or --reject",
    help: "backline releases review --help",
  });
  assert.deepEqual(
    failureOf(new CommanderError(1, "commander.unknownOption", "error: unknown option '--x'"), ""),
    { status: 2, code: "usage", message: "unknown option '--x'", help: "backline --help" },
  );
  assert.deepEqual(failureOf(new CliError("no store x", "not_found"), "stores show"), {
    status: 1,
    code: "not_found",
    message: "no store x",
  });
  const inUse = failureOf(new DataDirInUseError("/srv/data", 42), "tenants list", explain);
  assert.deepEqual([inUse.status, inUse.code], [1, "data_dir_in_use"]);
  const bug = failureOf(new TypeError("x is undefined"), "tenants list");
  assert.deepEqual([bug.status, bug.code, bug.message], [1, "internal", "unexpected error: x is undefined"]);
  assert.ok(bug.stack, "a bug keeps its stack");
});

test("--json is seen before -- only", () => {
  assert.equal(wantsJson(["tenants", "--json", "list"]), true);
  assert.equal(wantsJson(["tenants", "list"]), false);
  assert.equal(wantsJson(["royalties", "import", "--", "--json"]), false);
});
