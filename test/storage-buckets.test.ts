import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine, type TestDb } from "./support/db.ts";
import { type RunningS3rver, startS3Storage } from "./support/s3rver.ts";

/**
 * /storage/v1's buckets and objects (docs/uploads.md, "Buckets", "Objects", "Errors") through
 * storage-js over real HTTP, on both engines and both storage drivers (local disk, and S3 on an
 * s3rver started here): bucket management by the tenant's service-role key, objects under the
 * bucket's rules (one folder per account), signed and public URLs with `download=`, and Storage's
 * error answers on every route.
 */

type Obj = Record<string, unknown>;
const PASSWORD = "correct horse battery staple";
let n = 0;
const newEmail = () => `objects-${Date.now()}-${n++}@example.org`;
const noSession = { auth: { persistSession: false, autoRefreshToken: false } };

for (const driver of ["local", "s3"] as const) {
  describe(`storage buckets and objects (${driver})`, () => {
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

function suite(env: Record<string, string>) {
  describeEachEngine("storage-js", (t) => {
    let app: RunningApp;
    before(async () => {
      app = await startApp(t(), env);
    });
    after(async () => {
      await app?.close();
    });

    async function tenant() {
      const { keys, tenant } = await tenantWithKeys(t(), {
        auth: { email_confirmation: false },
        settings: { ...UNLIMITED },
      });
      return { keys, tenant, service: createClient(app.url, keys.service_role_key, noSession) };
    }

    async function signedUp(anonKey: string): Promise<{ client: SupabaseClient; account: string }> {
      const client = createClient(app.url, anonKey, noSession);
      const { data, error } = await client.auth.signUp({ email: newEmail(), password: PASSWORD });
      assert.equal(error, null);
      assert.ok(data.user);
      return { client, account: await accountOf(t(), data.user.id) };
    }

    test("buckets: create, get, list, update, empty, delete, with Storage's rules", async () => {
      const { keys, service } = await tenant();
      const made = await service.storage.createBucket("press", {
        public: false,
        fileSizeLimit: "1MB",
        allowedMimeTypes: ["image/*", "application/pdf"],
      });
      assert.equal(made.error, null, JSON.stringify(made.error));
      assert.deepEqual(made.data, { name: "press" });

      const again = await service.storage.createBucket("press");
      assert.equal(errorOf(again).message, "The resource already exists");
      assert.equal(errorOf(again).statusCode, "409");
      for (const bad of ["a/b", "", "x".repeat(101)]) {
        const r = await service.storage.createBucket(bad);
        assert.equal(errorOf(r).message, "Bucket name invalid", bad);
      }
      const badName = await fetch(`${app.url}/storage/v1/bucket`, {
        method: "POST",
        headers: {
          apikey: keys.service_role_key,
          authorization: `Bearer ${keys.service_role_key}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ id: "a/b", name: "a/b" }),
      });
      assert.equal(badName.status, 400);
      assert.deepEqual(await badName.json(), {
        statusCode: "400",
        code: "InvalidBucketName",
        error: "Invalid Input",
        message: "Bucket name invalid",
      });
      const builtIn = await service.storage.createBucket("artwork");
      assert.equal(errorOf(builtIn).statusCode, "409");

      const got = await service.storage.getBucket("press");
      assert.equal(got.error, null);
      assert.equal(got.data?.file_size_limit, 1024 * 1024);
      assert.deepEqual(got.data?.allowed_mime_types, ["image/*", "application/pdf"]);
      assert.equal(got.data?.public, false);

      const listed = await service.storage.listBuckets();
      assert.deepEqual(listed.data?.map((b) => b.name).sort(), ["artwork", "audio", "press"]);
      const art = listed.data?.find((b) => b.name === "artwork") as unknown as Obj;
      assert.equal(art.built_in, true);
      assert.deepEqual(art.allowed_mime_types, ["image/jpeg", "image/png"]);

      const updated = await service.storage.updateBucket("press", { public: true, fileSizeLimit: 2048 });
      assert.equal(updated.error, null, JSON.stringify(updated.error));
      assert.equal((await service.storage.getBucket("press")).data?.public, true);
      assert.equal(
        errorOf(await service.storage.updateBucket("artwork", { public: true })).statusCode,
        "400",
      );
      assert.equal(errorOf(await service.storage.deleteBucket("audio")).statusCode, "400");

      // A user of the tenant manages no bucket.
      const { client: user } = await signedUp(keys.anon_key);
      const userMade = await user.storage.createBucket("mine");
      assert.equal(errorOf(userMade).statusCode, "403");
      assert.equal(errorOf(await user.storage.deleteBucket("press")).statusCode, "403");

      const up = await service.storage
        .from("press")
        .upload("a/one.pdf", new Blob(["%PDF-1.4"], { type: "application/pdf" }));
      assert.equal(up.error, null, JSON.stringify(up.error));
      const notEmpty = await service.storage.deleteBucket("press");
      assert.equal(errorOf(notEmpty).message, "The bucket you tried to delete is not empty");
      assert.equal(errorOf(notEmpty).statusCode, "409");
      assert.equal((await service.storage.emptyBucket("press")).error, null);
      assert.equal((await service.storage.deleteBucket("press")).error, null);
      assert.equal(errorOf(await service.storage.getBucket("press")).message, "Bucket not found");
    });

    test("objects: upload, upsert, download, list, move, copy, remove, info, exists, signed and public URLs", async () => {
      const { service } = await tenant();
      assert.equal((await service.storage.createBucket("docs", { public: false })).error, null);
      const docs = service.storage.from("docs");
      const text = "lyrics sheet, verse one";
      const up = await docs.upload("folder/lyrics.txt", new Blob([text], { type: "text/plain" }), {
        cacheControl: "120",
      });
      assert.equal(up.error, null, JSON.stringify(up.error));
      assert.equal(up.data?.fullPath, "docs/folder/lyrics.txt");
      assert.equal(
        errorOf(await docs.upload("folder/lyrics.txt", new Blob(["x"]))).message,
        "The resource already exists",
      );
      const upsert = await docs.upload("folder/lyrics.txt", new Blob(["second"], { type: "text/plain" }), {
        upsert: true,
      });
      assert.equal(upsert.error, null);
      const tagged = await docs.upload("tagged.txt", new Blob(["t"], { type: "text/plain" }), {
        metadata: { contract: "2026-11", signed: true },
      });
      assert.equal(tagged.error, null, JSON.stringify(tagged.error));
      assert.deepEqual((await docs.info("tagged.txt")).data?.metadata, { contract: "2026-11", signed: true });
      assert.equal((await docs.remove(["tagged.txt"])).error, null);
      const raw = await docs.upload("top.bin", Buffer.from([1, 2, 3]), {
        contentType: "application/octet-stream",
      });
      assert.equal(raw.error, null, JSON.stringify(raw.error));

      const dl = await docs.download("folder/lyrics.txt");
      assert.equal(await (dl.data as Blob).text(), "second");
      const info = await docs.info("folder/lyrics.txt");
      assert.equal(info.error, null, JSON.stringify(info.error));
      assert.equal(info.data?.size, 6);
      assert.equal(info.data?.cacheControl, "max-age=3600");
      assert.equal((await docs.exists("folder/lyrics.txt")).data, true);
      assert.equal((await docs.exists("folder/none.txt")).data, false);

      const top = await docs.list("", { sortBy: { column: "name", order: "asc" } });
      assert.deepEqual(
        top.data?.map((o) => [o.name, o.id === null]),
        [
          ["folder", true],
          ["top.bin", false],
        ],
      );
      const inFolder = await docs.list("folder", { limit: 10, offset: 0, search: "lyr" });
      assert.deepEqual(
        inFolder.data?.map((o) => o.name),
        ["lyrics.txt"],
      );
      assert.deepEqual((await docs.list("folder", { search: "zzz" })).data, []);

      // list-v2: full names under a prefix, or one level with folders, in pages with a cursor.
      const v2 = await docs.listV2({ with_delimiter: true });
      assert.equal(v2.error, null, JSON.stringify(v2.error));
      assert.deepEqual(
        v2.data?.folders.map((f) => f.name),
        ["folder/"],
      );
      assert.deepEqual(
        v2.data?.objects.map((o) => o.name),
        ["top.bin"],
      );
      for (const i of [1, 2, 3]) await docs.upload(`pages/p${i}.txt`, new Blob([String(i)]));
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 5; page++) {
        const r = await docs.listV2({
          prefix: "pages/",
          limit: 2,
          sortBy: { column: "created_at", order: "desc" },
          ...(cursor ? { cursor } : {}),
        });
        assert.equal(r.error, null, JSON.stringify(r.error));
        seen.push(...(r.data?.objects.map((o) => o.name) ?? []));
        cursor = r.data?.nextCursor;
        if (!r.data?.hasNext) break;
      }
      assert.deepEqual(seen, ["pages/p3.txt", "pages/p2.txt", "pages/p1.txt"]);
      assert.equal(errorOf(await docs.listV2({ cursor: "not-a-cursor" })).statusCode, "400");

      assert.equal((await docs.move("top.bin", "moved/top.bin")).error, null);
      assert.equal(errorOf(await docs.download("top.bin")).message, "Object not found");
      const copied = await docs.copy("moved/top.bin", "copy.bin");
      assert.equal(copied.error, null, JSON.stringify(copied.error));
      assert.deepEqual(
        Buffer.from(await ((await docs.download("copy.bin")).data as Blob).arrayBuffer()),
        Buffer.from([1, 2, 3]),
      );

      const signed = await docs.createSignedUrl("folder/lyrics.txt", 60, { download: "Lyrics final.txt" });
      assert.equal(signed.error, null);
      const res = await fetch(signed.data?.signedUrl as string);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), "second");
      assert.match(
        String(res.headers.get("content-disposition")),
        /^attachment; filename="Lyrics final\.txt"; filename\*=UTF-8''Lyrics%20final\.txt$/,
      );
      const batch = await docs.createSignedUrls(["copy.bin", "missing.bin"], 60);
      assert.equal(batch.data?.[0]?.error, null);
      assert.ok(batch.data?.[0]?.signedUrl);
      assert.ok(batch.data?.[1]?.error);

      const publicUrl = docs.getPublicUrl("copy.bin").data.publicUrl;
      const privateAnswer = await fetch(publicUrl, {
        headers: { apikey: (await tenantKeyOf(service)) ?? "" },
      });
      assert.equal(privateAnswer.status, 404);
      await service.storage.updateBucket("docs", { public: true });
      const pub = await fetch(`${publicUrl}?download=`, {
        headers: { apikey: (await tenantKeyOf(service)) ?? "" },
      });
      assert.equal(pub.status, 200);
      assert.match(String(pub.headers.get("content-disposition")), /filename="copy\.bin"/);

      const removed = await docs.remove(["copy.bin", "moved/top.bin", "nothing"]);
      assert.deepEqual(removed.data?.map((o) => o.name).sort(), ["copy.bin", "moved/top.bin"]);

      // Signed uploads: a URL is good once (unless upsert).
      const upUrl = await docs.createSignedUploadUrl("signed/one.txt");
      assert.equal(upUrl.error, null, JSON.stringify(upUrl.error));
      const first = await docs.uploadToSignedUrl(
        "signed/one.txt",
        upUrl.data?.token as string,
        new Blob(["1"]),
      );
      assert.equal(first.error, null, JSON.stringify(first.error));
      const second = await docs.uploadToSignedUrl(
        "signed/one.txt",
        upUrl.data?.token as string,
        new Blob(["2"]),
      );
      assert.equal(errorOf(second).message, "The resource already exists");
      assert.equal(errorOf(second).statusCode, "409");
    });

    test("bucket rules: limits (413, 415), invalid keys, one folder per account, roles", async () => {
      const { keys, service } = await tenant();
      await service.storage.createBucket("contracts", {
        public: false,
        fileSizeLimit: 10,
        allowedMimeTypes: ["application/pdf"],
      });
      const c = service.storage.from("contracts");
      const big = await c.upload("x.pdf", new Blob(["%PDF-".padEnd(50, "x")], { type: "application/pdf" }));
      assert.equal(errorOf(big).statusCode, "413");
      assert.equal(errorOf(big).message, "The object exceeded the maximum allowed size");
      const png = await c.upload("x.png", new Blob(["png"], { type: "image/png" }));
      assert.equal(errorOf(png).statusCode, "415");
      assert.equal(errorOf(png).message, "mime type image/png is not supported");
      const badKey = await c.upload("bad{key}.pdf", new Blob(["%PDF"], { type: "application/pdf" }));
      assert.equal(errorOf(badKey).message, "Invalid key: bad{key}.pdf");
      assert.deepEqual((await c.list()).data, []);

      // A bucket whose first folder is the account: members of one account never see another's.
      const res = await fetch(`${app.url}/storage/v1/bucket`, {
        method: "POST",
        headers: {
          apikey: keys.service_role_key,
          authorization: `Bearer ${keys.service_role_key}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ id: "private", folder_per_account: true, write_roles: ["owner", "admin"] }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const alice = await signedUp(keys.anon_key);
      const bob = await signedUp(keys.anon_key);
      const mine = await alice.client.storage
        .from("private")
        .upload(`${alice.account}/press.txt`, new Blob(["alice"], { type: "text/plain" }));
      assert.equal(mine.error, null, JSON.stringify(mine.error));
      const intoBob = await alice.client.storage
        .from("private")
        .upload(`${bob.account}/press.txt`, new Blob(["x"], { type: "text/plain" }));
      assert.equal(errorOf(intoBob).statusCode, "403");
      const noFolder = await alice.client.storage.from("private").upload("press.txt", new Blob(["x"]));
      assert.equal(errorOf(noFolder).statusCode, "403");
      const bobReads = await bob.client.storage.from("private").download(`${alice.account}/press.txt`);
      assert.equal(errorOf(bobReads).message, "Object not found");
      assert.deepEqual((await bob.client.storage.from("private").list(alice.account)).data, []);
      assert.ok(
        (await bob.client.storage.from("private").createSignedUrl(`${alice.account}/press.txt`, 60)).error,
      );
      assert.ok(
        (await bob.client.storage.from("private").remove([`${alice.account}/press.txt`])).data?.length === 0,
      );
      const stillThere = await alice.client.storage.from("private").download(`${alice.account}/press.txt`);
      assert.equal(await (stillThere.data as Blob).text(), "alice");

      // Another tenant reaches nothing of this one.
      const other = await tenant();
      const stranger = await signedUp(other.keys.anon_key);
      assert.equal(errorOf(await other.service.storage.getBucket("private")).message, "Bucket not found");
      const cross = await stranger.client.storage.from("private").download(`${alice.account}/press.txt`);
      assert.equal(errorOf(cross).message, "Bucket not found");
      assert.deepEqual((await other.service.storage.listBuckets()).data?.map((b) => b.name).sort(), [
        "artwork",
        "audio",
      ]);
      // And the tables are not served by /rest/v1.
      const rest = await alice.client.schema("storage").from("objects").select("*");
      assert.ok(rest.error);
    });

    test("copy and remove answer the object's row as Storage does", async () => {
      const { keys, service } = await tenant();
      assert.equal((await service.storage.createBucket("rows", { public: false })).error, null);
      const headers = {
        apikey: keys.service_role_key,
        authorization: `Bearer ${keys.service_role_key}`,
        "content-type": "application/json",
      };
      const up = await service.storage
        .from("rows")
        .upload("a.txt", new Blob(["a"], { type: "text/plain" }), { metadata: { take: 1 } });
      assert.equal(up.error, null, JSON.stringify(up.error));
      const copy = await fetch(`${app.url}/storage/v1/object/copy`, {
        method: "POST",
        headers,
        body: JSON.stringify({ bucketId: "rows", sourceKey: "a.txt", destinationKey: "b.txt" }),
      });
      assert.equal(copy.status, 200);
      const copied = (await copy.json()) as Obj;
      const fields = [
        "bucket_id",
        "created_at",
        "id",
        "last_accessed_at",
        "metadata",
        "name",
        "owner",
        "owner_id",
        "updated_at",
        "user_metadata",
        "version",
      ];
      assert.deepEqual(Object.keys(copied).sort(), ["Id", "Key", ...fields]);
      assert.equal(copied.Key, "rows/b.txt");
      assert.equal(copied.Id, copied.id);
      assert.equal(copied.name, "b.txt");
      assert.equal(copied.bucket_id, "rows");
      // Uploaded with a key, not by a user: Storage's empty owner.
      assert.equal(copied.owner, "");
      assert.equal(copied.owner_id, "");
      assert.deepEqual(copied.user_metadata, { take: 1 });
      assert.equal((copied.metadata as Obj).size, 1);

      // A move onto an existing object: Storage's code for it (a copy's is KeyAlreadyExists).
      const onto = await fetch(`${app.url}/storage/v1/object/move`, {
        method: "POST",
        headers,
        body: JSON.stringify({ bucketId: "rows", sourceKey: "a.txt", destinationKey: "b.txt" }),
      });
      assert.equal(onto.status, 409);
      assert.deepEqual(await onto.json(), {
        statusCode: "409",
        code: "ResourceAlreadyExists",
        error: "Duplicate",
        message: "The resource already exists",
      });

      const removed = await service.storage.from("rows").remove(["a.txt", "b.txt"]);
      assert.equal(removed.error, null, JSON.stringify(removed.error));
      const rows = removed.data as unknown as Obj[];
      assert.deepEqual(rows.map((r) => r.name).sort(), ["a.txt", "b.txt"]);
      for (const r of rows) assert.deepEqual(Object.keys(r).sort(), fields);
      assert.equal(rows.find((r) => r.name === "b.txt")?.version, copied.version);
    });

    test("Storage's error answers on every route, unknown ones included", async () => {
      const { keys } = await tenant();
      const headers = { apikey: keys.service_role_key, authorization: `Bearer ${keys.service_role_key}` };
      for (const [method, path] of [
        ["GET", "/storage/v1/nothing/here"],
        ["POST", "/storage/v1/render/image/authenticated/docs/a.png"],
        ["PATCH", "/storage/v1/bucket"],
      ] as const) {
        const r = await fetch(`${app.url}${path}`, { method, headers });
        assert.equal(r.status, 404, path);
        assert.match(String(r.headers.get("content-type")), /^application\/json/);
        const b = (await r.json()) as Obj;
        // Storage's answer, with the path as Storage sees it behind Supabase's gateway.
        assert.deepEqual(b, {
          statusCode: "404",
          code: "InvalidRequest",
          error: "Not Found",
          message: `Route ${method}:${path.slice("/storage/v1".length)} not found`,
        });
      }
      const badJson = await fetch(`${app.url}/storage/v1/bucket`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: "{",
      });
      assert.equal(badJson.status, 400);
      assert.equal(((await badJson.json()) as Obj).statusCode, "400");
      const info = await fetch(`${app.url}/storage/v1/object/info/nobucket/a.txt`, { headers });
      assert.equal(((await info.json()) as Obj).message, "Bucket not found");
    });
  });
}

async function accountOf(t: TestDb, userId: string): Promise<string> {
  return t.db.asService(
    async (tx) =>
      (
        await tx.query<{ account_id: string }>(
          "select account_id from internal.memberships where user_id = $1 order by account_id limit 1",
          [userId],
        )
      ).rows[0]?.account_id as string,
  );
}

function errorOf(result: { error: unknown }): { message: string; statusCode?: string } {
  assert.ok(result.error, "an error was expected");
  return result.error as { message: string; statusCode?: string };
}

/** The key a client was made with (storage-js sends it as apikey). */
async function tenantKeyOf(client: SupabaseClient): Promise<string | undefined> {
  return (client as unknown as { supabaseKey?: string }).supabaseKey;
}
