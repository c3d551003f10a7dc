import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { decideOac, OacError, oacQueue } from "../src/pipeline/oac.ts";
import { type RunningApp, startApp, tenantWithKeys, UNLIMITED } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { expectStatus, issueTestKey, publicApi } from "./support/public-api.ts";
import { forceReleaseStatus, seedAccount, seedUser, userClaims } from "./support/seed.ts";

/**
 * Official Artist Channel requests after they are made (src/pipeline/oac.ts): the `oac.request`
 * job hands them to the operator, a sandbox account's is approved by the simulated store, the
 * operator decides the others; the account polls the request and its members are notified.
 */

type Obj = Record<string, unknown>;

describeEachEngine("OAC requests: the operator's side", (t) => {
  const db = () => t().db;
  let app: RunningApp;
  let worker: Worker;
  before(async () => {
    app = await startApp(t());
    const handle = pipelineHandlers(db())["oac.request"];
    assert.ok(handle);
    worker = new Worker({ db: db(), handlers: { "oac.request": handle }, pollMs: 20 });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
  });

  /** An account (or its sandbox) with a member, a key, an artist with a delivered release, and its OAC request. */
  async function requested(mode: "live" | "test") {
    const settings = { ...UNLIMITED, public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } };
    const { tenant } = await tenantWithKeys(t(), { settings });
    const account = await seedAccount(db(), tenant, "Night Owl");
    const member = await seedUser(db(), tenant, [{ account, role: "member" }]);
    const key = await issueTestKey(db(), account, { mode });
    const api = publicApi(app.url, key.secret);
    const artist = expectStatus(
      await api<Obj & { id: string }>("POST", "/artists", { name: "Luna Vale" }),
      201,
    );
    const release = expectStatus(
      await api<Obj & { id: string }>("POST", "/releases", { title: "Night Drive", artist_id: artist.id }),
      201,
    );
    await forceReleaseStatus(db(), release.id, "delivered");
    const request = expectStatus(
      await api<Obj & { id: string }>("POST", `/artists/${artist.id}/oac-request`, {
        channel_url: "https://www.youtube.com/@lunavale",
      }),
      201,
    );
    return { api, artist: artist.id, request: request.id, member };
  }

  async function statusOf(api: ReturnType<typeof publicApi>, artist: string, want: string): Promise<Obj> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const r = expectStatus(await api<Obj>("GET", `/artists/${artist}/oac-request`), 200);
      if (r.status === want) return r;
      if (Date.now() > deadline) throw new Error(`OAC request still ${String(r.status)}, not ${want}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  test("a live account's request goes to the operator (processing), who approves it; members hear of it", async () => {
    const w = await requested("live");
    await statusOf(w.api, w.artist, "processing");
    assert.ok((await oacQueue(db())).some((q) => q.id === w.request && q.artist_name === "Luna Vale"));

    const decided = await decideOac(db(), w.request, { approve: true, note: "Channel merged" });
    assert.deepEqual([decided.status, decided.status_reason], ["approved", "Channel merged"]);
    const shown = await statusOf(w.api, w.artist, "approved");
    assert.equal(typeof shown.completed_at, "string");
    assert.ok(!(await oacQueue(db())).some((q) => q.id === w.request));

    const inbox = await db().withRequestContext(
      userClaims(w.member),
      async (tx) =>
        (await tx.query<{ kind: string; data: Obj }>("select kind, data from public.notifications")).rows,
    );
    assert.deepEqual(
      inbox.filter((n) => n.kind.startsWith("oac.")).map((n) => [n.kind, n.data.oac_request_id]),
      [["oac.approved", w.request]],
    );
  });

  test("the operator rejects with a reason; a decided request is final; a rejection needs a reason", async () => {
    const w = await requested("live");
    await statusOf(w.api, w.artist, "processing");
    await assert.rejects(
      decideOac(db(), w.request, { approve: false, reason: "  " }),
      (e: unknown) => e instanceof OacError && e.message.startsWith("a rejection needs a reason"),
    );
    const decided = await decideOac(db(), w.request, { approve: false, reason: "Not enough uploads yet" });
    assert.deepEqual([decided.status, decided.status_reason], ["rejected", "Not enough uploads yet"]);
    const shown = await statusOf(w.api, w.artist, "rejected");
    assert.equal(shown.status_reason, "Not enough uploads yet");
    await assert.rejects(
      decideOac(db(), w.request, { approve: true }),
      (e: unknown) => e instanceof OacError && e.message.includes("is rejected already"),
    );
    // Rejected is closed: the artist may ask again.
    expectStatus(await w.api("POST", `/artists/${w.artist}/oac-request`), 201);
  });

  test("a sandbox account's request is approved by the simulated store", async () => {
    const w = await requested("test");
    const shown = await statusOf(w.api, w.artist, "approved");
    assert.equal(shown.status_reason, "Approved by the sandbox store.");
  });

  test("an unknown request is refused", async () => {
    const missing = "6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c";
    await assert.rejects(
      decideOac(db(), missing, { approve: true }),
      (e: unknown) => e instanceof OacError && e.message === `no OAC request ${missing}`,
    );
  });
});
