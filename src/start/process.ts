import pino, { type DestinationStream, type Logger } from "pino";
import { type Config, ConfigError, loadConfig } from "../config.ts";
import { asDbError, mapDbError } from "../db/errors.ts";
import { MigrationError } from "../db/migrate.ts";
import { DatabaseUnavailableError } from "../db/open.ts";
import { DataDirInUseError } from "../db/pglite.ts";
import { loggerOptions } from "../http/redact.ts";
import { SecretKeyError } from "../secrets/box.ts";

/** What every entry point shares: reading the config, the logger, and dying with one clear line. */

const EXPECTED = [ConfigError, DatabaseUnavailableError, MigrationError, DataDirInUseError, SecretKeyError];

/** A one-line explanation for errors a user can fix; undefined for bugs. */
export function explain(error: unknown): string | undefined {
  if (EXPECTED.some((type) => error instanceof type)) return (error as Error).message;
  // A request the database refused (a duplicate slug, a bad value): its message says what.
  const db = asDbError(error);
  if (db && mapDbError(db).status < 500) return [db.message, db.detail].filter(Boolean).join(": ");
  const e = error as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.code === "EADDRINUSE")
    return `Port ${e.port ?? ""} on ${e.address ?? "this host"} is already in use: set PORT to another port.`;
  if (e?.code === "EACCES" && e.syscall === "listen")
    return `Not allowed to listen on port ${e.port ?? ""}: choose a PORT above 1023.`;
  if (e?.code === "EACCES" || e?.code === "EROFS")
    return `Cannot write to ${e.path ?? "the data directory"}: set DATA_DIR to a writable folder.`;
  return undefined;
}

/** Prints `backline: <reason>` (the stack only for unexpected errors) and exits 1. */
export function die(error: unknown): never {
  const known = explain(error);
  if (known) {
    process.stderr.write(`backline: ${known}\n`);
  } else {
    process.stderr.write(
      `backline: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
  }
  process.exit(1);
}

export function loadConfigOrDie(): Config {
  try {
    return loadConfig(process.env);
  } catch (error) {
    die(error);
  }
}

/**
 * Settings that lower a protection, said at start so an operator who left one on sees it
 * (docs/security.md). One line each, at warn.
 */
export function unsafeSettings(config: Pick<Config, "webhookAllowPrivate" | "oidcAllowPrivate">): string[] {
  const warnings: string[] = [];
  if (config.webhookAllowPrivate) {
    warnings.push(
      "WEBHOOK_ALLOW_PRIVATE is on: webhook endpoints may be http:// and on loopback, private and link-local addresses (this server, its network, cloud metadata). Any API key holder can point them there. For development only.",
    );
  }
  if (config.oidcAllowPrivate) {
    warnings.push(
      "OIDC_ALLOW_PRIVATE is on: a tenant's OpenID Connect providers may be http:// and on loopback, private and link-local addresses (this server, its network, cloud metadata). Any tenant admin can point them there. For development only.",
    );
  }
  return warnings;
}

export function warnUnsafeSettings(
  config: Pick<Config, "webhookAllowPrivate" | "oidcAllowPrivate">,
  logger: Pick<Logger, "warn">,
): void {
  for (const warning of unsafeSettings(config)) logger.warn({ unsafe_setting: true }, warning);
}

/**
 * The process's logger: JSON lines on stdout (or `destination`), with secrets redacted from
 * requests, errors, fields and messages before anything is written (src/http/redact.ts).
 */
export function createLogger(config: Pick<Config, "logLevel">, destination?: DestinationStream): Logger {
  const options = loggerOptions({ level: config.logLevel, base: { service: "backline" } });
  return destination ? pino(options, destination) : pino(options);
}
