import assert from "node:assert/strict";
import { createHash, createHmac, randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import type { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CreateBucketCommand, HeadObjectCommand } from "@aws-sdk/client-s3";
import type { UploadRequest } from "../src/storage/driver.ts";
import { S3Store } from "../src/storage/s3.ts";
import { type RunningS3rver, startS3rver } from "./support/s3rver.ts";

/**
 * The S3 driver against a real S3-compatible server on loopback (s3rver). s3rver checks a presigned
 * URL's expiry (X-Amz-Date + X-Amz-Expires) but not its SigV4 signature (its V4 support stops at
 * parsing), so the store talks to it through `SigV4Gate`, a small proxy that verifies the
 * signature of every presigned request as S3 does — an independent implementation of the SigV4
 * query-string algorithm, not the SDK's — and answers 403 SignatureDoesNotMatch like S3.
 * Requests the SDK signs with an Authorization header pass through unchecked.
 */

const BUCKET = "backline-media";
const SECRET = "S3RVER";
const MIB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// SigV4 query-string verification (AWS "Authenticating Requests: Using Query Parameters")

const rfc3986 = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const sha256hex = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();

/** Why S3 would refuse this presigned request's signature, or undefined when it is valid. */
function sigV4Mismatch(
  method: string,
  rawUrl: string,
  headers: http.IncomingHttpHeaders,
  secret: string,
): string | undefined {
  const url = new URL(rawUrl, "http://gate");
  const q = url.searchParams;
  const signature = q.get("X-Amz-Signature");
  const credential = q.get("X-Amz-Credential");
  const amzDate = q.get("X-Amz-Date");
  const signedHeaders = q.get("X-Amz-SignedHeaders");
  if (
    q.get("X-Amz-Algorithm") !== "AWS4-HMAC-SHA256" ||
    !signature ||
    !credential ||
    !amzDate ||
    !signedHeaders
  ) {
    return "incomplete query-string authentication";
  }
  const [, ...scopeParts] = credential.split("/");
  const scope = scopeParts.join("/");
  const [shortDate, region, service] = scopeParts;
  if (!shortDate || !region || !service) return "malformed credential";
  const query = [...q.entries()]
    .filter(([k]) => k !== "X-Amz-Signature")
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([ak, av], [bk, bv]) => (ak === bk ? (av < bv ? -1 : 1) : ak < bk ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  let canonicalHeaders = "";
  for (const name of signedHeaders.split(";")) {
    const value = headers[name];
    if (value === undefined) return `signed header ${name} is missing`;
    canonicalHeaders += `${name}:${String(value).trim().replace(/\s+/g, " ")}\n`;
  }
  const canonicalRequest = [
    method,
    url.pathname,
    query,
    canonicalHeaders,
    signedHeaders,
    q.get("X-Amz-Content-Sha256") ?? "UNSIGNED-PAYLOAD",
  ].join("\n");
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256hex(canonicalRequest)].join("\n");
  let key: Buffer = hmac(`AWS4${secret}`, shortDate);
  for (const part of [region, service, "aws4_request"]) key = hmac(key, part);
  const expected = createHmac("sha256", key).update(stringToSign).digest("hex");
  return expected === signature ? undefined : "signature does not match";
}

/** A proxy in front of s3rver that refuses presigned requests whose SigV4 signature is wrong. */
class SigV4Gate {
  readonly server: http.Server;
  /** Refusals so far (what S3 would have answered SignatureDoesNotMatch to). */
  readonly refused: string[] = [];
  /**
   * S3 errors to answer for a multipart upload id instead of asking s3rver, which answers 500 to
   * an unknown upload id and crashes on a missing part rather than saying NoSuchUpload/InvalidPart.
   */
  readonly s3Errors = new Map<string, { status: number; code: string }>();

  constructor(upstreamPort: number) {
    this.server = http.createServer((req, res) => {
      const rawUrl = req.url ?? "/";
      const canned = this.s3Errors.get(new URL(rawUrl, "http://gate").searchParams.get("uploadId") ?? "");
      if (canned) {
        req.resume();
        req.on("end", () => {
          res.writeHead(canned.status, { "content-type": "application/xml" });
          res.end(`<?xml version="1.0"?><Error><Code>${canned.code}</Code><Message>canned</Message></Error>`);
        });
        return;
      }
      const presigned = new URL(rawUrl, "http://gate").searchParams.has("X-Amz-Algorithm");
      const why = presigned ? sigV4Mismatch(req.method ?? "GET", rawUrl, req.headers, SECRET) : undefined;
      if (why) {
        this.refused.push(why);
        // Read the body before answering, as S3 does, so the client sees the 403 and not a reset.
        req.resume();
        req.on("end", () => {
          res.writeHead(403, { "content-type": "application/xml" });
          res.end(
            `<?xml version="1.0"?><Error><Code>SignatureDoesNotMatch</Code><Message>${why}</Message></Error>`,
          );
        });
        return;
      }
      const upstream = http.request(
        { host: "127.0.0.1", port: upstreamPort, method: req.method, path: rawUrl, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on("error", (error) => res.destroy(error));
      req.pipe(upstream);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return (this.server.address() as AddressInfo).port;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

// ---------------------------------------------------------------------------------------------

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const inMinutes = (n: number) => new Date(Date.now() + n * 60_000);

describe("S3 storage driver (s3rver behind a SigV4-checking proxy)", () => {
  let s3rver: RunningS3rver | undefined;
  let gate: SigV4Gate | undefined;
  let store: S3Store;
  let endpoint: string;

  const request = (key: string, extra: Partial<UploadRequest> = {}): UploadRequest => ({
    assetId: "00000000-0000-4000-8000-000000000001",
    accountId: "00000000-0000-4000-8000-000000000002",
    key,
    contentType: "image/jpeg",
    maxBytes: 100 * MIB,
    expiresAt: inMinutes(15),
    ...extra,
  });

  before(async () => {
    s3rver = await startS3rver();
    gate = new SigV4Gate(s3rver.port);
    endpoint = `http://127.0.0.1:${await gate.listen()}`;
    store = new S3Store({
      endpoint,
      bucket: BUCKET,
      region: "us-east-1",
      accessKeyId: "S3RVER",
      secretAccessKey: SECRET,
      forcePathStyle: true,
      multipartThreshold: 8 * MIB,
      partSize: 5 * MIB,
    });
    await store.client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  });
  after(async () => {
    store?.close();
    await gate?.close();
    await s3rver?.close();
  });

  test("a presigned PUT sent with plain fetch, then stat, read, localCopy and remove", async () => {
    const key = "artwork/acc/rel/cover.jpg";
    const body = randomBytes(100_000);
    const target = await store.uploadTarget(request(key, { bytes: body.length }));
    assert.equal(target.method, "PUT");
    assert.equal(target.multipart, undefined);
    assert.deepEqual(target.headers, { "content-type": "image/jpeg", "content-length": String(body.length) });

    const put = await fetch(target.url, { method: target.method, headers: target.headers, body });
    assert.equal(put.status, 200, await put.text());

    assert.deepEqual(await store.stat(key), { bytes: body.length });
    const head = await store.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    assert.equal(head.ContentType, "image/jpeg");
    assert.deepEqual(await bytesOf(await store.read(key)), body);

    const copy = await store.localCopy(key);
    assert.ok(copy.path.endsWith("cover.jpg"), copy.path);
    assert.deepEqual(fs.readFileSync(copy.path), body);
    await copy.release();
    assert.equal(fs.existsSync(copy.path), false, "release() removes the copy");
    await copy.release(); // twice is harmless

    await store.remove(key);
    assert.equal(await store.stat(key), undefined);
    await assert.rejects(store.read(key));
  });

  test("the presigned PUT signs content-type and content-length and carries no checksum", async () => {
    const target = await store.uploadTarget(request("artwork/acc/rel/signed.jpg", { bytes: 10 }));
    const params = new URL(target.url).searchParams;
    assert.deepEqual(params.get("X-Amz-SignedHeaders")?.split(";"), [
      "content-length",
      "content-type",
      "host",
    ]);
    for (const name of params.keys()) {
      assert.ok(!/^x-amz-(sdk-)?checksum/i.test(name), `no checksum parameter, got ${name}`);
    }
    assert.equal(params.get("X-Amz-Content-Sha256"), "UNSIGNED-PAYLOAD");

    // Without a declared size only content-type is signed (S3 then cannot bound the size).
    const open = await store.uploadTarget(request("artwork/acc/rel/open.jpg"));
    assert.deepEqual(new URL(open.url).searchParams.get("X-Amz-SignedHeaders"), "content-type;host");
    assert.deepEqual(open.headers, { "content-type": "image/jpeg" });
  });

  test("a PUT that changes a signed header is refused and stores nothing", async () => {
    const key = "artwork/acc/rel/tampered.jpg";
    const body = randomBytes(1000);
    const target = await store.uploadTarget(request(key, { bytes: body.length }));
    const refusedBefore = gate?.refused.length ?? 0;

    const otherType = await fetch(target.url, {
      method: "PUT",
      headers: { ...target.headers, "content-type": "image/png" },
      body,
    });
    assert.equal(otherType.status, 403);
    assert.match(await otherType.text(), /SignatureDoesNotMatch/);

    const { "content-length": _, ...withoutLength } = target.headers;
    const longer = await fetch(target.url, {
      method: "PUT",
      headers: withoutLength,
      body: randomBytes(1001),
    });
    assert.equal(longer.status, 403, "another size than declared");
    await longer.text();

    const noType = await fetch(target.url, { method: "PUT", body });
    assert.equal(noType.status, 403, "no content type");
    await noType.text();

    const tamperedUrl = new URL(target.url);
    tamperedUrl.searchParams.set("X-Amz-Expires", "604800");
    const longerLife = await fetch(tamperedUrl, { method: "PUT", headers: target.headers, body });
    assert.equal(longerLife.status, 403, "a changed expiry");
    await longerLife.text();

    assert.deepEqual(gate?.refused.slice(refusedBefore), [
      "signature does not match",
      "signature does not match",
      "signed header content-type is missing",
      "signature does not match",
    ]);
    assert.equal(await store.stat(key), undefined);

    // The untouched request goes through the same gate.
    const ok = await fetch(target.url, { method: "PUT", headers: target.headers, body });
    assert.equal(ok.status, 200);
    await store.remove(key);
  });

  test("an expired URL is refused (by s3rver itself)", async () => {
    const key = "artwork/acc/rel/late.jpg";
    const body = randomBytes(10);
    const target = await store.uploadTarget(
      request(key, { bytes: 10, expiresAt: new Date(Date.now() + 500) }),
    );
    assert.equal(new URL(target.url).searchParams.get("X-Amz-Expires"), "1");
    await sleep(2100);
    const late = await fetch(target.url, { method: "PUT", headers: target.headers, body });
    assert.equal(late.status, 403);
    assert.match(await late.text(), /Request has expired/);
    assert.equal(await store.stat(key), undefined);

    // Expiries are clamped to what SigV4 allows: at least 1 second, at most 7 days.
    const past = await store.uploadTarget(request(key, { expiresAt: new Date(Date.now() - 60_000) }));
    assert.equal(new URL(past.url).searchParams.get("X-Amz-Expires"), "1");
    const far = await store.uploadTarget(request(key, { expiresAt: inMinutes(60 * 24 * 30) }));
    assert.equal(new URL(far.url).searchParams.get("X-Amz-Expires"), String(7 * 24 * 3600));
  });

  test("a 12 MiB multipart upload through presigned part URLs", async () => {
    const key = "audio/acc/rel/track.flac";
    const body = randomBytes(12 * MIB);
    const target = await store.uploadTarget(request(key, { contentType: "audio/flac", bytes: body.length }));
    const multipart = target.multipart;
    assert.ok(multipart, "above the threshold: multipart");
    assert.equal(multipart.part_size, 5 * MIB);
    assert.deepEqual(
      multipart.parts.map((p) => p.part_number),
      [1, 2, 3],
    );
    assert.equal(target.url, `${endpoint}/${BUCKET}/${key}`, "the object's unsigned URL");
    assert.deepEqual(target.headers, {});
    // (Unsigned, it takes no upload on a private bucket; s3rver allows anonymous writes, so that
    // is not checked here.)

    // A part of another size than announced is refused (each part signs its Content-Length).
    const first = multipart.parts[0];
    assert.ok(first);
    const short = await fetch(first.url, { method: "PUT", body: body.subarray(0, MIB) });
    assert.equal(short.status, 403);
    await short.text();

    const etags: { part_number: number; etag: string }[] = [];
    for (const part of multipart.parts) {
      const start = (part.part_number - 1) * multipart.part_size;
      const chunk = body.subarray(start, start + multipart.part_size);
      const params = new URL(part.url).searchParams;
      assert.equal(params.get("X-Amz-SignedHeaders"), "content-length;host");
      assert.equal(params.get("uploadId"), multipart.upload_id);
      const answer = await fetch(part.url, { method: "PUT", body: chunk });
      assert.equal(answer.status, 200, await answer.text());
      const etag = answer.headers.get("etag");
      assert.ok(etag, "each part answers an ETag");
      etags.push({ part_number: part.part_number, etag });
    }
    assert.equal(await store.stat(key), undefined, "nothing before completion");

    // Given out of order, and one without its quotes: the driver sorts and normalises.
    const [a, b, c] = etags;
    assert.ok(a && b && c);
    await store.completeMultipart(key, multipart.upload_id, [
      c,
      a,
      { ...b, etag: b.etag.replaceAll('"', "") },
    ]);

    assert.deepEqual(await store.stat(key), { bytes: 12 * MIB });
    const head = await store.client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    assert.equal(head.ContentType, "audio/flac");
    const expected = sha256hex(body);
    assert.equal(sha256hex(await bytesOf(await store.read(key))), expected);

    const copy = await store.localCopy(key);
    try {
      const hash = createHash("sha256");
      for await (const chunk of fs.createReadStream(copy.path)) hash.update(chunk as Buffer);
      assert.equal(hash.digest("hex"), expected);
    } finally {
      await copy.release();
    }

    // A range, inclusive at both ends, across the first part boundary; and an open-ended one.
    const from = 5 * MIB - 3;
    assert.deepEqual(
      await bytesOf(await store.read(key, { start: from, end: from + 5 })),
      body.subarray(from, from + 6),
    );
    assert.deepEqual(
      await bytesOf(await store.read(key, { start: 12 * MIB - 7 })),
      body.subarray(12 * MIB - 7),
    );

    await store.remove(key);
  });

  test("completeMultipart refuses invalid parts with code multipart_invalid", async () => {
    const key = "audio/acc/rel/broken.wav";
    const target = await store.uploadTarget(request(key, { contentType: "audio/wav", bytes: 11 * MIB }));
    const uploadId = target.multipart?.upload_id;
    assert.ok(uploadId);
    const invalid = { code: "multipart_invalid" };
    await assert.rejects(store.completeMultipart(key, uploadId, []), invalid);
    await assert.rejects(
      store.completeMultipart(key, uploadId, [
        { part_number: 1, etag: '"a"' },
        { part_number: 1, etag: '"b"' },
      ]),
      invalid,
    );
    await assert.rejects(store.completeMultipart(key, uploadId, [{ part_number: 0, etag: '"a"' }]), invalid);
    await assert.rejects(store.completeMultipart(key, uploadId, [{ part_number: 1, etag: "" }]), invalid);
    await assert.rejects(store.completeMultipart(key, "", [{ part_number: 1, etag: '"a"' }]), invalid);

    // S3's own answers (given by the gate: s3rver does not make them) map the same way…
    gate?.s3Errors.set("gone-upload", { status: 404, code: "NoSuchUpload" });
    gate?.s3Errors.set("bad-part-upload", { status: 400, code: "InvalidPart" });
    gate?.s3Errors.set("small-part-upload", { status: 400, code: "EntityTooSmall" });
    for (const id of ["gone-upload", "bad-part-upload", "small-part-upload"]) {
      await assert.rejects(
        store.completeMultipart(key, id, [{ part_number: 1, etag: '"a"' }]),
        (error: Error) => {
          assert.equal((error as Error & { code?: string }).code, "multipart_invalid", id);
          assert.match(error.message, /cannot be completed/);
          return true;
        },
      );
    }
    // …but a configuration error is not the client's.
    gate?.s3Errors.set("denied-upload", { status: 403, code: "AccessDenied" });
    await assert.rejects(store.completeMultipart(key, "denied-upload", [{ part_number: 1, etag: '"a"' }]), {
      name: "AccessDenied",
    });
  });

  test("downloadUrl works with plain fetch", async () => {
    const key = "artwork/acc/rel/download.png";
    const body = randomBytes(4096);
    const target = await store.uploadTarget(request(key, { contentType: "image/png", bytes: body.length }));
    assert.equal((await fetch(target.url, { method: "PUT", headers: target.headers, body })).status, 200);
    const url = await store.downloadUrl(key, inMinutes(5));
    const params = new URL(url).searchParams;
    assert.equal(params.get("X-Amz-SignedHeaders"), "host");
    const answer = await fetch(url);
    assert.equal(answer.status, 200);
    assert.deepEqual(Buffer.from(await answer.arrayBuffer()), body);
    await store.remove(key);
  });

  test("downloadUrl signs the answer's Content-Type and Content-Disposition; changing them breaks the signature", async () => {
    const key = "artwork/acc/rel/served.jpg";
    const body = Buffer.from("<html><script>alert(1)</script></html>");
    const target = await store.uploadTarget(request(key, { contentType: "image/jpeg", bytes: body.length }));
    assert.equal((await fetch(target.url, { method: "PUT", headers: target.headers, body })).status, 200);
    const url = await store.downloadUrl(key, inMinutes(5), {
      contentType: "application/octet-stream",
      contentDisposition: 'attachment; filename="served.jpg"',
    });
    const answer = await fetch(url);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get("content-type"), "application/octet-stream");
    assert.equal(answer.headers.get("content-disposition"), 'attachment; filename="served.jpg"');
    assert.deepEqual(Buffer.from(await answer.arrayBuffer()), body);
    // A client that asks for its own type instead: the signature no longer holds.
    const tampered = new URL(url);
    tampered.searchParams.set("response-content-type", "text/html");
    tampered.searchParams.delete("response-content-disposition");
    assert.equal((await fetch(tampered)).status, 403);
    await store.remove(key);
  });

  test("missing objects: stat is undefined, remove is fine, read and localCopy reject", async () => {
    const key = "artwork/acc/rel/nothing.jpg";
    assert.equal(await store.stat(key), undefined);
    await store.remove(key);
    await assert.rejects(store.read(key));
    const leftovers = () =>
      fs
        .readdirSync(os.tmpdir())
        .filter((name) => name.startsWith("backline-s3-"))
        .sort();
    const before = leftovers();
    await assert.rejects(store.localCopy(key), { name: "NoSuchKey" });
    await assert.rejects(store.localCopy("artwork/acc/rel/any.jpg", AbortSignal.abort()), {
      name: "AbortError",
    });
    assert.deepEqual(leftovers(), before, "a failed copy leaves no temporary directory");
  });

  test("keys with .. or a leading slash are refused", async () => {
    for (const key of ["../etc/passwd", "artwork/../../x.jpg", "/artwork/a/b/cover.jpg", ""]) {
      const invalid = { code: "invalid_key" };
      await assert.rejects(store.uploadTarget(request(key, { bytes: 1 })), invalid, key);
      await assert.rejects(store.stat(key), invalid, key);
      await assert.rejects(store.read(key), invalid, key);
      await assert.rejects(store.localCopy(key), invalid, key);
      await assert.rejects(store.remove(key), invalid, key);
      await assert.rejects(store.downloadUrl(key, inMinutes(1)), invalid, key);
      await assert.rejects(
        store.completeMultipart(key, "u", [{ part_number: 1, etag: '"a"' }]),
        invalid,
        key,
      );
    }
  });

  test("a declared size above maxBytes is refused before anything is signed", async () => {
    await assert.rejects(store.uploadTarget(request("audio/acc/rel/big.wav", { bytes: 11, maxBytes: 10 })), {
      code: "file_too_large",
    });
  });
});
