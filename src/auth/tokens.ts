import {
  createHash,
  createHmac,
  verify as cryptoVerify,
  randomBytes,
  randomInt,
  timingSafeEqual,
} from "node:crypto";
import { SignJWT } from "jose";
import { PROPAGATION_S, type TenantSigningKeys } from "./signing-keys.ts";

/**
 * Access tokens (ES256 JWTs signed with the tenant's current signing key and naming it in `kid`,
 * or HS256 ones signed with the tenant's secret for a tenant without a signing key; claims as
 * GoTrue issues them plus tenant_id), refresh tokens and one-time codes. Only hashes of refresh
 * tokens and codes are stored.
 */

export interface AccessTokenInput {
  secret: string;
  /** The tenant's current signing key: when there is one, it signs instead of `secret`. */
  signingKey?: TenantSigningKeys["current"];
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
    .setProtectedHeader(
      input.signingKey
        ? { alg: "ES256", typ: "JWT", kid: input.signingKey.kid }
        : { alg: "HS256", typ: "JWT" },
    )
    .setSubject(input.user.id)
    .setIssuer(input.issuer)
    .setIssuedAt(now)
    .setExpirationTime(expiresAt)
    .sign(input.signingKey ? input.signingKey.privateKey : new TextEncoder().encode(input.secret));
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

const MALFORMED = "JWT is malformed or uses an unsupported algorithm";

function parseToken(token: string): {
  signed: string;
  sig: Buffer;
  header: Record<string, unknown>;
  claims: Record<string, unknown>;
} {
  const parts = token.split(".");
  if (parts.length !== 3) throw new TokenError("malformed", MALFORMED);
  const [h, p, sig] = parts as [string, string, string];
  let header: unknown;
  let payload: unknown;
  try {
    header = JSON.parse(Buffer.from(h, "base64url").toString("utf8"));
    payload = JSON.parse(Buffer.from(p, "base64url").toString("utf8"));
  } catch {
    throw new TokenError("malformed", MALFORMED);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header))
    throw new TokenError("malformed", MALFORMED);
  if (typeof payload !== "object" || payload === null || Array.isArray(payload))
    throw new TokenError("malformed", MALFORMED);
  return {
    signed: `${h}.${p}`,
    sig: Buffer.from(sig, "base64url"),
    header: header as Record<string, unknown>,
    claims: payload as Record<string, unknown>,
  };
}

function checkHmac(signed: string, sig: Buffer, secret: string): void {
  const expected = createHmac("sha256", secret).update(signed).digest();
  if (sig.length !== expected.length || !timingSafeEqual(sig, expected)) {
    throw new TokenError("bad_signature", "JWT signature does not match");
  }
}

function checkTimes(claims: Record<string, unknown>, now: number): Record<string, unknown> {
  const seconds = Math.floor(now / 1000);
  if (claims.exp !== undefined && (typeof claims.exp !== "number" || claims.exp <= seconds)) {
    throw new TokenError("expired", "JWT expired");
  }
  if (claims.nbf !== undefined && (typeof claims.nbf !== "number" || claims.nbf > seconds)) {
    throw new TokenError("malformed", "JWT is not valid yet");
  }
  return claims;
}

/**
 * Verifies an HS256 token with `secret`; throws TokenError saying why it is refused. Done with
 * node:crypto's HMAC, synchronously: it runs on every request, and WebCrypto's asynchronous path
 * cost a measurable share of a request (bench/README.md). Only HS256 is accepted, whatever the
 * header says; the signature is compared in constant time; exp and nbf are checked. The tenants'
 * anon and service-role keys are verified with this alone.
 */
export async function verifyToken(
  token: string,
  secret: string,
  now: number = Date.now(),
): Promise<Record<string, unknown>> {
  const { signed, sig, header, claims } = parseToken(token);
  if (header.alg !== "HS256") throw new TokenError("malformed", MALFORMED);
  checkHmac(signed, sig, secret);
  return checkTimes(claims, now);
}

const VERIFIED_TTL_MS = 10_000;
const MAX_VERIFIED = 10_000;
const verifiedEs256 = new Map<string, { tenant: object; claims: Record<string, unknown>; until: number }>();

/**
 * Verifies a bearer token of the tenant whose secret and signing keys are given (docs/auth.md,
 * "Signing keys"). The header's `alg` picks the check, and each algorithm has its own keys, so
 * no key is ever used for the other algorithm (an HS256 token "signed" with a published public
 * key is checked against the secret and refused):
 *
 * - ES256: `kid` must name one of the tenant's published keys (another tenant's kid, a withdrawn
 *   or unknown one: refused); the signature is checked with node:crypto, synchronously.
 * - HS256: the tenant's secret. Once the tenant has signing keys, an HS256 token other than its
 *   anon and service-role keys is a session from before the switch: accepted only if issued
 *   before the first key (plus the propagation margin) and only until such sessions have expired.
 * - anything else (`none`, RS256, …): refused.
 */
export async function verifyBearerToken(
  token: string,
  tenant: { jwtSecret: string; signing: TenantSigningKeys },
  now: number = Date.now(),
): Promise<Record<string, unknown>> {
  // An ECDSA check costs tens of HMACs: a token verified a moment ago, against the very same
  // cached tenant record (a new record, every 10 s or after a rotation, starts over), is not
  // checked again; its times are.
  const hit = verifiedEs256.get(token);
  if (hit && hit.tenant === tenant && hit.until > now) return checkTimes(hit.claims, now);
  const { signed, sig, header, claims } = parseToken(token);
  if (header.alg === "ES256") {
    const kid = header.kid;
    const key =
      typeof kid === "string"
        ? tenant.signing.published.find(
            (k) => k.kid === kid && (k.verifyUntil === undefined || k.verifyUntil > now),
          )
        : undefined;
    if (!key) throw new TokenError("bad_signature", "JWT signing key (kid) is not one of this tenant's keys");
    const valid =
      sig.length === 64 &&
      cryptoVerify("sha256", Buffer.from(signed), { key: key.key, dsaEncoding: "ieee-p1363" }, sig);
    if (!valid) throw new TokenError("bad_signature", "JWT signature does not match");
    checkTimes(claims, now);
    if (verifiedEs256.size >= MAX_VERIFIED) verifiedEs256.clear();
    verifiedEs256.set(token, {
      tenant,
      claims,
      until: Math.min(now + VERIFIED_TTL_MS, key.verifyUntil ?? now + VERIFIED_TTL_MS),
    });
    return claims;
  }
  if (header.alg !== "HS256") throw new TokenError("malformed", MALFORMED);
  checkHmac(signed, sig, tenant.jwtSecret);
  const { since, hs256SessionsUntil } = tenant.signing;
  const isApiKey = claims.iss === "backline" && (claims.role === "anon" || claims.role === "service_role");
  if (since !== undefined && hs256SessionsUntil !== undefined && !isApiKey) {
    const issuedBefore = typeof claims.iat === "number" && claims.iat * 1000 <= since + PROPAGATION_S * 1000;
    if (!issuedBefore || now >= hs256SessionsUntil) {
      throw new TokenError(
        "bad_signature",
        "JWT is signed with the tenant's secret, which no longer signs sessions (the tenant signs them with its signing keys)",
      );
    }
  }
  return checkTimes(claims, now);
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
