import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Signed storage tokens (docs/uploads.md): what the local driver's upload and download URLs
 * carry instead of a login. `<payload>.<signature>`, both base64url: the payload is JSON, the
 * signature HMAC-SHA256 of the payload's text under a key derived from ENCRYPTION_KEY. Whoever holds
 * the token may do exactly what it says until it expires: upload one object of at most `max`
 * bytes for one asset, or download one version of one object (the asset it was signed for).
 */
export interface UploadGrant {
  use: "upload";
  /** The media_assets row the upload fills. */
  asset: string;
  account: string;
  /** The object key the bytes go to. */
  key: string;
  max: number;
  /** The content type the client must send (absent: any; the bytes are inspected anyway). */
  type?: string;
  /** Expiry, seconds since the epoch. */
  exp: number;
}

export interface DownloadGrant {
  use: "download";
  key: string;
  /**
   * The media_assets row whose bytes the URL was signed for: a replacement is a new asset, so a URL
   * signed before it answers 410 object_replaced instead of serving the new file.
   */
  asset: string;
  exp: number;
}

/**
 * An object of a tenant's own bucket (/storage/v1): read it (`object-read`) or upload it
 * (`object-upload`, as `owner`, replacing an existing one only with `upsert`). `key` is
 * `<bucket>/<name>`; the object is looked up by tenant, bucket and name when the URL is used.
 */
export interface ObjectGrant {
  use: "object-read" | "object-upload";
  key: string;
  tenant: string;
  bucket: string;
  name: string;
  owner?: string;
  upsert?: boolean;
  /** A read's image transform (./transform.ts), fixed when the URL was signed. */
  transform?: Record<string, unknown>;
  exp: number;
}

export type Grant = UploadGrant | DownloadGrant | ObjectGrant;

export type TokenFailure = "token_malformed" | "token_invalid" | "token_expired";

export class TokenError extends Error {
  readonly code: TokenFailure;

  constructor(code: TokenFailure, message: string) {
    super(message);
    this.name = "TokenError";
    this.code = code;
  }
}

export class TokenSigner {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length < 32) throw new Error("a token key has at least 32 bytes");
    this.key = key;
  }

  sign(grant: Grant): string {
    const payload = Buffer.from(JSON.stringify(grant)).toString("base64url");
    return `${payload}.${this.mac(payload).toString("base64url")}`;
  }

  /** The grant a token carries, if its signature is ours and it has not expired. */
  verify(token: string, now: Date = new Date()): Grant {
    const parts = token.split(".");
    if (parts.length !== 2 || !parts[0] || !parts[1] || token.length > 4096) {
      throw new TokenError("token_malformed", "The token is not a Backline storage token.");
    }
    const [payload, signature] = parts as [string, string];
    const given = Buffer.from(signature, "base64url");
    const expected = this.mac(payload);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new TokenError(
        "token_invalid",
        "The token's signature does not match: it was changed or not issued here.",
      );
    }
    let grant: Grant;
    try {
      grant = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Grant;
    } catch {
      throw new TokenError("token_malformed", "The token's payload is not readable.");
    }
    if (typeof grant?.exp !== "number" || typeof grant.key !== "string") {
      throw new TokenError("token_malformed", "The token's payload is incomplete.");
    }
    if (grant.exp * 1000 <= now.getTime()) {
      throw new TokenError(
        "token_expired",
        `The URL expired at ${new Date(grant.exp * 1000).toISOString()}: ask for a new one.`,
      );
    }
    return grant;
  }

  private mac(payload: string): Buffer {
    return createHmac("sha256", this.key).update(payload).digest();
  }
}
