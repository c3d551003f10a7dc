import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * The server's master key and what it seals (docs/security.md, "Where secrets live"): webhook
 * signing secrets, tenants' JWT signing secrets, store credentials. AES-256-GCM with a fresh
 * 12-byte nonce each time, as `v2.<key id>.<nonce>.<tag>.<ciphertext>` (base64); the key id (8 hex
 * digits derived from the key, which it does not reveal) says which key sealed a value, so that
 * during a rotation the previous keys still open what they sealed and the rotation knows what is
 * left to re-seal. `v1.<nonce>.<tag>.<ciphertext>` (before key ids) is still opened, by trying
 * each key.
 */
export class SecretBox {
  /** The id of the key new values are sealed with. */
  readonly keyId: string;
  private readonly key: Buffer;
  private readonly keys: Map<string, Buffer>;

  /** `key` seals and opens; each of `previous` only opens (a rotation in progress). */
  constructor(key: Buffer, previous: readonly Buffer[] = []) {
    for (const k of [key, ...previous]) {
      if (k.length !== 32) throw new Error("the encryption key must be 32 bytes");
    }
    this.key = key;
    this.keyId = keyIdOf(key);
    this.keys = new Map([key, ...previous].map((k) => [keyIdOf(k), k]));
  }

  /** The ids of every key this box opens with, the current one first. */
  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  encrypt(plain: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return ["v2", this.keyId, ...[nonce, cipher.getAuthTag(), body].map((p) => p.toString("base64"))].join(
      ".",
    );
  }

  decrypt(sealed: string): string {
    const parts = sealed.split(".");
    if (parts[0] === "v2" && parts.length === 5) {
      const [, id, nonce, tag, body] = parts as [string, string, string, string, string];
      const key = this.keys.get(id);
      if (!key) throw new SecretKeyError(id);
      return open(key, nonce, tag, body);
    }
    if (parts[0] === "v1" && parts.length === 4) {
      const [, nonce, tag, body] = parts as [string, string, string, string];
      for (const key of this.keys.values()) {
        try {
          return open(key, nonce, tag, body);
        } catch {
          // Not this key: try the next.
        }
      }
      throw new SecretKeyError(undefined);
    }
    throw new Error("not a sealed secret");
  }

  /** Whether `sealed` is sealed with the current key (else a rotation seals it again). */
  isCurrent(sealed: string): boolean {
    return sealed.startsWith(`v2.${this.keyId}.`);
  }

  /** The id of the key that sealed `sealed`, if it says (v1 values do not). */
  static keyIdOf(sealed: string): string | undefined {
    const parts = sealed.split(".");
    return parts[0] === "v2" && parts.length === 5 ? parts[1] : undefined;
  }

  /**
   * A key for another purpose (e.g. signing upload tokens), derived from the current key with HKDF
   * so that one secret setting serves every purpose and no two purposes share a key.
   */
  derive(purpose: string): Buffer {
    return Buffer.from(hkdfSync("sha256", this.key, Buffer.alloc(0), `backline ${purpose}`, 32));
  }
}

/** A sealed value that none of the keys opens: the server runs with another ENCRYPTION_KEY than sealed it. */
export class SecretKeyError extends Error {
  readonly keyId: string | undefined;

  /** `where`: the sealed value's table, row and column, when known. */
  constructor(keyId: string | undefined, where?: string) {
    super(
      `${where ? `${where}: ` : ""}${
        keyId
          ? `a secret is sealed with key ${keyId}, which this server does not have (set ENCRYPTION_KEY_PREVIOUS to it while rotating)`
          : "a secret does not open with any of this server's keys (is ENCRYPTION_KEY the one it was sealed with?)"
      }`,
    );
    this.name = "SecretKeyError";
    this.keyId = keyId;
  }
}

function open(key: Buffer, nonce: string, tag: string, body: string): string {
  const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(nonce, "base64"));
  decipher.setAuthTag(Buffer.from(tag, "base64"));
  return Buffer.concat([decipher.update(Buffer.from(body, "base64")), decipher.final()]).toString("utf8");
}

export function keyIdOf(key: Buffer): string {
  return Buffer.from(hkdfSync("sha256", key, Buffer.alloc(0), "backline key id", 4)).toString("hex");
}

/** Where the embedded default keeps its key, and a rotation's next key until it is complete. */
export function keyFiles(dataDir: string): { current: string; next: string } {
  return { current: path.join(dataDir, "encryption.key"), next: path.join(dataDir, "encryption.key.next") };
}

/**
 * Reads a key file, making it first (32 random bytes, base64, mode 0600 whatever the umask) when
 * `create` and it is missing. A key file others may read is narrowed to 0600.
 */
export function readKeyFile(file: string, create: boolean): Buffer | undefined {
  if (create) {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    if (!fs.existsSync(file)) {
      // Written whole under a private name, then linked into place: two processes starting at
      // once never read a half-written key, and the one whose link fails (EEXIST) reads the other's.
      const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
      const fd = fs.openSync(tmp, "wx", 0o600);
      try {
        // The mode given to open() is narrowed by the umask; fchmod makes it exactly 0600.
        fs.fchmodSync(fd, 0o600);
        fs.writeSync(fd, `${randomBytes(32).toString("base64")}\n`);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      try {
        fs.linkSync(tmp, file);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      } finally {
        fs.rmSync(tmp, { force: true });
      }
    }
  }
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && !create) return undefined;
    throw error;
  }
  if ((fs.statSync(file).mode & 0o077) !== 0) fs.chmodSync(file, 0o600);
  const key = Buffer.from(text.trim(), "base64");
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte key in base64`);
  return key;
}

export interface KeySettings {
  encryptionKey: string | undefined;
  /** Keys that still open what they sealed, during a rotation (ENCRYPTION_KEY_PREVIOUS). */
  encryptionKeyPrevious?: readonly string[] | undefined;
  dataDir: string;
}

/**
 * The server's master key: ENCRYPTION_KEY when set (production: the same in every process), else
 * `DATA_DIR/encryption.key`, made on first use with mode 0600 (one machine, development). Keys
 * in ENCRYPTION_KEY_PREVIOUS, and a rotation's `encryption.key.next` left by an interrupted
 * `backline secrets rotate-master-key`, still open what they sealed.
 */
export function loadSecretBox(config: KeySettings): SecretBox {
  const previous = (config.encryptionKeyPrevious ?? []).map((k) => Buffer.from(k, "base64"));
  if (config.encryptionKey) return new SecretBox(Buffer.from(config.encryptionKey, "base64"), previous);
  const files = keyFiles(config.dataDir);
  const current = readKeyFile(files.current, true) as Buffer;
  const next = readKeyFile(files.next, false);
  return new SecretBox(current, next ? [...previous, next] : previous);
}
