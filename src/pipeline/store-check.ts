import { access, constants } from "node:fs/promises";
import type { Db } from "../db/db.ts";
import { ddexSettingsOf } from "./ddex/adapter.ts";
import { openSftp } from "./ddex/sftp.ts";
import { storeSettingsOf } from "./stores.ts";

export interface StoreCheck {
  ok: boolean;
  message: string;
}

/**
 * `backline stores configure --check` (docs/ddex.md, "Checking a store"): reaches the store's
 * destination with its settings — connects to its SFTP server (the host key must match, the
 * credentials must be accepted, the folder must exist), asks its S3 bucket, or looks at its
 * directory — and says what happened. Never throws for the store's answer; only for no such store.
 */
export async function checkStore(db: Db, code: string): Promise<StoreCheck> {
  const row = await db.asService(
    async (tx) =>
      (
        await tx.query<{ settings: Record<string, unknown>; credentials_sealed: string | null }>(
          "select settings, credentials_sealed from internal.stores where code = $1",
          [code],
        )
      ).rows[0],
    { readOnly: true },
  );
  if (!row) throw new Error(`no store ${code}`);
  const settings = storeSettingsOf(db, row);
  if (settings.adapter !== "ddex") {
    return {
      ok: true,
      message: `store ${code} delivers through ${String(settings.adapter ?? "no adapter")}: nothing to connect to`,
    };
  }
  try {
    const d = ddexSettingsOf({ code, settings }).destination;
    if (d.type === "directory") {
      await access(d.path, constants.W_OK);
      return { ok: true, message: `the directory ${d.path} is there and writable` };
    }
    if (d.type === "s3") {
      const { HeadBucketCommand, S3Client } = await import("@aws-sdk/client-s3");
      const client = new S3Client({
        region: d.region ?? "us-east-1",
        ...(d.endpoint ? { endpoint: d.endpoint } : {}),
        forcePathStyle: d.force_path_style ?? false,
        ...(d.access_key_id && d.secret_access_key
          ? { credentials: { accessKeyId: d.access_key_id, secretAccessKey: d.secret_access_key } }
          : {}),
      });
      try {
        await client.send(new HeadBucketCommand({ Bucket: d.bucket }));
      } finally {
        client.destroy();
      }
      return { ok: true, message: `the bucket ${d.bucket} answers` };
    }
    const session = await openSftp(d);
    try {
      await session.mkdirp(session.root);
    } finally {
      session.close();
    }
    return {
      ok: true,
      message: `connected to sftp://${d.username}@${d.host}:${d.port}/${d.path.replace(/^\/+/, "")} as ${d.username}: the host key matches`,
    };
  } catch (error) {
    const e = error as { message?: string; name?: string };
    return { ok: false, message: e.message || e.name || String(error) };
  }
}
