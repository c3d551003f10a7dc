// bench/stores: BENCH_RELEASES releases (default 200) delivered over SFTP to one store whose
// max_connections is BENCH_CONNECTIONS (default 2), against the ssh2 test server on this machine
// (a real SFTP server: handshakes, host-key check, key sign-in, writes, renames). Each release
// carries one WAV of BENCH_AUDIO_BYTES (default 1 MB). Prints releases per minute.
//   node bench/stores/sftp-delivery.ts pglite|postgres
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { Worker } from "../../src/jobs/worker.ts";
import { pipelineHandlers } from "../../src/pipeline/handlers.ts";
import { LocalMedia } from "../../src/storage/media.ts";
import { createAccount, createTenant } from "../../src/tenancy/tenants.ts";
import { createTestDb } from "../../test/support/db.ts";
import {
  configureDdexStore,
  gtin13,
  placeMedia,
  RECIPIENT,
  SENDER,
  seedRelease,
  wavBytes,
} from "../../test/support/ddex.ts";
import { tempDir } from "../../test/support/process.ts";
import { FUTURE_DATE } from "../../test/support/public-api.ts";
import { startSftpServer } from "../../test/support/sftp-server.ts";

const RELEASES = Number(process.env.BENCH_RELEASES ?? 200);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 2);
const AUDIO = Number(process.env.BENCH_AUDIO_BYTES ?? 1_000_000);
const engine = (process.argv[2] ?? "pglite") as "pglite" | "postgres";

const tdb = await createTestDb(engine);
const db = tdb.db;
const server = await startSftpServer(tempDir("backline-bench-sftp-"));
const media = new LocalMedia(tempDir("backline-bench-media-"));
const store = `bench_${randomUUID().slice(0, 6)}`;
await configureDdexStore(db, store, {
  sender: SENDER,
  recipient: RECIPIENT,
  destination: server.settings({ max_connections: CONNECTIONS }),
});
const { tenant } = await createTenant(db, {
  name: "Bench",
  slug: `bench-${randomUUID().slice(0, 8)}`,
  settings: { auto_review: true, require_media: false, gs1_company_prefix: "2000000" },
});
const account = await createAccount(db, { tenantId: tenant.id, name: "Bench Label" });
const ids: string[] = [];
for (let i = 0; i < RELEASES; i++) {
  const r = await seedRelease(
    db,
    account.id,
    {
      title: `Bench ${i}`,
      release_type: "single",
      artist_name: "Bench Artist",
      primary_genre: "electronic",
      release_date: FUTURE_DATE,
      label_name: "Bench Label",
      licensed_territories_include: "WW",
      services: [store],
      copyright: "2026 Bench",
      copyright_year: 2026,
      phonographic_copyright: "2026 Bench",
      phonographic_year: 2026,
      language: "en",
      upc: gtin13(`4006387${String(i).padStart(5, "0")}`),
    },
    [{ title: `Bench ${i}`, isrc: `QZBNC26${String(i).padStart(5, "0")}`, duration: 200, track_number: 1 }],
  );
  placeMedia(media, account.id, r.id, {
    audio: [{ trackId: r.tracks[0]?.id ?? "", ext: "wav", data: wavBytes(i, AUDIO) }],
  });
  ids.push(r.id);
}
const worker = new Worker({ db, handlers: pipelineHandlers(db, { media }), pollMs: 50, concurrency: 8 });
worker.start();
const started = performance.now();
await db.asService((tx) =>
  tx.query("update public.releases set status = 'submitted' where id = any($1::uuid[])", [ids]),
);
worker.wake();
for (;;) {
  const r = await db.asService((tx) =>
    tx.query<{ done: number; errors: number }>(
      `select count(*) filter (where status = 'delivered')::int as done, count(*) filter (where status = 'error')::int as errors
       from internal.release_deliveries where store = $1`,
      [store],
    ),
  );
  const row = r.rows[0] ?? { done: 0, errors: 0 };
  if (row.done + row.errors >= RELEASES) {
    const seconds = (performance.now() - started) / 1000;
    console.log(
      JSON.stringify({
        engine,
        releases: RELEASES,
        delivered: row.done,
        errors: row.errors,
        maxConnections: CONNECTIONS,
        serverMaxConcurrent: server.maxConcurrent,
        audioBytes: AUDIO,
        seconds: Number(seconds.toFixed(1)),
        releasesPerMinute: Math.round((row.done / seconds) * 60),
      }),
    );
    break;
  }
  await new Promise((res) => setTimeout(res, 200));
}
await worker.stop();
await server.stop();
await tdb.close();
fs.rmSync(server.root, { recursive: true, force: true });
fs.rmSync(media.root, { recursive: true, force: true });
