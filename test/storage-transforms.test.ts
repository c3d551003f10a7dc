import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { crc32, deflateSync } from "node:zlib";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import sharp from "sharp";
import { loadConfig } from "../src/config.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { openStorage } from "../src/storage/open.ts";
import { TRANSFORM_LIMITS, transformImage } from "../src/storage/transform.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, TEST_ENCRYPTION_KEY, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg } from "./support/media-fixtures.ts";

/**
 * Image transforms of /storage/v1 (docs/uploads.md, "Image transforms") through storage-js over
 * real HTTP: download({ transform }) → /render/image/authenticated, getPublicUrl({ transform }) →
 * /render/image/public, createSignedUrl({ transform }) → /render/image/sign with the transform in
 * the token. Each output's size and format is read back with sharp.
 */

/** A PNG that declares `side` × `side` pixels in a few dozen bytes (a decompression bomb). */
function bombPng(side: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(side, 0);
  ihdr.writeUInt32BE(side, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(Buffer.alloc(1024))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

describeEachEngine("storage: image transforms with storage-js", (t) => {
  let app: RunningApp;
  let storage: SupabaseClient["storage"];
  let anon: SupabaseClient["storage"];
  let serviceKey: string;
  let anonKey: string;
  let png: Buffer;
  let jpeg: Buffer;

  const size = async (bytes: ArrayBuffer | Buffer | Blob) => {
    const buffer =
      bytes instanceof Blob ? Buffer.from(await bytes.arrayBuffer()) : Buffer.from(bytes as never);
    const meta = await sharp(buffer).metadata();
    return { width: meta.width, height: meta.height, format: meta.format, bytes: buffer.length };
  };
  const get = (url: string, headers: Record<string, string> = {}) =>
    fetch(url, { headers: { apikey: serviceKey, authorization: `Bearer ${serviceKey}`, ...headers } });

  before(async () => {
    app = await startApp(t());
    const { keys } = await tenantWithKeys(t(), { settings: UNLIMITED });
    serviceKey = keys.service_role_key;
    anonKey = keys.anon_key;
    const options = { auth: { persistSession: false, autoRefreshToken: false } };
    storage = createClient(app.url, keys.service_role_key, options).storage;
    anon = createClient(app.url, keys.anon_key, options).storage;
    // 400 × 200, with noise so that JPEG quality changes the size.
    const noise = Buffer.alloc(400 * 200 * 3);
    for (let i = 0; i < noise.length; i++) noise[i] = (i * 7919) % 251;
    png = await sharp(noise, { raw: { width: 400, height: 200, channels: 3 } })
      .png()
      .toBuffer();
    jpeg = await sharp(noise, { raw: { width: 400, height: 200, channels: 3 } })
      .jpeg({ quality: 95 })
      .toBuffer();
    assert.equal((await storage.createBucket("photos", { public: false })).error, null);
    assert.equal((await storage.createBucket("press", { public: true })).error, null);
    const uploads: [string, string, Buffer, string][] = [
      ["photos", "wide.png", png, "image/png"],
      ["photos", "wide.jpg", jpeg, "image/jpeg"],
      ["photos", "notes.txt", Buffer.from("not a picture at all\n".repeat(20)), "text/plain"],
      ["photos", "bomb.png", bombPng(60_000), "image/png"],
      ["press", "cover.png", png, "image/png"],
    ];
    for (const [bucket, name, body, contentType] of uploads) {
      assert.equal((await storage.from(bucket).upload(name, body, { contentType })).error, null, name);
    }
  });
  after(async () => {
    await app?.close();
  });

  test("download({ transform }) resizes in each mode, as the caller reads the object", async () => {
    const photos = storage.from("photos");
    const cases: [Record<string, unknown>, number, number][] = [
      [{ width: 100, height: 100 }, 100, 100], // cover (the default): cropped to the box
      [{ width: 100, height: 100, resize: "cover" }, 100, 100],
      [{ width: 100, height: 100, resize: "contain" }, 100, 50], // inside the box, aspect kept
      [{ width: 100, height: 100, resize: "fill" }, 100, 100], // stretched
      [{ width: 100 }, 100, 50],
      [{ height: 50 }, 100, 50],
    ];
    for (const [transform, width, height] of cases) {
      const { data, error } = await photos.download("wide.png", { transform });
      assert.equal(error, null, JSON.stringify(transform));
      const out = await size(data as Blob);
      assert.deepEqual([out.width, out.height], [width, height], JSON.stringify(transform));
    }
    // Never enlarged: a side larger than the source keeps the source's.
    const { data } = await photos.download("wide.png", { transform: { width: 2000 } });
    const out = await size(data as Blob);
    assert.deepEqual([out.width, out.height], [400, 200]);
  });

  test("quality and format: origin keeps the source's, webp and avif convert, Accept negotiates", async () => {
    const photos = storage.from("photos");
    const low = await photos.download("wide.jpg", {
      transform: { width: 300, quality: 20, format: "origin" },
    });
    const high = await photos.download("wide.jpg", {
      transform: { width: 300, quality: 100, format: "origin" },
    });
    const lowOut = await size(low.data as Blob);
    const highOut = await size(high.data as Blob);
    assert.equal(lowOut.format, "jpeg");
    assert.equal(highOut.format, "jpeg");
    assert.ok(
      lowOut.bytes < highOut.bytes / 2,
      `quality 20 (${lowOut.bytes}) < quality 100 (${highOut.bytes})`,
    );
    const origin = await photos.download("wide.png", { transform: { width: 50, format: "origin" } });
    assert.equal((await size(origin.data as Blob)).format, "png");

    const base = `${app.url}/storage/v1/render/image/authenticated/photos/wide.png`;
    const webp = await get(`${base}?width=50&format=webp`);
    assert.equal(webp.status, 200);
    assert.equal(webp.headers.get("content-type"), "image/webp");
    assert.equal((await size(Buffer.from(await webp.arrayBuffer()))).format, "webp");
    const avif = await get(`${base}?width=50&format=avif`);
    assert.equal(avif.headers.get("content-type"), "image/avif");
    assert.equal((await size(Buffer.from(await avif.arrayBuffer()))).format, "heif");
    // No format: WebP for a client that takes it, the source's format otherwise.
    const negotiated = await get(`${base}?width=50`, { accept: "image/avif,image/webp,*/*" });
    assert.equal(negotiated.headers.get("content-type"), "image/webp");
    assert.equal(negotiated.headers.get("vary"), "Accept");
    assert.ok(negotiated.headers.get("cache-control"), "cached as the download is");
    const plain = await get(`${base}?width=50`, { accept: "*/*" });
    assert.equal(plain.headers.get("content-type"), "image/png");
  });

  test("createSignedUrl({ transform }): the token carries the transform; the query cannot change it", async () => {
    const { data, error } = await storage
      .from("photos")
      .createSignedUrl("wide.png", 60, { transform: { width: 80, height: 80, resize: "fill" } });
    assert.equal(error, null);
    const url = (data as { signedUrl: string }).signedUrl;
    assert.match(url, /\/storage\/v1\/render\/image\/sign\/photos\/wide\.png\?token=/);
    const response = await fetch(url);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("x-transformations"), "height:80,width:80,resizing_type:force");
    const out = await size(Buffer.from(await response.arrayBuffer()));
    assert.deepEqual([out.width, out.height], [80, 80]);
    const tampered = await fetch(`${url}&width=300&height=20`);
    const still = await size(Buffer.from(await tampered.arrayBuffer()));
    assert.deepEqual([still.width, still.height], [80, 80]);
    // A token without a transform still only reads the object it names.
    const plain = await storage.from("photos").createSignedUrl("wide.png", 60);
    const other = (plain.data as { signedUrl: string }).signedUrl.replace("wide.png", "wide.jpg");
    assert.equal((await fetch(other)).status, 403);
    // A bad transform is refused when signing.
    const bad = await storage.from("photos").createSignedUrl("wide.png", 60, { transform: { quality: 5 } });
    assert.ok(bad.error);
  });

  test("getPublicUrl({ transform }) on a public bucket; a private object through the public route is refused", async () => {
    const { data } = storage
      .from("press")
      .getPublicUrl("cover.png", { transform: { width: 40, height: 40 } });
    assert.match(data.publicUrl, /\/render\/image\/public\/press\/cover\.png\?/);
    // The tenant is named by its key (docs/uploads.md): the anon key, no login.
    const response = await fetch(data.publicUrl, { headers: { apikey: anonKey } });
    assert.equal(response.status, 200);
    const out = await size(Buffer.from(await response.arrayBuffer()));
    assert.deepEqual([out.width, out.height], [40, 40]);

    const secret = storage.from("photos").getPublicUrl("wide.png", { transform: { width: 40 } });
    const refused = await fetch(secret.data.publicUrl, { headers: { apikey: anonKey } });
    assert.equal(refused.status, 404);
    assert.equal(((await refused.json()) as { code: string }).code, "NoSuchBucket");
  });

  test("row security: a caller who may not read the object gets no transform of it", async () => {
    const plain = await anon.from("photos").download("wide.png");
    const transformed = await anon.from("photos").download("wide.png", { transform: { width: 50 } });
    assert.ok(plain.error, "anon may not download it");
    assert.ok(transformed.error, "nor transform it");
    assert.equal(
      (transformed.error as { status?: number }).status,
      (plain.error as { status?: number }).status,
    );
  });

  test("IMAGE_TRANSFORM_MAX_BYTES and IMAGE_TRANSFORM_MAX_PIXELS bound what a server transforms", async () => {
    assert.throws(
      () => loadConfig({ IMAGE_TRANSFORM_MAX_PIXELS: "10", ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }),
      /IMAGE_TRANSFORM_MAX_PIXELS/,
    );
    // The same files (DATA_DIR) and database as the first server, tighter bounds.
    const strict = await startApp(t(), {
      DATA_DIR: app.config.dataDir,
      IMAGE_TRANSFORM_MAX_BYTES: "20000",
      IMAGE_TRANSFORM_MAX_PIXELS: "1000000",
    });
    try {
      // 1200 × 1000 of one colour: a few kilobytes, 1.2 million pixels.
      const plain = await sharp({ create: { width: 1200, height: 1000, channels: 3, background: "#0a0" } })
        .png()
        .toBuffer();
      assert.ok(plain.length < 20000);
      assert.equal(
        (await storage.from("photos").upload("plain.png", plain, { contentType: "image/png" })).error,
        null,
      );
      const base = `${strict.url}/storage/v1/render/image/authenticated/photos`;
      const big = await get(`${base}/wide.jpg?width=10`);
      assert.equal(big.status, 413, "the 400 × 200 JPEG is over 20000 bytes");
      assert.equal(((await big.json()) as { code: string }).code, "EntityTooLarge");
      const many = await get(`${base}/plain.png?width=10`);
      assert.equal(many.status, 422);
      assert.match(((await many.json()) as { message: string }).message, /1000000 pixels/);
      // The default server transforms both.
      assert.equal(
        (await get(`${app.url}/storage/v1/render/image/authenticated/photos/plain.png?width=10`)).status,
        200,
      );
    } finally {
      await strict.close();
    }
  });

  test("refusals in Storage's shape: a non-image, a too-large side, a bad mode, a decompression bomb", async () => {
    const base = `${app.url}/storage/v1/render/image/authenticated/photos`;
    const cases: [string, number, string][] = [
      ["notes.txt?width=10", 422, "InvalidImage"],
      ["wide.png?width=3000", 400, "InvalidParameter"],
      ["wide.png?height=0", 400, "InvalidParameter"],
      ["wide.png?resize=stretch", 400, "InvalidParameter"],
      ["wide.png?quality=101", 400, "InvalidParameter"],
      ["wide.png?format=bmp", 400, "InvalidParameter"],
      ["missing.png?width=10", 404, "NoSuchKey"],
    ];
    for (const [path, status, code] of cases) {
      const response = await get(`${base}/${path}`);
      const body = (await response.json()) as { code: string; statusCode: string; message: string };
      assert.equal(response.status, status, path);
      assert.equal(body.code, code, path);
      assert.equal(body.statusCode, String(status));
      assert.ok(body.message.length > 0);
    }
    const started = Date.now();
    const bomb = await get(`${base}/bomb.png?width=100`);
    const body = (await bomb.json()) as { code: string; message: string };
    assert.equal(bomb.status, 422);
    assert.equal(body.code, "InvalidImage");
    assert.match(body.message, /pixels/);
    assert.ok(Date.now() - started < 5000, "refused from the header, without decoding");
    // storage-js shows the message.
    const { error } = await storage.from("photos").download("bomb.png", { transform: { width: 100 } });
    assert.ok(error);
  });
});

describeEachEngine("storage: transforms of the artwork slot", (t) => {
  let app: RunningApp;
  let worker: Worker;
  before(async () => {
    app = await startApp(t());
    const { store } = openStorage(app.config, loadSecretBox(app.config));
    worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db, { store }), pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
  });

  test("a valid cover transforms for its account's member, not for another account's", async () => {
    const { keys } = await tenantWithKeys(t(), {
      auth: { email_confirmation: false },
      settings: { ...UNLIMITED, require_media: true },
    });
    const member = async () => {
      const client = createClient(app.url, keys.anon_key, {
        auth: { persistSession: false, autoRefreshToken: false },
      });
      const email = `transform-${Date.now()}-${Math.random().toString(36).slice(2)}@example.org`;
      const { error } = await client.auth.signUp({ email, password: "correct horse battery staple" });
      assert.equal(error, null);
      return client;
    };
    const user = await member();
    const artist = await user.from("artist_profiles").insert({ name: "Mira Vale" }).select().single();
    const release = await user
      .from("releases")
      .insert({ artist_id: (artist.data as { id: string }).id, title: "Signals", release_type: "single" })
      .select()
      .single();
    const path = `${(release.data as { id: string }).id}/cover.jpg`;
    const signed = await user.storage.from("artwork").createSignedUploadUrl(path);
    assert.equal(signed.error, null);
    const up = await user.storage
      .from("artwork")
      .uploadToSignedUrl(
        path,
        signed.data?.token as string,
        new Blob([await artworkJpeg()], { type: "image/jpeg" }),
      );
    assert.equal(up.error, null);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { data } = await user
        .from("media_assets")
        .select("status")
        .eq("kind", "artwork")
        .in("status", ["valid", "invalid"]);
      if ((data ?? []).length > 0) {
        assert.equal((data as { status: string }[])[0]?.status, "valid");
        break;
      }
      assert.ok(Date.now() < deadline, "cover not judged");
      await new Promise((r) => setTimeout(r, 50));
    }

    const { data, error } = await user.storage
      .from("artwork")
      .download(path, { transform: { width: 120, height: 120, format: "origin" } });
    assert.equal(error, null, JSON.stringify(error));
    const meta = await sharp(Buffer.from(await (data as Blob).arrayBuffer())).metadata();
    assert.deepEqual([meta.width, meta.height, meta.format], [120, 120, "jpeg"]);

    const stranger = await member();
    const refused = await stranger.storage.from("artwork").download(path, { transform: { width: 120 } });
    assert.ok(refused.error, "another account's member reads no transform of the cover");
    // No public URL and no transform on a slot's signed URL.
    const sign = await user.storage.from("artwork").createSignedUrl(path, 60, { transform: { width: 120 } });
    assert.ok(sign.error);
  });
});

test("at most `concurrency` transforms run, `queue` wait; beyond, 503 SlowDown", async () => {
  const image = await sharp({ create: { width: 64, height: 64, channels: 3, background: "#123456" } })
    .png()
    .toBuffer();
  const limits = { ...TRANSFORM_LIMITS, concurrency: 1, queue: 0 };
  const results = await Promise.allSettled([
    transformImage(image, { width: 10 }, undefined, limits),
    transformImage(image, { width: 10 }, undefined, limits),
  ]);
  assert.equal(results[0].status, "fulfilled");
  assert.equal(results[1].status, "rejected");
  assert.equal(((results[1] as PromiseRejectedResult).reason as { code: string }).code, "SlowDown");
  // Once the first is done, the next runs.
  const after = await transformImage(image, { width: 10 }, undefined, limits);
  assert.equal((await sharp(after.body).metadata()).width, 10);
});
