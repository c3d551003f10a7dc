import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import type { Db } from "../src/db/db.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import type { LocalStore } from "../src/storage/local.ts";
import { openStorage } from "../src/storage/open.ts";
import type { S3Store } from "../src/storage/s3.ts";
import { loadSecretBox } from "../src/webhooks/secrets.ts";
import { type RunningApp, startApp, tenantWithKeys } from "./support/app.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { tempDir } from "./support/process.ts";
import { expectStatus, keyedAccount, publicApi } from "./support/public-api.ts";
import { type RunningS3rver, startS3rver } from "./support/s3rver.ts";
import {
  ALBUM,
  archiveSamplesSkip,
  bombArchive,
  corruptArchive,
  ernDeliveryZip,
  SINGLE,
  wav,
  zipSlipArchive,
} from "./support/transfer-archive.ts";

/**
 * A previous distributor's ERN delivery as a zip through the public API (docs/catalogue.md, "An
 * archive of ERN messages"): DDEX's ERN 4.3 single and ERN 3.8.2 album with generated media go to
 * an application/zip upload slot over real HTTP; the dry run reports without writing, the real run
 * creates the releases and tracks and stores the audio and cover as media assets (the single's
 * audio with the MD5 the message gives), the same archive again changes nothing. A zip-slip entry,
 * a zip bomb, a corrupt archive and a checksum mismatch each end with their documented code and
 * write nothing. `backline transfer import FILE.zip` takes the same archive.
 */

type Obj = Record<string, unknown>;
type Api = ReturnType<typeof publicApi>;

const keptIn = (db: Db, uploadId: string) =>
  db.asService(
    async (tx) =>
      (
        await tx.query<{ in_database: boolean; object_key: string | null }>(
          "select content is not null as in_database, object_key from internal.transfer_uploads where id = $1",
          [uploadId],
        )
      ).rows[0] as { in_database: boolean; object_key: string | null },
  );

async function run(api: Api, uploadId: string, dryRun: boolean): Promise<Obj> {
  const job = expectStatus(await api("POST", "/transfers", { upload_id: uploadId, dry_run: dryRun }), 202);
  assert.equal(job.source_format, "ern");
  const deadline = Date.now() + 90_000;
  for (;;) {
    const got = expectStatus(await api("GET", `/transfers/${job.id as string}`), 200);
    if (got.status === "completed" || got.status === "failed") return got;
    if (Date.now() > deadline) assert.fail(`transfer ${String(job.id)} still ${String(got.status)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const catalogueIn = (db: Db, accountId: string) =>
  db.asService(async (tx) => {
    const releases = (
      await tx.query<{ upc: string | null; title: string }>(
        "select upc, title from public.releases where account_id = $1 order by title",
        [accountId],
      )
    ).rows;
    const tracks = (
      await tx.query<{ isrc: string }>("select isrc from public.tracks where account_id = $1 order by isrc", [
        accountId,
      ])
    ).rows.map((r) => r.isrc);
    const media = (
      await tx.query<{ kind: string; isrc: string | null; bytes: string; sha256: string; status: string }>(
        `select m.kind, t.isrc, m.bytes::text, m.sha256,
           case when m.status in ('uploaded', 'validating') then 'checking' else m.status end as status,
           m.problems
         from public.media_assets m
         left join public.tracks t on t.id = m.track_id
         where m.account_id = $1 order by m.kind, t.isrc`,
        [accountId],
      )
    ).rows;
    return { releases, tracks, media };
  });

describeEachEngine("public API: a transfer from a zip of an ERN delivery", (t) => {
  let app: RunningApp;
  let worker: Worker;
  let store: LocalStore;
  const keptOf = (uploadId: string) => keptIn(t().db, uploadId);
  const catalogue = (accountId: string) => catalogueIn(t().db, accountId);

  before(async () => {
    app = await startApp(t());
    store = openStorage(app.config, loadSecretBox(app.config)).store as LocalStore;
    worker = new Worker({
      db: t().db,
      handlers: pipelineHandlers(t().db, { store, uploadLimits: app.config.uploads }),
      pollMs: 20,
    });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
  });

  async function account(): Promise<{ api: Api; id: string }> {
    const { tenant } = await tenantWithKeys(t(), {
      settings: { public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } },
    });
    const k = await keyedAccount(t().db, { tenant });
    return { api: publicApi(app.url, k.key.secret), id: k.account.id };
  }

  async function upload(api: Api, bytes: Buffer, filename = "delivery.zip"): Promise<string> {
    const slot = expectStatus(
      await api("POST", "/transfer-uploads", { filename, size: bytes.length }),
      201,
    ) as Obj & { upload_id: string; upload_url: string; headers: Record<string, string>; max_bytes: number };
    assert.deepEqual(slot.headers, { "content-type": "application/zip" });
    assert.equal(slot.max_bytes, 2 * 1024 * 1024 * 1024);
    assert.equal((slot.upload as Obj).source_format, "ern");
    const res = await fetch(slot.upload_url, { method: "PUT", headers: slot.headers, body: bytes });
    assert.equal(res.status, 200, await res.clone().text());
    const got = expectStatus(await api("GET", `/transfer-uploads/${slot.upload_id}`), 200);
    assert.equal(got.content_type, "application/zip");
    assert.equal(got.sha256, createHash("sha256").update(bytes).digest("hex"));
    // The archive is in media storage, not in the database.
    const kept = await keptOf(slot.upload_id);
    assert.equal(kept.in_database, false);
    assert.match(kept.object_key ?? "", /^objects\/[0-9a-f-]{36}\/[0-9a-f-]{36}$/);
    assert.deepEqual(readFileSync(store.file(kept.object_key as string)), bytes);
    return slot.upload_id;
  }

  test("dry run, real run with the media, and the same archive again changes nothing", {
    skip: archiveSamplesSkip,
  }, async () => {
    const { api, id } = await account();
    const uploadId = await upload(api, await ernDeliveryZip());

    const dry = await run(api, uploadId, true);
    assert.equal(dry.status, "completed", JSON.stringify(dry));
    const dc = dry.counts as Record<string, number>;
    assert.equal(dc.releases_created, 2, JSON.stringify(dry));
    assert.equal(dc.tracks_created, 1 + ALBUM.isrcs.length);
    assert.equal(dc.errors, 0, JSON.stringify(dry.problems));
    assert.deepEqual(
      await catalogue(id),
      { releases: [], tracks: [], media: [] },
      "a dry run writes nothing",
    );

    const key = (await keptOf(uploadId)).object_key as string;
    const real = await run(api, uploadId, false);
    assert.equal(real.status, "completed", JSON.stringify(real));
    // A real run has used the archive: its object is gone, and the slot says so.
    assert.deepEqual(await keptOf(uploadId), { in_database: false, object_key: null });
    // The object is removed just after the job's commit (src/transfer/job.ts: never before it), so
    // a client that saw "completed" may find it still there for a moment.
    const removedBy = Date.now() + 10_000;
    while (existsSync(store.file(key)) && Date.now() < removedBy) await new Promise((r) => setTimeout(r, 20));
    assert.equal(existsSync(store.file(key)), false);
    const used = await api("POST", "/transfers", { upload_id: uploadId });
    assert.equal(used.status, 409);
    assert.equal((used.body as Obj).code, "upload_used");
    const rc = real.counts as Record<string, number>;
    assert.equal(rc.releases_created, 2);
    assert.equal(rc.tracks_created, 7);
    // The stored files are inspected by the worker as any upload is (media.validate): all pass.
    let after = await catalogue(id);
    for (let i = 0; i < 400 && after.media.some((m) => m.status === "checking"); i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await catalogue(id);
    }
    assert.deepEqual(
      after.media.map((m) => m.status),
      after.media.map(() => "valid"),
      JSON.stringify(after.media),
    );
    assert.deepEqual(
      after.releases.map((r) => r.title),
      [ALBUM.title, SINGLE.title],
    );
    assert.deepEqual(after.tracks, [...ALBUM.isrcs, ...SINGLE.isrcs].sort());
    // Every file the messages named, checked, is a media asset of its release or track.
    const audio = after.media.filter((m) => m.kind === "audio");
    assert.deepEqual(
      audio.map((m) => m.isrc),
      [...ALBUM.isrcs, ...SINGLE.isrcs].sort(),
    );
    const single = audio.find((m) => m.isrc === SINGLE.isrcs[0]);
    assert.equal(single?.sha256, createHash("sha256").update(wav(1)).digest("hex"));
    assert.equal(Number(single?.bytes), wav(1).length);
    assert.equal(after.media.filter((m) => m.kind === "artwork").length, 1, "the album's cover");

    // Again (a new upload of the same archive): everything is there already.
    const again = await run(api, await upload(api, await ernDeliveryZip()), false);
    assert.equal(again.status, "completed");
    const ac = again.counts as Record<string, number>;
    assert.equal(ac.releases_created, 0);
    assert.equal(ac.tracks_created, 0);
    assert.equal(ac.releases_existing, 2);
    assert.deepEqual(await catalogue(id), after);
  });

  for (const [name, make, code, where] of [
    [
      "a zip-slip entry",
      async () => zipSlipArchive(),
      "archive_unsafe_path",
      "../../../tmp/backline-zip-slip.txt",
    ],
    [
      "a zip bomb",
      async () => bombArchive(),
      "archive_ratio",
      "delivery/resources/190295810726_00001_LL.flac",
    ],
    ["a corrupt archive", corruptArchive, "archive_corrupt", undefined],
  ] as const) {
    test(`${name} fails with ${code}, nothing written`, { skip: archiveSamplesSkip }, async () => {
      const { api, id } = await account();
      const uploadId = await upload(api, await make());
      for (const dryRun of [true, false]) {
        const job = await run(api, uploadId, dryRun);
        assert.equal(job.status, "failed", JSON.stringify(job));
        assert.equal(job.counts, null);
        const problems = job.problems as Obj[];
        assert.equal(problems.length, 1);
        assert.equal(problems[0]?.code, code, JSON.stringify(problems));
        assert.equal(problems[0]?.severity, "error");
        if (where) assert.equal(problems[0]?.where, where);
      }
      assert.deepEqual(await catalogue(id), { releases: [], tracks: [], media: [] });
      assert.equal(existsSync("/tmp/backline-zip-slip.txt"), false);
      const recorded = await t().db.asService(
        async (tx) =>
          (await tx.query("select 1 from internal.transfers where account_id = $1", [id])).rows.length,
      );
      assert.equal(recorded, 0, "no transfer recorded");
    });
  }

  test("a checksum mismatch: the release is left out with checksum_mismatch at its track, nothing written", {
    skip: archiveSamplesSkip,
  }, async () => {
    const { api, id } = await account();
    const uploadId = await upload(api, await ernDeliveryZip({ mismatch: true, singleOnly: true }));
    for (const dryRun of [true, false]) {
      const job = await run(api, uploadId, dryRun);
      assert.equal(job.status, "completed", JSON.stringify(job));
      const c = job.counts as Record<string, number>;
      assert.equal(c.releases_created, 0);
      assert.equal(c.releases_with_problems, 1);
      const p = (job.problems as Obj[]).find((x) => x.code === "checksum_mismatch");
      assert.ok(p, JSON.stringify(job.problems));
      assert.equal(p.severity, "error");
      assert.match(String(p.message), /resources\/190295810726_00001_LL\.wav has MD5 [0-9a-f]{32}/);
    }
    assert.deepEqual(await catalogue(id), { releases: [], tracks: [], media: [] });
  });

  test("a slot refuses an archive over 2 GiB at once, and a PUT of another type", {
    skip: archiveSamplesSkip,
  }, async () => {
    const { api } = await account();
    const big = await api("POST", "/transfer-uploads", {
      filename: "big.zip",
      size: 2 * 1024 * 1024 * 1024 + 1,
    });
    assert.equal(big.status, 413);
    assert.equal((big.body as Obj).code, "file_too_large");
    const slot = expectStatus(
      await api("POST", "/transfer-uploads", { content_type: "application/zip" }),
      201,
    );
    const res = await fetch(String(slot.upload_url), {
      method: "PUT",
      headers: { "content-type": "text/csv" },
      body: "a,b\n",
    });
    assert.equal(res.status, 415);
    assert.equal(((await res.json()) as Obj).code, "content_type_mismatch");

    // Bytes other than the declared SHA-256: refused, and nothing is left in storage.
    const zip = await ernDeliveryZip({ singleOnly: true });
    const declared = expectStatus(
      await api("POST", "/transfer-uploads", { filename: "d.zip", sha256: "0".repeat(64) }),
      201,
    ) as Obj & { upload_id: string; upload_url: string; headers: Record<string, string> };
    const sent = await fetch(declared.upload_url, { method: "PUT", headers: declared.headers, body: zip });
    assert.equal(sent.status, 400);
    assert.equal(((await sent.json()) as Obj).code, "checksum_mismatch");
    const kept = await keptOf(declared.upload_id);
    assert.equal(existsSync(store.file(kept.object_key as string)), false);
    assert.equal(
      expectStatus(await api("GET", `/transfer-uploads/${declared.upload_id}`), 200).status,
      "pending",
    );
  });

  test("backline transfer import FILE.zip: dry run, import with the media, a zip-slip archive refused", {
    skip: archiveSamplesSkip,
  }, async () => {
    const { id } = await account();
    const dir = tempDir("backline-transfer-zip-cli-");
    writeFileSync(path.join(dir, "delivery.zip"), await ernDeliveryZip());
    writeFileSync(path.join(dir, "escaping.zip"), zipSlipArchive());
    const args = (file: string, ...more: string[]) => ["transfer", "import", file, "--account", id, ...more];
    const dry = await runCliOn(t(), ["--json", ...args("delivery.zip", "--dry-run")], { cwd: dir });
    assert.equal(dry.code, 0, dry.stderr);
    const report = JSON.parse(dry.stdout) as { source: string; counts: { releases: Obj; tracks: Obj } };
    assert.equal(report.source, "delivery.zip");
    assert.equal(report.counts.releases.create, 2);
    assert.equal(report.counts.tracks.create, 7);
    assert.deepEqual(await catalogue(id), { releases: [], tracks: [], media: [] });

    const real = await runCliOn(t(), args("delivery.zip"), { cwd: dir, config: app.config });
    assert.equal(real.code, 0, real.stderr);
    assert.match(real.stdout, /releases: 2 created, 0 already there, 0 with problems/);
    const after = await catalogue(id);
    assert.equal(after.tracks.length, 7);
    assert.equal(after.media.filter((m) => m.kind === "audio").length, 7);

    const bad = await runCliOn(t(), args("escaping.zip"), { cwd: dir });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /would be written outside the archive's folder/);
    assert.equal(existsSync("/tmp/backline-zip-slip.txt"), false);
  });
});

describeEachEngine("public API: a transfer archive on S3 storage", (t) => {
  const BUCKET = "backline-transfers";
  let s3rver: RunningS3rver | undefined;
  let app: RunningApp;
  let store: S3Store;
  let worker: Worker;

  before(async () => {
    s3rver = await startS3rver();
    app = await startApp(t(), {
      STORAGE_DRIVER: "s3",
      S3_ENDPOINT: s3rver.endpoint,
      S3_BUCKET: BUCKET,
      S3_REGION: "us-east-1",
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
      S3_FORCE_PATH_STYLE: "true",
    });
    store = openStorage(app.config, loadSecretBox(app.config)).store as S3Store;
    await store.client.send(new CreateBucketCommand({ Bucket: BUCKET }));
    worker = new Worker({
      db: t().db,
      handlers: pipelineHandlers(t().db, { store, uploadLimits: app.config.uploads }),
      pollMs: 20,
    });
    worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    store?.close();
    await s3rver?.close();
  });

  test("the archive goes to the bucket, imports with its media from there, and is removed after", {
    skip: archiveSamplesSkip,
  }, async () => {
    const { tenant } = await tenantWithKeys(t(), {
      settings: { public_api_rate_limit: { max: 1_000_000, windowSeconds: 1 } },
    });
    const k = await keyedAccount(t().db, { tenant });
    const api = publicApi(app.url, k.key.secret);
    const zip = await ernDeliveryZip();
    const slot = expectStatus(
      await api("POST", "/transfer-uploads", { filename: "delivery.zip" }),
      201,
    ) as Obj & {
      upload_id: string;
      upload_url: string;
      headers: Record<string, string>;
    };
    const res = await fetch(slot.upload_url, { method: "PUT", headers: slot.headers, body: zip });
    assert.equal(res.status, 200, await res.clone().text());
    const kept = await keptIn(t().db, slot.upload_id);
    assert.equal(kept.in_database, false);
    const key = kept.object_key as string;
    assert.equal((await store.stat(key))?.bytes, zip.length, "the archive is in the bucket");

    const dry = await run(api, slot.upload_id, true);
    assert.equal(dry.status, "completed", JSON.stringify(dry));
    assert.equal((dry.counts as Record<string, number>).tracks_created, 7);
    assert.equal((await store.stat(key))?.bytes, zip.length, "a dry run leaves it");

    const real = await run(api, slot.upload_id, false);
    assert.equal(real.status, "completed", JSON.stringify(real));
    assert.equal((real.counts as Record<string, number>).releases_created, 2);
    const after = await catalogueIn(t().db, k.account.id);
    assert.equal(after.tracks.length, 7);
    assert.equal(after.media.length, 8, "seven tracks' audio and the album's cover, in the bucket");
    assert.equal(await store.stat(key), undefined, "a real run removes the archive");
  });
});
