import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import ssh2 from "ssh2";
import type { Db } from "../src/db/db.ts";
import { fingerprintOf } from "../src/pipeline/ddex/sftp.ts";
import { checkStore } from "../src/pipeline/store-check.ts";
import type { LocalMedia } from "../src/storage/media.ts";
import { describeEachEngine } from "./support/db.ts";
import {
  configureDdexStore,
  gtin13,
  listFiles,
  placeMedia,
  poll,
  RECIPIENT,
  SENDER,
  seedRelease,
  wavBytes,
} from "./support/ddex.ts";
import { FUTURE_DATE } from "./support/public-api.ts";
import { type SftpStoreFixture, startSftpStoreFixture, type TestSftpServer } from "./support/sftp-server.ts";

/**
 * The ddex adapter over SFTP (docs/ddex.md, "SFTP"), against a real SFTP server started here with
 * ssh2's server side and a key pair made for the test: a whole batch delivered (temporary names
 * renamed, BatchComplete last), the credentials sealed, a wrong host key refused naming the key
 * seen, a connection cut mid-upload and the batch completed after the server comes back, the
 * per-store connection limit, and `stores configure --check`.
 */
describeEachEngine("ddex over SFTP (ssh2 server)", (t) => {
  const db = (): Db => t().db;
  let fixture: SftpStoreFixture;
  let server: TestSftpServer;
  let media: LocalMedia;
  let accountId: string;
  let seq = 0;
  const STORE = `sftp_${randomUUID().slice(0, 6)}`;
  const WRONG_KEY = `${STORE}_wrong`;
  const ONE_AT_A_TIME = `${STORE}_one`;
  const nextIsrc = () => `QZSFT26${String(++seq).padStart(5, "0")}`;

  before(async () => {
    fixture = await startSftpStoreFixture(db(), {
      prefix: "sftp",
      tenant: "SFTP Label",
      account: "Night Owl Records",
    });
    ({ server, media } = fixture);
    accountId = fixture.account.id;
    await configureDdexStore(db(), STORE, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: server.settings(),
    });
    const other = ssh2.utils.parseKey(ssh2.utils.generateKeyPairSync("ed25519").public);
    if (other instanceof Error) throw other;
    await configureDdexStore(db(), WRONG_KEY, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: server.settings({ host_key_sha256: fingerprintOf(other.getPublicSSH()) }),
    });
    await configureDdexStore(db(), ONE_AT_A_TIME, {
      sender: SENDER,
      recipient: RECIPIENT,
      destination: server.settings({ path: "one", max_connections: 1 }),
    });
    fixture.startWorker();
  });
  after(async () => {
    await fixture?.close();
  });

  const rows = async <T extends Record<string, unknown>>(sql: string, params: unknown[] = []) =>
    db().asService(async (tx) => (await tx.query<T>(sql, params)).rows);
  const deliveryOf = async (releaseId: string) =>
    (
      await rows<{
        id: string;
        status: string;
        message: string | null;
        store_reference: string | null;
        attempts: number;
        batch_id: string | null;
      }>(
        "select id::text as id, status, message, store_reference, attempts, batch_id from internal.release_deliveries where release_id = $1",
        [releaseId],
      )
    )[0];

  async function release(store: string, upc: string, audioBytes = 4000) {
    const r = await seedRelease(
      db(),
      accountId,
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
        upc,
      },
      [{ title: "Night Drive", isrc: nextIsrc(), duration: 200, track_number: 1 }],
    );
    const audio = r.tracks.map((tr, i) => ({
      trackId: tr.id,
      ext: "wav" as const,
      data: wavBytes(i + seq, audioBytes),
    }));
    placeMedia(media, accountId, r.id, { audio });
    return { ...r, audio, upc };
  }
  const submit = async (id: string) => {
    await rows("update public.releases set status = 'submitted' where id = $1", [id]);
    fixture.wake();
  };

  test("a whole batch is delivered: every file under its real name, no temporary names, BatchComplete; credentials sealed", async () => {
    const upc = gtin13(`40063820${String(seq).padStart(4, "0")}`);
    const r = await release(STORE, upc);
    await submit(r.id);
    const d = await poll(
      "the delivery",
      () => deliveryOf(r.id),
      (x) => x?.status === "delivered" || x?.status === "error",
    );
    assert.equal(d?.status, "delivered", d?.message ?? "");
    // DDEX's choreography names a batch by the time it was made (YYYYMMDDhhmmssnnn).
    const batch = d?.batch_id ?? "";
    assert.match(batch, /^[0-9]{17}$/);
    assert.equal(d?.store_reference, `sftp://store@127.0.0.1:${server.port}/incoming/${batch}`);
    const dir = path.join(server.root, "incoming", batch);
    const isrc = r.tracks[0]?.isrc;
    assert.deepEqual(
      listFiles(dir),
      [`${upc}/${upc}.xml`, `${upc}/resources/${isrc}.wav`, `BatchComplete_${batch}.xml`].sort(),
    );
    assert.deepEqual(fs.readFileSync(path.join(dir, upc, "resources", `${isrc}.wav`)), r.audio[0]?.data);
    // The ManifestMessage (its schema check: test/ddex-choreography.test.ts) names the message.
    const manifest = fs.readFileSync(path.join(dir, `BatchComplete_${batch}.xml`), "utf8");
    assert.match(manifest, new RegExp(`<URL>${upc}/${upc}.xml</URL>`));
    // The private key is sealed, never in the settings.
    const [store] = await rows<{ settings: string; sealed: string | null }>(
      "select settings::text as settings, credentials_sealed as sealed from internal.stores where code = $1",
      [STORE],
    );
    assert.ok(store?.sealed?.startsWith("v"));
    assert.ok(
      !store?.settings.includes("PRIVATE KEY") && !store?.settings.includes("private_key"),
      store?.settings,
    );
  });

  test("a wrong host key is refused, naming the key seen; the job waits for the operator", async () => {
    const r = await release(WRONG_KEY, gtin13("400638300001"));
    await submit(r.id);
    const d = await poll(
      "the delivery to fail",
      () => deliveryOf(r.id),
      (x) => x?.status === "error",
    );
    assert.match(
      d?.message ?? "",
      new RegExp(
        `presented the host key ${server.fingerprint.replace(/[+/]/g, "\\$&")}, not the configured SHA256:`,
      ),
    );
    assert.equal(d?.attempts, 1);
    assert.ok(!fs.existsSync(path.join(server.root, "incoming", d?.batch_id ?? "")), "nothing was written");
    const jobs = await poll(
      "the send job to finish",
      () =>
        rows<{ status: string; attempts: number }>(
          "select status, attempts from internal.jobs where kind = 'delivery.send' and payload ->> 'delivery_id' = $1",
          [d?.id],
        ),
      (js) => js.every((j) => j.status === "succeeded"),
    );
    assert.deepEqual(jobs, [{ status: "succeeded", attempts: 1 }], "a configuration error is not retried");
  });

  test("a connection cut mid-upload leaves no announced batch; the batch completes once the server is back", async () => {
    const r = await release(STORE, gtin13("400638300002"), 400_000);
    server.cutAfterWrites(3);
    await submit(r.id);
    const failed = await poll(
      "the first attempt to fail",
      () => deliveryOf(r.id),
      (x) => x?.status === "error",
    );
    const batch = failed?.batch_id ?? "";
    assert.match(batch, /^[0-9]{17}$/);
    const dir = path.join(server.root, "incoming", batch);
    assert.ok(!fs.existsSync(path.join(dir, `BatchComplete_${batch}.xml`)), "no BatchComplete after a cut");
    // The server goes away, then comes back on the same port with the same host key.
    await server.stop();
    await new Promise((res) => setTimeout(res, 300));
    await server.start();
    const d = await poll(
      "the retry to deliver",
      () => deliveryOf(r.id),
      (x) => x?.status === "delivered",
      30_000,
    );
    assert.ok((d?.attempts ?? 0) >= 2);
    assert.equal(d?.batch_id, batch, "a retry writes the same batch");
    const isrc = r.tracks[0]?.isrc;
    assert.deepEqual(
      listFiles(dir),
      [`${r.upc}/${r.upc}.xml`, `${r.upc}/resources/${isrc}.wav`, `BatchComplete_${batch}.xml`].sort(),
      "no .part file left",
    );
    assert.deepEqual(fs.readFileSync(path.join(dir, r.upc, "resources", `${isrc}.wav`)), r.audio[0]?.data);
  });

  test("max_connections 1: three releases at once reach the server one connection at a time", async () => {
    server.maxConcurrent = 0;
    const rs = [];
    for (let i = 0; i < 3; i++) rs.push(await release(ONE_AT_A_TIME, gtin13(`40063840000${i}`), 50_000));
    await Promise.all(rs.map((r) => submit(r.id)));
    for (const r of rs) {
      const d = await poll(
        "delivered",
        () => deliveryOf(r.id),
        (x) => x?.status === "delivered" || x?.status === "error",
      );
      assert.equal(d?.status, "delivered", d?.message ?? "");
    }
    assert.equal(server.maxConcurrent, 1);
  });

  test("stores configure --check: connects and says so; a wrong host key is named", async () => {
    const ok = await checkStore(db(), STORE);
    assert.deepEqual(ok, {
      ok: true,
      message: `connected to sftp://store@127.0.0.1:${server.port}/incoming as store: the host key matches`,
    });
    const bad = await checkStore(db(), WRONG_KEY);
    assert.equal(bad.ok, false);
    assert.match(bad.message, /presented the host key SHA256:/);
  });
});
