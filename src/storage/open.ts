import type { Config } from "../config.ts";
import type { SecretBox } from "../webhooks/secrets.ts";
import type { ObjectStore } from "./driver.ts";
import { LocalStore } from "./local.ts";
import { S3Store } from "./s3.ts";
import { TokenSigner } from "./tokens.ts";

export interface Storage {
  store: ObjectStore;
  /** Signs the local driver's upload and download tokens (and /storage/v1's signed URLs). */
  signer: TokenSigner;
}

/** The configured storage driver (STORAGE_DRIVER), its tokens keyed from ENCRYPTION_KEY. */
export function openStorage(config: Pick<Config, "storage" | "publicUrl">, secrets: SecretBox): Storage {
  const signer = new TokenSigner(secrets.derive("storage tokens v1"));
  const store =
    config.storage.driver === "s3"
      ? new S3Store(config.storage.s3)
      : new LocalStore({ root: config.storage.root, publicUrl: config.publicUrl, signer });
  return { store, signer };
}
