import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { SignJWT } from "jose";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import type { TenantKeys } from "../src/tenancy/keys.ts";
import { getTenantSigningSecret, type Tenant } from "../src/tenancy/tenants.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  type ApiResponse,
  assertFieldErrors,
  assertProblem,
  completeRelease,
  expectStatus,
  isrcs,
  keyedAccount,
  publicApi,
} from "./support/public-api.ts";
import { forceReleaseStatus, seedAccount, seedUser, signSessionClaims } from "./support/seed.ts";

/**
 * The admin API (/admin/v1, src/admin): the operator's review, delivery and OAC commands over
 * HTTP, for one tenant's operator team with that tenant's service-role key. Real HTTP over a
 * socket, a real Worker running the pipeline's jobs, releases made as accounts make them (the
 * public API). Tenants here review by hand (no settings.auto_review), so a clean release waits in
 * the queue for the operator; and they name no settings.delivery_adapter, so each store's own
 * settings decide how it is delivered to (this file's stores, made before the app starts).
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;
type Admin = <T = Obj>(method: string, path: string, body?: unknown) => Promise<ApiResponse<T>>;

interface Delivery {
  id: string;
  store: string;
  action: string;
  status: string;
  attempts: number;
  message: string | null;
  store_reference: string | null;
  created_at: string;
  delivered_at: string | null;
  live_at: string | null;
  taken_down_at: string | null;
  confirmed_by: string | null;
  confirmed_via: string | null;
  confirmation_note: string | null;
  updated_at: string;
}

interface Queued {
  id: string;
  account_id: string;
  title: string;
  artist_name: string | null;
  status: string;
  submitted_at: string | null;
  /** An active priority_review add-on: sorted first (docs/operator.md, "Add-ons"). */
  priority: boolean;
  problems: { param: string; code: string; message: string }[];
}

const nextIsrc = isrcs("QZADM");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Reads until `ok` holds; fails with `what` and the last value read. */
async function poll<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline)
      assert.fail(`timed out waiting for ${what}; last seen: ${JSON.stringify(value)}`);
    await sleep(25);
  }
}

const sign = (claims: Obj, secret: string) =>
  new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT" }).sign(new TextEncoder().encode(secret));
const now = () => Math.floor(Date.now() / 1000);

describeEachEngine("admin API /admin/v1", (t) => {
  const db = () => t().db;
  const rows = <T extends Obj>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  const statusOf = async (id: string) =>
    (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]?.status;
  const waitForStatus = (id: string, status: string) =>
    poll(
      `release ${id} to be ${status}`,
      () => statusOf(id),
      (s) => s === status,
    );
  /** What an operator call must leave alone: the release's row, history and jobs. */
  const footprint = (id: string) =>
    rows(
      `select r.status, r.status_reason,
         (select count(*)::int from internal.release_history h where h.release_id = r.id) as history,
         (select count(*)::int from internal.jobs j where j.payload ->> 'release_id' = r.id::text) as jobs,
         (select count(*)::int from internal.release_deliveries d where d.release_id = r.id) as deliveries
       from public.releases r where r.id = $1`,
      [id],
    );
  const setStore = (code: string, settings: Obj) =>
    db().asService((tx) =>
      tx.query("update internal.stores set settings = $2 where code = $1", [code, JSON.stringify(settings)]),
    );

  // An inner suite, so the worker and the app stop before describeEachEngine's after() closes the database.
  describe("with a worker", () => {
    let app: RunningApp;
    let worker: Worker;
    // This file's stores. The public API checks `services` against a store catalogue it caches,
    // so they exist before the app starts; releases here always name theirs.
    const tag = randomBytes(4).toString("hex");
    const store = {
      /** Delivers and reports live at once. */
      ok: `adm_ok_${tag}`,
      /** Delivers, and would report live in an hour: a delivered record that waits for a report. */
      slow: `adm_slow_${tag}`,
      /** Refuses while its settings say so (one test). */
      flaky: `adm_flaky_${tag}`,
      /** No adapter configured until the operator sets one (one test). */
      bare: `adm_bare_${tag}`,
      /** Live at once, but would confirm a takedown only in an hour: a takedown that waits for its word. */
      hold: `adm_hold_${tag}`,
    };
    before(async () => {
      const settings: Record<string, Obj> = {
        [store.ok]: { adapter: "sandbox" },
        [store.slow]: { adapter: "sandbox", sandbox: { live_after_ms: 3_600_000 } },
        [store.flaky]: { adapter: "sandbox" },
        [store.bare]: {},
        [store.hold]: { adapter: "sandbox", sandbox: { takedown_after_ms: 3_600_000 } },
      };
      await db().asService(async (tx) => {
        for (const [code, s] of Object.entries(settings)) {
          await tx.query(
            "insert into internal.stores (code, name, sort, settings) values ($1, $2, 1000, $3)",
            [code, `Store ${code}`, JSON.stringify(s)],
          );
        }
      });
      app = await startApp(t());
      worker = new Worker({ db: db(), handlers: pipelineHandlers(db()), pollMs: 20 });
      worker.start();
    });
    after(async () => {
      await worker?.stop();
      await app?.close();
    });

    async function withWorkerStopped(fn: () => Promise<void>): Promise<void> {
      await worker.stop();
      try {
        await fn();
      } finally {
        worker.start();
      }
    }

    async function newTenant(): Promise<{ tenant: Tenant; keys: TenantKeys }> {
      const limits = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
      return tenantWithKeys(t(), { settings: limits });
    }

    async function keyed(tenant: Tenant) {
      const k = await keyedAccount(db(), { tenant });
      return { account: k.account, api: publicApi(app.url, k.key.secret) };
    }

    /** A complete release, submitted through the public API. */
    async function submitted(api: Api, services: string[] = [store.ok]): Promise<string> {
      const release = expectStatus(
        await api<Obj & { id: string }>("POST", "/releases", completeRelease({ services })),
        201,
      );
      const track = { title: "Night Drive", isrc: nextIsrc(), duration: 200 };
      expectStatus(await api("POST", `/releases/${release.id}/tracks`, track), 201);
      expectStatus(await api("POST", `/releases/${release.id}/submit`), 200);
      return release.id;
    }

    /** A complete release its review job left in review, waiting for the operator. */
    async function inReview(api: Api, services?: string[]): Promise<string> {
      const id = await submitted(api, services);
      await waitForStatus(id, "in_review");
      await poll(
        `the review job of ${id} to finish`,
        () =>
          rows(
            `select 1 from internal.jobs where kind = 'release.review' and payload ->> 'release_id' = $1
               and status in ('queued', 'running')`,
            [id],
          ),
        (open) => open.length === 0,
      );
      return id;
    }

    /** Calls /admin/v1 with `key` as apikey (and `bearer`, if given, as Authorization). */
    async function call<T = Obj>(
      method: string,
      path: string,
      options: { key?: string; bearer?: string; body?: unknown; contentType?: string } = {},
    ): Promise<ApiResponse<T>> {
      const headers: Record<string, string> = {};
      if (options.key !== undefined) headers.apikey = options.key;
      if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`;
      const raw =
        options.body === undefined
          ? undefined
          : typeof options.body === "string"
            ? options.body
            : JSON.stringify(options.body);
      if (raw !== undefined) headers["content-type"] = options.contentType ?? "application/json";
      const res = await fetch(`${app.url}/admin/v1${path}`, {
        method,
        headers,
        ...(raw !== undefined ? { body: raw } : {}),
      });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: the test sees the text
      }
      return { status: res.status, headers: res.headers, body: body as T };
    }

    /** An operator team: its tenant, keys and an admin client with the service-role key. */
    async function operator() {
      const { tenant, keys } = await newTenant();
      const admin: Admin = <T = Obj>(method: string, path: string, body?: unknown) =>
        call<T>(method, path, { key: keys.service_role_key, body });
      return { tenant, keys, admin, ...(await keyed(tenant)) };
    }

    const deliveriesOf = async (admin: Admin, id: string) =>
      expectStatus(await admin<{ data: Delivery[] }>("GET", `/releases/${id}/deliveries`), 200).data;
    const jobKinds = async (id: string) =>
      (
        await rows<{ kind: string }>(
          "select kind from internal.jobs where payload ->> 'release_id' = $1 order by id",
          [id],
        )
      ).map((j) => j.kind);
    const secretOf = async (tenant: Tenant) => (await getTenantSigningSecret(db(), tenant.id)) as string;
    /** A signed-in user's access token, as /auth/v1 issues it. */
    const userToken = async (tenant: Tenant, exp = now() + 3600) => {
      const account = await seedAccount(db(), tenant);
      const user = await seedUser(db(), tenant, [{ account, role: "owner" }]);
      return signSessionClaims(db(), tenant.id, {
        role: "authenticated",
        sub: user.id,
        tenant_id: tenant.id,
        aud: "authenticated",
        iat: now(),
        exp,
      });
    };

    test("the review queue lists the tenant's releases waiting for review, oldest first, with what the checks say now", async () => {
      const a = await operator();
      const b = await operator();
      const clean = await inReview(a.api);
      const broken = await inReview(a.api);
      await rows("delete from public.tracks where release_id = $1", [broken]);
      const theirs = await inReview(b.api);

      await withWorkerStopped(async () => {
        // Submitted, its review job not run yet: in the queue too, and the operator may decide it.
        const waiting = await submitted(a.api);
        const res = await a.admin<{ data: Queued[] }>("GET", "/reviews");
        assert.equal(res.status, 200);
        assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
        assert.equal(res.headers.get("cache-control"), "no-store");
        const queue = res.body.data;
        assert.deepEqual(
          queue.map((r) => [r.id, r.account_id, r.title, r.artist_name, r.status]),
          [
            [clean, a.account.id, "Night Drive", "Luna Vale", "in_review"],
            [broken, a.account.id, "Night Drive", "Luna Vale", "in_review"],
            [waiting, a.account.id, "Night Drive", "Luna Vale", "submitted"],
          ],
        );
        assert.deepEqual(Object.keys(queue[0] ?? {}).sort(), [
          "account_id",
          "artist_name",
          "id",
          "priority",
          "problems",
          "status",
          "submitted_at",
          "title",
        ]);
        for (const r of queue) assert.match(r.submitted_at ?? "", ISO);
        // No priority_review add-on bought here: none is first for it.
        assert.deepEqual(
          queue.map((r) => r.priority),
          [false, false, false],
        );
        assert.deepEqual(
          queue.map((r) => r.problems),
          [[], [{ param: "tracks", code: "no_tracks", message: "a release needs at least one track" }], []],
        );

        assert.deepEqual(expectStatus(await a.admin("POST", `/releases/${waiting}/approve`), 200), {
          id: waiting,
          status: "approved",
          status_reason: null,
        });
      });

      assert.deepEqual(
        expectStatus(await b.admin<{ data: Queued[] }>("GET", "/reviews"), 200).data.map((r) => r.id),
        [theirs],
        "another tenant's queue is its own",
      );
      const empty = await operator();
      assert.deepEqual(expectStatus(await empty.admin("GET", "/reviews"), 200), {
        data: [],
        has_more: false,
        counts: { submitted: 0, in_review: 0, total: 0 },
      });
    });

    test("approve: the release is approved, its delivery job queued, and it goes on to its stores; approving it again is 409", async () => {
      const a = await operator();
      const id = await inReview(a.api);
      // No body, an empty body, or {}: all the same.
      const res = await a.admin("POST", `/releases/${id}/approve`, {});
      assert.deepEqual(expectStatus(res, 200), { id, status: "approved", status_reason: null });
      assert.deepEqual((await jobKinds(id)).slice(0, 2), ["release.review", "release.deliver"]);
      const [last] = await rows<{ from_status: string; to_status: string; actor_role: string }>(
        `select from_status, to_status, actor_role from internal.release_history
         where release_id = $1 and to_status = 'approved'`,
        [id],
      );
      assert.deepEqual(last, { from_status: "in_review", to_status: "approved", actor_role: "service_role" });

      await waitForStatus(id, "live");
      const status = expectStatus(await a.api<Obj>("GET", `/releases/${id}/status`), 200);
      assert.deepEqual([status.approval, status.status], ["approved", "live"]);

      const deliveries = await deliveriesOf(a.admin, id);
      assert.deepEqual(
        deliveries.map((d) => [d.store, d.action, d.status, d.attempts, d.message, d.store_reference]),
        [[store.ok, "insert", "live", 1, null, `sandbox-${store.ok}-${deliveries[0]?.id}`]],
      );
      const [d] = deliveries;
      for (const at of [d?.created_at, d?.delivered_at, d?.live_at, d?.updated_at])
        assert.match(at ?? "", ISO);

      const again = assertProblem(await a.admin("POST", `/releases/${id}/approve`), 409, "invalid_state");
      assert.match(again.detail, /is live; only submitted and in_review releases are reviewed/);
      const reject = await a.admin("POST", `/releases/${id}/reject`, { reason: "Too late" });
      assertProblem(reject, 409, "invalid_state");
      assert.equal(await statusOf(id), "live");
    });

    test("reject with a reason: the release is rejected with it, the account sees it, nothing is delivered", async () => {
      const a = await operator();
      const id = await inReview(a.api);
      const res = await a.admin("POST", `/releases/${id}/reject`, { reason: "  Cover art has a URL " });
      assert.deepEqual(expectStatus(res, 200), {
        id,
        status: "rejected",
        status_reason: "Cover art has a URL",
      });
      const status = expectStatus(await a.api<Obj>("GET", `/releases/${id}/status`), 200);
      assert.deepEqual([status.approval, status.rejection_reason], ["rejected", "Cover art has a URL"]);
      assert.deepEqual(await jobKinds(id), ["release.review"]);
      assertProblem(await a.admin("POST", `/releases/${id}/approve`), 409, "invalid_state");
      assert.deepEqual(expectStatus(await a.admin("GET", "/reviews"), 200), {
        data: [],
        has_more: false,
        counts: { submitted: 0, in_review: 0, total: 0 },
      });
    });

    test("approving a release whose checks fail now is 422 release_incomplete listing them; it stays in review", async () => {
      const a = await operator();
      const id = await inReview(a.api);
      await rows("delete from public.tracks where release_id = $1", [id]);
      const before = await footprint(id);
      const res = await a.admin("POST", `/releases/${id}/approve`);
      const errors = assertFieldErrors(res, [["tracks", "no_tracks"]], "release_incomplete", 422);
      assert.equal(errors[0]?.message, "a release needs at least one track");
      const body = res.body as { param?: string; detail: string };
      assert.equal(body.param, "tracks");
      assert.match(body.detail, /cannot be approved: a release needs at least one track/);
      assert.deepEqual(await footprint(id), before);
      assert.equal(await statusOf(id), "in_review");
      assert.equal(
        expectStatus(await a.admin("POST", `/releases/${id}/reject`, { reason: "No audio" }), 200).status,
        "rejected",
      );
    });

    test("retry after a store refused: the failed delivery is sent again once the store accepts, and the release goes live", async () => {
      const a = await operator();
      await setStore(store.flaky, { adapter: "sandbox", sandbox: { fail: "Artwork too small" } });
      try {
        const id = await inReview(a.api, [store.ok, store.flaky]);
        expectStatus(await a.admin("POST", `/releases/${id}/approve`), 200);
        const failed = await poll(
          "the refused delivery to be in error and the other live",
          () => deliveriesOf(a.admin, id),
          (ds) =>
            ds.length === 2 &&
            ds.some((d) => d.store === store.flaky && d.status === "error") &&
            ds.some((d) => d.store === store.ok && d.status === "live"),
        );
        const refused = failed.find((d) => d.store === store.flaky);
        assert.equal(
          refused?.message,
          `Store ${store.flaky} (sandbox) refused the delivery: Artwork too small`,
        );
        assert.equal(await statusOf(id), "delivering");

        // The worker held still, so the queue's own retry cannot slip in before the operator's.
        await withWorkerStopped(async () => {
          await setStore(store.flaky, { adapter: "sandbox" });
          if ((await deliveriesOf(a.admin, id)).find((d) => d.store === store.flaky)?.status !== "error") {
            assert.fail("the refused delivery left error before the retry");
          }
          const res = await a.admin("POST", `/releases/${id}/deliveries/retry`);
          assert.deepEqual(expectStatus(res, 200), { release_id: id, retried: 1 });
          const pending = (await deliveriesOf(a.admin, id)).find((d) => d.store === store.flaky);
          assert.equal(pending?.status, "pending");
        });
        await waitForStatus(id, "live");
        const done = (await deliveriesOf(a.admin, id)).find((d) => d.store === store.flaky);
        assert.deepEqual([done?.id, done?.status, done?.message], [refused?.id, "live", null]);
        assert.ok((done?.attempts ?? 0) >= 2, `attempts: ${done?.attempts}`);
        assert.deepEqual(expectStatus(await a.admin("POST", `/releases/${id}/deliveries/retry`, {}), 200), {
          release_id: id,
          retried: 0,
        });
      } finally {
        await setStore(store.flaky, { adapter: "sandbox" });
      }
    });

    test("retry after the operator configures a store: a delivery that waited for it (no adapter, not retried by the queue) is sent", async () => {
      const a = await operator();
      const id = await inReview(a.api, [store.bare]);
      expectStatus(await a.admin("POST", `/releases/${id}/approve`), 200);
      const [waiting] = await poll(
        "the delivery to wait for an adapter",
        () => deliveriesOf(a.admin, id),
        (ds) => ds[0]?.status === "error",
      );
      assert.equal(
        waiting?.message,
        `store ${store.bare} has no delivery adapter configured (internal.stores.settings.adapter)`,
      );
      await poll(
        "its send job to end",
        () =>
          rows<{ status: string }>(
            "select status from internal.jobs where kind = 'delivery.send' and payload ->> 'delivery_id' = $1",
            [waiting?.id],
          ),
        (jobs) => jobs.length === 1 && jobs[0]?.status === "succeeded",
      );
      await setStore(store.bare, { adapter: "sandbox" });
      await sleep(200);
      assert.equal(
        (await deliveriesOf(a.admin, id))[0]?.status,
        "error",
        "nothing sends it but the operator",
      );

      assert.deepEqual(expectStatus(await a.admin("POST", `/releases/${id}/deliveries/retry`), 200), {
        release_id: id,
        retried: 1,
      });
      await waitForStatus(id, "live");
      assert.deepEqual(
        (await deliveriesOf(a.admin, id)).map((d) => [d.id, d.status, d.message]),
        [[waiting?.id, "live", null]],
      );
    });

    test("a store's report on a delivered record: live moves it (and the release) on; error records the store's message; retry sends it again", async () => {
      const a = await operator();
      const b = await operator();
      const delivered = async () => {
        const id = await inReview(a.api, [store.slow]);
        expectStatus(await a.admin("POST", `/releases/${id}/approve`), 200);
        await waitForStatus(id, "delivered");
        const [d] = await deliveriesOf(a.admin, id);
        assert.deepEqual([d?.status, d?.live_at], ["delivered", null]);
        return { id, delivery: d?.id as string };
      };
      const first = await delivered();
      const report = (d: string, body: unknown, admin: Admin = a.admin) =>
        admin<Delivery>("POST", `/deliveries/${d}/report`, body);

      // Refused bodies first: nothing changes.
      assertFieldErrors(
        await report(first.delivery, { status: "gone" }),
        [["status", "invalid_value"]],
        "invalid_request",
        400,
      );
      assertFieldErrors(await report(first.delivery, {}), [["status", "required"]], "invalid_request", 400);
      assertFieldErrors(
        await report(first.delivery, { status: "error" }),
        [["message", "required"]],
        "invalid_request",
        400,
      );
      assertFieldErrors(
        await report(first.delivery, { status: "live", message: "x" }),
        [["message", "unknown_field"]],
        "invalid_request",
        400,
      );
      const blank = assertProblem(
        await report(first.delivery, { status: "error", message: "  " }),
        400,
        "reason_required",
      );
      assert.equal(blank.param, "message");
      // Another tenant's delivery is as missing as one that never was.
      const theirs = assertProblem(
        await report(first.delivery, { status: "live" }, b.admin),
        404,
        "not_found",
      );
      assert.equal(theirs.detail, `no delivery ${first.delivery}`);
      const missing = randomUUID();
      assertProblem(await report(missing, { status: "live" }), 404, "not_found");
      assert.equal((await deliveriesOf(a.admin, first.id))[0]?.status, "delivered");

      const live = expectStatus(await report(first.delivery, { status: "live" }), 200);
      assert.deepEqual(
        [live.id, live.store, live.action, live.status],
        [first.delivery, store.slow, "insert", "live"],
      );
      assert.match(live.live_at ?? "", ISO);
      assert.equal(await statusOf(first.id), "live");
      assertProblem(await report(first.delivery, { status: "live" }), 409, "invalid_state");

      const second = await delivered();
      const refused = expectStatus(
        await report(second.delivery, { status: "error", message: "Ingestion refused: artwork too small" }),
        200,
      );
      assert.deepEqual([refused.status, refused.message], ["error", "Ingestion refused: artwork too small"]);
      assertProblem(await report(second.delivery, { status: "live" }), 409, "invalid_state");
      // The operator fixes it and sends it again: delivered anew, waiting for the store's word.
      assert.deepEqual(expectStatus(await a.admin("POST", `/releases/${second.id}/deliveries/retry`), 200), {
        release_id: second.id,
        retried: 1,
      });
      const again = await poll(
        "the delivery to be delivered again",
        () => deliveriesOf(a.admin, second.id),
        (ds) => ds[0]?.status === "delivered",
      );
      assert.deepEqual([again[0]?.id, again[0]?.message, again[0]?.attempts], [second.delivery, null, 2]);
    });

    test("a takedown waits for every store to confirm; the operator records a store's confirmation by hand, with a note", async () => {
      const a = await operator();
      const b = await operator();
      const id = await inReview(a.api, [store.ok, store.hold]);
      expectStatus(await a.admin("POST", `/releases/${id}/approve`), 200);
      await waitForStatus(id, "live");
      const request = expectStatus(
        await a.api<Obj & { id: string }>("POST", `/releases/${id}/takedown`, { reason: "Rights ended" }),
        202,
      );
      // The sandbox store confirms by itself; the held store has the takedown, unconfirmed.
      const ds = await poll(
        "the takedowns to be sent",
        () => deliveriesOf(a.admin, id),
        (list) =>
          list.some((d) => d.store === store.ok && d.action === "takedown" && d.status === "taken_down") &&
          list.some((d) => d.store === store.hold && d.action === "takedown" && d.status === "takedown_sent"),
      );
      const held = ds.find((d) => d.store === store.hold && d.action === "takedown") as Delivery & Obj;
      const insert = ds.find((d) => d.store === store.hold && d.action === "insert") as Delivery;
      assert.deepEqual([held.taken_down_at, held.confirmed_by], [null, null]);
      assert.match(held.delivered_at ?? "", ISO);
      await sleep(100);
      assert.equal(await statusOf(id), "takedown_requested", "one store has not confirmed");
      const events = () =>
        rows<{ type: string; data: Obj }>(
          "select type, data from internal.events where type = 'release.takedown_completed' and data -> 'object' ->> 'id' = $1",
          [id],
        );
      assert.deepEqual(await events(), []);
      const waiting = expectStatus(await a.api<Obj>("GET", `/releases/${id}/status`), 200);
      const takedownNow = waiting.takedown as Obj & { stores: Obj[] };
      assert.equal(takedownNow.status, "processing");
      assert.deepEqual(
        takedownNow.stores.map((s) => [s.store, s.status, s.confirmed_by]).sort(),
        [
          [store.hold, "takedown_sent", null],
          [store.ok, "taken_down", "sandbox"],
        ].sort(),
      );

      const report = (d: string, body: unknown, admin: Admin = a.admin) =>
        admin<Delivery & Obj>("POST", `/deliveries/${d}/report`, body);
      // Refused: no note, a blank one, another tenant's key, the wrong report, the wrong delivery.
      assertFieldErrors(
        await report(held.id, { status: "taken_down" }),
        [["note", "required"]],
        "invalid_request",
        400,
      );
      assert.equal(
        assertProblem(await report(held.id, { status: "taken_down", note: "  " }), 400, "invalid_request")
          .param,
        "note",
      );
      const theirs = assertProblem(
        await report(held.id, { status: "taken_down", note: "Not yours" }, b.admin),
        404,
        "not_found",
      );
      assert.equal(theirs.detail, `no delivery ${held.id}`);
      assertProblem(await report(held.id, { status: "live" }), 409, "invalid_state");
      assertProblem(
        await report(insert.id, { status: "taken_down", note: "Wrong one" }),
        409,
        "invalid_state",
      );
      assert.equal(await statusOf(id), "takedown_requested");

      const note = "Store support confirmed the removal by e-mail, ticket 4411";
      const confirmed = expectStatus(await report(held.id, { status: "taken_down", note }), 200);
      assert.deepEqual(
        [confirmed.status, confirmed.confirmed_by, confirmed.confirmed_via, confirmed.confirmation_note],
        ["taken_down", "operator", "admin_api", note],
      );
      assert.match(String(confirmed.taken_down_at), ISO);
      await waitForStatus(id, "taken_down");
      assertProblem(await report(held.id, { status: "taken_down", note }), 409, "invalid_state");

      // The event, once, with each store's times; the request completed with them.
      const [event, ...more] = await events();
      assert.deepEqual(more, []);
      const takedown = event?.data.takedown as Obj & { stores: Obj[] };
      assert.deepEqual([takedown.id, takedown.status], [request.id, "completed"]);
      assert.deepEqual(
        takedown.stores.map((s) => [s.store, s.status, s.confirmed_by]).sort(),
        [
          [store.hold, "taken_down", "operator"],
          [store.ok, "taken_down", "sandbox"],
        ].sort(),
      );
      const heldTimes = takedown.stores.find((s) => s.store === store.hold) as Obj;
      assert.equal(Date.parse(String(heldTimes.taken_down_at)), Date.parse(String(confirmed.taken_down_at)));
      const done = expectStatus(await a.api<Obj>("GET", `/releases/${id}/status`), 200);
      assert.deepEqual([done.status, (done.takedown as Obj).status], ["taken_down", "completed"]);
      const held2 = (done.stores as Obj[]).find((s) => s.store === store.hold) as Obj;
      assert.deepEqual([held2.status, held2.confirmed_by], ["taken_down", "operator"]);
    });

    test("OAC requests: the queue lists the tenant's; the operator approves with a note or rejects with a reason", async () => {
      const a = await operator();
      const b = await operator();
      const requested = async () => {
        const { api } = await keyed(a.tenant);
        const artist = expectStatus(
          await api<Obj & { id: string }>("POST", "/artists", { name: "Luna Vale" }),
          201,
        );
        const release = expectStatus(
          await api<Obj & { id: string }>("POST", "/releases", {
            title: "Night Drive",
            artist_id: artist.id,
          }),
          201,
        );
        await forceReleaseStatus(db(), release.id, "delivered");
        const request = expectStatus(
          await api<Obj & { id: string }>("POST", `/artists/${artist.id}/oac-request`, {
            channel_url: "https://www.youtube.com/@lunavale",
          }),
          201,
        );
        return { api, artist: artist.id, request: request.id };
      };
      const one = await requested();
      const two = await requested();
      const queue = await poll(
        "both requests to reach the operator",
        async () => expectStatus(await a.admin<{ data: Obj[] }>("GET", "/oac-requests"), 200).data,
        (q) => q.length === 2 && q.every((r) => r.status === "processing"),
      );
      assert.deepEqual(
        queue.map((r) => [r.id, r.artist_id, r.artist_name, r.channel_url]),
        [
          [one.request, one.artist, "Luna Vale", "https://www.youtube.com/@lunavale"],
          [two.request, two.artist, "Luna Vale", "https://www.youtube.com/@lunavale"],
        ],
      );
      assert.deepEqual(Object.keys(queue[0] ?? {}).sort(), [
        "account_id",
        "artist_id",
        "artist_name",
        "channel_url",
        "completed_at",
        "created_at",
        "id",
        "status",
        "status_reason",
        "store",
      ]);
      assert.match(String(queue[0]?.created_at), ISO);
      assert.deepEqual(expectStatus(await b.admin("GET", "/oac-requests"), 200), {
        data: [],
        has_more: false,
      });

      // Another tenant's key: not found, and nothing decided.
      assertProblem(await b.admin("POST", `/oac-requests/${one.request}/approve`), 404, "not_found");
      assertProblem(
        await b.admin("POST", `/oac-requests/${one.request}/reject`, { reason: "No" }),
        404,
        "not_found",
      );
      assertFieldErrors(
        await a.admin("POST", `/oac-requests/${one.request}/approve`, { reason: "x" }),
        [["reason", "unknown_field"]],
        "invalid_request",
        400,
      );

      assert.deepEqual(
        expectStatus(
          await a.admin("POST", `/oac-requests/${one.request}/approve`, { note: "Channel merged" }),
          200,
        ),
        { id: one.request, status: "approved", status_reason: "Channel merged" },
      );
      assertProblem(await a.admin("POST", `/oac-requests/${one.request}/approve`), 409, "invalid_state");

      assertFieldErrors(
        await a.admin("POST", `/oac-requests/${two.request}/reject`, {}),
        [["reason", "required"]],
        "invalid_request",
        400,
      );
      assert.deepEqual(
        expectStatus(
          await a.admin("POST", `/oac-requests/${two.request}/reject`, { reason: "Not enough uploads yet" }),
          200,
        ),
        { id: two.request, status: "rejected", status_reason: "Not enough uploads yet" },
      );
      const shown = expectStatus(await two.api<Obj>("GET", `/artists/${two.artist}/oac-request`), 200);
      assert.deepEqual([shown.status, shown.status_reason], ["rejected", "Not enough uploads yet"]);
      assert.deepEqual(expectStatus(await a.admin("GET", "/oac-requests"), 200), {
        data: [],
        has_more: false,
      });
    });

    test("credentials: 401 missing_api_key without a key, 401 invalid_api_key for a bad one, 403 service_role_required for the anon key alone, 403 not_staff for a user who is not staff", async () => {
      const a = await operator();
      const b = await operator();
      const secret = await secretOf(a.tenant);
      const service = a.keys.service_role_key;
      const anon = a.keys.anon_key;
      const user = await userToken(a.tenant);
      const expiredUser = await userToken(a.tenant, now() - 60);
      const claims = { tenant_id: a.tenant.id, iss: "backline", iat: now() - 120 };
      const cases: {
        name: string;
        key?: string;
        bearer?: string;
        query?: string;
        status: number;
        code?: string;
      }[] = [
        { name: "no key", status: 401, code: "missing_api_key" },
        { name: "an empty apikey header", key: "", status: 401, code: "missing_api_key" },
        {
          name: "the service key in the query string",
          query: `?apikey=${encodeURIComponent(service)}`,
          status: 401,
          code: "missing_api_key",
        },
        { name: "a bearer without an apikey", bearer: service, status: 401, code: "missing_api_key" },
        { name: "not a key", key: "not-a-key", status: 401, code: "invalid_api_key" },
        {
          name: "a service key signed with another secret",
          key: await sign(
            { ...claims, role: "service_role", exp: now() + 3600 },
            randomBytes(32).toString("base64url"),
          ),
          status: 401,
          code: "invalid_api_key",
        },
        {
          name: "an expired service key",
          key: await sign({ ...claims, role: "service_role", exp: now() - 60 }, secret),
          status: 401,
          code: "invalid_api_key",
        },
        { name: "a user's token as the apikey", key: user, status: 401, code: "invalid_api_key" },
        { name: "a garbage bearer", key: service, bearer: "garbage", status: 401, code: "invalid_api_key" },
        {
          name: "another tenant's service key as bearer",
          key: service,
          bearer: b.keys.service_role_key,
          status: 401,
          code: "invalid_api_key",
        },
        {
          name: "an expired user's token",
          key: service,
          bearer: expiredUser,
          status: 401,
          code: "invalid_api_key",
        },
        { name: "the anon key", key: anon, status: 403, code: "service_role_required" },
        {
          name: "the anon key as apikey and bearer",
          key: anon,
          bearer: anon,
          status: 403,
          code: "service_role_required",
        },
        {
          name: "a user's token (not staff) with the anon key",
          key: anon,
          bearer: user,
          status: 403,
          code: "not_staff",
        },
        {
          name: "a user's token (not staff) with the service key",
          key: service,
          bearer: user,
          status: 403,
          code: "not_staff",
        },
        { name: "the service key", key: service, status: 200 },
        { name: "the service key as apikey and bearer", key: service, bearer: service, status: 200 },
      ];
      for (const c of cases) {
        const res = await call("GET", `/reviews${c.query ?? ""}`, {
          ...(c.key !== undefined ? { key: c.key } : {}),
          ...(c.bearer !== undefined ? { bearer: c.bearer } : {}),
        });
        if (c.status === 200) {
          assert.deepEqual(
            expectStatus(res, 200),
            { data: [], has_more: false, counts: { submitted: 0, in_review: 0, total: 0 } },
            c.name,
          );
          continue;
        }
        const problem = assertProblem(res, c.status, c.code as string);
        assert.equal(problem.type, `https://backline.dev/errors/${c.code}`, c.name);
        if (c.status === 401) assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer /, c.name);
      }
    });

    test("every route refuses the anon key (403), no key (401) and a non-staff user's token (403 not_staff), and changes nothing", async () => {
      const a = await operator();
      const id = await inReview(a.api);
      const user = await userToken(a.tenant);
      const before = await footprint(id);
      const routes: [string, string, unknown?][] = [
        ["GET", "/reviews"],
        ["POST", `/releases/${id}/approve`],
        ["POST", `/releases/${id}/reject`, { reason: "No" }],
        ["GET", `/releases/${id}/deliveries`],
        ["POST", `/releases/${id}/deliveries/retry`],
        ["POST", `/deliveries/${randomUUID()}/report`, { status: "live" }],
        ["GET", "/oac-requests"],
        ["POST", `/oac-requests/${randomUUID()}/approve`],
        ["POST", `/oac-requests/${randomUUID()}/reject`, { reason: "No" }],
      ];
      for (const [method, path, body] of routes) {
        const what = `${method} ${path}`;
        const anon = await call(method, path, { key: a.keys.anon_key, body });
        assert.equal(assertProblem(anon, 403, "service_role_required").status, 403, what);
        assertProblem(await call(method, path, { body }), 401, "missing_api_key");
        const asUser = await call(method, path, { key: a.keys.anon_key, bearer: user, body });
        assertProblem(asUser, 403, "not_staff");
      }
      assert.deepEqual(await footprint(id), before);
    });

    test("another tenant's release is 404 not_found with a valid key of that tenant, exactly as a missing one; nothing changes", async () => {
      const a = await operator();
      const b = await operator();
      const id = await inReview(a.api);
      const before = await footprint(id);
      const missing = randomUUID();
      const attempts: [string, string, unknown?][] = [
        ["POST", "approve"],
        ["POST", "reject", { reason: "Not yours" }],
        ["GET", "deliveries"],
        ["POST", "deliveries/retry"],
      ];
      for (const [method, action, body] of attempts) {
        const theirs = assertProblem(
          await b.admin(method, `/releases/${id}/${action}`, body),
          404,
          "not_found",
        );
        const none = assertProblem(
          await b.admin(method, `/releases/${missing}/${action}`, body),
          404,
          "not_found",
        );
        assert.equal(theirs.detail, `no release ${id}`);
        assert.equal(none.detail, `no release ${missing}`);
      }
      assert.deepEqual(await footprint(id), before);
      assert.deepEqual(expectStatus(await b.admin("GET", "/reviews"), 200), {
        data: [],
        has_more: false,
        counts: { submitted: 0, in_review: 0, total: 0 },
      });
      // Its own team still decides it.
      assert.equal(
        expectStatus(await a.admin("POST", `/releases/${id}/reject`, { reason: "Blurry" }), 200).status,
        "rejected",
      );
    });

    test("a malformed id is 404 not_found; a UUID in capitals is the same id", async () => {
      const a = await operator();
      const id = await inReview(a.api);
      for (const bad of ["not-a-uuid", "123", `${id}x`, "%20"]) {
        for (const [method, path] of [
          ["POST", `/releases/${bad}/approve`],
          ["POST", `/releases/${bad}/reject`],
          ["GET", `/releases/${bad}/deliveries`],
          ["POST", `/releases/${bad}/deliveries/retry`],
          ["POST", `/deliveries/${bad}/report`],
          ["POST", `/oac-requests/${bad}/approve`],
          ["POST", `/oac-requests/${bad}/reject`],
        ] as const) {
          const problem = assertProblem(
            await a.admin(method, path, method === "POST" ? { reason: "x" } : undefined),
            404,
            "not_found",
          );
          assert.equal(problem.param, "id", `${method} ${path}`);
        }
      }
      assert.deepEqual(expectStatus(await a.admin("GET", `/releases/${id.toUpperCase()}/deliveries`), 200), {
        data: [],
      });
      assert.equal(await statusOf(id), "in_review");
    });

    test("bodies: 400 invalid_request naming the field (missing, unknown, out of range, not an object), 400 for bad JSON, 415 for another content type", async () => {
      const a = await operator();
      const id = await inReview(a.api);
      const before = await footprint(id);
      const reject = (body: unknown, contentType?: string) =>
        call("POST", `/releases/${id}/reject`, {
          key: a.keys.service_role_key,
          body,
          ...(contentType ? { contentType } : {}),
        });

      const noBody = assertProblem(
        await call("POST", `/releases/${id}/reject`, { key: a.keys.service_role_key }),
        400,
        "invalid_request",
      );
      assert.match(noBody.detail, /JSON object/);
      assertProblem(await reject("[]"), 400, "invalid_request");
      assertProblem(await reject('"Cover art"'), 400, "invalid_request");
      assertFieldErrors(await reject({}), [["reason", "required"]], "invalid_request", 400);
      const unknown = assertFieldErrors(
        await reject({ reason: "Blurry", note: "x" }),
        [["note", "unknown_field"]],
        "invalid_request",
        400,
      );
      assert.equal(unknown[0]?.message, "note is not a field of this request");
      assert.equal((await reject({ reason: "Blurry", note: "x" })).body.param, "note");
      assertFieldErrors(await reject({ reason: "" }), [["reason", "out_of_range"]], "invalid_request", 400);
      assertFieldErrors(
        await reject({ reason: "x".repeat(2001) }),
        [["reason", "out_of_range"]],
        "invalid_request",
        400,
      );
      assertFieldErrors(await reject({ reason: 42 }), [["reason", "invalid_type"]], "invalid_request", 400);
      const blank = assertProblem(await reject({ reason: "   " }), 400, "reason_required");
      assert.equal(blank.param, "reason");
      assertProblem(await reject("{"), 400, "invalid_json_body");
      assertProblem(await reject("Blurry", "text/plain"), 415, "invalid_media_type");
      assertProblem(
        await reject("reason=Blurry", "application/x-www-form-urlencoded"),
        415,
        "invalid_media_type",
      );
      assertFieldErrors(
        await call("POST", `/releases/${id}/approve`, {
          key: a.keys.service_role_key,
          body: { force: true },
        }),
        [["force", "unknown_field"]],
        "invalid_request",
        400,
      );
      assertProblem(
        await call("POST", `/releases/${id}/approve`, {
          key: a.keys.service_role_key,
          body: "yes",
          contentType: "text/plain",
        }),
        415,
        "invalid_media_type",
      );
      assert.deepEqual(await footprint(id), before);
      // An empty body sent as JSON is no body: approving needs none.
      const empty = await call("POST", `/releases/${id}/approve`, { key: a.keys.service_role_key, body: "" });
      assert.equal(expectStatus(empty, 200).status, "approved");
    });
  });
});
