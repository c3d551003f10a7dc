import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import type { Db } from "../src/db/db.ts";
import { Worker } from "../src/jobs/worker.ts";
import { pipelineHandlers } from "../src/pipeline/handlers.ts";
import {
  inboxStatus,
  parseAcknowledgement,
  pollStore,
  scheduleStorePolls,
} from "../src/pipeline/store-inbox.ts";
import { LocalMedia } from "../src/storage/media.ts";
import { type Account, createAccount, createTenant } from "../src/tenancy/tenants.ts";
import { describeEachEngine } from "./support/db.ts";
import { configureDdexStore, gtin13, poll, RECIPIENT, SENDER, seedRelease } from "./support/ddex.ts";
import { ROOT, tempDir } from "./support/process.ts";
import { FUTURE_DATE } from "./support/public-api.ts";
import { seedSampleCatalog } from "./support/royalties.ts";
import { startS3rver } from "./support/s3rver.ts";
import { type SftpStoreFixture, startSftpStoreFixture, type TestSftpServer } from "./support/sftp-server.ts";

/**
 * A store's answers and reports fetched on a schedule (docs/ddex.md, "Acknowledgements and
 * reports"), against a real SFTP server started here (ssh2's server side): a batch delivered over
 * SFTP, the store's DDEX acknowledgement file moving the release to live by itself, the same file
 * twice changing nothing, an unreadable file kept and reported, an error and a takedown
 * confirmation in Backline's JSON and CSV forms (from a plain directory), and a DSR report
 * dropped in the reports folder imported once and matched.
 */
describeEachEngine("store inbox: acknowledgements and reports on a schedule", (t) => {
  const db = (): Db => t().db;
  let fixture: SftpStoreFixture;
  let server: TestSftpServer;
  let account: Account;
  let tenantId: string;
  let local: string;
  let seq = 0;
  const STORE = `inbox_${randomUUID().slice(0, 6)}`;
  const LOCAL = `${STORE}_dir`;

  before(async () => {
    fixture = await startSftpStoreFixture(db(), {
      prefix: "inbox",
      tenant: "Inbox Label",
      account: "Night Owl",
    });
    ({ server, account } = fixture);
    const { tenant } = fixture;
    local = tempDir("backline-inbox-dir-");
    tenantId = tenant.id;
    await seedSampleCatalog(db(), account);
    await configureDdexStore(db(), STORE, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: server.settings(),
      inbox: { acknowledgements: "acks", reports: { path: "reports", tenant: tenant.id }, every_s: 10 },
    });
    await configureDdexStore(db(), LOCAL, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { type: "directory", path: path.join(local, "drops") },
      inbox: { source: { type: "directory", path: local }, acknowledgements: "acks", enabled: false },
    });
    fixture.startWorker();
  });
  after(async () => {
    await fixture?.close([local]);
  });

  const rows = async <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  const deliveryOf = async (releaseId: string) =>
    (
      await rows<{
        id: string;
        action: string;
        status: string;
        message: string | null;
        confirmed_by: string | null;
      }>(
        `select id::text as id, action, status, message, confirmed_by from internal.release_deliveries
         where release_id = $1 order by created_at desc limit 1`,
        [releaseId],
      )
    )[0];
  const releaseStatus = async (id: string) =>
    (await rows<{ status: string }>("select status from public.releases where id = $1", [id]))[0]?.status;

  async function delivered(store: string) {
    const r = await seedRelease(
      db(),
      account.id,
      {
        title: "Night Drive",
        release_type: "single",
        artist_name: "Luna Vale",
        primary_genre: "electronic",
        release_date: FUTURE_DATE,
        label_name: "Night Owl Records",
        licensed_territories_include: "WW",
        services: [store],
        copyright: "2026 Night Owl Records",
        copyright_year: 2026,
        phonographic_copyright: "2026 Night Owl Records",
        phonographic_year: 2026,
        language: "en",
        upc: gtin13(`40063850${String(++seq).padStart(4, "0")}`),
      },
      [
        {
          title: "Night Drive",
          isrc: `QZINB26${String(seq).padStart(5, "0")}`,
          duration: 200,
          track_number: 1,
        },
      ],
    );
    await rows("update public.releases set status = 'submitted' where id = $1", [r.id]);
    fixture.wake();
    const d = await poll(
      "delivered",
      () => deliveryOf(r.id),
      (x) => x?.status === "delivered" || x?.status === "error",
    );
    assert.equal(d?.status, "delivered", d?.message ?? "");
    return { releaseId: r.id, deliveryId: d?.id ?? "" };
  }

  const ftpAck = (batchId: string, status: string, error?: string) => `<?xml version="1.0" encoding="UTF-8"?>
<ernac:FtpAcknowledgementMessage xmlns:ernac="http://ddex.net/xml/ern-c/15" MessageSchemaVersionId="ern-c/15">
  <MessageHeader>
    <MessageId>STORE-ACK-${randomUUID()}</MessageId>
    <MessageSender><PartyId>${RECIPIENT.dpid}</PartyId></MessageSender>
    <MessageRecipient><PartyId>${SENDER.dpid}</PartyId></MessageRecipient>
    <MessageCreatedDateTime>2026-11-26T01:00:00Z</MessageCreatedDateTime>
  </MessageHeader>
  <AcknowledgedFile><FileName>${batchId}/BatchComplete_${batchId}.xml</FileName></AcknowledgedFile>
  <FileStatus>${status}</FileStatus>${error ? `\n  <ErrorText>${error}</ErrorText>` : ""}
</ernac:FtpAcknowledgementMessage>
`;

  test("a DDEX acknowledgement in the store's SFTP answer folder makes the release live on the store's schedule", async () => {
    const { releaseId, deliveryId } = await delivered(STORE);
    const batch = deliveryId.replace(/-/g, "");
    const acks = path.join(server.root, "incoming", "acks");
    fs.mkdirSync(acks, { recursive: true });
    fs.writeFileSync(path.join(acks, `ACK_${batch}.xml`), ftpAck(batch, "FileOK"));
    // The schedule: one recurring job per store, run by the worker, queued again after each run.
    assert.ok((await scheduleStorePolls(db())).includes(STORE));
    assert.ok((await scheduleStorePolls(db())).includes(STORE));
    fixture.wake();
    await poll(
      "the release to go live",
      () => releaseStatus(releaseId),
      (s) => s === "live",
    );
    assert.equal((await deliveryOf(releaseId))?.status, "live");
    const jobs = await poll(
      "the poll job to be queued again",
      () =>
        rows<{ status: string; attempts: number; later: boolean }>(
          "select status, attempts, run_at > now() as later from internal.jobs where kind = 'store.poll' and payload ->> 'store' = $1",
          [STORE],
        ),
      (js) => js.length === 1 && js[0]?.status === "queued",
    );
    assert.deepEqual(jobs, [{ status: "queued", attempts: 0, later: true }], "one job per store, recurring");
    assert.deepEqual(fs.readdirSync(acks), ["processed"]);
    assert.deepEqual(fs.readdirSync(path.join(acks, "processed")), [`ACK_${batch}.xml`]);

    // The same file again changes nothing; an unreadable file is kept and reported once.
    fs.writeFileSync(
      path.join(acks, `ACK_${batch}-again.xml`),
      ftpAck(batch, "FileOK").replace(/STORE-ACK-[^<]+/, "x"),
    );
    fs.writeFileSync(path.join(acks, "garbage.txt"), "hello");
    const r = await pollStore(db(), STORE);
    assert.deepEqual(
      r.files.map((f) => [f.name, f.outcome, JSON.stringify(f.detail)]),
      [
        [
          `ACK_${batch}-again.xml`,
          "applied",
          JSON.stringify({
            form: "legacy",
            entries: [{ delivery_id: deliveryId, result: "unchanged", status: "live" }],
          }),
        ],
        [
          "garbage.txt",
          "unreadable",
          JSON.stringify({ error: "not a DDEX acknowledgement, nor Backline's JSON or CSV form" }),
        ],
      ],
    );
    const again = await pollStore(db(), STORE);
    assert.deepEqual(again.files, [], "nothing new: the unreadable file is not reported again");
    assert.deepEqual(fs.readdirSync(acks).sort(), ["garbage.txt", "processed"]);
    // `stores show` shows the schedule, its job and the files read, the unreadable one included.
    const status = await inboxStatus(db(), STORE);
    assert.deepEqual([status?.every_s, status?.enabled, status?.job?.status], [10, true, "queued"]);
    assert.deepEqual(status?.recent_files.map((f) => [f.name, f.outcome]).sort(), [
      [`ACK_${batch}-again.xml`, "applied"],
      [`ACK_${batch}.xml`, "applied"],
      ["garbage.txt", "unreadable"],
    ]);
    // The rest of the suite polls by hand: the schedule's next run (10 s on) must not race it.
    await rows(
      "delete from internal.jobs where kind = 'store.poll' and payload ->> 'store' = $1 and status = 'queued'",
      [STORE],
    );
  });

  test("an error acknowledgement records the store's message on the delivery (its batch named by its time)", async () => {
    const { releaseId, deliveryId } = await delivered(STORE);
    // ERN-C 1.4 names the batch folder it answers: YYYYMMDDhhmmssnnn (read by element name).
    const [{ batch_id: batch } = { batch_id: "" }] = await rows<{ batch_id: string }>(
      "select batch_id from internal.release_deliveries where id = $1",
      [deliveryId],
    );
    assert.match(batch, /^[0-9]{17}$/);
    fs.writeFileSync(
      path.join(server.root, "incoming", "acks", `ACK_${batch}.xml`),
      ftpAck(batch, "ResourceCorrupt", "Cover art below 3000&#215;3000".replace("&#215;", "x")),
    );
    await pollStore(db(), STORE);
    const d = await deliveryOf(releaseId);
    assert.deepEqual(
      [d?.status, d?.message],
      ["error", `${STORE}: ResourceCorrupt: Cover art below 3000x3000`],
    );
  });

  test("a DSR report in the reports folder is imported once, matched, and royalties.imported fires", async () => {
    const reports = path.join(server.root, "incoming", "reports");
    fs.mkdirSync(reports, { recursive: true });
    fs.copyFileSync(path.join(ROOT, "docs/formats/ddex-dsr.tsv"), path.join(reports, "DSR_2026-03.tsv"));
    const r = await pollStore(db(), STORE);
    assert.deepEqual(
      r.files.map((f) => [f.kind, f.name, f.outcome]),
      [["report", "DSR_2026-03.tsv", "imported"]],
    );
    const [imp] = await rows<{ lines_total: string; lines_matched: string; source: string; store: string }>(
      "select lines_total::text, lines_matched::text, source, store from internal.royalty_imports where id = $1",
      [String(r.files[0]?.detail.import_id)],
    );
    assert.deepEqual(imp, { lines_total: "6", lines_matched: "5", source: "store", store: STORE });
    // Dropped again: the same bytes are not imported twice.
    fs.copyFileSync(path.join(ROOT, "docs/formats/ddex-dsr.tsv"), path.join(reports, "DSR_2026-03-copy.tsv"));
    await pollStore(db(), STORE);
    const count = await rows<{ n: number }>(
      "select count(*)::int as n from internal.royalty_imports where tenant_id = $1 and status = 'completed'",
      [tenantId],
    );
    assert.equal(count[0]?.n, 1);
    assert.deepEqual(fs.readdirSync(reports), ["processed"]);
    const events = await rows(
      "select 1 from internal.events where account_id = $1 and type = 'royalties.imported'",
      [account.id],
    );
    assert.equal(events.length, 1);
  });

  test("Backline's JSON and CSV forms from a directory: an error, then live; a takedown confirmed by the store", async () => {
    const { releaseId, deliveryId } = await delivered(LOCAL);
    const acks = path.join(local, "acks");
    fs.mkdirSync(acks, { recursive: true });
    fs.writeFileSync(
      path.join(acks, "a.json"),
      JSON.stringify({ acknowledgements: [{ delivery_id: deliveryId, status: "live" }] }),
    );
    fs.writeFileSync(
      path.join(acks, "b.csv"),
      `delivery_id,status,message\n${randomUUID()},error,"no such, delivery"\n`,
    );
    const r = await pollStore(db(), LOCAL);
    assert.deepEqual(
      r.files.map((f) => [f.name, f.outcome]),
      [
        ["a.json", "applied"],
        // A delivery not (yet) recorded: the file waits for it, read again at each poll.
        ["b.csv", "waiting"],
      ],
    );
    assert.equal((r.files[1]?.detail.entries as { result: string }[] | undefined)?.[0]?.result, "waiting");
    assert.equal(await releaseStatus(releaseId), "live");
    // The takedown's acknowledgement confirms it: taken down by the store.
    await rows(
      "insert into public.takedown_requests (release_id, account_id, reason) values ($1, $2, 'rights')",
      [releaseId, account.id],
    );
    fixture.wake();
    const takedown = await poll(
      "the takedown to be sent",
      () => deliveryOf(releaseId),
      (d) => d?.action === "takedown" && d.status === "takedown_sent",
    );
    fs.writeFileSync(path.join(acks, "c.csv"), `delivery_id,status\n${takedown?.id},ok\n`);
    await pollStore(db(), LOCAL);
    const d = await deliveryOf(releaseId);
    assert.deepEqual([d?.status, d?.confirmed_by], ["taken_down", "store"]);
  });
});

test("an S3 answer folder (s3rver): an acknowledgement applied, the object moved to processed/, garbage kept", async () => {
  const { createTestDb, ENGINES } = await import("./support/db.ts");
  const tdb = await createTestDb(ENGINES[0] ?? "pglite");
  const s3server = await startS3rver();
  const s3 = new S3Client({
    region: "us-east-1",
    endpoint: s3server.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    requestChecksumCalculation: "WHEN_REQUIRED",
  });
  const drops = tempDir("backline-inbox-s3-drops-");
  const mediaRoot = tempDir("backline-inbox-s3-media-");
  const worker = new Worker({
    db: tdb.db,
    handlers: pipelineHandlers(tdb.db, { media: new LocalMedia(mediaRoot) }),
    pollMs: 20,
  });
  try {
    await s3.send(new CreateBucketCommand({ Bucket: "store-answers" }));
    const code = `inbox_s3_${randomUUID().slice(0, 6)}`;
    await configureDdexStore(tdb.db, code, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: { type: "directory", path: drops },
      inbox: {
        source: {
          type: "s3",
          bucket: "store-answers",
          prefix: "backline",
          endpoint: s3server.endpoint,
          force_path_style: true,
          access_key_id: "S3RVER",
          secret_access_key: "S3RVER",
        },
        acknowledgements: "acks",
      },
    });
    const { tenant } = await createTenant(tdb.db, {
      name: "S3 Inbox",
      slug: `s3-inbox-${randomUUID().slice(0, 8)}`,
      settings: { auto_review: true, require_media: false, gs1_company_prefix: "2000000" },
    });
    const acc = await createAccount(tdb.db, { tenantId: tenant.id, name: "Label" });
    const r = await seedRelease(
      tdb.db,
      acc.id,
      {
        title: "Night Drive",
        release_type: "single",
        artist_name: "Luna Vale",
        primary_genre: "electronic",
        release_date: FUTURE_DATE,
        label_name: "Night Owl Records",
        licensed_territories_include: "WW",
        services: [code],
        copyright: "2026 Night Owl Records",
        copyright_year: 2026,
        phonographic_copyright: "2026 Night Owl Records",
        phonographic_year: 2026,
        language: "en",
        upc: gtin13("400638600001"),
      },
      [{ title: "Night Drive", isrc: "QZINB2699001", duration: 200, track_number: 1 }],
    );
    worker.start();
    await tdb.db.asService((tx) =>
      tx.query("update public.releases set status = 'submitted' where id = $1", [r.id]),
    );
    worker.wake();
    const d = await poll(
      "delivered",
      () =>
        tdb.db.asService(
          async (tx) =>
            (
              await tx.query<{ id: string; status: string }>(
                "select id::text as id, status from internal.release_deliveries where release_id = $1",
                [r.id],
              )
            ).rows[0],
        ),
      (x) => x?.status === "delivered",
    );
    const put = (key: string, body: string) =>
      s3.send(new PutObjectCommand({ Bucket: "store-answers", Key: `backline/acks/${key}`, Body: body }));
    await put("ack.json", JSON.stringify({ delivery_id: d?.id, status: "live" }));
    await put("junk.bin", "???");
    const result = await pollStore(tdb.db, code);
    assert.deepEqual(
      result.files.map((f) => [f.name, f.outcome]),
      [
        ["ack.json", "applied"],
        ["junk.bin", "unreadable"],
      ],
    );
    const status = await tdb.db.asService(
      async (tx) =>
        (await tx.query<{ status: string }>("select status from public.releases where id = $1", [r.id]))
          .rows[0]?.status,
    );
    assert.equal(status, "live");
    const keys = (await s3.send(new ListObjectsV2Command({ Bucket: "store-answers" }))).Contents?.map(
      (o) => o.Key,
    ).sort();
    assert.deepEqual(keys, ["backline/acks/junk.bin", "backline/acks/processed/ack.json"]);
  } finally {
    await worker.stop();
    s3.destroy();
    await s3server.close();
    await tdb.close();
    fs.rmSync(drops, { recursive: true, force: true });
    fs.rmSync(mediaRoot, { recursive: true, force: true });
  }
});

test("parseAcknowledgement: the forms, and what is refused", () => {
  const id = randomUUID();
  assert.deepEqual(
    parseAcknowledgement(
      "x.json",
      Buffer.from(JSON.stringify([{ batch_id: id.replace(/-/g, ""), status: "taken_down" }])),
    ),
    [{ ref: id.replace(/-/g, ""), status: "taken_down", message: undefined }],
  );
  assert.throws(
    () => parseAcknowledgement("x.json", Buffer.from(`{"delivery_id":"${id}","status":"error"}`)),
    /an error needs a message/,
  );
  assert.throws(() => parseAcknowledgement("x.json", Buffer.from("{nope")), /not valid JSON/);
  // ERN-C 1.4 (ERN 3's stores), read by element name: the batch by its time-stamped folder.
  assert.deepEqual(
    parseAcknowledgement(
      "ACK.xml",
      Buffer.from(
        `<e:FtpAcknowledgementMessage xmlns:e="http://ddex.net/xml/ern-c/14"><MessageHeader><MessageId>7</MessageId></MessageHeader>` +
          "<AcknowledgedFile><FileName>20261206101500123/BatchComplete_20261206101500123.xml</FileName></AcknowledgedFile>" +
          "<FileStatus>ResourceCorrupt</FileStatus><ErrorText>bad flac</ErrorText></e:FtpAcknowledgementMessage>",
      ),
    ),
    [{ ref: undefined, batchId: "20261206101500123", status: "error", message: "ResourceCorrupt: bad flac" }],
  );
  assert.throws(
    () => parseAcknowledgement("x.xml", Buffer.from("<NewReleaseMessage/>")),
    /not a DDEX acknowledgement/,
  );
  assert.throws(
    () =>
      parseAcknowledgement(
        "x.xml",
        Buffer.from("<FtpAcknowledgementMessage><FileStatus>FileOK</FileStatus></FtpAcknowledgementMessage>"),
      ),
    /names no Backline batch/,
  );
});
