import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import { sampleCatalogue, writeSampleCsv } from "../src/transfer/sample.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { tempDir } from "./support/process.ts";
import { assertProblem, expectStatus, issueTestKey, keyedAccount, publicApi } from "./support/public-api.ts";

/**
 * The public API's catalogue transfer (docs/public-api.md, "Transfers"): a CSV through a transfer
 * upload slot, a dry run then the real run as jobs in the worker, polled to completion with their
 * counts; the same file again changes nothing; a bad file is reported with its row numbers and
 * writes nothing; another account's transfer is not found, a key without catalog:write is refused;
 * each job's end writes a transfer.completed event.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

describeEachEngine("public API: catalogue transfers as jobs", (t) => {
  let app: RunningApp;
  let worker: Worker;
  let api: Api;
  let accountId: string;
  let csv: Buffer;

  before(async () => {
    app = await startApp(t());
    worker = new Worker({ db: t().db, handlers: pipelineHandlers(t().db), pollMs: 20 });
    worker.start();
    const { tenant } = await tenantWithKeys(t(), {
      settings: { public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } },
    });
    const k = await keyedAccount(t().db, { tenant });
    accountId = k.account.id;
    api = publicApi(app.url, k.key.secret);
    const file = path.join(tempDir("backline-transfer-api-"), "catalogue.csv");
    await writeSampleCsv(file, sampleCatalogue(30, 40));
    csv = fs.readFileSync(file);
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
  });

  async function upload(a: Api, bytes: Buffer, body: Obj = { filename: "catalogue.csv" }): Promise<string> {
    const slot = expectStatus(await a("POST", "/transfer-uploads", body), 201) as Obj & {
      upload_id: string;
      upload_url: string;
      headers: Record<string, string>;
      max_bytes: number;
    };
    assert.equal(slot.max_bytes, (/\.xml$/.test(String(body.filename)) ? 16 : 32) * 1024 * 1024);
    assert.equal((slot.upload as Obj).status, "pending");
    const res = await fetch(slot.upload_url, { method: "PUT", headers: slot.headers, body: bytes });
    assert.equal(res.status, 200, await res.clone().text());
    const checked = expectStatus(await a("GET", `/transfer-uploads/${slot.upload_id}`), 200);
    assert.equal(checked.status, "uploaded");
    assert.equal(checked.bytes, bytes.length);
    assert.equal(checked.sha256, createHash("sha256").update(bytes).digest("hex"));
    return slot.upload_id;
  }

  async function finished(a: Api, id: string, timeoutMs = 60_000): Promise<Obj> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = expectStatus(await a("GET", `/transfers/${id}`), 200);
      if (job.status === "completed" || job.status === "failed") return job;
      if (Date.now() > deadline) assert.fail(`transfer ${id} still ${String(job.status)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  const catalogueCounts = () =>
    t().db.asService(
      async (tx) =>
        (
          await tx.query<{ releases: number; tracks: number }>(
            `select (select count(*)::int from public.releases where account_id = $1) as releases,
                    (select count(*)::int from public.tracks where account_id = $1) as tracks`,
            [accountId],
          )
        ).rows[0] as { releases: number; tracks: number },
    );

  const events = (id: string) =>
    t().db.asService(
      async (tx) =>
        (
          await tx.query<{ data: { object: Obj } }>(
            "select data from internal.events where type = 'transfer.completed' and data->'object'->>'id' = $1",
            [id],
          )
        ).rows,
    );

  test("a CSV: dry run, real run, again: counts right, nothing changes the second time; events written", async () => {
    const uploadId = await upload(api, csv);
    const dry = expectStatus(await api("POST", "/transfers", { upload_id: uploadId, dry_run: true }), 202);
    assert.equal(dry.object, "transfer");
    assert.equal(dry.status, "queued");
    assert.equal(dry.dry_run, true);
    assert.equal(dry.source_format, "csv");
    assert.equal(dry.counts, null);
    const dryDone = await finished(api, dry.id as string);
    assert.equal(dryDone.status, "completed", JSON.stringify(dryDone));
    const dc = dryDone.counts as Record<string, number>;
    assert.equal(dc.tracks_created, 30);
    assert.ok((dc.releases_created ?? 0) > 0);
    assert.equal(dc.releases_existing, 0);
    assert.equal(dc.errors, 0);
    assert.deepEqual(await catalogueCounts(), { releases: 0, tracks: 0 }, "a dry run writes nothing");

    // The same upload runs for real after its dry run.
    const real = expectStatus(await api("POST", "/transfers", { upload_id: uploadId }), 202);
    assert.equal(real.dry_run, false);
    const realDone = await finished(api, real.id as string);
    assert.equal(realDone.status, "completed");
    const rc = realDone.counts as Record<string, number>;
    assert.equal(rc.tracks_created, 30);
    assert.equal(rc.releases_created, dc.releases_created);
    assert.ok(realDone.completed_at);
    assert.deepEqual(await catalogueCounts(), { releases: dc.releases_created, tracks: 30 });
    const via = await t().db.asService(
      async (tx) =>
        (
          await tx.query<{ via: string }>("select via from internal.transfers where account_id = $1", [
            accountId,
          ])
        ).rows,
    );
    assert.deepEqual(
      via.map((r) => r.via),
      ["api"],
    );

    // A real run has used its file: the slot no longer takes a transfer.
    assertProblem(await api("POST", "/transfers", { upload_id: uploadId }), 409, "upload_used");

    // The same file again: everything is already there.
    const again = expectStatus(await api("POST", "/transfers", { upload_id: await upload(api, csv) }), 202);
    const againDone = await finished(api, again.id as string);
    const ac = againDone.counts as Record<string, number>;
    assert.equal(ac.tracks_created, 0);
    assert.equal(ac.releases_created, 0);
    assert.equal(ac.tracks_existing, 30);
    assert.equal(ac.releases_existing, dc.releases_created);
    assert.deepEqual(await catalogueCounts(), { releases: dc.releases_created, tracks: 30 });

    // Listed newest first, and each end wrote its event with the transfer as it ended.
    const list = expectStatus(await api("GET", "/transfers?limit=2"), 200);
    assert.deepEqual(
      (list.data as Obj[]).map((x) => x.id),
      [again.id, real.id],
    );
    assert.equal(list.has_more, true);
    const rest = expectStatus(await api("GET", `/transfers?starting_after=${real.id}`), 200);
    assert.deepEqual(
      (rest.data as Obj[]).map((x) => x.id),
      [dry.id],
    );
    for (const job of [dryDone, realDone, againDone]) {
      const e = await events(job.id as string);
      assert.equal(e.length, 1, `one transfer.completed for ${String(job.id)}`);
      assert.equal(e[0]?.data.object.status, "completed");
      assert.deepEqual(e[0]?.data.object.counts, job.counts);
    }
  });

  test("a bad file: its problems with their row numbers, nothing written", async () => {
    const before = await catalogueCounts();
    const bad = Buffer.from(
      "release_ref,upc,release_title,release_artist,original_release_date,isrc,track_number,track_title\n" +
        "B,036000291452,Bad Release,Nova Vale,2015-03-01,NOT-AN-ISRC,1,One\n" +
        "B,036000291452,Bad Release,Nova Vale,2015-03-01,,2,Two\n",
    );
    const job = expectStatus(await api("POST", "/transfers", { upload_id: await upload(api, bad) }), 202);
    const done = await finished(api, job.id as string);
    assert.equal(done.status, "completed");
    const counts = done.counts as Record<string, number>;
    assert.equal(counts.releases_created, 0);
    assert.equal(counts.tracks_created, 0);
    assert.equal(counts.releases_with_problems, 1);
    assert.ok((counts.errors ?? 0) >= 2);
    const problems = done.problems as { where: string; code: string; severity: string }[];
    assert.equal(problems[0]?.severity, "error");
    assert.ok(
      problems.some((p) => p.where.startsWith("row 2")),
      JSON.stringify(problems),
    );
    assert.ok(
      problems.some((p) => p.where.startsWith("row 3")),
      JSON.stringify(problems),
    );
    assert.deepEqual(await catalogueCounts(), before);
    assert.equal((await events(job.id as string))[0]?.data.object.status, "completed");

    // Not a transfer at all (an ERN slot holding no XML): failed, with why.
    const xmlSlot = await upload(api, Buffer.from("this is not xml"), {
      filename: "message.xml",
    });
    const failed = expectStatus(await api("POST", "/transfers", { upload_id: xmlSlot, dry_run: true }), 202);
    assert.equal(failed.source_format, "ern");
    const f = await finished(api, failed.id as string);
    assert.ok((f.problems as Obj[]).length > 0, JSON.stringify(f));
    assert.deepEqual(await catalogueCounts(), before);
  });

  test("the upload slot: its limits, its token, its type", async () => {
    assertProblem(
      await api("POST", "/transfer-uploads", { filename: "big.csv", size: 33 * 1024 * 1024 }),
      413,
      "file_too_large",
    );
    assertProblem(
      await api("POST", "/transfer-uploads", { content_type: "text/html" }),
      422,
      "validation_failed",
    );
    const slot = expectStatus(await api("POST", "/transfer-uploads", {}), 201) as Obj & {
      upload_id: string;
      upload_url: string;
    };
    // Not uploaded yet: no transfer of it.
    assertProblem(await api("POST", "/transfers", { upload_id: slot.upload_id }), 409, "upload_not_received");
    const wrong = slot.upload_url.replace(/token=[^&]+/, "token=nope");
    assert.equal(
      (await fetch(wrong, { method: "PUT", headers: { "content-type": "text/csv" }, body: "a" })).status,
      403,
    );
    assert.equal(
      (await fetch(slot.upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: "a" }))
        .status,
      415,
    );
    assert.equal(
      (
        await fetch(slot.upload_url, {
          method: "PUT",
          headers: { "content-type": "text/csv" },
          body: "a,b\n",
        })
      ).status,
      200,
    );
    // One file per URL.
    assert.equal(
      (
        await fetch(slot.upload_url, {
          method: "PUT",
          headers: { "content-type": "text/csv" },
          body: "a,b\n",
        })
      ).status,
      409,
    );
    assertProblem(
      await api("POST", "/transfers", { upload_id: crypto.randomUUID() }),
      404,
      "resource_missing",
    );
    assertProblem(await api("POST", "/transfers", { dry_run: "yes" }), 422, "validation_failed");
  });

  test("another account's transfer is not found; a key without catalog:write is refused", async () => {
    const job = expectStatus(
      await api("POST", "/transfers", { upload_id: await upload(api, csv), dry_run: true }),
      202,
    );
    await finished(api, job.id as string);
    const { tenant } = await tenantWithKeys(t());
    const other = await keyedAccount(t().db, { tenant });
    const otherApi = publicApi(app.url, other.key.secret);
    assertProblem(await otherApi("GET", `/transfers/${job.id}`), 404, "resource_missing");
    assertProblem(await otherApi("GET", `/transfer-uploads/${job.upload_id}`), 404, "resource_missing");
    assertProblem(
      await otherApi("POST", "/transfers", { upload_id: job.upload_id }),
      404,
      "resource_missing",
    );
    assert.deepEqual((expectStatus(await otherApi("GET", "/transfers"), 200).data as Obj[]).length, 0);

    const reader = await issueTestKey(t().db, other.account, { scopes: ["catalog:read"] });
    const readerApi = publicApi(app.url, reader.secret);
    assertProblem(await readerApi("POST", "/transfer-uploads", {}), 403, "insufficient_scope");
    assertProblem(
      await readerApi("POST", "/transfers", { upload_id: job.upload_id }),
      403,
      "insufficient_scope",
    );
    expectStatus(await readerApi("GET", "/transfers"), 200);
  });
});
