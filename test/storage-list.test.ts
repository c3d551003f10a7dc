import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient } from "@supabase/supabase-js";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";

/**
 * /storage/v1's list (v1), whose JSON the database writes in the listing statement
 * (src/storage/objects.ts, listObjects): the answer's exact fields and their forms, folders beside
 * files, a prefix and a search taken literally (`_` is no wildcard), sorting with limit and offset,
 * and a missing bucket, on both engines.
 */

const noSession = { auth: { persistSession: false, autoRefreshToken: false } };
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describeEachEngine("storage list", (t) => {
  let app: RunningApp;
  before(async () => {
    app = await startApp(t());
  });
  after(async () => {
    await app?.close();
  });

  test("the list's JSON: fields, folders, literal prefix and search, order, limit and offset", async () => {
    const { keys } = await tenantWithKeys(t(), { settings: { ...UNLIMITED } });
    const service = createClient(app.url, keys.service_role_key, noSession);
    const headers = {
      apikey: keys.service_role_key,
      authorization: `Bearer ${keys.service_role_key}`,
      "content-type": "application/json",
    };
    const list = async (bucket: string, body: Record<string, unknown>) => {
      const res = await fetch(`${app.url}/storage/v1/object/list/${bucket}`, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
      });
      assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
      return {
        status: res.status,
        body: (await res.json()) as Record<string, unknown>[] | Record<string, unknown>,
      };
    };
    assert.equal((await service.storage.createBucket("lists")).error, null);
    const files = service.storage.from("lists");
    for (const name of [
      "a_b/x.txt",
      "a_b/sub/z.txt",
      "axb/y.txt",
      "it's (1) & co.txt",
      "t/1.txt",
      "t/2.txt",
      "t/3.txt",
    ]) {
      const up = await files.upload(name, new Blob([name], { type: "text/plain" }));
      assert.equal(up.error, null, JSON.stringify(up.error));
    }

    // One level under the prefix: the folder (id, times and metadata null) and the file, every field.
    const underAb = await list("lists", { prefix: "a_b" });
    assert.equal(underAb.status, 200);
    const [folder, file] = underAb.body as Record<string, unknown>[];
    assert.deepEqual(folder, {
      name: "sub",
      id: null,
      updated_at: null,
      created_at: null,
      last_accessed_at: null,
      metadata: null,
    });
    assert.deepEqual(Object.keys(file ?? {}), [
      "name",
      "id",
      "updated_at",
      "created_at",
      "last_accessed_at",
      "metadata",
    ]);
    assert.equal(file?.name, "x.txt");
    assert.match(String(file?.id), /^[0-9a-f-]{36}$/);
    for (const k of ["updated_at", "created_at", "last_accessed_at"]) assert.match(String(file?.[k]), ISO, k);
    const metadata = file?.metadata as Record<string, unknown>;
    assert.equal(metadata.size, "a_b/x.txt".length);
    assert.equal(metadata.mimetype, "text/plain");
    // The same instants as the object's info gives.
    const info = (await (
      await fetch(`${app.url}/storage/v1/object/info/lists/a_b/x.txt`, { headers })
    ).json()) as Record<string, unknown>;
    assert.equal(info.created_at, file?.created_at);
    assert.equal(info.last_modified, file?.updated_at);

    // The top: folders and files by name; `_` in a search is a character, not a wildcard.
    const names = async (body: Record<string, unknown>) =>
      ((await list("lists", body)).body as Record<string, unknown>[]).map((o) => o.name);
    assert.deepEqual(await names({ prefix: "" }), ["a_b", "axb", "it's (1) & co.txt", "t"]);
    assert.deepEqual(await names({ prefix: "", search: "a_" }), ["a_b"]);
    assert.deepEqual(await names({ prefix: "", search: "IT'S" }), ["it's (1) & co.txt"]);
    assert.deepEqual(await names({ prefix: "", search: "%" }), []);
    assert.deepEqual(await names({ prefix: "a%" }), []);
    assert.deepEqual(await names({ prefix: "", sortBy: { column: "name", order: "desc" }, limit: 2 }), [
      "t",
      "it's (1) & co.txt",
    ]);
    // Newest first, the first one skipped.
    assert.deepEqual(
      await names({ prefix: "t", sortBy: { column: "created_at", order: "desc" }, limit: 2, offset: 1 }),
      ["2.txt", "1.txt"],
    );
    assert.deepEqual(await names({ prefix: "nothing/here" }), []);

    const missing = await list("no-such-bucket", { prefix: "" });
    assert.equal(missing.status, 404);
    assert.equal((missing.body as Record<string, unknown>).message, "Bucket not found");
  });
});
