import assert from "node:assert/strict";
import { test } from "node:test";
import { base32Decode, base32Encode, matchTotp, otpauthUri, qrSvg, totpCode, totpStep } from "./totp.ts";

// RFC 6238, appendix B: the SHA-1 secret "12345678901234567890"; its codes' last six digits.
const SECRET = base32Encode(Buffer.from("12345678901234567890"));

test("codes match RFC 6238's test vectors", () => {
  assert.equal(SECRET, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
  assert.equal(base32Decode(SECRET).toString(), "12345678901234567890");
  const vectors: [number, string][] = [
    [59, "287082"],
    [1111111109, "081804"],
    [1111111111, "050471"],
    [1234567890, "005924"],
    [2000000000, "279037"],
  ];
  for (const [seconds, code] of vectors) assert.equal(totpCode(SECRET, totpStep(seconds * 1000)), code);
});

test("a code matches one step either side, once, and never after a later step was used", () => {
  const now = 1_700_000_000_000;
  const step = totpStep(now);
  assert.equal(matchTotp(SECRET, totpCode(SECRET, step), null, now), step);
  assert.equal(matchTotp(SECRET, totpCode(SECRET, step - 1), null, now), step - 1);
  assert.equal(matchTotp(SECRET, totpCode(SECRET, step + 1), null, now), step + 1);
  assert.equal(matchTotp(SECRET, totpCode(SECRET, step - 2), null, now), undefined);
  assert.equal(matchTotp(SECRET, totpCode(SECRET, step), step, now), undefined, "replay");
  assert.equal(matchTotp(SECRET, totpCode(SECRET, step - 1), step, now), undefined, "older than the last");
  assert.equal(matchTotp(SECRET, "12345", null, now), undefined);
  assert.equal(matchTotp(SECRET, "abcdef", null, now), undefined);
});

test("the otpauth URI and its QR code", () => {
  const uri = otpauthUri(SECRET, "Backline Dev", "a@example.com");
  assert.match(uri, /^otpauth:\/\/totp\/Backline%20Dev:a%40example\.com\?/);
  const q = new URL(uri).searchParams;
  assert.equal(q.get("secret"), SECRET);
  assert.equal(q.get("issuer"), "Backline Dev");
  assert.equal(q.get("digits"), "6");
  assert.equal(q.get("period"), "30");
  const svg = qrSvg(uri);
  assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.match(svg, /<\/svg>\s*$/);
});
