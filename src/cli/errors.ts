import { CommanderError } from "commander";
import { asDbError, type DbError, mapDbError } from "../db/errors.ts";
import { CliError, type CliIo } from "./context.ts";

/**
 * How a failed command ends: one line on stderr (a JSON object with --json) and an exit status.
 *
 * - 2: the command was called wrongly (unknown command or option, a missing or malformed value,
 *   options that do not go together); the line names what is wrong and the help to read.
 * - 1: the command could not do it (no such record, a refused change, the database unavailable);
 *   the line says why in words, never as a raw database error.
 * - 1 with the stack: a bug (an error nobody expected).
 *
 * With --json the line is `{"error":{"code","message","help"?}}`; `code` is `usage` for status 2,
 * else a reason such as `not_found`, `conflict`, `invalid_state`, `invalid_value`, `unavailable`.
 */

export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export interface Failure {
  status: 1 | 2;
  code: string;
  message: string;
  /** For a usage error: the command whose help to read, e.g. `backline tenants create --help`. */
  help?: string;
  /** For a bug: the stack, printed in text mode only. */
  stack?: string;
}

/**
 * The failure `error` stands for. `command` is the words of the command that ran, e.g. "tenants
 * create"; `explain` gives the one line for errors a user can fix (src/start/process.ts, loaded
 * only when a command failed that way).
 */
export function failureOf(
  error: unknown,
  command: string,
  explain: (error: unknown) => string | undefined = () => undefined,
): Failure {
  const help = `backline ${command ? `${command} ` : ""}--help`;
  if (error instanceof CommanderError) {
    return { status: EXIT_USAGE, code: "usage", message: error.message.replace(/^error: /, ""), help };
  }
  if (error instanceof CliError) {
    return error.code === "usage"
      ? { status: EXIT_USAGE, code: "usage", message: error.message, help }
      : { status: EXIT_FAILURE, code: error.code, message: error.message };
  }
  const db = asDbError(error);
  if (db && mapDbError(db).status < 500) return { status: EXIT_FAILURE, ...describeDbError(db) };
  const known = explain(error);
  if (known) return { status: EXIT_FAILURE, code: knownCode(error), message: known };
  const message = error instanceof Error ? error.message : String(error);
  return {
    status: EXIT_FAILURE,
    code: "internal",
    message: `unexpected error: ${message}`,
    ...(error instanceof Error && error.stack ? { stack: error.stack } : {}),
  };
}

/**
 * The code of an error `explain` knows, from its class: DatabaseUnavailableError → database_unavailable,
 * DataDirInUseError → data_dir_in_use, SecretKeyError → secret_key, ConfigError → config; a system
 * error (a port in use, a folder not writable) by its errno code in lower case.
 */
function knownCode(error: unknown): string {
  const name = error instanceof Error && error.name !== "Error" ? error.name.replace(/Error$/, "") : "";
  if (name)
    return name
      .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
      .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
      .toLowerCase();
  const errno = (error as NodeJS.ErrnoException)?.code;
  return typeof errno === "string" ? errno.toLowerCase() : "failed";
}

/** Writes the failure to `io` and sets the exit status; returns the status. */
export function report(failure: Failure, io: CliIo, json: boolean): number {
  if (json) {
    const { status: _status, stack: _stack, ...body } = failure;
    io.stderr(`${JSON.stringify({ error: body })}\n`);
  } else if (failure.stack) {
    io.stderr(`backline: unexpected error: ${failure.stack}\n`);
  } else {
    io.stderr(`backline: ${failure.message}${failure.help ? ` (see \`${failure.help}\`)` : ""}\n`);
  }
  io.setExitCode(failure.status);
  return failure.status;
}

/** --json was asked for on this command line (also when parsing it failed). */
export function wantsJson(args: readonly string[]): boolean {
  const end = args.indexOf("--");
  return (end === -1 ? args : args.slice(0, end)).includes("--json");
}

const singular = (table: string) =>
  table
    .replace(/ies$/, "y")
    .replace(/(?<!s)s$/, "")
    .replaceAll("_", " ");

/**
 * A database refusal in words. The constraint and detail say which record and which value; the
 * SQL wording ("violates check constraint", "relation") stays out.
 */
export function describeDbError(e: DbError): { code: string; message: string } {
  const key = /^Key \((.+?)\)=\((.*)\)/.exec(e.detail ?? "");
  const thing = e.table ? singular(e.table) : "record";
  switch (e.sqlstate) {
    case "23505":
      return {
        code: "conflict",
        message: key ? `a ${thing} with ${key[1]} ${key[2]} exists already` : `that ${thing} exists already`,
      };
    case "23503": {
      const other = /table "(.+?)"/.exec(e.detail ?? "")?.[1];
      if (key && other && /is not present/.test(e.detail ?? "")) {
        return { code: "not_found", message: `no ${singular(other)} ${key[2]}` };
      }
      return { code: "conflict", message: `that ${thing} is still referred to by others` };
    }
    case "23502":
      return { code: "invalid_value", message: `a ${thing} needs ${e.column ?? "a value it was not given"}` };
    case "23514":
      return {
        code: "invalid_value",
        message: `a value breaks the rule ${e.constraint ?? "on it"}${e.table ? ` of ${e.table}` : ""}`,
      };
  }
  if (e.sqlstate.startsWith("22")) {
    // invalid input syntax for type uuid: "nope" → not a valid uuid: "nope"
    const m = /^invalid input syntax for type ([\w ]+): (.*)$/.exec(e.message);
    return { code: "invalid_value", message: m ? `not a valid ${m[1]}: ${m[2]}` : e.message };
  }
  // Backline's own rules (BL…, P0001 raised by its triggers) are written to be read as they are.
  return { code: mapDbError(e).code, message: e.message };
}
