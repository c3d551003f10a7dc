import { createHash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";

/**
 * The API-key format (docs/public-api.md, "API keys"):
 *
 *   bk_live_<43 base62 characters: 32 random bytes><6 base62 characters: CRC-32 of what precedes>
 *
 * The prefix says what it is and its mode, so secret scanners and people recognise a leaked key;
 * the checksum lets a scanner (and this server, before any database lookup) tell a real key from
 * a typo offline. Only a SHA-256 of the whole key is stored: 256 random bits need no slow hash.
 */
export type KeyMode = "live" | "test";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SECRET_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = /^bk_(live|test)_([0-9A-Za-z]{43})([0-9A-Za-z]{6})$/;
/** How many characters of the secret a listing shows after the mode prefix. */
const VISIBLE = 6;

function base62(value: bigint, length: number): string {
  let out = "";
  let v = value;
  while (v > 0n) {
    out = ALPHABET[Number(v % 62n)] + out;
    v /= 62n;
  }
  return out.padStart(length, "0");
}

function checksum(body: string): string {
  return base62(BigInt(crc32(body)), CHECKSUM_LENGTH);
}

export function generateApiKey(mode: KeyMode): { key: string; prefix: string; hash: string } {
  const secret = base62(BigInt(`0x${randomBytes(32).toString("hex")}`), SECRET_LENGTH);
  const body = `bk_${mode}_${secret}`;
  const key = body + checksum(body);
  return { key, prefix: visiblePrefix(key), hash: hashApiKey(key) };
}

export function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

export function visiblePrefix(key: string): string {
  const m = KEY_PATTERN.exec(key);
  return m ? `bk_${m[1]}_${(m[2] ?? "").slice(0, VISIBLE)}` : key.slice(0, 8 + VISIBLE);
}

/** Whether `token` looks like a Backline API key at all (its prefix), as opposed to a JWT. */
export function looksLikeApiKey(token: string): boolean {
  return token.startsWith("bk_");
}

/** The mode of a well-formed key whose checksum holds; undefined for anything else. */
export function parseApiKey(key: string): { mode: KeyMode } | undefined {
  const m = KEY_PATTERN.exec(key);
  if (!m) return undefined;
  const body = `bk_${m[1]}_${m[2]}`;
  return checksum(body) === m[3] ? { mode: m[1] as KeyMode } : undefined;
}
