// One import, in a process of its own so that its peak RSS is the import's alone:
//   node bench/royalties/child.ts <postgres-url | pglite-data-dir> <tenant-id> <report-file>
// Prints one JSON line: { seconds, lines, maxRssMb, status }.
import { loadConfig } from "../../src/config.ts";
import { Db } from "../../src/db/db.ts";
import { baselineWasmOnly } from "../../src/db/memory.ts";
import { PgliteEngine } from "../../src/db/pglite.ts";
import { PostgresEngine } from "../../src/db/postgres.ts";
import { importRoyalties } from "../../src/royalties/import.ts";

const [target = "", tenantId = "", file = ""] = process.argv.slice(2);
// The embedded database as `backline royalties import` opens it: the configured shared_buffers
// (PGLITE_SHARED_BUFFERS, 8MB), not PGlite's own 128MB. BENCH_BASELINE_WASM=1: WebAssembly on
// V8's baseline compiler only (src/db/memory.ts), as short `backline` commands run it.
const embedded = () => {
  if (process.env.BENCH_BASELINE_WASM === "1") baselineWasmOnly();
  const config = loadConfig({ DATA_DIR: target, PGLITE_SHARED_BUFFERS: process.env.PGLITE_SHARED_BUFFERS });
  const sharedBuffers = config.database.engine === "pglite" ? config.database.sharedBuffers : undefined;
  return PgliteEngine.open({ dataDir: target, sharedBuffers });
};
const engine = target.startsWith("postgres")
  ? new PostgresEngine({ url: target, poolSize: 2, applicationName: "bench-royalties" })
  : await embedded();
const db = new Db(engine);
const started = performance.now();
const phases: Record<string, number> = {};
const r = await importRoyalties(db, {
  tenantId,
  format: process.env.BENCH_FORMAT ?? "backline",
  ...(process.env.BENCH_FORMAT === "ddex-dsr" ? { store: "spotify" } : {}),
  file,
  onPhase: (name, ms) => {
    phases[name] = Math.round(ms) / 1000;
  },
});
const seconds = (performance.now() - started) / 1000;
await db.close();
process.stdout.write(
  `${JSON.stringify({
    status: r.status,
    seconds,
    lines: r.status === "completed" ? r.report.lines_total : 0,
    matched: r.status === "completed" ? r.report.lines_matched : 0,
    errors: r.status === "rejected" ? r.report.errors.slice(0, 3) : [],
    phases,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  })}\n`,
);
