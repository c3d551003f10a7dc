import fs from "node:fs";
import { tempDir } from "./process.ts";

/**
 * s3rver, an S3-compatible server, on a free loopback port with its files in a temporary folder
 * (credentials S3RVER / S3RVER). It parses SigV4 but does not check signatures or Content-Length:
 * test/storage-s3.test.ts puts a checking proxy in front where that matters.
 */
export interface RunningS3rver {
  port: number;
  endpoint: string;
  close(): Promise<void>;
}

interface S3rverLike {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}

export async function startS3rver(): Promise<RunningS3rver> {
  const directory = tempDir("backline-s3rver-");
  // s3rver ships no types: imported by a name TypeScript does not resolve.
  const { default: S3rver } = (await import("s3rver" as string)) as {
    default: new (options: Record<string, unknown>) => S3rverLike;
  };
  const server = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory });
  const { port } = await server.run();
  return {
    port,
    endpoint: `http://127.0.0.1:${port}`,
    close: async () => {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * An s3rver with `bucket` made in it, and the server settings that point Backline's S3 driver at it
 * (STORAGE_DRIVER=s3, S3_*), for suites that run once per storage driver.
 */
export async function startS3Storage(
  bucket = "objects",
): Promise<{ s3: RunningS3rver; env: Record<string, string> }> {
  const s3 = await startS3rver();
  const { CreateBucketCommand, S3Client } = await import("@aws-sdk/client-s3");
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  });
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } finally {
    client.destroy();
  }
  return {
    s3,
    env: {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: bucket,
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      S3_FORCE_PATH_STYLE: "true",
    },
  };
}
