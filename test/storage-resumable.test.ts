import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import * as tus from "tus-js-client";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { openStorage } from "../src/storage/open.ts";
import { OPEN_UPLOADS_PER_CALLER, sweepExpiredUploads } from "../src/storage/resumable.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { wav } from "./support/media-fixtures.ts";
import { tempDir } from "./support/process.ts";
import { type RunningS3rver, startS3Storage } from "./support/s3rver.ts";

/**
 * Resumable uploads (docs/storage.md, "Resumable uploads"): TUS at /storage/v1/upload/resumable
 * with the real tus-js-client over real HTTP, on both engines and both storage drivers (local disk,
 * and S3 on an s3rver started here): a file over 6 MB in 6 MB chunks; a connection dropped
 * mid-upload by a proxy, then resumed; an upload resumed after the server process is replaced;
 * a large audio master into its media slot, then checked by the media checks; the bucket's limits,
 * upsert, policies and the binding of an upload to its creator, refused before any byte is stored.
 */

type Obj = Record<string, unknown>;
const PASSWORD = "correct horse battery staple";
const MB = 1024 * 1024;
const CHUNK = 6 * MB;
let n = 0;
const newEmail = () => `tus-${Date.now()}-${n++}@example.org`;
const noSession = { auth: { persistSession: false, autoRefreshToken: false } };
const sha256 = (b: Buffer | Uint8Array) => createHash("sha256").update(b).digest("hex");

for (const driver of ["local", "s3"] as const) {
  describe(`resumable uploads (${driver})`, () => {
    let s3: RunningS3rver | undefined;
    const env: Record<string, string> = {};
    before(async () => {
      if (driver !== "s3") return;
      const started = await startS3Storage("objects");
      s3 = started.s3;
      Object.assign(env, started.env);
    });
    after(async () => {
      await s3?.close();
    });
    suite(env);
  });
}

interface Who {
  client: SupabaseClient;
  token: string;
  account: string;
}

function suite(env: Record<string, string>) {
  describeEachEngine("tus", (t) => {
    let app: RunningApp;
    let dataDir: string;
    let worker: Worker;
    before(async () => {
      dataDir = tempDir("backline-tus-");
      app = await startApp(t(), { ...env, DATA_DIR: dataDir });
      const { store } = openStorage(app.config, loadSecretBox(app.config));
      worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db, { store }), pollMs: 20 });
      worker.start();
    });
    after(async () => {
      await worker?.stop();
      await app?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const endpoint = (base = app.url) => `${base}/storage/v1/upload/resumable`;
    const staged = () => fs.readdirSync(path.join(dataDir, "resumable")).filter((f) => !f.endsWith(".json"));

    async function tenant() {
      const { keys } = await tenantWithKeys(t(), {
        auth: { email_confirmation: false },
        settings: { ...UNLIMITED },
      });
      const service = createClient(app.url, keys.service_role_key, noSession);
      const made = await service.storage.createBucket("masters", { public: false });
      assert.equal(made.error, null, JSON.stringify(made.error));
      const rules = await fetch(`${app.url}/storage/v1/bucket/masters`, {
        method: "PUT",
        headers: {
          apikey: keys.service_role_key,
          authorization: `Bearer ${keys.service_role_key}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ public: false, folder_per_account: true }),
      });
      assert.equal(rules.status, 200, await rules.clone().text());
      return { keys, service };
    }

    async function signedUp(anonKey: string): Promise<Who> {
      const client = createClient(app.url, anonKey, noSession);
      const { data, error } = await client.auth.signUp({ email: newEmail(), password: PASSWORD });
      assert.equal(error, null);
      assert.ok(data.session && data.user);
      const account = await t().db.asService(
        async (tx) =>
          (
            await tx.query<{ account_id: string }>(
              "select account_id from internal.memberships where user_id = $1 order by account_id limit 1",
              [data.user?.id],
            )
          ).rows[0]?.account_id as string,
      );
      return { client, token: data.session.access_token, account };
    }

    /** tus-js-client's upload, resolved with its URL on success. */
    function send(
      data: Buffer,
      o: {
        endpoint?: string;
        uploadUrl?: string;
        apikey: string;
        token: string;
        bucket: string;
        name: string;
        contentType?: string;
        upsert?: boolean;
        duringCreation?: boolean;
        onUpload?: (u: tus.Upload, sent: number) => void;
      },
    ): { upload: tus.Upload; done: Promise<string> } {
      let upload!: tus.Upload;
      const done = new Promise<string>((resolve, reject) => {
        upload = new tus.Upload(data, {
          ...(o.uploadUrl ? { uploadUrl: o.uploadUrl } : { endpoint: o.endpoint ?? endpoint() }),
          chunkSize: CHUNK,
          uploadDataDuringCreation: o.duringCreation === true,
          retryDelays: [0, 100, 300, 1000],
          removeFingerprintOnSuccess: true,
          headers: {
            apikey: o.apikey,
            authorization: `Bearer ${o.token}`,
            ...(o.upsert ? { "x-upsert": "true" } : {}),
          },
          metadata: {
            bucketName: o.bucket,
            objectName: o.name,
            contentType: o.contentType ?? "audio/wav",
            cacheControl: "3600",
          },
          onProgress: (sent) => o.onUpload?.(upload, sent),
          onError: reject,
          onSuccess: () => resolve(upload.url as string),
        });
        upload.start();
      });
      return { upload, done };
    }

    /** A raw TUS request (what the refusals are checked with). */
    function tusFetch(url: string, method: string, headers: Record<string, string>, body?: Buffer) {
      return fetch(url, {
        method,
        headers: { "tus-resumable": "1.0.0", ...headers },
        ...(body ? { body } : {}),
      });
    }
    const meta = (m: Record<string, string>) =>
      Object.entries(m)
        .map(([k, v]) => `${k} ${Buffer.from(v).toString("base64")}`)
        .join(",");
    const auth = (apikey: string, token: string) => ({ apikey, authorization: `Bearer ${token}` });

    test("a file over 6 MB goes in 6 MB chunks and is an ordinary object (download, info, list)", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const data = randomBytes(13 * MB + 123);
      const patches: number[] = [];
      const name = `${alice.account}/album/master.wav`;
      const { done } = send(data, {
        apikey: keys.anon_key,
        token: alice.token,
        bucket: "masters",
        name,
        duringCreation: true,
        onUpload: (_u, sent) => patches.push(sent),
      });
      const url = await done;
      assert.match(url, /\/storage\/v1\/upload\/resumable\/[0-9a-f]{32}$/);
      assert.ok(patches.includes(CHUNK) && patches.includes(2 * CHUNK), "sent in 6 MB chunks");
      const masters = alice.client.storage.from("masters");
      const dl = await masters.download(name);
      assert.equal(dl.error, null, JSON.stringify(dl.error));
      assert.equal(sha256(Buffer.from(await (dl.data as Blob).arrayBuffer())), sha256(data));
      const info = await masters.info(name);
      assert.equal(info.error, null);
      assert.equal(info.data?.size, data.length);
      assert.equal(info.data?.contentType, "audio/wav");
      const listed = await masters.list(`${alice.account}/album`);
      assert.deepEqual(
        listed.data?.map((o) => o.name),
        ["master.wav"],
      );
      // The finished upload is gone from the staging folder, and its URL with it.
      const head = await tusFetch(url, "HEAD", auth(keys.anon_key, alice.token));
      assert.equal(head.status, 404);
    });

    test("a connection dropped mid-upload resumes to a byte-identical object", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const data = randomBytes(14 * MB);
      const proxy = await dropOnce(new URL(app.url).port, 9 * MB);
      try {
        const name = `${alice.account}/dropped.wav`;
        const { done } = send(data, {
          endpoint: endpoint(proxy.url),
          apikey: keys.anon_key,
          token: alice.token,
          bucket: "masters",
          name,
        });
        await done;
        assert.equal(proxy.dropped(), true, "the proxy dropped a connection mid-upload");
        const dl = await alice.client.storage.from("masters").download(name);
        assert.equal(sha256(Buffer.from(await (dl.data as Blob).arrayBuffer())), sha256(data));
      } finally {
        await proxy.close();
      }
    });

    test("an upload resumes after the server is stopped and another started on the same data", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const data = randomBytes(13 * MB);
      const name = `${alice.account}/restart.wav`;
      let url = "";
      await new Promise<void>((resolve, reject) => {
        const { upload, done } = send(data, {
          apikey: keys.anon_key,
          token: alice.token,
          bucket: "masters",
          name,
          onUpload: (u, sent) => {
            if (sent >= CHUNK && !url && u.url) {
              url = u.url;
              void upload.abort().then(resolve, reject);
            }
          },
        });
        done.then(() => reject(new Error("finished before the restart")), reject);
      });
      assert.ok(url);
      await app.close();
      app = await startApp(t(), { ...env, DATA_DIR: dataDir });
      const moved = `${endpoint()}/${url.split("/").pop()}`;
      const head = await tusFetch(moved, "HEAD", auth(keys.anon_key, alice.token));
      assert.equal(head.status, 200);
      const offset = Number(head.headers.get("upload-offset"));
      assert.ok(offset >= CHUNK && offset < data.length, `offset ${offset}`);
      const resumed: number[] = [];
      const { done } = send(data, {
        uploadUrl: moved,
        apikey: keys.anon_key,
        token: alice.token,
        bucket: "masters",
        name,
        onUpload: (_u, sent) => resumed.push(sent),
      });
      await done;
      assert.ok(Math.min(...resumed) >= offset, `resumed from the offset ${offset}, not from the start`);
      // The new server (on another port) serves the object.
      const dl = await fetch(`${app.url}/storage/v1/object/masters/${name}`, {
        headers: auth(keys.anon_key, alice.token),
      });
      assert.equal(dl.status, 200);
      assert.equal(sha256(Buffer.from(await dl.arrayBuffer())), sha256(data));
    });

    test("a large audio master goes into its media slot and passes the media checks", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const artist = await alice.client
        .from("artist_profiles")
        .insert({ name: "Mira Vale" })
        .select()
        .single();
      const release = await alice.client
        .from("releases")
        .insert({ artist_id: (artist.data as Obj).id, title: "Long", release_type: "single" })
        .select()
        .single();
      const track = await alice.client
        .from("tracks")
        .insert({ release_id: (release.data as Obj).id, title: "Long", track_number: 1 })
        .select()
        .single();
      assert.equal(track.error, null);
      const master = wav({ seconds: 40 });
      assert.ok(master.length > CHUNK);
      const objectPath = `${(release.data as Obj).id}/${(track.data as Obj).id}.wav`;
      const { done } = send(master, {
        apikey: keys.anon_key,
        token: alice.token,
        bucket: "audio",
        name: objectPath,
      });
      await done;
      const deadline = Date.now() + 30_000;
      let asset: Obj | undefined;
      while (Date.now() < deadline) {
        const r = await alice.client
          .from("media_assets")
          .select("status, problems, bytes, sha256")
          .eq("release_id", (release.data as Obj).id)
          .eq("kind", "audio")
          .is("superseded_at", null);
        asset = (r.data ?? [])[0] as Obj | undefined;
        if (asset?.status === "valid" || asset?.status === "invalid") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(asset?.status, "valid", JSON.stringify(asset));
      assert.equal(asset?.sha256, sha256(master));
      const dl = await alice.client.storage.from("audio").download(objectPath);
      assert.equal(sha256(Buffer.from(await (dl.data as Blob).arrayBuffer())), sha256(master));
      // Another user of the tenant cannot start an upload into this release's slot.
      const bob = await signedUp(keys.anon_key);
      const refused = await tusFetch(endpoint(), "POST", {
        ...auth(keys.anon_key, bob.token),
        "upload-length": String(master.length),
        "upload-metadata": meta({ bucketName: "audio", objectName: objectPath }),
      });
      assert.ok([403, 404].includes(refused.status), String(refused.status));
    });

    test("limits, upsert and policies refuse at creation, before any byte is stored", async () => {
      const { keys, service } = await tenant();
      const alice = await signedUp(keys.anon_key);
      await service.storage.createBucket("small", {
        public: false,
        fileSizeLimit: MB,
        allowedMimeTypes: ["audio/wav"],
      });
      const before = staged().length;
      const create = (headers: Record<string, string>, m: Record<string, string>, length = 1000) =>
        tusFetch(endpoint(), "POST", {
          ...headers,
          "upload-length": String(length),
          "upload-metadata": meta(m),
        });
      const service_ = auth(keys.service_role_key, keys.service_role_key);

      const big = await create(
        service_,
        { bucketName: "small", objectName: "a.wav", contentType: "audio/wav" },
        2 * MB,
      );
      assert.equal(big.status, 413);
      assert.deepEqual(await big.json(), {
        statusCode: "413",
        code: "EntityTooLarge",
        error: "Payload too large",
        message: "The object exceeded the maximum allowed size",
      });
      const png = await create(service_, {
        bucketName: "small",
        objectName: "a.png",
        contentType: "image/png",
      });
      assert.equal(png.status, 415);
      assert.equal(((await png.json()) as Obj).message, "mime type image/png is not supported");
      const noBucket = await create(service_, { bucketName: "nope", objectName: "a.wav" });
      assert.equal(noBucket.status, 404);
      assert.equal(((await noBucket.json()) as Obj).message, "Bucket not found");
      const badKey = await create(service_, { bucketName: "small", objectName: "../a.wav" });
      assert.equal(((await badKey.json()) as Obj).code, "InvalidKey");
      const noName = await create(service_, { bucketName: "small" });
      assert.equal(noName.status, 400);

      // Anon has no policy to write; a user writes only in its own account's folder.
      const anon = await create(auth(keys.anon_key, keys.anon_key), {
        bucketName: "masters",
        objectName: `${alice.account}/x.wav`,
      });
      assert.equal(anon.status, 403);
      assert.equal(((await anon.json()) as Obj).code, "AccessDenied");
      const bob = await signedUp(keys.anon_key);
      const intoAlice = await create(auth(keys.anon_key, bob.token), {
        bucketName: "masters",
        objectName: `${alice.account}/x.wav`,
      });
      assert.equal(intoAlice.status, 403);
      const noToken = await fetch(endpoint(), {
        method: "POST",
        headers: { "tus-resumable": "1.0.0", "upload-length": "10" },
      });
      assert.equal(noToken.status, 401);
      assert.equal(staged().length, before, "no refused upload left a file");

      // upsert: false on an existing object is refused at creation; x-upsert: true replaces it.
      const name = `${alice.account}/once.wav`;
      const first = randomBytes(7 * MB);
      await send(first, { apikey: keys.anon_key, token: alice.token, bucket: "masters", name }).done;
      const again = await create(auth(keys.anon_key, alice.token), {
        bucketName: "masters",
        objectName: name,
      });
      assert.equal(again.status, 409);
      assert.deepEqual(await again.json(), {
        statusCode: "409",
        code: "KeyAlreadyExists",
        error: "Duplicate",
        message: "The resource already exists",
      });
      const second = randomBytes(7 * MB);
      await send(second, { apikey: keys.anon_key, token: alice.token, bucket: "masters", name, upsert: true })
        .done;
      const dl = await alice.client.storage.from("masters").download(name);
      assert.equal(sha256(Buffer.from(await (dl.data as Blob).arrayBuffer())), sha256(second));
    });

    test("an upload is its creator's: another user or tenant cannot HEAD, PATCH or DELETE it", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const bob = await signedUp(keys.anon_key);
      const other = await tenantWithKeys(t(), {
        auth: { email_confirmation: false },
        settings: { ...UNLIMITED },
      });
      const stranger = await signedUp(other.keys.anon_key);
      const created = await tusFetch(endpoint(), "POST", {
        ...auth(keys.anon_key, alice.token),
        "upload-length": "100",
        "upload-metadata": meta({
          bucketName: "masters",
          objectName: `${alice.account}/mine.txt`,
          contentType: "text/plain",
        }),
      });
      assert.equal(created.status, 201, await created.clone().text());
      const url = new URL(String(created.headers.get("location")), app.url).toString();
      const first = await tusFetch(
        url,
        "PATCH",
        {
          ...auth(keys.anon_key, alice.token),
          "upload-offset": "0",
          "content-type": "application/offset+octet-stream",
        },
        Buffer.alloc(40, 1),
      );
      assert.equal(first.status, 204);
      for (const [who, h] of [
        ["another user", auth(keys.anon_key, bob.token)],
        ["the tenant's anon key", auth(keys.anon_key, keys.anon_key)],
        ["the tenant's service key", auth(keys.service_role_key, keys.service_role_key)],
        ["another tenant's user", auth(other.keys.anon_key, stranger.token)],
        ["another tenant's service key", auth(other.keys.service_role_key, other.keys.service_role_key)],
      ] as const) {
        const head = await tusFetch(url, "HEAD", h);
        assert.equal(head.status, 404, `${who} HEAD`);
        assert.equal(head.headers.get("upload-offset"), null);
        const patch = await tusFetch(
          url,
          "PATCH",
          { ...h, "upload-offset": "40", "content-type": "application/offset+octet-stream" },
          Buffer.alloc(60, 2),
        );
        assert.equal(patch.status, 404, `${who} PATCH`);
        assert.equal(((await patch.json()) as Obj).code, "NoSuchUpload");
        const del = await tusFetch(url, "DELETE", h);
        assert.equal(del.status, 404, `${who} DELETE`);
      }
      const mine = await tusFetch(url, "HEAD", auth(keys.anon_key, alice.token));
      assert.equal(mine.status, 200);
      assert.equal(mine.headers.get("upload-offset"), "40");
      // Its creator may terminate it (TUS termination).
      const del = await tusFetch(url, "DELETE", auth(keys.anon_key, alice.token));
      assert.equal(del.status, 204);
      assert.equal((await tusFetch(url, "HEAD", auth(keys.anon_key, alice.token))).status, 404);
    });

    test("a query string cannot name someone else's upload behind the caller's own", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const other = await tenant();
      const mallory = await signedUp(other.keys.anon_key);
      const open = async (who: Who, apikey: string, name: string) => {
        const created = await tusFetch(endpoint(), "POST", {
          ...auth(apikey, who.token),
          "upload-length": "100",
          "upload-metadata": meta({
            bucketName: "masters",
            objectName: `${who.account}/${name}`,
            contentType: "text/plain",
          }),
        });
        assert.equal(created.status, 201, await created.clone().text());
        return new URL(String(created.headers.get("location")), app.url).toString();
      };
      const victim = await open(alice, keys.anon_key, "victim.txt");
      const own = await open(mallory, other.keys.anon_key, "own.txt");
      const victimId = victim.split("/").at(-1) as string;
      const forged = `${own}?x=/${victimId}`;
      const h = auth(other.keys.anon_key, mallory.token);
      const head = await tusFetch(forged, "HEAD", h);
      assert.notEqual(
        head.headers.get("upload-metadata")?.includes(Buffer.from(alice.account).toString("base64")),
        true,
      );
      await tusFetch(
        forged,
        "PATCH",
        { ...h, "upload-offset": "0", "content-type": "application/offset+octet-stream" },
        Buffer.alloc(30, 7),
      );
      await tusFetch(forged, "DELETE", h);
      const still = await tusFetch(victim, "HEAD", auth(keys.anon_key, alice.token));
      assert.equal(still.status, 200, "the victim's upload is still there");
      assert.equal(still.headers.get("upload-offset"), "0", "and nothing was appended to it");
    });

    test("unfinished uploads are bounded per caller: the next one is refused before anything is staged", async () => {
      const { keys } = await tenant();
      const carol = await signedUp(keys.anon_key);
      const create = (i: number) =>
        tusFetch(endpoint(), "POST", {
          ...auth(keys.anon_key, carol.token),
          "upload-length": String(50 * MB),
          "upload-metadata": meta({ bucketName: "masters", objectName: `${carol.account}/open-${i}.wav` }),
        });
      for (let i = 0; i < OPEN_UPLOADS_PER_CALLER; i++) assert.equal((await create(i)).status, 201);
      const before = staged().length;
      const refused = await create(OPEN_UPLOADS_PER_CALLER);
      assert.equal(refused.status, 429, await refused.clone().text());
      assert.match(((await refused.json()) as Obj).message as string, /Too many unfinished uploads/);
      assert.equal(staged().length, before);
      // Another user of the tenant is not held up by Carol's.
      const dave = await signedUp(keys.anon_key);
      const theirs = await tusFetch(endpoint(), "POST", {
        ...auth(keys.anon_key, dave.token),
        "upload-length": "10",
        "upload-metadata": meta({ bucketName: "masters", objectName: `${dave.account}/one.wav` }),
      });
      assert.equal(theirs.status, 201, await theirs.clone().text());
    });

    test("unfinished uploads expire and are swept", async () => {
      const { keys } = await tenant();
      const alice = await signedUp(keys.anon_key);
      const created = await tusFetch(endpoint(), "POST", {
        ...auth(keys.anon_key, alice.token),
        "upload-length": "100",
        "upload-metadata": meta({ bucketName: "masters", objectName: `${alice.account}/late.txt` }),
      });
      assert.equal(created.status, 201);
      assert.ok(created.headers.get("upload-expires"), "Upload-Expires says when");
      const url = new URL(String(created.headers.get("location")), app.url).toString();
      const id = url.split("/").pop() as string;
      const dir = path.join(dataDir, "resumable");
      // Created two days ago, as far as the sweep can tell.
      const info = JSON.parse(fs.readFileSync(path.join(dir, `${id}.json`), "utf8")) as Obj;
      info.creation_date = new Date(Date.now() - 48 * 3600 * 1000).toISOString();
      fs.writeFileSync(path.join(dir, `${id}.json`), JSON.stringify(info));
      assert.ok((await sweepExpiredUploads(dir)) >= 1);
      assert.equal(fs.existsSync(path.join(dir, id)), false);
      assert.equal((await tusFetch(url, "HEAD", auth(keys.anon_key, alice.token))).status, 404);
    });
  });
}

/** A TCP proxy in front of the app that cuts the connection once after `afterBytes` of request bytes. */
async function dropOnce(port: string, afterBytes: number) {
  let sent = 0;
  let dropped = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), "127.0.0.1");
    sockets.add(client).add(upstream);
    client.on("data", (chunk: Buffer) => {
      sent += chunk.length;
      if (!dropped && sent > afterBytes) {
        dropped = true;
        client.destroy();
        upstream.destroy();
        return;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    dropped: () => dropped,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
