import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { openStorage } from "../src/storage/open.ts";
import type { S3Store } from "../src/storage/s3.ts";
import { validateAsset } from "../src/storage/uploads.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg, flac } from "./support/media-fixtures.ts";
import { expectStatus } from "./support/public-api.ts";
import { type RunningS3rver, startS3rver } from "./support/s3rver.ts";
import { artworkUrl, draft, type Target, uploader } from "./support/uploads.ts";

/**
 * Issue 26, item 12: how media is served. A file that failed inspection (HTML declared as a JPEG)
 * or was not inspected yet is an attachment of application/octet-stream; only inspected, valid
 * artwork and audio are served inline with their type; every answer says nosniff. A signed URL is
 * bound to the file's version: after a replacement, a URL signed before answers 410
 * object_replaced. Local driver through storage-js; S3 through the signed route's redirect to a
 * presigned GET that carries response-content-type and response-content-disposition.
 */

type Obj = Record<string, unknown>;
const PASSWORD = "correct horse battery staple";
const HTML = Buffer.from("<html><body><script>fetch('/auth/v1/user')</script></body></html>");
let n = 0;

async function fetched(url: string, init?: RequestInit) {
  const res = await fetch(url, init);
  const body = Buffer.from(await res.arrayBuffer());
  return { res, body, header: (name: string) => res.headers.get(name) };
}

function assertAttachment(r: Awaited<ReturnType<typeof fetched>>, filename: string, what: string) {
  assert.equal(r.res.status, 200, `${what}: ${r.body.toString().slice(0, 200)}`);
  assert.equal(r.header("content-type"), "application/octet-stream", what);
  assert.equal(r.header("content-disposition"), `attachment; filename="${filename}"`, what);
  assert.equal(r.header("x-content-type-options"), "nosniff", what);
}

function assertInline(r: Awaited<ReturnType<typeof fetched>>, type: string, filename: string, what: string) {
  assert.equal(r.res.status, 200, `${what}: ${r.body.toString().slice(0, 200)}`);
  assert.equal(r.header("content-type"), type, what);
  assert.equal(r.header("content-disposition"), `inline; filename="${filename}"`, what);
  assert.equal(r.header("x-content-type-options"), "nosniff", what);
}

describeEachEngine("downloads: local storage through /storage/v1", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  /** Runs the inspection the worker would (no worker here: the test decides when files are inspected). */
  async function inspect(release: string, kind: "artwork" | "audio") {
    const { store } = openStorage(app.config, loadSecretBox(app.config));
    const ids = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ id: string }>(
            "select id from public.media_assets where release_id = $1 and kind = $2 and status = 'uploaded'",
            [release, kind],
          )
        ).rows,
    );
    for (const { id } of ids) await validateAsset(t().db, store, id);
  }

  async function user(): Promise<{ client: SupabaseClient; headers: Record<string, string> }> {
    const { keys } = await tenantWithKeys(t(), {
      auth: { email_confirmation: false },
      settings: { ...UNLIMITED, require_media: true },
    });
    const client = createClient(app.url, keys.anon_key, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const { data, error } = await client.auth.signUp({
      email: `downloads-${Date.now()}-${n++}@example.org`,
      password: PASSWORD,
    });
    assert.equal(error, null);
    return {
      client,
      headers: { apikey: keys.anon_key, authorization: `Bearer ${data.session?.access_token}` },
    };
  }

  async function release(client: SupabaseClient): Promise<{ release: string; track: string }> {
    const artist = await client.from("artist_profiles").insert({ name: "Mira Vale" }).select().single();
    const rel = await client
      .from("releases")
      .insert({ artist_id: (artist.data as Obj).id, title: "Signals", release_type: "single" })
      .select()
      .single();
    assert.equal(rel.error, null);
    const track = await client
      .from("tracks")
      .insert({ release_id: (rel.data as Obj).id, title: "Signals", track_number: 1 })
      .select()
      .single();
    assert.equal(track.error, null);
    return { release: String((rel.data as Obj).id), track: String((track.data as Obj).id) };
  }

  async function upload(client: SupabaseClient, bucket: string, path: string, bytes: Buffer, type: string) {
    const signed = await client.storage.from(bucket).createSignedUploadUrl(path);
    assert.equal(signed.error, null, JSON.stringify(signed.error));
    const up = await client.storage
      .from(bucket)
      .uploadToSignedUrl(path, signed.data?.token as string, bytes, { contentType: type });
    assert.equal(up.error, null, JSON.stringify(up.error));
  }

  async function signedUrl(client: SupabaseClient, bucket: string, path: string): Promise<string> {
    const url = await client.storage.from(bucket).createSignedUrl(path, 3600);
    assert.equal(url.error, null, JSON.stringify(url.error));
    return url.data?.signedUrl as string;
  }

  test("a file that failed inspection (HTML sent as a JPEG) is an attachment of application/octet-stream, nosniff", async () => {
    const { client, headers } = await user();
    const { release: id } = await release(client);
    const path = `${id}/cover.jpg`;
    await upload(client, "artwork", path, HTML, "image/jpeg");

    // Not inspected yet: not rendered either.
    const url = `${app.url}/storage/v1/object/authenticated/artwork/${path}`;
    assertAttachment(await fetched(url, { headers }), "cover.jpg", "uploaded, not inspected");

    await inspect(id, "artwork");
    const row = await client.from("media_assets").select("status").eq("release_id", id).single();
    assert.equal((row.data as Obj).status, "invalid");
    for (const [what, target] of [
      ["authenticated", url],
      ["as the caller", `${app.url}/storage/v1/object/artwork/${path}`],
      ["signed URL", await signedUrl(client, "artwork", path)],
    ] as const) {
      const r = await fetched(target, what === "signed URL" ? undefined : { headers });
      assertAttachment(r, "cover.jpg", what);
      assert.deepEqual(r.body, HTML, "the bytes themselves, only never as a page");
    }
  });

  test("inspected, valid artwork and audio are served inline with their own type, nosniff", async () => {
    const { client, headers } = await user();
    const { release: id, track } = await release(client);
    const cover = await artworkJpeg();
    const sound = flac({ seconds: 1 });
    await upload(client, "artwork", `${id}/cover.jpg`, cover, "image/jpeg");
    await upload(client, "audio", `${id}/${track}.flac`, sound, "audio/flac");
    await inspect(id, "artwork");
    await inspect(id, "audio");
    const art = await fetched(await signedUrl(client, "artwork", `${id}/cover.jpg`));
    assertInline(art, "image/jpeg", "cover.jpg", "artwork");
    assert.deepEqual(art.body, cover);
    const audio = await fetched(`${app.url}/storage/v1/object/authenticated/audio/${id}/${track}.flac`, {
      headers,
    });
    assertInline(audio, "audio/flac", `${track}.flac`, "audio");
    assert.deepEqual(audio.body, sound);
    // Errors say nosniff too.
    const missing = await fetched(
      `${app.url}/storage/v1/object/authenticated/artwork/${randomUUID()}/cover.jpg`,
      {
        headers,
      },
    );
    assert.equal(missing.res.status, 404);
    assert.equal(missing.header("x-content-type-options"), "nosniff");
  });

  test("a URL signed before a replacement answers 410 object_replaced; a new one serves the new file", async () => {
    const { client } = await user();
    const { release: id } = await release(client);
    const first = await artworkJpeg();
    await upload(client, "artwork", `${id}/cover.jpg`, first, "image/jpeg");
    await inspect(id, "artwork");
    const before = await signedUrl(client, "artwork", `${id}/cover.jpg`);
    assert.deepEqual((await fetched(before)).body, first);

    // The same slot, the same object key, other bytes.
    const second = Buffer.concat([first.subarray(0, first.length - 2), Buffer.from([0x00, 0xff, 0xd9])]);
    await upload(client, "artwork", `${id}/cover.jpg`, second, "image/jpeg");
    const stale = await fetched(before);
    assert.equal(stale.res.status, 410, stale.body.toString());
    assert.equal((JSON.parse(stale.body.toString()) as Obj).code, "object_replaced");
    assert.equal(stale.header("x-content-type-options"), "nosniff");

    const after = await fetched(await signedUrl(client, "artwork", `${id}/cover.jpg`));
    assert.equal(after.res.status, 200);
    assert.deepEqual(after.body, second);

    // A token without the asset it was signed for (as issued before this rule) is refused.
    const { signer } = openStorage(app.config, loadSecretBox(app.config));
    const key = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ object_key: string }>(
            "select object_key from public.media_assets where release_id = $1 and superseded_at is null",
            [id],
          )
        ).rows[0]?.object_key as string,
    );
    const unbound = signer.sign({ use: "download", key, exp: Math.floor(Date.now() / 1000) + 60 } as never);
    const old = await fetched(`${app.url}/storage/v1/object/sign/artwork/${id}/cover.jpg?token=${unbound}`);
    assert.equal(old.res.status, 403);
    assert.equal((JSON.parse(old.body.toString()) as Obj).code, "token_invalid");
  });
});

describeEachEngine("downloads: S3 storage, the signed route's redirect", (t) => {
  const BUCKET = "backline-downloads";
  let s3rver: RunningS3rver | undefined;
  let app: RunningApp;
  let store: S3Store;

  before(async () => {
    s3rver = await startS3rver();
    app = await startApp(t(), {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: s3rver.endpoint,
      S3_BUCKET: BUCKET,
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      S3_FORCE_PATH_STYLE: "true",
    });
    store = openStorage(app.config, loadSecretBox(app.config)).store as S3Store;
    await store.client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  });
  after(async () => {
    await app?.close();
    store?.close();
    await s3rver?.close();
  });

  /** Uploads `bytes` as the release's artwork through the public API (presigned PUT, then complete). */
  async function uploadArtwork(
    api: Awaited<ReturnType<typeof uploader>>["api"],
    release: string,
    bytes: Buffer,
  ) {
    const target = await artworkUrl(api, release, { content_type: "image/jpeg", size: bytes.length });
    const put = await fetch(target.upload_url, { method: "PUT", headers: target.headers, body: bytes });
    assert.equal(put.status, 200, await put.text());
    expectStatus(await api("POST", `/uploads/${target.asset_id}/complete`), 200);
    return target as Target;
  }

  /** The signed URL POST /storage/v1/object/sign makes for the slot's current asset. */
  async function signed(release: string, assetId: string): Promise<string> {
    const { signer } = openStorage(app.config, loadSecretBox(app.config));
    const row = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ object_key: string }>("select object_key from public.media_assets where id = $1", [
            assetId,
          ])
        ).rows[0],
    );
    const token = signer.sign({
      use: "download",
      key: row?.object_key as string,
      asset: assetId,
      exp: Math.floor(Date.now() / 1000) + 3600,
    });
    return `${app.url}/storage/v1/object/sign/artwork/${release}/cover.jpg?token=${token}`;
  }

  test("an uninspected or failed file comes from the bucket as an attachment; a replaced one answers 410", async () => {
    const { api } = await uploader(t(), app);
    const release = await draft(api);
    const first = await uploadArtwork(api, release.id, HTML);
    const url = await signed(release.id, first.asset_id);

    const redirect = await fetch(url, { redirect: "manual" });
    assert.equal(redirect.status, 302);
    assert.equal(redirect.headers.get("x-content-type-options"), "nosniff");
    const location = new URL(redirect.headers.get("location") as string);
    assert.equal(location.searchParams.get("response-content-type"), "application/octet-stream");
    assert.equal(
      location.searchParams.get("response-content-disposition"),
      'attachment; filename="cover.jpg"',
    );
    const expires = Number(location.searchParams.get("X-Amz-Expires"));
    assert.ok(expires > 0 && expires <= 300, `the presigned GET lives minutes, not days: ${expires}`);
    const fromBucket = await fetched(location.toString());
    assert.equal(fromBucket.res.status, 200);
    assert.equal(fromBucket.header("content-type"), "application/octet-stream");
    assert.equal(fromBucket.header("content-disposition"), 'attachment; filename="cover.jpg"');
    assert.deepEqual(fromBucket.body, HTML);

    const cover = await artworkJpeg();
    await uploadArtwork(api, release.id, cover);
    const stale = await fetched(url, { redirect: "manual" });
    assert.equal(stale.res.status, 410);
    assert.equal((JSON.parse(stale.body.toString()) as Obj).code, "object_replaced");
  });
});
