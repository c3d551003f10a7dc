import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  CreateBucketCommand,
  ListObjectsV2Command,
  PutBucketCorsCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { tid } from "../support/console-ui.ts";
import { portalSkip, portalSuite, uploadCoverAndAudio } from "../support/portal-browser.ts";
import { PASSWORD } from "../support/portal-seed.ts";
import { type RunningS3rver, startS3rver } from "../support/s3rver.ts";

/**
 * The portal's uploads on S3 storage (docs/portal.md, "A release, from draft to live"; docs/uploads.md, "Storage drivers"): the
 * browser sends a cover and an audio file straight to the bucket's presigned URLs, across origins,
 * as the bucket's CORS rule allows (the rule docs/portal.md gives), under the page's CSP (which
 * names the bucket's origin in connect-src), and the worker reads the bytes back from the bucket
 * and gives each file its verdict. The bucket is s3rver on loopback, a real S3-compatible server.
 */

const skip = portalSkip();
const BUCKET = "portal-uploads";
const ISRC = "QZ-S3U-26-00001";

describe("the portal in Chromium: uploads straight to an S3 bucket", { skip }, () => {
  let s3: RunningS3rver | undefined;
  let client: S3Client | undefined;
  // Filled before the portal's server starts (portalSuite's own before() runs after this one).
  const env: Record<string, string> = {};
  before(async () => {
    s3 = await startS3rver();
    client = new S3Client({
      endpoint: s3.endpoint,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
    // The rule docs/portal.md gives: the portal's origin may PUT, with any header, and read ETag.
    await client.send(
      new PutBucketCorsCommand({
        Bucket: BUCKET,
        CORSConfiguration: {
          CORSRules: [
            {
              AllowedOrigins: ["http://127.0.0.1:*"],
              AllowedMethods: ["PUT", "GET", "HEAD"],
              AllowedHeaders: ["*"],
              ExposeHeaders: ["ETag"],
              MaxAgeSeconds: 600,
            },
          ],
        },
      }),
    );
    Object.assign(env, {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: BUCKET,
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      S3_FORCE_PATH_STYLE: "true",
    });
  });
  // The bucket is the one origin besides the server the page may reach.
  const stories = portalSuite(env, { otherOrigins: () => (s3 ? [s3.endpoint] : []) });
  after(async () => {
    client?.destroy();
    await s3?.close();
  });

  test("a cover and an audio file go from the page to the bucket, and come back judged", async () => {
    await stories.story("uploads-s3", async ({ page, record }) => {
      const offsite: string[] = [];
      page.on("request", (r) => {
        if (r.url().startsWith(s3?.endpoint ?? "-"))
          offsite.push(`${r.method()} ${new URL(r.url()).pathname}`);
      });
      await stories.signIn(page, stories.portal(), stories.world.artist.email, PASSWORD);
      await page.locator(tid("release-new")).click();
      await page.getByLabel("Title", { exact: true }).fill("Harbour Lights");
      await page.getByLabel("Artist", { exact: true }).fill("Tidewater");
      await page.getByRole("button", { name: "Create draft" }).click();
      await page.getByRole("heading", { name: "Harbour Lights" }).waitFor();
      await page.locator(tid("new-track-title")).fill("Harbour Lights");
      await page.locator(tid("new-track-isrc")).fill(ISRC);
      await page.locator(tid("new-track-add")).click();
      await page.locator(tid("edit-track")).first().waitFor();

      const audio = await uploadCoverAndAudio(page, "harbour-lights.wav");
      await record("release-uploads-s3", "track-audio-0-verdict");

      // The bytes went to the bucket from the page itself (a PUT across origins), not through Backline.
      assert.ok(
        offsite.some((r) => r.startsWith(`PUT /${BUCKET}/`)),
        `the page PUT to the bucket: ${offsite.join(", ")}`,
      );
      const listed = await client?.send(new ListObjectsV2Command({ Bucket: BUCKET }));
      const sizes = (listed?.Contents ?? []).map((o) => o.Size);
      assert.ok(
        sizes.includes(audio.length),
        `the audio's ${audio.length} bytes are in the bucket: ${sizes.join(", ")}`,
      );
      assert.equal(sizes.length >= 2, true, "the cover and the audio");
    });
  });
});
