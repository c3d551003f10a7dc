import { createHash } from "node:crypto";
import path from "node:path";
import type { Client, SFTPWrapper } from "ssh2";
import { z } from "zod";
import { DeliveryConfigError } from "../stores.ts";

/**
 * SFTP, spoken directly with the pure-JavaScript `ssh2` client (docs/ddex.md, "SFTP"): the
 * transport most stores take DDEX batches on, and where they leave their acknowledgements and
 * sales reports. The server must show the host key whose SHA-256 fingerprint the store's settings
 * name (no trust on first use); the password, private key and passphrase are sealed at rest with
 * the other store credentials (their names say so: docs/security.md).
 */
export const SftpSettings = z
  .object({
    type: z.literal("sftp"),
    host: z.string().trim().min(1).max(255),
    port: z.number().int().min(1).max(65535).default(22),
    username: z.string().min(1).max(200),
    password: z.string().min(1).optional(),
    private_key: z.string().min(1).optional(),
    passphrase: z.string().min(1).optional(),
    host_key_sha256: z
      .string()
      .trim()
      .regex(
        /^SHA256:[A-Za-z0-9+/]{43}=?$/,
        "the server's host key fingerprint as ssh-keygen -lf prints it: SHA256:…",
      ),
    /** The folder batches go into (relative to the login folder unless it starts with /). */
    path: z.string().min(1).max(500).default("."),
    /** Connections at once to this server from one Backline process. */
    max_connections: z.number().int().min(1).max(32).default(2),
    ready_timeout_ms: z.number().int().min(1000).max(120_000).default(20_000),
  })
  .strict()
  .refine((s) => s.password !== undefined || s.private_key !== undefined, {
    message: "an SFTP destination needs a password or a private_key",
    path: ["password"],
  });
export type SftpSettings = z.infer<typeof SftpSettings>;

/** OpenSSH's form of a host key's fingerprint: SHA256: and the unpadded base64 of the key's digest. */
export function fingerprintOf(key: Buffer): string {
  return `SHA256:${createHash("sha256").update(key).digest("base64").replace(/=+$/, "")}`;
}

/** A connection refused for its settings (host key, credentials): the operator must act, not retried. */
export class SftpConfigError extends DeliveryConfigError {}

// Connections at once per store (or, without one, per server account), in this process (max_connections).
const slots = new Map<string, { used: number; waiting: (() => void)[] }>();

async function acquire(key: string, max: number, signal?: AbortSignal): Promise<() => void> {
  let s = slots.get(key);
  if (!s) {
    s = { used: 0, waiting: [] };
    slots.set(key, s);
  }
  const state = s;
  while (state.used >= max) {
    signal?.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal?.reason ?? new Error("aborted"));
      signal?.addEventListener("abort", onAbort, { once: true });
      state.waiting.push(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }
  state.used++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    state.used--;
    state.waiting.shift()?.();
  };
}

/** How many connections under a limit key (a store's code) are open now (for tests and benches). */
export function openConnections(limitKey: string): number {
  return slots.get(limitKey)?.used ?? 0;
}

const call = <T>(f: (cb: (err: Error | undefined | null, value?: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => f((err, value) => (err ? reject(err) : resolve(value as T))));

/** SFTP status 2: no such file. */
const missing = (e: unknown) => (e as { code?: unknown }).code === 2;

export interface SftpEntry {
  name: string;
  size: number;
  isDirectory: boolean;
}

/** One open SFTP connection, inside the store's connection limit. close() always. */
export class SftpSession {
  readonly root: string;
  #client: Client;
  #sftp: SFTPWrapper;
  #release: () => void;
  #closed: Promise<never>;

  constructor(client: Client, sftp: SFTPWrapper, root: string, release: () => void, label: string) {
    this.#client = client;
    this.#sftp = sftp;
    this.root = root;
    this.#release = release;
    // A connection that ends under an operation fails it (ssh2 may never call it back).
    this.#closed = new Promise<never>((_, reject) => {
      const lost = () => reject(new Error(`SFTP ${label}: the connection was lost`));
      client.once("close", lost);
      client.once("end", lost);
    });
    this.#closed.catch(() => {});
  }

  #call<T>(f: (cb: (err: Error | undefined | null, value?: T) => void) => void): Promise<T> {
    return Promise.race([call(f), this.#closed]);
  }

  /** A path under the settings' folder. */
  at(...parts: string[]): string {
    return path.posix.join(this.root, ...parts);
  }

  async size(file: string): Promise<number | undefined> {
    try {
      const st = await this.#call<{ size: number; isDirectory(): boolean }>((cb) =>
        this.#sftp.stat(file, cb),
      );
      return st.isDirectory() ? undefined : st.size;
    } catch (e) {
      if (missing(e)) return undefined;
      throw e;
    }
  }

  async exists(p: string): Promise<boolean> {
    try {
      await this.#call((cb) => this.#sftp.stat(p, cb));
      return true;
    } catch (e) {
      if (missing(e)) return false;
      throw e;
    }
  }

  async mkdirp(dir: string): Promise<void> {
    const parts = dir.split("/");
    let cur = dir.startsWith("/") ? "/" : "";
    for (const part of parts) {
      if (part === "" || part === ".") continue;
      cur = cur === "" ? part : path.posix.join(cur, part);
      if (await this.exists(cur)) continue;
      await this.#call((cb) => this.#sftp.mkdir(cur, cb)).catch(async (e: unknown) => {
        // Made by someone else meanwhile.
        if (!(await this.exists(cur))) throw e;
      });
    }
  }

  async remove(file: string): Promise<void> {
    await this.#call((cb) => this.#sftp.unlink(file, cb)).catch((e: unknown) => {
      if (!missing(e)) throw e;
    });
  }

  /** Renames over an existing file (SFTP v3's RENAME refuses to: the target goes first). */
  async move(from: string, to: string): Promise<void> {
    await this.remove(to);
    await this.#call((cb) => this.#sftp.rename(from, to, cb));
  }

  /**
   * Writes a file under a temporary name (`.name.part` beside it) and renames it into place when
   * complete, so a reader never sees half a file under its real name.
   */
  async put(file: string, source: { file: string } | { data: Buffer }): Promise<void> {
    const temp = path.posix.join(path.posix.dirname(file), `.${path.posix.basename(file)}.part`);
    if ("file" in source) await this.#call((cb) => this.#sftp.fastPut(source.file, temp, cb));
    else await this.#call((cb) => this.#sftp.writeFile(temp, source.data, cb));
    await this.move(temp, file);
  }

  async list(dir: string): Promise<SftpEntry[]> {
    const entries = await this.#call<{ filename: string; attrs: { size: number; isDirectory(): boolean } }[]>(
      (cb) => this.#sftp.readdir(dir, cb),
    );
    return entries
      .filter((e) => e.filename !== "." && e.filename !== "..")
      .map((e) => ({ name: e.filename, size: e.attrs.size, isDirectory: e.attrs.isDirectory() }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async read(file: string): Promise<Buffer> {
    return this.#call<Buffer>((cb) => this.#sftp.readFile(file, cb));
  }

  /** Downloads a file to a local path (large reports: not held in memory). */
  async download(file: string, local: string): Promise<void> {
    await this.#call((cb) => this.#sftp.fastGet(file, local, cb));
  }

  /** Ends the connection; its slot is free once the socket has closed (or after 2 s). */
  close(): void {
    const release = this.#release;
    const timer = setTimeout(release, 2000);
    this.#client.once("close", () => {
      clearTimeout(timer);
      release();
    });
    this.#client.end();
  }
}

/**
 * Connects and opens SFTP, waiting for a free connection slot first. Throws SftpConfigError when
 * the host key is not the configured one (naming the key seen) or the server refuses the
 * credentials; any other failure (refused, timed out, cut) is a plain Error, worth a retry.
 */
export async function openSftp(
  settings: SftpSettings,
  signal?: AbortSignal,
  limitKey?: string,
): Promise<SftpSession> {
  // ssh2 is loaded by the first connection, not by every process that imports this file.
  const { Client } = await import("ssh2");
  const key = limitKey ?? `${settings.username}@${settings.host}:${settings.port}`;
  const release = await acquire(key, settings.max_connections, signal);
  const client = new Client();
  let seen: string | undefined;
  const want = settings.host_key_sha256.replace(/=$/, "");
  try {
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        client.end();
        reject(signal?.reason ?? new Error("aborted"));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      client
        .once("ready", () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        })
        .once("error", (error: Error & { level?: string }) => {
          signal?.removeEventListener("abort", onAbort);
          if (seen !== undefined && seen !== want) {
            reject(
              new SftpConfigError(
                `the SFTP server ${settings.host}:${settings.port} presented the host key ${seen}, not the configured ${settings.host_key_sha256}: ` +
                  "confirm the fingerprint with the store before changing ddex.destination.host_key_sha256",
              ),
            );
          } else if (error.level === "client-authentication") {
            reject(
              new SftpConfigError(
                `the SFTP server ${settings.host}:${settings.port} refused ${settings.username}'s ${
                  settings.private_key ? "private key" : "password"
                }`,
              ),
            );
          } else {
            reject(new Error(`SFTP ${settings.host}:${settings.port}: ${error.message}`));
          }
        });
      client.connect({
        host: settings.host,
        port: settings.port,
        username: settings.username,
        ...(settings.private_key ? { privateKey: settings.private_key } : {}),
        ...(settings.passphrase ? { passphrase: settings.passphrase } : {}),
        ...(settings.password ? { password: settings.password } : {}),
        readyTimeout: settings.ready_timeout_ms,
        keepaliveInterval: 10_000,
        hostVerifier: (hostKey: Buffer) => {
          seen = fingerprintOf(hostKey);
          return seen === want;
        },
      });
    });
    const sftp = await call<SFTPWrapper>((cb) => client.sftp(cb));
    // A connection cut later fails the operation under way; no unhandled 'error' event.
    client.on("error", () => {});
    const session = new SftpSession(
      client,
      sftp,
      settings.path,
      release,
      `${settings.host}:${settings.port}`,
    );
    signal?.addEventListener("abort", () => client.end(), { once: true });
    return session;
  } catch (error) {
    client.end();
    release();
    throw error;
  }
}
