import fs from "node:fs";
import pino from "pino";
import { SMTPServer } from "smtp-server";
import { hashPassword } from "../../src/auth/passwords.ts";
import { insertUser } from "../../src/auth/users.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import type { Db } from "../../src/db/db.ts";
import { openDatabase } from "../../src/db/open.ts";
import type { EngineKind } from "../../src/db/types.ts";
import { copyMigratedDatabase, createTestDb, TEST_ENCRYPTION_KEY, type TestDb } from "./db.ts";
import { freePort, type RunningServer, startServer, tempDir } from "./process.ts";

/**
 * The console's browser tests and benchmark talk to `npm start` as a user runs it: the real server
 * process (src/start/server.ts) on the embedded database in its own DATA_DIR, its worker running
 * the pipeline, its mail leaving by SMTP to a fake mail server here (the one true edge: with the
 * embedded database locked by the server, the mailbox can be read only that way).
 *
 * What a test needs in the database before the start (tenants, accounts, users, staff) is written
 * through the service functions in this process, before the server opens the directory.
 */

export interface Mail {
  to: string[];
  data: string;
}

export interface FakeSmtp {
  url: string;
  received: Mail[];
  close(): Promise<void>;
}

export async function fakeSmtp(): Promise<FakeSmtp> {
  const received: Mail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        received.push({ to: session.envelope.rcptTo.map((r) => r.address), data: decodeMail(chunks) });
        callback();
      });
    },
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The raw message with quoted-printable soft breaks and escapes undone (links and codes read whole). */
function decodeMail(chunks: Buffer[]): string {
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/=\r?\n/g, "")
    .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/** Waits for the newest mail to `to` whose text matches `pattern`, newer than `after` mails. */
export async function waitForMail(
  smtp: FakeSmtp,
  to: string,
  pattern: RegExp,
  options: { after?: number; timeoutMs?: number } = {},
): Promise<{ mail: Mail; match: RegExpMatchArray }> {
  const deadline = Date.now() + (options.timeoutMs ?? 15_000);
  for (;;) {
    const mails = smtp.received.slice(options.after ?? 0);
    for (let i = mails.length - 1; i >= 0; i--) {
      const mail = mails[i];
      if (!mail?.to.includes(to)) continue;
      const match = mail.data.match(pattern);
      if (match) return { mail, match };
    }
    if (Date.now() > deadline)
      throw new Error(
        `no mail to ${to} matching ${pattern} within the time; received: ${smtp.received
          .map((m) => `${m.to.join(",")}: ${m.data.slice(0, 300)}`)
          .join("\n---\n")}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface ConsoleStack {
  url: string;
  dataDir: string;
  smtp: FakeSmtp;
  server: RunningServer;
  config: Config;
  /** Stops the server (SIGTERM, then SIGKILL if it hangs), the mail server, and removes DATA_DIR. */
  stop(): Promise<void>;
}

/**
 * Starts the server on a fresh database of `engine`, seeded by `seed` first: on the embedded
 * database (the default `npm start` runs on) a new DATA_DIR, migrated and seeded in this process
 * and closed before the server opens it; on PostgreSQL a new test database (test/support/db.ts)
 * the server reaches as the `authenticator` login role. `env` adds server settings.
 */
export async function startConsoleStack<T>(
  engine: EngineKind,
  seed: (db: Db, config: Config) => Promise<T>,
  env: Record<string, string> = {},
): Promise<{ stack: ConsoleStack; seeded: T }> {
  const dataDir = tempDir("backline-console-");
  // The port is chosen first, so the seed knows the server's URL (config.publicUrl): a tenant's
  // site_url, where its mailed sign-in links may lead.
  const base: Record<string, string> = {
    DATA_DIR: dataDir,
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    PORT: String(await freePort()),
    HOST: "127.0.0.1",
  };
  base.PUBLIC_URL = `http://127.0.0.1:${base.PORT}`;
  let pg: TestDb | undefined;
  let seeded: T;
  try {
    if (engine === "postgres") {
      pg = await createTestDb("postgres");
      base.DATABASE_URL = pg.url ?? "";
      const config = loadConfig({ ...base, LOG_LEVEL: "warn" });
      seeded = await seed(pg.db, config);
    } else {
      const config = loadConfig({ ...base, LOG_LEVEL: "warn" });
      // The suite's migrated template, copied into DATA_DIR: the same schema as migrating from
      // nothing, without spending the time again for every file.
      if (config.database.engine === "pglite") await copyMigratedDatabase(dataDir);
      const db = await openDatabase(config, { migrate: true, logger: pino({ level: "warn" }) });
      try {
        seeded = await seed(db, config);
      } finally {
        await db.close();
      }
    }
  } catch (e) {
    // Nothing left behind when the database or the seed fails (bench/smoke.ts checks).
    await pg?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    throw e;
  }
  const config = loadConfig({ ...base, LOG_LEVEL: "warn" });
  const smtp = await fakeSmtp();
  const cleanup = async () => {
    await smtp.close();
    await pg?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  let server: RunningServer;
  try {
    server = await startServer({ ...base, SMTP_URL: smtp.url, ...env }, 90_000);
  } catch (e) {
    await cleanup();
    throw e;
  }
  const stack: ConsoleStack = {
    url: server.url,
    dataDir,
    smtp,
    server,
    config,
    async stop() {
      const killer = setTimeout(() => server.child.kill("SIGKILL"), 20_000);
      await server.stop("SIGTERM");
      clearTimeout(killer);
      await cleanup();
    },
  };
  return { stack, seeded };
}

/**
 * A user with a password whose address is proven (as after using a mailed link): staff rows count
 * only for a proven address (docs/console.md, "Staff roles").
 */
export async function seedPasswordUser(
  db: Db,
  tenantId: string,
  email: string,
  password: string,
): Promise<{ id: string; email: string }> {
  const passwordHash = await hashPassword(password);
  return db.asService(async (tx) => {
    const user = await insertUser(tx, { tenantId, email, passwordHash, userMetadata: {}, confirmed: true });
    await tx.query("update internal.users set email_proven_at = now() where id = $1", [user.id]);
    return { id: user.id, email: user.email ?? email };
  });
}
