import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { asDbError, mapDbError } from "./errors.ts";

describe("asDbError", () => {
  test("reads the SQLSTATE and fields both drivers set", () => {
    const e = Object.assign(new Error("duplicate key"), {
      code: "23505",
      detail: "Key (slug)=(a) already exists.",
      constraint: "tenants_slug_key",
    });
    assert.deepEqual(asDbError(e), {
      sqlstate: "23505",
      message: "duplicate key",
      detail: "Key (slug)=(a) already exists.",
      hint: undefined,
      constraint: "tenants_slug_key",
      table: undefined,
      column: undefined,
    });
  });

  test("ignores errors that are not from the database", () => {
    assert.equal(asDbError(new Error("plain")), undefined);
    assert.equal(asDbError(Object.assign(new Error("x"), { code: "ECONNREFUSED" })), undefined);
    assert.equal(asDbError("23505"), undefined);
    assert.equal(asDbError(null), undefined);
  });
});

describe("mapDbError", () => {
  const err = (sqlstate: string) => ({
    sqlstate,
    message: "m",
    detail: undefined,
    hint: undefined,
    constraint: undefined,
    table: undefined,
    column: undefined,
  });
  const cases: [string, "anon" | "authenticated" | "service_role", number, string][] = [
    ["BL001", "authenticated", 409, "release_not_editable"],
    ["BL002", "authenticated", 409, "invalid_status_transition"],
    ["BL003", "authenticated", 409, "takedown_not_allowed"],
    ["BL004", "authenticated", 403, "operator_only"],
    ["BL014", "authenticated", 403, "insufficient_scope"],
    ["23505", "authenticated", 409, "unique_violation"],
    ["23503", "authenticated", 409, "foreign_key_violation"],
    ["23001", "authenticated", 409, "restrict_violation"],
    ["23502", "authenticated", 400, "not_null_violation"],
    ["23514", "authenticated", 400, "check_violation"],
    ["22P02", "authenticated", 400, "invalid_value"],
    ["22007", "authenticated", 400, "invalid_value"],
    ["42883", "authenticated", 404, "undefined_function"],
    ["42501", "anon", 401, "insufficient_privilege"],
    ["42501", "authenticated", 403, "insufficient_privilege"],
    ["25006", "authenticated", 405, "read_only_transaction"],
    ["P0001", "authenticated", 400, "raise_exception"],
    ["PT402", "authenticated", 402, "raised"],
    ["57014", "authenticated", 504, "statement_timeout"],
    ["40001", "authenticated", 409, "serialization_failure"],
    ["08006", "authenticated", 503, "database_unavailable"],
    ["XX000", "authenticated", 500, "internal_error"],
  ];
  for (const [sqlstate, role, status, code] of cases) {
    test(`${sqlstate} as ${role} -> ${status} ${code}`, () => {
      assert.deepEqual(mapDbError(err(sqlstate), role), { status, code });
    });
  }
});
