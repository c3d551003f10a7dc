import path from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import type { Config } from "../config.ts";
import type { Db } from "../db/db.ts";
import type { Tenant } from "../tenancy/tenants.ts";

/**
 * What every command group shares: where its output goes, how it opens the database, and how it
 * prints a result (a text table or message, or JSON with --json). A group registers its commands
 * with `register(program, cli)` and touches nothing else, so it runs the same in the `backline`
 * process and, later, inside a running server.
 */

/** Where a command's output goes: this process's stdout/stderr, or a client's over a socket. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** stderr is a terminal (progress bars redraw a line there). */
  readonly stderrIsTTY: boolean;
  /** The directory relative file arguments are read from and written to. */
  readonly cwd: string;
  setExitCode(code: number): void;
}

export const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  get stderrIsTTY() {
    return process.stderr.isTTY === true;
  },
  get cwd() {
    return process.cwd();
  },
  setExitCode: (code) => {
    process.exitCode = code;
  },
};

/** How a command gets the database: opened for this command (and closed after), or the server's own. */
export type DbOpener = <T>(fn: (db: Db, config: Config) => Promise<T>) => Promise<T>;

/**
 * A command that could not do what was asked (a missing record, a refused change): one line on
 * stderr, exit status 1. `code` is the machine-readable reason --json prints.
 */
export class CliError extends Error {
  readonly code: string;

  constructor(message: string, code = "refused") {
    super(message);
    this.name = "CliError";
    this.code = code;
  }
}

/** The command was called wrongly (a missing or conflicting option, a malformed value): exit status 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, "usage");
    this.name = "UsageError";
  }
}

/**
 * Thrown by the `backline` process's database opener when a running server holds the embedded
 * data directory and listens for CLI commands: the command line is sent there instead (socket.ts).
 */
export class RunOnServer extends Error {
  readonly socket: string;

  constructor(socket: string) {
    super(`run on the server listening on ${socket}`);
    this.socket = socket;
  }
}

/** "no <what> <ref>": the record named does not exist. */
export function notFound(what: string, ref: string): CliError {
  return new CliError(`no ${what} ${ref}`, "not_found");
}

export interface GlobalOptions {
  json?: boolean;
}

/** The one handle a command group gets. */
export class Cli {
  readonly program: Command;
  readonly io: CliIo;
  readonly withDb: DbOpener;

  constructor(program: Command, io: CliIo, withDb: DbOpener) {
    this.program = program;
    this.io = io;
    this.withDb = withDb;
  }

  /** --json was given. */
  get json(): boolean {
    return this.program.opts<GlobalOptions>().json === true;
  }

  /** Prints a result: `human` as text, or `data` as indented JSON with --json. */
  output(human: string, data: unknown): void {
    this.io.stdout(this.json ? `${JSON.stringify(data, null, 2)}\n` : `${human}\n`);
  }

  /** A file argument, relative to the caller's working directory (as given when that is this process's). */
  path(file: string): string {
    return path.isAbsolute(file) || this.io.cwd === process.cwd() ? file : path.resolve(this.io.cwd, file);
  }

  /** The tenant with this id or slug, or a CliError naming it. */
  async requireTenant(db: Db, ref: string): Promise<Tenant> {
    const { findTenant } = await import("../tenancy/tenants.ts");
    const tenant = await db.asService((tx) => findTenant(tx, ref), { readOnly: true });
    if (!tenant) throw notFound("tenant", ref);
    return tenant;
  }
}

/** Rows as an aligned text table with a header line; "(none)" when empty. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cell = (v: unknown) => (v instanceof Date ? v.toISOString() : String(v ?? ""));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join("\n");
}

/** An option parser for a whole number in [min, max]. */
export function integer(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected ${min} to ${max}`);
    return n;
  };
}

/** An option parser for one of `values`. */
export function choice<T extends string>(values: readonly T[]) {
  return (value: string): T => {
    if (!(values as readonly string[]).includes(value)) {
      throw new InvalidArgumentError(`expected one of ${values.join(", ")}`);
    }
    return value as T;
  };
}

/**
 * Rethrows an error of one of `types` (a refusal the user can act on) as a CliError with its
 * message and, when it has one, its code (not_found, invalid_state, ...).
 */
export function refusal(...types: (abstract new (...args: never[]) => Error)[]) {
  return (error: unknown): never => {
    if (!types.some((type) => error instanceof type)) throw error;
    const code = (error as { code?: unknown }).code;
    throw new CliError((error as Error).message, typeof code === "string" ? code : "refused");
  };
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
