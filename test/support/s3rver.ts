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
