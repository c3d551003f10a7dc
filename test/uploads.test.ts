import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { openStorage } from "../src/storage/open.ts";
import type { UploadGrant } from "../src/storage/tokens.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { artworkJpeg, artworkPng, flac, wav } from "./support/media-fixtures.ts";
import { tempDir } from "./support/process.ts";
import { type ApiResponse, assertProblem, expectStatus } from "./support/public-api.ts";
import { type Api, artworkUrl, audioUrl, draft, judged, type Target, uploader } from "./support/uploads.ts";

/**
 * Uploads through /api/public/v1 (seed 001; docs/uploads.md) on the local-disk driver, over real
 * HTTP: the signed URL, the streamed upload, the checks the worker runs on the bytes, what the
 * release and track show, and submit refusing missing or invalid media. Then the ways an upload
 * must fail (size, token, type, another account, a release no longer editable) without changing
 * anything.
 */

type Obj = Record<string, unknown>;

const ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64");
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describeEachEngine("uploads: signed URLs on local storage", (t) => {
  let app: RunningApp;
  let dataDir: string;
  let worker: Worker;
  let storage: ReturnType<typeof openStorage>;
  const env = () => ({
    DATA_DIR: dataDir,
    ENCRYPTION_KEY,
    UPLOAD_MAX_ARTWORK_BYTES: String(4 * 1024 * 1024),
    UPLOAD_MAX_AUDIO_BYTES: String(3 * 1024 * 1024),
  });

  before(async () => {
    dataDir = tempDir("backline-uploads-");
    app = await startApp(t(), env());
    const config = loadConfig({ ...env(), PORT: new URL(app.url).port });
    storage = openStorage(config, loadSecretBox(config));
    worker = new Worker({
      db: t().db,
      handlers: pipelineHandlers(t().db, { store: storage.store }),
      pollMs: 20,
    });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const keyed = (scopes?: string[]) => uploader(t(), app, scopes);

  async function put(target: Target, bytes: Buffer, headers: Record<string, string> = target.headers) {
    const res = await fetch(target.upload_url, { method: target.method, headers, body: bytes });
    return { status: res.status, body: (await res.json()) as Obj };
  }

  async function uploadValidMedia(api: Api, release: { id: string; tracks: string[] }) {
    const cover = await artworkJpeg();
    const target = await artworkUrl(api, release.id, { filename: "cover.jpg" });
    assert.equal((await put(target, cover)).status, 200);
    assert.equal((await judged(api, target.asset_id)).status, "valid");
    for (const track of release.tracks) {
      const audio = await audioUrl(api, release.id, track, { filename: "master.wav" });
      assert.equal((await put(audio, wav())).status, 200);
      assert.equal((await judged(api, audio.asset_id)).status, "valid");
    }
  }

  const mediaRows = (releaseId: string) =>
    t().db.asService(
      async (tx) =>
        (
          await tx.query<Obj>(
            "select id, status, superseded_at, object_key from public.media_assets where release_id = $1 order by created_at",
            [releaseId],
          )
        ).rows,
    );

  test("artwork: a signed URL, the file streamed to storage, checked valid and shown on the release", async () => {
    const { api, account } = await keyed();
    const release = await draft(api);
    const cover = await artworkJpeg();
    const before = Date.now();
    const target = await artworkUrl(api, release.id, {
      filename: "cover.jpg",
      content_type: "image/jpeg",
      size: cover.length,
      sha256: sha256(cover),
    });
    assert.equal(target.method, "PUT");
    assert.deepEqual(target.headers, { "content-type": "image/jpeg" });
    assert.equal(target.max_bytes, 4 * 1024 * 1024);
    assert.match(
      target.upload_url,
      new RegExp(`^${app.url}/storage/v1/object/upload/sign/artwork/${release.id}/cover\\.jpg\\?token=`),
    );
    const expires = Date.parse(target.expires_at);
    assert.ok(expires >= before + 899_000 && expires <= Date.now() + 901_000, "15 minutes by default");

    const uploaded = await put(target, cover);
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    assert.equal(uploaded.body.sha256, sha256(cover));
    assert.equal(uploaded.body.bytes, cover.length);
    const file = path.join(dataDir, "storage", "artwork", account.id, release.id, "cover.jpg");
    assert.deepEqual(fs.readFileSync(file), cover, "the bytes are in place under DATA_DIR/storage");
    assert.deepEqual(
      fs.readdirSync(path.join(dataDir, "storage", ".uploads")),
      [],
      "no temporary file is left",
    );

    const asset = await judged(api, target.asset_id);
    assert.equal(asset.status, "valid");
    assert.deepEqual(asset.problems, []);
    assert.equal((asset.metadata as Obj).width, 3000);
    assert.equal((asset.metadata as Obj).height, 3000);
    assert.equal((asset.metadata as Obj).format, "jpeg");
    assert.equal(asset.current, true);

    const detail = expectStatus(await api("GET", `/releases/${release.id}`), 200);
    assert.equal((detail.artwork as Obj).id, target.asset_id);
    assert.equal((detail.artwork as Obj).status, "valid");
  });

  test("audio: WAV and FLAC are checked, and the track gets its measured duration and audio metadata", async () => {
    const { api } = await keyed();
    const release = await draft(api, 2);
    const [first, second] = release.tracks as [string, string];
    const w = wav({ seconds: 3, sampleRate: 48_000, bitDepth: 24 });
    const t1 = await audioUrl(api, release.id, first, { filename: "one.wav", size: w.length });
    assert.match(
      t1.upload_url,
      new RegExp(`/storage/v1/object/upload/sign/audio/${release.id}/${first}\\.wav\\?token=`),
    );
    assert.equal((await put(t1, w)).status, 200);
    const f = flac({ seconds: 2 });
    const t2 = await audioUrl(api, release.id, second, { content_type: "audio/flac" });
    assert.deepEqual(t2.headers, { "content-type": "audio/flac" });
    assert.equal((await put(t2, f)).status, 200);

    const a1 = await judged(api, t1.asset_id);
    const a2 = await judged(api, t2.asset_id);
    assert.equal(a1.status, "valid", JSON.stringify(a1.problems));
    assert.equal(a2.status, "valid", JSON.stringify(a2.problems));
    assert.equal((a1.metadata as Obj).sample_rate, 48_000);
    assert.equal((a1.metadata as Obj).bit_depth, 24);
    assert.equal((a2.metadata as Obj).format, "flac");

    const detail = expectStatus(await api("GET", `/releases/${release.id}`), 200);
    const [one, two] = detail.tracks as [Obj, Obj];
    assert.equal(one.duration, 3);
    assert.equal(two.duration, 2);
    assert.equal((one.audio_metadata as Obj).channels, 2);
    assert.equal((one.audio as Obj).status, "valid");
    assert.equal((two.audio as Obj).id, t2.asset_id);
    const track = expectStatus(await api("GET", `/releases/${release.id}/tracks/${second}`), 200);
    assert.equal(track.duration, 2);
    assert.equal((track.audio as Obj).id, t2.asset_id);
    assert.equal((track.audio as Obj).status, "valid");
  });

  test("submit refuses missing, unchecked or invalid media with every reason, and accepts valid media", async () => {
    const { api } = await keyed();
    const release = await draft(api, 1);
    const missing = assertProblem(
      await api("POST", `/releases/${release.id}/submit`),
      422,
      "release_incomplete",
    );
    const codes = (missing.errors ?? []).map((e) => `${e.param}:${e.code}`);
    assert.deepEqual(codes.sort(), ["artwork:artwork_missing", "tracks[0].audio:audio_missing"]);

    // Too small and not square: invalid, with the reasons in the submit error.
    const small = await artworkPng({ width: 1000, height: 800 });
    const target = await artworkUrl(api, release.id, { filename: "cover.png" });
    assert.equal((await put(target, small)).status, 200);
    const bad = await judged(api, target.asset_id);
    assert.equal(bad.status, "invalid");
    const problemCodes = (bad.problems as { code: string }[]).map((p) => p.code).sort();
    assert.deepEqual(problemCodes, ["not_square", "too_small"]);
    const refused = assertProblem(
      await api("POST", `/releases/${release.id}/submit`),
      422,
      "release_incomplete",
    );
    const artwork = (refused.errors ?? []).find((e) => e.param === "artwork");
    assert.equal(artwork?.code, "artwork_invalid");
    assert.match(String(artwork?.message), /1000×800/);

    // A new upload replaces the invalid one (and its file of another extension).
    await uploadValidMedia(api, release);
    const rows = await mediaRows(release.id);
    const artworkRows = rows.filter((r) => String(r.object_key).startsWith("artwork/"));
    assert.equal(artworkRows.filter((r) => r.superseded_at === null).length, 1);
    assert.ok(
      !fs.existsSync(path.join(dataDir, "storage", String(artworkRows[0]?.object_key))),
      "cover.png removed",
    );

    const submitted = expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
    assert.equal(submitted.status, "submitted");
  });

  test("files that are not what they must be are judged invalid, with every problem", async () => {
    const { api } = await keyed();
    const release = await draft(api, 3);
    const cases: { track: string; bytes: Buffer; codes: string[] }[] = [
      {
        track: release.tracks[0] as string,
        bytes: wav({ channels: 1, bitDepth: 8, sampleRate: 22_050 }),
        codes: ["bit_depth", "channels", "sample_rate"],
      },
      {
        track: release.tracks[1] as string,
        bytes: Buffer.from("this is not audio at all, just text\n".repeat(20)),
        codes: ["unsupported_format"],
      },
      {
        track: release.tracks[2] as string,
        bytes: wav({ seconds: 2 }).subarray(0, 2000),
        codes: ["corrupt"],
      },
    ];
    for (const c of cases) {
      const target = await audioUrl(api, release.id, c.track);
      assert.equal((await put(target, c.bytes)).status, 200);
      const asset = await judged(api, target.asset_id);
      assert.equal(asset.status, "invalid");
      const codes = (asset.problems as { code: string }[]).map((p) => p.code);
      for (const code of c.codes) assert.ok(codes.includes(code), `${code} in ${codes.join(",")}`);
    }
    // A JPEG sent as the track's audio: the declared type is audio/wav, the bytes an image.
    const jpeg = await artworkJpeg();
    const target = await audioUrl(api, release.id, release.tracks[0] as string);
    assert.equal((await put(target, jpeg)).status, 200);
    const asset = await judged(api, target.asset_id);
    assert.equal(asset.status, "invalid");
  });

  test("too large: refused when declared, cut off at the limit when not, and nothing is kept", async () => {
    const { api, account } = await keyed();
    const release = await draft(api);
    const track = release.tracks[0] as string;
    assertProblem(
      await api("POST", `/releases/${release.id}/tracks/${track}/audio-upload-url`, {
        size: 3 * 1024 * 1024 + 1,
      }),
      413,
      "file_too_large",
    );
    const target = await audioUrl(api, release.id, track);
    // Declared by Content-Length: refused before the body is read.
    const big = wav({ seconds: 20 }); // 3.5 MB
    const res = await put(target, big);
    assert.equal(res.status, 413);
    assert.equal(res.body.code, "file_too_large");
    // Streamed without a length: counted, and stopped at the limit.
    const chunked = await fetch(target.upload_url, {
      method: "PUT",
      headers: target.headers,
      body: new Blob([big]).stream(),
      duplex: "half",
    } as RequestInit);
    assert.equal(chunked.status, 413);
    assert.equal(((await chunked.json()) as Obj).code, "file_too_large");
    assert.ok(
      !fs.existsSync(path.join(dataDir, "storage", "audio", account.id, release.id)),
      "no file in place",
    );
    assert.deepEqual(
      fs.readdirSync(path.join(dataDir, "storage", ".uploads")),
      [],
      "no temporary file is left",
    );
    const asset = expectStatus(await api("GET", `/uploads/${target.asset_id}`), 200);
    assert.equal(asset.status, "pending");
    // The same URL still takes a file within the limit.
    assert.equal((await put(target, wav())).status, 200);
  });

  test("tokens: tampered, malformed, expired, for another object, or used twice are refused", async () => {
    const { api } = await keyed();
    const release = await draft(api);
    const target = await artworkUrl(api, release.id);
    const cover = await artworkJpeg();
    const url = new URL(target.upload_url);
    const token = url.searchParams.get("token") as string;
    const [payload, signature] = token.split(".") as [string, string];
    const grant = JSON.parse(Buffer.from(payload, "base64url").toString()) as Obj;

    const withToken = (value: string, pathname = url.pathname) =>
      fetch(`${url.origin}${pathname}?token=${encodeURIComponent(value)}`, {
        method: "PUT",
        headers: target.headers,
        body: cover,
      });
    const cases: [string, string, string][] = [
      [
        "a bigger limit in the payload",
        `${Buffer.from(JSON.stringify({ ...grant, max: 1e12 })).toString("base64url")}.${signature}`,
        "token_invalid",
      ],
      [
        "a flipped signature",
        `${payload}.${signature.startsWith("A") ? "B" : "A"}${signature.slice(1)}`,
        "token_invalid",
      ],
      ["no signature", payload, "token_malformed"],
      [
        "an expired grant",
        storage.signer.sign({ ...(grant as unknown as UploadGrant), exp: Math.floor(Date.now() / 1000) - 1 }),
        "token_expired",
      ],
    ];
    for (const [what, value, code] of cases) {
      const res = await withToken(value);
      assert.equal(res.status, 403, what);
      assert.equal(((await res.json()) as Obj).code, code, what);
    }
    const other = await withToken(
      token,
      url.pathname.replace(release.id, "00000000-0000-4000-8000-000000000000"),
    );
    assert.equal(other.status, 403, "a token names its object");
    const traversal = await withToken(
      token,
      `${url.pathname.split("/artwork/")[0]}/artwork/../../../etc/passwd`,
    );
    // The URL resolves to /object/etc/passwd: an update of an object, which needs a login (401).
    assert.ok([400, 401, 404].includes(traversal.status), `traversal: ${traversal.status}`);

    assert.equal((await put(target, cover)).status, 200);
    const again = await put(target, cover);
    assert.equal(again.status, 409);
    assert.equal(again.body.code, "upload_already_completed");
    const wrongType = await artworkUrl(api, release.id);
    const res = await put(wrongType, cover, { "content-type": "image/png" });
    assert.equal(res.status, 415);
    assert.equal(res.body.code, "content_type_mismatch");
  });

  test("security: another account's release, a read-only key, a submitted release", async () => {
    const owner = await keyed();
    const stranger = await keyed();
    const readOnly = await keyed(["catalog:read"]);
    const release = await draft(owner.api);
    const track = release.tracks[0] as string;

    const probes: [string, ApiResponse][] = [
      [
        "artwork, other account",
        await stranger.api("POST", `/releases/${release.id}/artwork-upload-url`, {}),
      ],
      [
        "audio, other account",
        await stranger.api("POST", `/releases/${release.id}/tracks/${track}/audio-upload-url`, {}),
      ],
    ];
    for (const [what, res] of probes) assert.equal(res.status, 404, what);
    assertProblem(
      await readOnly.api("POST", `/releases/${release.id}/artwork-upload-url`, {}),
      403,
      "insufficient_scope",
    );

    const target = await artworkUrl(owner.api, release.id);
    assert.equal((await stranger.api("GET", `/uploads/${target.asset_id}`)).status, 404);

    await uploadValidMedia(owner.api, release);
    expectStatus(await owner.api("POST", `/releases/${release.id}/submit`), 200);
    assertProblem(
      await owner.api("POST", `/releases/${release.id}/artwork-upload-url`, {}),
      409,
      "release_not_editable",
    );
    // A URL issued before the submission no longer lands.
    const late = await put(target, await artworkJpeg());
    assert.equal(late.status, 409);
    assert.equal(late.body.code, "release_not_editable");
    assert.equal((await mediaRows(release.id)).filter((r) => r.id === target.asset_id)[0]?.status, "pending");
  });

  test("bad requests for an upload URL say which field is wrong", async () => {
    const { api } = await keyed();
    const release = await draft(api);
    const cases: [Obj, string][] = [
      [{ content_type: "image/gif" }, "content_type"],
      [{ size: 0 }, "size"],
      [{ sha256: "xyz" }, "sha256"],
      [{ colour: "blue" }, "colour"],
    ];
    for (const [body, param] of cases) {
      const problem = assertProblem(
        await api("POST", `/releases/${release.id}/artwork-upload-url`, body),
        422,
        "validation_failed",
      );
      assert.ok(
        (problem.errors ?? []).some((e) => e.param === param),
        `${param}: ${JSON.stringify(problem.errors)}`,
      );
    }
    assert.equal((await mediaRows(release.id)).length, 0, "nothing was made");
  });
});
