import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  assertProblem,
  completeRelease,
  expectStatus,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";

/**
 * ETag, If-Match and If-None-Match on releases, tracks and artists (issue 29, item 7): the real
 * server on a socket, fetch with a real API key, each engine. A stale If-Match is 412
 * precondition_failed and changes nothing; two writers holding the same tag: one wins.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

describeEachEngine("public api: ETag and conditional requests", (t) => {
  let app: RunningApp;
  let api: Api;
  before(async () => {
    app = await startApp(t());
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    const { tenant } = await tenantWithKeys(t(), { settings });
    const k = await keyedAccount(t().db, { tenant });
    api = publicApi(app.url, k.key.secret);
  });
  after(async () => {
    await app?.close();
  });

  async function release(): Promise<Obj & { id: string; artist_id: string }> {
    return expectStatus(
      await api<Obj & { id: string; artist_id: string }>(
        "POST",
        "/releases",
        completeRelease({ title: "Tides" }),
      ),
      201,
    );
  }

  /** For each resource: where it is read, and a harmless edit. */
  async function resources(): Promise<{ name: string; path: string; edit: Obj; field: string }[]> {
    const r = await release();
    const track = expectStatus(
      await api<Obj & { id: string }>("POST", `/releases/${r.id}/tracks`, { title: "One", duration: 100 }),
      201,
    );
    return [
      { name: "release", path: `/releases/${r.id}`, edit: { title: "Tides II" }, field: "title" },
      { name: "track", path: `/releases/${r.id}/tracks/${track.id}`, edit: { title: "Two" }, field: "title" },
      { name: "artist", path: `/artists/${r.artist_id}`, edit: { bio: "From the coast." }, field: "bio" },
    ];
  }

  test("GET answers a strong ETag; If-None-Match with it is 304 without a body, a changed object 200", async () => {
    for (const r of await resources()) {
      const first = expectStatus(await api<Obj>("GET", r.path), 200);
      const etag = (await api("GET", r.path)).headers.get("etag");
      assert.match(etag ?? "", /^"\d+-[A-Za-z0-9_-]{16}"$/, `${r.name}: a strong tag`);
      const again = await api("GET", r.path, undefined, { "if-none-match": etag ?? "" });
      assert.equal(again.status, 304, r.name);
      assert.equal(again.body, undefined, r.name);
      assert.equal(again.headers.get("etag"), etag);
      // A list of tags, and the weak form of the same tag, match too (weak comparison).
      assert.equal((await api("GET", r.path, undefined, { "if-none-match": `"x", W/${etag}` })).status, 304);
      assert.equal(
        (await api("GET", r.path, undefined, { "if-none-match": '"0-AAAAAAAAAAAAAAAA"' })).status,
        200,
      );
      const patched = await api("PATCH", r.path, r.edit);
      expectStatus(patched, 200);
      const changed = await api<Obj>("GET", r.path, undefined, { "if-none-match": etag ?? "" });
      assert.equal(changed.status, 200, `${r.name}: changed since the tag`);
      assert.notEqual(changed.headers.get("etag"), etag);
      assert.notDeepEqual(changed.body[r.field], first[r.field]);
    }
  });

  test("a track's change changes its release's ETag (the release's answer holds its tracks)", async () => {
    const r = await release();
    const track = expectStatus(
      await api<Obj & { id: string }>("POST", `/releases/${r.id}/tracks`, { title: "One", duration: 100 }),
      201,
    );
    const etag = (await api("GET", `/releases/${r.id}`)).headers.get("etag") ?? "";
    expectStatus(await api("PATCH", `/releases/${r.id}/tracks/${track.id}`, { title: "Uno" }), 200);
    assert.equal((await api("GET", `/releases/${r.id}`, undefined, { "if-none-match": etag })).status, 200);
  });

  test("PATCH with the current If-Match succeeds and answers the new ETag; a stale one is 412 and changes nothing", async () => {
    for (const r of await resources()) {
      const etag = (await api("GET", r.path)).headers.get("etag") ?? "";
      const ok = await api<Obj>("PATCH", r.path, r.edit, { "if-match": etag });
      expectStatus(ok, 200);
      const next = ok.headers.get("etag") ?? "";
      assert.match(next, /^"\d+-/);
      assert.notEqual(next.split("-")[0], etag.split("-")[0], `${r.name}: a new version`);
      const before = expectStatus(await api<Obj>("GET", r.path), 200);
      const stale = await api("PATCH", r.path, { [r.field]: "Overwritten" }, { "if-match": etag });
      const problem = assertProblem(stale, 412, "precondition_failed");
      assert.equal(problem.param, "If-Match");
      assert.deepEqual(expectStatus(await api<Obj>("GET", r.path), 200), before, `${r.name}: unchanged`);
      // A weak tag, a tag that is not ours: no strong match, 412. `*`: any version, 200.
      assertProblem(
        await api("PATCH", r.path, r.edit, { "if-match": `W/${next}` }),
        412,
        "precondition_failed",
      );
      assertProblem(await api("PATCH", r.path, r.edit, { "if-match": '"nope"' }), 412, "precondition_failed");
      expectStatus(await api("PATCH", r.path, r.edit, { "if-match": "*" }), 200);
      // The new tag of the PATCH's answer is good for the next write.
      const current = (await api("GET", r.path)).headers.get("etag") ?? "";
      expectStatus(await api("PATCH", r.path, r.edit, { "if-match": `"0-x", ${current}` }), 200);
    }
  });

  test("two writers holding the same ETag: one PATCH wins, the other is 412", async () => {
    for (const r of await resources()) {
      const etag = (await api("GET", r.path)).headers.get("etag") ?? "";
      const [a, b] = await Promise.all([
        api<Obj>("PATCH", r.path, { [r.field]: "Writer A" }, { "if-match": etag }),
        api<Obj>("PATCH", r.path, { [r.field]: "Writer B" }, { "if-match": etag }),
      ]);
      const statuses = [a.status, b.status].sort();
      assert.deepEqual(statuses, [200, 412], `${r.name}: ${JSON.stringify([a.body, b.body])}`);
      const winner = a.status === 200 ? "Writer A" : "Writer B";
      assert.equal(expectStatus(await api<Obj>("GET", r.path), 200)[r.field], winner);
    }
  });

  test("DELETE with a stale If-Match is 412 and deletes nothing; with the current tag it deletes", async () => {
    const list = await resources();
    // The track, then the release (the artist is the release's, in use until then).
    for (const r of [list[1], list[0]]) {
      if (!r) continue;
      const etag = (await api("GET", r.path)).headers.get("etag") ?? "";
      expectStatus(await api("PATCH", r.path, r.edit), 200);
      assertProblem(await api("DELETE", r.path, undefined, { "if-match": etag }), 412, "precondition_failed");
      expectStatus(await api("GET", r.path), 200);
      const current = (await api("GET", r.path)).headers.get("etag") ?? "";
      expectStatus(await api("DELETE", r.path, undefined, { "if-match": current }), 200);
      assertProblem(await api("GET", r.path), 404, "resource_missing");
    }
    const fresh = expectStatus(
      await api<Obj & { id: string }>("POST", "/artists", { name: "Solo Act" }),
      201,
    );
    const artist = { path: `/artists/${fresh.id}`, edit: { bio: "x" } };
    if (list[2]) {
      const etag = (await api("GET", artist.path)).headers.get("etag") ?? "";
      expectStatus(await api("PATCH", artist.path, artist.edit), 200);
      assertProblem(
        await api("DELETE", artist.path, undefined, { "if-match": etag }),
        412,
        "precondition_failed",
      );
      const current = (await api("GET", artist.path)).headers.get("etag") ?? "";
      expectStatus(await api("DELETE", artist.path, undefined, { "if-match": current }), 200);
    }
  });

  test("If-Match on an object that does not exist is 404, as without it", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    assertProblem(
      await api("PATCH", `/artists/${missing}`, { bio: "x" }, { "if-match": '"1-AAAAAAAAAAAAAAAA"' }),
      404,
      "resource_missing",
    );
    assertProblem(
      await api("DELETE", `/releases/${missing}`, undefined, { "if-match": '"1-AAAAAAAAAAAAAAAA"' }),
      404,
      "resource_missing",
    );
  });

  test("the OpenAPI document states the ETag header, If-Match, If-None-Match, 304 and 412", async () => {
    const doc = (await (await fetch(`${app.url}/api/public/v1/openapi.json`)).json()) as Obj;
    const paths = doc.paths as Record<string, Record<string, Obj>>;
    for (const [path, methods] of [
      ["/releases/{id}", ["get", "patch", "delete"]],
      ["/releases/{id}/tracks/{trackId}", ["get", "patch", "delete"]],
      ["/artists/{id}", ["get", "patch", "delete"]],
    ] as const) {
      for (const m of methods) {
        const op = paths[path]?.[m] as { parameters: Obj[]; responses: Record<string, Obj> };
        const refs = op.parameters.map((p) => p.$ref);
        if (m === "get") {
          assert.ok(refs.includes("#/components/parameters/IfNoneMatch"), `${m} ${path}`);
          assert.ok(op.responses["304"], `${m} ${path} 304`);
          assert.ok((op.responses["200"]?.headers as Obj | undefined)?.ETag, `${m} ${path} ETag`);
        } else {
          assert.ok(refs.includes("#/components/parameters/IfMatch"), `${m} ${path}`);
          assert.ok(op.responses["412"], `${m} ${path} 412`);
        }
      }
    }
  });
});
