import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { renderSVG } from "uqr";

/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP): HMAC-SHA1, six digits, 30-second
 * steps, as authenticator apps and Supabase Auth use them. One step either side of now is
 * accepted (a phone's clock drifts), and never a step at or before the last one accepted, so a
 * code works once.
 */

export const TOTP_PERIOD = 30;
export const TOTP_DIGITS = 6;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

export function base32Encode(bytes: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

export function base32Decode(text: string): Buffer {
  const clean = text.toUpperCase().replace(/=+$/, "").replace(/\s/g, "");
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const ch of clean) {
    const i = ALPHABET.indexOf(ch);
    if (i < 0) throw new Error("not a base32 string");
    value = (value << 5) | i;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** A new secret: 20 random bytes (160 bits, RFC 4226's recommendation), in base32. */
export const newTotpSecret = (): string => base32Encode(randomBytes(20));

/** The time step of `nowMs`. */
export const totpStep = (nowMs: number = Date.now()): number => Math.floor(nowMs / 1000 / TOTP_PERIOD);

/** The code of `step` for a base32 secret. */
export function totpCode(secret: string, step: number, digits = TOTP_DIGITS): string {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac("sha1", base32Decode(secret)).update(counter).digest();
  const offset = (mac[mac.length - 1] as number) & 15;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, "0");
}

/**
 * The step a code matches (now, one before or one after), if it is later than `lastUsedStep`;
 * undefined otherwise. Every candidate is compared, in constant time.
 */
export function matchTotp(
  secret: string,
  code: string,
  lastUsedStep: number | null,
  nowMs: number = Date.now(),
): number | undefined {
  if (!/^\d{6}$/.test(code)) return undefined;
  const now = totpStep(nowMs);
  let matched: number | undefined;
  for (const step of [now - 1, now, now + 1]) {
    const same = timingSafeEqual(Buffer.from(totpCode(secret, step)), Buffer.from(code));
    if (same && (lastUsedStep === null || step > lastUsedStep) && matched === undefined) matched = step;
  }
  return matched;
}

/** The otpauth:// URI an authenticator app reads (the QR code holds it). */
export function otpauthUri(secret: string, issuer: string, account: string): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`;
  const q = new URLSearchParams({
    algorithm: "SHA1",
    digits: String(TOTP_DIGITS),
    issuer,
    period: String(TOTP_PERIOD),
    secret,
  });
  return `otpauth://totp/${label}?${q.toString()}`;
}

/** The URI as a QR code, an SVG document (what GoTrue returns in totp.qr_code). */
export const qrSvg = (uri: string): string => renderSVG(uri, { ecc: "M", border: 2 });
