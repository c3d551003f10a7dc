import { createHash, randomBytes, randomInt } from "node:crypto";
import { errors as joseErrors, jwtVerify, SignJWT } from "jose";

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

/** Verifies an HS256 token with `secret`; throws TokenError saying why it is refused. */
export async function verifyToken(token: string, secret: string): Promise<Record<string, unknown>> {
  try {
    const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), { algorithms: ["HS256"] });
    return payload as Record<string, unknown>;
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw new TokenError("expired", "JWT expired");
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) {
      throw new TokenError("bad_signature", "JWT signature does not match");
    }
    throw new TokenError("malformed", "JWT is malformed or uses an unsupported algorithm");
  }
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
