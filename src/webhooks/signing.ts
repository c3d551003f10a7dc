import { createHmac } from "node:crypto";

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): the headers `webhook-id`,
 * `webhook-timestamp` (Unix seconds) and `webhook-signature`, a space-separated list of
 * `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` — one per secret in force, so a receiver
 * holding either the old or the new secret verifies a message during a rotation.
 */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  if (!secret.startsWith("whsec_")) throw new Error("a signing secret starts with whsec_");
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`;
}

export function signatureHeaders(
  secrets: string[],
  id: string,
  timestamp: number,
  body: string,
): Record<"webhook-id" | "webhook-timestamp" | "webhook-signature", string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": secrets.map((s) => sign(s, id, timestamp, body)).join(" "),
  };
}
