import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from "node:crypto";
import { SignJWT } from "jose";

/**
 * Access tokens (HS256 JWTs signed with the tenant's secret, claims as GoTrue issues them plus
 * tenant_id), refresh tokens and one-time codes. Only hashes of refresh tokens and codes are stored.
 */

export interface AccessTokenInput {
  secret: string;
  issuer: string;
  expiresIn: number;
  tenantId: string;
  user: {
    id: string;
    email: string | null;
    phone: string | null;
    app_metadata: Record<string, unknown>;
    user_metadata: Record<string, unknown>;
    is_anonymous: boolean;
  };
  sessionId: string;
  aal: string;
  amr: unknown[];
}

export async function signAccessToken(
  input: AccessTokenInput,
): Promise<{ token: string; expiresAt: number }> {
  const now = Math.floor(Date.now() / 1000);
  const expiresAt = now + input.expiresIn;
  const token = await new SignJWT({
    aud: "authenticated",
    email: input.user.email ?? "",
    phone: input.user.phone ?? "",
    app_metadata: input.user.app_metadata,
    user_metadata: input.user.user_metadata,
    role: "authenticated",
    aal: input.aal,
    amr: input.amr,
    session_id: input.sessionId,
    is_anonymous: input.user.is_anonymous,
    tenant_id: input.tenantId,
  })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(input.user.id)
    .setIssuer(input.issuer)
    .setIssuedAt(now)
    .setExpirationTime(expiresAt)
    .sign(new TextEncoder().encode(input.secret));
  return { token, expiresAt };
}

export type VerifyFailure = "malformed" | "bad_signature" | "expired";

export class TokenError extends Error {
  readonly reason: VerifyFailure;
  constructor(reason: VerifyFailure, message: string) {
    super(message);
    this.name = "TokenError";
    this.reason = reason;
  }
}

/**
 * Verifies an HS256 token with `secret`; throws TokenError saying why it is refused. Done with
 * node:crypto's HMAC, synchronously: it runs on every request, and WebCrypto's asynchronous path
 * cost a measurable share of a request (bench/README.md). Only HS256 is accepted, whatever the
 * header says; the signature is compared in constant time; exp and nbf are checked.
 */
export async function verifyToken(
  token: string,
  secret: string,
  now: number = Date.now(),
): Promise<Record<string, unknown>> {
  const parts = token.split(".");
  if (parts.length !== 3)
    throw new TokenError("malformed", "JWT is malformed or uses an unsupported algorithm");
  const [h, p, sig] = parts as [string, string, string];
  let header: unknown;
  let payload: unknown;
  try {
    header = JSON.parse(Buffer.from(h, "base64url").toString("utf8"));
    payload = JSON.parse(Buffer.from(p, "base64url").toString("utf8"));
  } catch {
    throw new TokenError("malformed", "JWT is malformed or uses an unsupported algorithm");
  }
  if (typeof header !== "object" || header === null || (header as { alg?: unknown }).alg !== "HS256") {
    throw new TokenError("malformed", "JWT is malformed or uses an unsupported algorithm");
  }
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    throw new TokenError("malformed", "JWT is malformed or uses an unsupported algorithm");
  }
  const expected = createHmac("sha256", secret).update(`${h}.${p}`).digest();
  const given = Buffer.from(sig, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new TokenError("bad_signature", "JWT signature does not match");
  }
  const claims = payload as Record<string, unknown>;
  const seconds = Math.floor(now / 1000);
  if (claims.exp !== undefined && (typeof claims.exp !== "number" || claims.exp <= seconds)) {
    throw new TokenError("expired", "JWT expired");
  }
  if (claims.nbf !== undefined && (typeof claims.nbf !== "number" || claims.nbf > seconds)) {
    throw new TokenError("malformed", "JWT is not valid yet");
  }
  return claims;
}

/** Reads a JWT's payload without verifying it (only to find which tenant's secret verifies it). */
export function peekClaims(token: string): Record<string, unknown> | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts[1]) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"));
    return typeof payload === "object" && payload !== null && !Array.isArray(payload) ? payload : undefined;
  } catch {
    return undefined;
  }
}

export const sha256 = (value: string): string => createHash("sha256").update(value).digest("hex");

/** A new opaque secret for a refresh token or an e-mail link. */
export const newOpaqueToken = (): string => randomBytes(32).toString("base64url");

/** A six-digit code for e-mail OTPs. */
export const newOtp = (): string => String(randomInt(0, 1_000_000)).padStart(6, "0");

/** OTPs are short, so their hash is bound to the user: the same code of two users never collides. */
export const otpHash = (userId: string, otp: string): string => sha256(`${userId}:${otp}`);
