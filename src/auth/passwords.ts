import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { AuthError, validationFailed } from "./errors.ts";

/**
 * Password hashing with scrypt (memory-hard; in Node's standard library, so nothing native to
 * build). Stored as `scrypt$N$r$p$salt$hash`, so parameters can be raised later and old hashes
 * still verify.
 */

const N = 16384;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(
      password.normalize("NFKC"),
      salt,
      KEY_LENGTH,
      { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(key)),
    ),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, N, R, P);
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const parts = stored?.split("$");
  if (parts?.length !== 6 || parts[0] !== "scrypt") {
    // Spend the same time as a real check, so a missing user cannot be told from a wrong password.
    await derive(password, randomBytes(16), N, R, P);
    return false;
  }
  const [, n, r, p, salt, hash] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, "base64url");
  const actual = await derive(password, Buffer.from(salt, "base64url"), Number(n), Number(r), Number(p));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export interface PasswordPolicy {
  minLength: number;
  /** Require at least one lower-case letter, one upper-case letter and one digit. */
  requireMixed: boolean;
}

/** The reasons a password is too weak, in GoTrue's words ('length', 'characters'); empty when it is fine. */
export function weakPasswordReasons(password: string, policy: PasswordPolicy): string[] {
  const reasons: string[] = [];
  if ([...password].length < policy.minLength) reasons.push("length");
  if (policy.requireMixed && !(/[a-z]/.test(password) && /[A-Z]/.test(password) && /[0-9]/.test(password))) {
    reasons.push("characters");
  }
  return reasons;
}

export const MAX_PASSWORD_LENGTH = 256;

/**
 * A password a request chose, against the tenant's policy: 400 validation_failed when missing or
 * too long, 422 weak_password (with GoTrue's `weak_password: {reasons, message}`) when too weak.
 */
export function checkPassword(
  password: unknown,
  settings: { password_min_length: number; password_require_mixed: boolean },
): string {
  if (typeof password !== "string" || password === "") throw validationFailed("Password is required");
  if (password.length > MAX_PASSWORD_LENGTH)
    throw validationFailed(`Password is longer than ${MAX_PASSWORD_LENGTH} characters`);
  const reasons = weakPasswordReasons(password, {
    minLength: settings.password_min_length,
    requireMixed: settings.password_require_mixed,
  });
  if (reasons.length > 0) {
    const message = `Password should be at least ${settings.password_min_length} characters${
      settings.password_require_mixed ? " and contain lower-case and upper-case letters and digits" : ""
    }.`;
    throw new AuthError(422, "weak_password", message, { extra: { weak_password: { reasons, message } } });
  }
  return password;
}
