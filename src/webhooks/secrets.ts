import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * Webhook signing secrets (docs/webhooks.md): `whsec_` + base64 of 32 random bytes, as Standard
 * Webhooks has them; shown once, at registration or rotation, and stored only encrypted
 * (AES-256-GCM, a fresh 12-byte nonce each time, as `v1.<nonce>.<tag>.<ciphertext>` in base64).
 */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error("the encryption key must be 32 bytes");
    this.key = key;
  }

  encrypt(plain: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return ["v1", nonce, cipher.getAuthTag(), body]
      .map((p) => (typeof p === "string" ? p : p.toString("base64")))
      .join(".");
  }

  /**
   * A key for another purpose (e.g. signing upload tokens), derived from this one with HKDF so
   * that one secret setting serves every purpose and no two purposes share a key.
   */
  derive(purpose: string): Buffer {
    return Buffer.from(hkdfSync("sha256", this.key, Buffer.alloc(0), `backline ${purpose}`, 32));
  }

  decrypt(sealed: string): string {
    const [version, nonce, tag, body] = sealed.split(".");
    if (version !== "v1" || !nonce || !tag || body === undefined) throw new Error("not a sealed secret");
    const decipher = createDecipheriv("aes-256-gcm", this.key, Buffer.from(nonce, "base64"));
    decipher.setAuthTag(Buffer.from(tag, "base64"));
    return Buffer.concat([decipher.update(Buffer.from(body, "base64")), decipher.final()]).toString("utf8");
  }
}

/**
 * The server's encryption key: ENCRYPTION_KEY when set (production: the same in every process),
 * else `DATA_DIR/encryption.key`, made on first use with mode 0600 (one machine, development).
 */
export function loadSecretBox(config: { encryptionKey: string | undefined; dataDir: string }): SecretBox {
  if (config.encryptionKey) return new SecretBox(Buffer.from(config.encryptionKey, "base64"));
  const file = path.join(config.dataDir, "encryption.key");
  fs.mkdirSync(config.dataDir, { recursive: true });
  try {
    fs.writeFileSync(file, `${randomBytes(32).toString("base64")}\n`, { flag: "wx", mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  return new SecretBox(Buffer.from(fs.readFileSync(file, "utf8").trim(), "base64"));
}
