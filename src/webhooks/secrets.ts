import { randomBytes } from "node:crypto";

/**
 * Webhook signing secrets (docs/webhooks.md): `whsec_` + base64 of 32 random bytes, as Standard
 * Webhooks has them; shown once, at registration or rotation, and stored only sealed with the
 * server's master key (src/secrets/box.ts).
 */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

export { loadSecretBox, SecretBox } from "../secrets/box.ts";
