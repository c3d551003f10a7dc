import { createReadStream } from "node:fs";
import { copyFile, mkdir, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { openSftp, type SftpSettings } from "./sftp.ts";

/**
 * Where a DDEX package is dropped for a store to pick up (docs/ddex.md, "Destinations"): a
 * directory (a mounted share), an SFTP server's folder, or an S3 bucket. The files of a batch
 * are written first and the BatchComplete file last, so a store that ingests on seeing it never
 * reads half a batch; a directory batch also appears all at once (written aside, then renamed).
 */
export interface PackageFile {
  /** Path inside the batch, with forward slashes. */
  path: string;
  source: { file: string } | { data: Buffer };
  bytes: number;
}

export type Destination =
  | { type: "directory"; path: string }
  | {
      type: "s3";
      bucket: string;
      prefix?: string | undefined;
      region?: string | undefined;
      endpoint?: string | undefined;
      force_path_style?: boolean | undefined;
      access_key_id?: string | undefined;
      secret_access_key?: string | undefined;
    }
  | SftpSettings;

export interface DropResult {
  /** Where the batch is: a directory path or an s3:// URL. */
  location: string;
}

export async function dropBatch(
  destination: Destination,
  batchId: string,
  files: PackageFile[],
  complete: PackageFile,
  signal?: AbortSignal,
  /** The store's code: SFTP's connection limit is counted per store. */
  store?: string,
): Promise<DropResult> {
  if (!/^[A-Za-z0-9_-]+$/.test(batchId)) throw new Error(`bad batch id ${batchId}`);
  for (const f of [...files, complete]) {
    if (f.path.split("/").some((part) => part === "" || part === "." || part === "..")) {
      throw new Error(`bad package path ${f.path}`);
    }
  }
  if (destination.type === "directory")
    return dropToDirectory(destination.path, batchId, files, complete, signal);
  if (destination.type === "sftp") return dropToSftp(destination, batchId, files, complete, signal, store);
  return dropToS3(destination, batchId, files, complete, signal);
}

async function dropToDirectory(
  root: string,
  batchId: string,
  files: PackageFile[],
  complete: PackageFile,
  signal?: AbortSignal,
): Promise<DropResult> {
  const final = path.join(root, batchId);
  const partial = path.join(root, `.${batchId}.partial`);
  await mkdir(root, { recursive: true });
  await rm(partial, { recursive: true, force: true });
  for (const f of [...files, complete]) {
    signal?.throwIfAborted();
    const target = path.join(partial, ...f.path.split("/"));
    await mkdir(path.dirname(target), { recursive: true });
    if ("file" in f.source) await copyFile(f.source.file, target);
    else await writeFile(target, f.source.data);
  }
  signal?.throwIfAborted();
  // Sent again (a retry after a crash): the new batch replaces the old one whole.
  await rm(final, { recursive: true, force: true });
  await rename(partial, final);
  return { location: final };
}

async function dropToS3(
  d: Extract<Destination, { type: "s3" }>,
  batchId: string,
  files: PackageFile[],
  complete: PackageFile,
  signal?: AbortSignal,
): Promise<DropResult> {
  // Loaded on the first drop to S3, not at start (docs/operations.md, "Memory").
  const { PutObjectCommand, S3Client } = await import("@aws-sdk/client-s3");
  const client = new S3Client({
    region: d.region ?? "us-east-1",
    ...(d.endpoint ? { endpoint: d.endpoint } : {}),
    forcePathStyle: d.force_path_style ?? false,
    ...(d.access_key_id && d.secret_access_key
      ? { credentials: { accessKeyId: d.access_key_id, secretAccessKey: d.secret_access_key } }
      : {}),
    // Plain PUTs, as every S3-compatible server takes them (no streaming checksum trailers).
    requestChecksumCalculation: "WHEN_REQUIRED",
  });
  const prefix = d.prefix ? `${d.prefix.replace(/\/+$/, "")}/` : "";
  try {
    for (const f of [...files, complete]) {
      signal?.throwIfAborted();
      await client.send(
        new PutObjectCommand({
          Bucket: d.bucket,
          Key: `${prefix}${batchId}/${f.path}`,
          Body: "file" in f.source ? createReadStream(f.source.file) : f.source.data,
          ContentLength: f.bytes,
          ContentType: f.path.endsWith(".xml")
            ? "application/xml"
            : f.path.endsWith(".json")
              ? "application/json"
              : undefined,
        }),
        { abortSignal: signal },
      );
    }
  } finally {
    client.destroy();
  }
  return { location: `s3://${d.bucket}/${prefix}${batchId}/` };
}

/**
 * Over SFTP: the batch folder is made, each file is written under a temporary name and renamed
 * into place when complete, and the BatchComplete file comes last, so the store never reads half
 * a batch. Sent again (a retry after a cut connection), the marker an earlier attempt may have
 * left goes first, media files already in place with their full size are kept (their bytes do
 * not change between attempts: they resume), and the message and manifest are written again.
 */
async function dropToSftp(
  d: SftpSettings,
  batchId: string,
  files: PackageFile[],
  complete: PackageFile,
  signal?: AbortSignal,
  store?: string,
): Promise<DropResult> {
  const session = await openSftp(d, signal, store && `store:${store}`);
  try {
    const dir = session.at(batchId);
    await session.mkdirp(dir);
    await session.remove(path.posix.join(dir, complete.path));
    const made = new Set<string>([dir]);
    for (const f of [...files, complete]) {
      signal?.throwIfAborted();
      const target = path.posix.join(dir, f.path);
      const parent = path.posix.dirname(target);
      if (!made.has(parent)) {
        await session.mkdirp(parent);
        made.add(parent);
      }
      if ("file" in f.source && (await session.size(target)) === f.bytes) continue;
      await session.put(target, f.source);
    }
    return { location: `sftp://${d.username}@${d.host}:${d.port}/${dir.replace(/^\/+/, "")}` };
  } finally {
    session.close();
  }
}
