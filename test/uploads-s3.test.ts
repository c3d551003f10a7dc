import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { CreateBucketCommand, HeadObjectCommand } from "@aws-sdk/client-s3";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { openStorage } from "../src/storage/open.ts";
import { S3Store } from "../src/storage/s3.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg, wav } from "./support/media-fixtures.ts";
import { assertProblem, expectStatus, isrcs } from "./support/public-api.ts";
import { type RunningS3rver, startS3rver } from "./support/s3rver.ts";
import { type Api, artworkUrl, audioUrl, draft, judged, type Target, uploader } from "./support/uploads.ts";

/**
 * Uploads through /api/public/v1 on the S3 driver, end to end over real HTTP: the API hands out
 * presigned S3 URLs (a single PUT, or a multipart upload for large audio), the client sends the
 * bytes straight to the bucket with plain fetch, says so with POST /uploads/{id}/complete, and
 * the worker judges the bytes it reads back from S3. The bucket is s3rver on loopback; it checks a
 * presigned URL's expiry but not its SigV4 signature or the parts' ETags (the signatures are
 * checked in test/storage-s3.test.ts, behind a verifying proxy).
 */

type Obj = Record<string, unknown>;

const BUCKET = "backline-uploads";
const MIB = 1024 * 1024;
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const _nextIsrc = isrcs("QZUS3");

describeEachEngine("uploads: presigned URLs on S3 storage", (t) => {
  let s3rver: RunningS3rver | undefined;
  let endpoint: string;
  let app: RunningApp;
  let store: S3Store;
  let worker: Worker;

  before(async () => {
    s3rver = await startS3rver();
    endpoint = s3rver.endpoint;
    app = await startApp(t(), {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: endpoint,
      S3_BUCKET: BUCKET,
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      S3_FORCE_PATH_STYLE: "true",
      S3_MULTIPART_THRESHOLD_BYTES: String(5 * MIB),
      S3_PART_SIZE_BYTES: String(5 * MIB),
      UPLOAD_MAX_ARTWORK_BYTES: String(8 * MIB),
    });
    const storage = openStorage(app.config, loadSecretBox(app.config));
    assert.ok(storage.store instanceof S3Store, "STORAGE_DRIVER=s3 opens the S3 driver");
    store = storage.store;
    await store.client.send(new CreateBucketCommand({ Bucket: BUCKET }));
    worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db, { store }), pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    store?.close();
    await s3rver?.close();
  });

  const keyed = () => uploader(t(), app);

  /** The single presigned PUT, with plain fetch and exactly the headers given. */
  async function put(target: Target, bytes: Buffer): Promise<number> {
    const res = await fetch(target.upload_url, {
      method: target.method,
      headers: target.headers,
      body: bytes,
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    return res.status;
  }

  /** Every part to its presigned URL, in order; the ETags each PUT answered. */
  async function putParts(target: Target, bytes: Buffer) {
    const multipart = target.multipart;
    assert.ok(multipart, "a multipart target");
    const parts: { part_number: number; etag: string }[] = [];
    for (const part of multipart.parts) {
      const start = (part.part_number - 1) * multipart.part_size;
      const res = await fetch(part.url, {
        method: "PUT",
        body: bytes.subarray(start, start + multipart.part_size),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const etag = res.headers.get("etag");
      assert.ok(etag, `part ${part.part_number} answers an ETag`);
      parts.push({ part_number: part.part_number, etag });
    }
    return parts;
  }

  const complete = (api: Api, assetId: string, body?: Obj) =>
    api("POST", `/uploads/${assetId}/complete`, body);

  const objectKey = async (assetId: string) =>
    t().db.asService(
      async (tx) =>
        (
          await tx.query<{ object_key: string }>("select object_key from public.media_assets where id = $1", [
            assetId,
          ])
        ).rows[0]?.object_key as string,
    );

  test("artwork: a presigned PUT straight to the bucket, completed, checked valid and shown on the release", async () => {
    const { api, account } = await keyed();
    const release = await draft(api);
    const cover = await artworkJpeg();
    const target = await artworkUrl(api, release.id, {
      filename: "cover.jpg",
      content_type: "image/jpeg",
      size: cover.length,
      sha256: sha256(cover),
    });
    assert.equal(target.method, "PUT");
    assert.equal(target.multipart, undefined, "below the multipart threshold: one PUT");
    assert.deepEqual(target.headers, {
      "content-type": "image/jpeg",
      "content-length": String(cover.length),
    });
    assert.equal(target.max_bytes, 8 * MIB);
    const url = new URL(target.upload_url);
    assert.equal(url.origin, endpoint, "the bytes go to S3, not through Backline");
    // The upload lands at its own staging key; completing it moves it to the release's cover.
    assert.equal(url.pathname, `/${BUCKET}/uploads/${account.id}/${target.asset_id}.jpg`);
    assert.equal(url.searchParams.get("X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
    assert.equal(url.searchParams.get("X-Amz-SignedHeaders"), "content-length;content-type;host");
    assert.ok(url.searchParams.get("X-Amz-Signature"));
    assert.ok(Number(url.searchParams.get("X-Amz-Expires")) <= 900, "as short-lived as the upload URL");
    assert.match(
      String(target.complete_url),
      new RegExp(`/api/public/v1/uploads/${target.asset_id}/complete$`),
    );

    await put(target, cover);
    assert.equal(
      (expectStatus(await api("GET", `/uploads/${target.asset_id}`), 200) as Obj).status,
      "pending",
      "S3 tells Backline nothing: pending until the complete call",
    );
    const completed = expectStatus(await complete(api, target.asset_id), 200);
    assert.ok(
      ["uploaded", "validating", "valid"].includes(String(completed.status)),
      String(completed.status),
    );
    assert.equal(completed.bytes, cover.length);

    const key = `artwork/${account.id}/${release.id}/cover.jpg`;
    const head = await store.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    assert.equal(head.ContentType, "image/jpeg");
    assert.equal(head.ContentLength, cover.length);

    const asset = await judged(api, target.asset_id);
    assert.equal(asset.status, "valid", JSON.stringify(asset.problems));
    assert.deepEqual(asset.problems, []);
    assert.equal((asset.metadata as Obj).width, 3000);
    assert.equal((asset.metadata as Obj).height, 3000);
    assert.equal((asset.metadata as Obj).format, "jpeg");
    assert.equal(asset.sha256, sha256(cover), "hashed from the bytes read back from S3");
    assert.equal(asset.current, true);

    const detail = expectStatus(await api("GET", `/releases/${release.id}`), 200);
    assert.equal((detail.artwork as Obj).id, target.asset_id);
    assert.equal((detail.artwork as Obj).status, "valid");

    // Completing again changes nothing and says how the upload stands.
    const again = expectStatus(await complete(api, target.asset_id), 200);
    assert.equal(again.status, "valid");
  });

  test("audio: a 12 MiB WAV as a presigned multipart upload, completed with the parts' ETags", async () => {
    const { api, account } = await keyed();
    const release = await draft(api);
    const track = release.tracks[0] as string;
    const audio = wav({ seconds: 72 });
    assert.ok(audio.length > 12 * MIB);
    const target = await audioUrl(api, release.id, track, { filename: "master.wav", size: audio.length });
    const multipart = target.multipart;
    assert.ok(multipart, "above the threshold: multipart");
    assert.equal(multipart.part_size, 5 * MIB);
    assert.deepEqual(
      multipart.parts.map((p) => p.part_number),
      [1, 2, 3],
    );
    for (const part of multipart.parts) {
      const params = new URL(part.url).searchParams;
      assert.equal(new URL(part.url).origin, endpoint);
      assert.equal(params.get("uploadId"), multipart.upload_id);
      assert.equal(params.get("partNumber"), String(part.part_number));
      assert.ok(params.get("X-Amz-Signature"));
    }
    assert.equal(
      target.upload_url,
      `${endpoint}/${BUCKET}/uploads/${account.id}/${target.asset_id}.wav`,
      "the staging object's plain URL",
    );

    const parts = await putParts(target, audio);
    // Given in reverse order: the server sorts them.
    const completed = expectStatus(
      await complete(api, target.asset_id, { upload_id: multipart.upload_id, parts: [...parts].reverse() }),
      200,
    );
    assert.equal(completed.bytes, audio.length);

    const asset = await judged(api, target.asset_id);
    assert.equal(asset.status, "valid", JSON.stringify(asset.problems));
    assert.equal((asset.metadata as Obj).format, "wav");
    assert.equal((asset.metadata as Obj).sample_rate, 44_100);
    assert.equal((asset.metadata as Obj).channels, 2);
    assert.equal((asset.metadata as Obj).duration_seconds, 72);
    assert.equal(asset.sha256, sha256(audio), "the parts were put together in order");

    const detail = expectStatus(await api("GET", `/releases/${release.id}`), 200);
    const [one] = detail.tracks as [Obj];
    assert.equal(one.duration, 72);
    assert.equal((one.audio as Obj).id, target.asset_id);
    assert.equal((one.audio as Obj).status, "valid");
    assert.equal((one.audio_metadata as Obj).bit_depth, 16);
  });

  test("complete before the bytes arrived, or with bad parts, is refused and leaves the upload pending", async () => {
    const { api } = await keyed();
    const release = await draft(api);
    const track = release.tracks[0] as string;

    const cover = await artworkJpeg();
    const single = await artworkUrl(api, release.id, { size: cover.length });
    assertProblem(await complete(api, single.asset_id), 409, "upload_not_received");
    assert.equal(expectStatus(await api("GET", `/uploads/${single.asset_id}`), 200).status, "pending");
    // The same URL still takes the file afterwards.
    await put(single, cover);
    expectStatus(await complete(api, single.asset_id), 200);

    const audio = wav({ seconds: 40 }); // 6.7 MiB: two parts
    const target = await audioUrl(api, release.id, track, { size: audio.length });
    const multipart = target.multipart;
    assert.ok(multipart);
    assertProblem(await complete(api, target.asset_id), 409, "upload_not_received");
    const parts = await putParts(target, audio);
    assert.equal(parts.length, 2);
    const [first, second] = parts as [(typeof parts)[0], (typeof parts)[0]];
    assertProblem(
      await complete(api, target.asset_id, {
        upload_id: multipart.upload_id,
        parts: [first, { ...second, part_number: 1 }],
      }),
      409,
      "multipart_invalid",
    );
    assertProblem(
      await complete(api, target.asset_id, {
        upload_id: multipart.upload_id,
        parts: [first, { ...second, etag: '"not an etag"' }],
      }),
      409,
      "multipart_invalid",
    );
    assertProblem(await complete(api, target.asset_id, { parts }), 422, "validation_failed");
    assertProblem(
      await complete(api, target.asset_id, { upload_id: multipart.upload_id, parts: [] }),
      422,
      "validation_failed",
    );
    assert.equal(expectStatus(await api("GET", `/uploads/${target.asset_id}`), 200).status, "pending");
    assert.equal(await store.stat(await objectKey(target.asset_id)), undefined, "no object yet");

    // The right parts still complete it.
    expectStatus(await complete(api, target.asset_id, { upload_id: multipart.upload_id, parts }), 200);
    assert.equal((await judged(api, target.asset_id)).status, "valid");
    assert.equal((await judged(api, single.asset_id)).status, "valid");
  });

  test("a file larger than allowed, sent without a declared size, is refused on complete and removed", async () => {
    const { api } = await keyed();
    const release = await draft(api);
    const target = await artworkUrl(api, release.id);
    assert.deepEqual(target.headers, { "content-type": "image/jpeg" }, "no size declared: none signed");
    await put(target, randomBytes(8 * MIB + 1));
    assertProblem(await complete(api, target.asset_id), 413, "file_too_large");
    assert.equal(await store.stat(await objectKey(target.asset_id)), undefined, "the object is removed");
    assert.equal(expectStatus(await api("GET", `/uploads/${target.asset_id}`), 200).status, "pending");
    assertProblem(
      await api("POST", `/releases/${release.id}/artwork-upload-url`, { size: 8 * MIB + 1 }),
      413,
      "file_too_large",
    );
  });

  test("another account cannot see or complete an upload", async () => {
    const owner = await keyed();
    const stranger = await keyed();
    const release = await draft(owner.api);
    const cover = await artworkJpeg();
    const target = await artworkUrl(owner.api, release.id, { size: cover.length });

    assertProblem(await stranger.api("GET", `/uploads/${target.asset_id}`), 404, "resource_missing");
    assertProblem(await complete(stranger.api, target.asset_id), 404, "resource_missing");
    await put(target, cover);
    // Even with the bytes in the bucket, the stranger's complete does nothing.
    assertProblem(await complete(stranger.api, target.asset_id), 404, "resource_missing");
    assert.equal(expectStatus(await owner.api("GET", `/uploads/${target.asset_id}`), 200).status, "pending");

    const audio = wav({ seconds: 40 });
    const track = release.tracks[0] as string;
    const multi = await audioUrl(owner.api, release.id, track, { size: audio.length });
    const parts = await putParts(multi, audio);
    assertProblem(
      await complete(stranger.api, multi.asset_id, { upload_id: multi.multipart?.upload_id, parts }),
      404,
      "resource_missing",
    );
    assert.equal(
      await store.stat(await objectKey(multi.asset_id)),
      undefined,
      "the parts were not put together",
    );

    assertProblem(
      await stranger.api("POST", `/releases/${release.id}/artwork-upload-url`, {}),
      404,
      "resource_missing",
    );
    assertProblem(
      await stranger.api("POST", `/releases/${release.id}/tracks/${track}/audio-upload-url`, {}),
      404,
      "resource_missing",
    );

    expectStatus(await complete(owner.api, target.asset_id), 200);
    expectStatus(
      await complete(owner.api, multi.asset_id, { upload_id: multi.multipart?.upload_id, parts }),
      200,
    );
    assert.equal((await judged(owner.api, target.asset_id)).status, "valid");
    assert.equal((await judged(owner.api, multi.asset_id)).status, "valid");
  });

  test("a URL issued before submit cannot replace the submitted release's bytes", async () => {
    const { api, account } = await keyed();
    const release = await draft(api);
    const cover = await artworkJpeg();
    const art = await artworkUrl(api, release.id, { size: cover.length });
    await put(art, cover);
    expectStatus(await complete(api, art.asset_id), 200);
    const audio = wav({ seconds: 3 });
    const sound = await audioUrl(api, release.id, release.tracks[0] as string, { size: audio.length });
    await put(sound, audio);
    expectStatus(await complete(api, sound.asset_id), 200);
    assert.equal((await judged(api, art.asset_id)).status, "valid");
    assert.equal((await judged(api, sound.asset_id)).status, "valid");

    const small = await artworkJpeg({ width: 500, height: 500 });
    const late = await artworkUrl(api, release.id, { size: small.length });
    expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
    const res = await fetch(late.upload_url, { method: "PUT", headers: late.headers, body: small });
    await res.text();
    assertProblem(await complete(api, late.asset_id), 409, "release_not_editable");
    const key = `artwork/${account.id}/${release.id}/cover.jpg`;
    assert.equal((await store.stat(key))?.bytes, cover.length, "the submitted cover is still in the bucket");
  });

  test("submit refuses the release until its artwork and audio in S3 are valid, then accepts it", async () => {
    const { api } = await keyed();
    const release = await draft(api);
    const track = release.tracks[0] as string;
    const missing = assertProblem(
      await api("POST", `/releases/${release.id}/submit`),
      422,
      "release_incomplete",
    );
    assert.deepEqual((missing.errors ?? []).map((e) => `${e.param}:${e.code}`).sort(), [
      "artwork:artwork_missing",
      "tracks[0].audio:audio_missing",
    ]);

    const cover = await artworkJpeg();
    const art = await artworkUrl(api, release.id, { filename: "cover.jpg", size: cover.length });
    await put(art, cover);
    expectStatus(await complete(api, art.asset_id), 200);
    // Small audio: one presigned PUT with its size signed.
    const audio = wav({ seconds: 3 });
    const sound = await audioUrl(api, release.id, track, { filename: "master.wav", size: audio.length });
    assert.equal(sound.multipart, undefined);
    assert.deepEqual(sound.headers, { "content-type": "audio/wav", "content-length": String(audio.length) });
    await put(sound, audio);
    expectStatus(await complete(api, sound.asset_id), 200);
    assert.equal((await judged(api, art.asset_id)).status, "valid");
    assert.equal((await judged(api, sound.asset_id)).status, "valid");

    const submitted = expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
    assert.equal(submitted.status, "submitted");
    const detail = expectStatus(await api("GET", `/releases/${release.id}`), 200);
    assert.equal((detail.tracks as Obj[]).length, 1);
    assert.equal((detail.tracks as Obj[])[0]?.duration, 3);
  });
});
