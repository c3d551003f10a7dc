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
 * Cursor pages on the public API's lists (issue 29, item 6): `starting_after` / `ending_before` with
 * `has_more` and no `total`, beside offset pages that answer as before. Real server, real key, each
 * engine. A walk by cursor sees every item once, in the offset order, even when items are added
 * before the cursor while it walks.
 */

type Obj = Record<string, unknown>;
type Page = {
  object: string;
  data: (Obj & { id: string })[];
  has_more: boolean;
  total?: number;
  offset?: number;
};
type Api = ReturnType<typeof publicApi>;

describeEachEngine("public api: cursor pagination", (t) => {
  let app: RunningApp;
  let api: Api;
  let releaseId: string;
  let webhookId: string;
  before(async () => {
    app = await startApp(t(), { WEBHOOK_ALLOW_PRIVATE: "true" });
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    const { tenant } = await tenantWithKeys(t(), { settings });
    const k = await keyedAccount(t().db, {
      tenant,
      scopes: ["catalog:read", "catalog:write", "keys:manage", "webhooks:manage"],
    });
    api = publicApi(app.url, k.key.secret);
    for (const name of ["Cleo", "Abe", "Bo", "Abe", "Dana", "Eve", "Fay"]) {
      expectStatus(await api("POST", "/artists", { name }), 201);
    }
    for (let i = 0; i < 6; i++) {
      const r = expectStatus(
        await api<Obj & { id: string }>(
          "POST",
          "/releases",
          completeRelease({ title: `R${i}`, artist_name: "Abe" }),
        ),
        201,
      );
      releaseId = r.id;
    }
    // Tracks: two discs, and positions given out of order.
    for (const [disc, n] of [
      [2, 1],
      [1, 3],
      [1, 1],
      [2, 2],
      [1, 2],
    ] as const) {
      expectStatus(
        await api("POST", `/releases/${releaseId}/tracks`, {
          title: `T${disc}.${n}`,
          disc_number: disc,
          track_number: n,
        }),
        201,
      );
    }
  });
  after(async () => {
    await app?.close();
  });

  async function everything(path: string): Promise<string[]> {
    const all = expectStatus(
      await api<Page>("GET", `${path}${path.includes("?") ? "&" : "?"}limit=100`),
      200,
    );
    assert.equal(all.has_more, false);
    return all.data.map((x) => x.id);
  }

  async function walk(path: string, size: number, dir: "starting_after" | "ending_before", from?: string) {
    const sep = path.includes("?") ? "&" : "?";
    const seen: string[] = [];
    let cursor = from;
    for (let i = 0; i < 50; i++) {
      const q = `${sep}limit=${size}${cursor ? `&${dir}=${cursor}` : ""}`;
      const page = expectStatus(await api<Page>("GET", `${path}${q}`), 200);
      if (cursor) {
        assert.equal(page.total, undefined, "a cursor page counts nothing");
        assert.equal(page.offset, undefined);
      }
      assert.ok(page.data.length <= size);
      if (dir === "starting_after") seen.push(...page.data.map((x) => x.id));
      else seen.unshift(...page.data.map((x) => x.id));
      if (!page.has_more) return seen;
      const edge = dir === "starting_after" ? page.data[page.data.length - 1] : page.data[0];
      cursor = edge?.id;
    }
    throw new Error("the walk did not end");
  }

  const lists = () => [
    "/artists",
    "/releases",
    "/releases?status=draft",
    `/releases/${releaseId}/tracks`,
    "/api-keys",
  ];

  test("walking every list by starting_after sees each item once, in the offset order; ending_before walks back", async () => {
    for (const path of lists()) {
      const all = await everything(path);
      assert.ok(all.length >= 1, path);
      for (const size of [1, 2, 3]) {
        assert.deepEqual(await walk(path, size, "starting_after"), all, `${path} forward by ${size}`);
        const last = all[all.length - 1];
        const back = await walk(path, size, "ending_before", last);
        assert.deepEqual(back, all.slice(0, -1), `${path} back by ${size}`);
      }
    }
  });

  test("tracks come by cursor in disc and track order", async () => {
    const titles = expectStatus(
      await api<Page>(
        "GET",
        `/releases/${releaseId}/tracks?limit=2&starting_after=${(await everything(`/releases/${releaseId}/tracks`))[0]}`,
      ),
      200,
    ).data.map((x) => x.title);
    assert.deepEqual(titles, ["T1.2", "T1.3"]);
  });

  test("offset pages answer as before: total, offset and has_more", async () => {
    const page = expectStatus(await api<Page>("GET", "/artists?limit=2&offset=2"), 200);
    assert.equal(page.total, 7);
    assert.equal(page.offset, 2);
    assert.equal(page.has_more, true);
    assert.equal(page.data.length, 2);
    const first = expectStatus(await api<Page>("GET", "/artists?limit=2"), 200);
    assert.equal(first.offset, 0);
  });

  test("a walk by cursor neither skips nor repeats when items are added before the cursor", async () => {
    const first = expectStatus(await api<Page>("GET", "/artists?limit=3"), 200);
    // Names sorting before every one seen: an offset walk would now repeat items.
    expectStatus(await api("POST", "/artists", { name: "Aaron" }), 201);
    expectStatus(await api("POST", "/artists", { name: "Aaa" }), 201);
    const rest = await walk("/artists", 2, "starting_after", first.data[2]?.id);
    const all = await everything("/artists");
    assert.deepEqual(
      [...first.data.map((x) => x.id), ...rest],
      all.filter((_, i) => i >= 2),
    );
  });

  test("bad cursors are 400 invalid_parameter naming the parameter", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    let p = assertProblem(await api("GET", `/artists?starting_after=${missing}`), 400, "invalid_parameter");
    assert.equal(p.param, "starting_after");
    p = assertProblem(await api("GET", "/artists?ending_before=nope"), 400, "invalid_parameter");
    assert.equal(p.param, "ending_before");
    const id = (await everything("/artists"))[0];
    p = assertProblem(await api("GET", `/artists?starting_after=${id}&offset=0`), 400, "invalid_parameter");
    assert.equal(p.param, "offset");
    p = assertProblem(
      await api("GET", `/artists?starting_after=${id}&ending_before=${id}`),
      400,
      "invalid_parameter",
    );
    assert.equal(p.param, "ending_before");
    // An artist's id is not an item of the releases list.
    p = assertProblem(await api("GET", `/releases?starting_after=${id}`), 400, "invalid_parameter");
    assert.equal(p.param, "starting_after");
  });

  test("webhook endpoints and their deliveries page by cursor too", async () => {
    for (const n of [1, 2, 3]) {
      const w = expectStatus(
        await api<Obj & { id: string }>("POST", "/webhooks", {
          url: `http://127.0.0.1:9/hook/${n}`,
          events: ["release.live"],
        }),
        201,
      );
      webhookId = w.id;
    }
    for (let i = 0; i < 3; i++) expectStatus(await api("POST", `/webhooks/${webhookId}/test`), 202);
    const all = await everything("/webhooks");
    assert.equal(all.length, 3);
    assert.deepEqual(await walk("/webhooks", 1, "starting_after"), all);
    const deliveries = await everything(`/webhooks/${webhookId}/deliveries`);
    assert.equal(deliveries.length, 3);
    assert.deepEqual(await walk(`/webhooks/${webhookId}/deliveries`, 1, "starting_after"), deliveries);
  });

  test("the OpenAPI document describes the cursor parameters and a list without total", async () => {
    const doc = (await (await fetch(`${app.url}/api/public/v1/openapi.json`)).json()) as Obj;
    const paths = doc.paths as Record<string, Record<string, { parameters: Obj[] }>>;
    for (const path of [
      "/artists",
      "/releases",
      "/releases/{id}/tracks",
      "/api-keys",
      "/webhooks",
      "/webhooks/{id}/deliveries",
    ]) {
      const names = (paths[path]?.get?.parameters ?? []).map((p) => p.name);
      for (const n of ["limit", "offset", "starting_after", "ending_before"])
        assert.ok(names.includes(n), `${path} ${n}`);
    }
    const list = (doc.components as { schemas: Record<string, { required?: string[] }> }).schemas.ArtistList;
    assert.ok(!list?.required?.includes("total"));
  });
});
