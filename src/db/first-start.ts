// A first start's database, created in a process of its own: `openDatabase` (src/db/open.ts)
// runs this file with fork() while it holds the data directory's lock, waits for it to end, and
// then opens the directory itself as on a restart.
//
// Why a process: initdb runs a second PGlite instance, and the migrations a few hundred
// statements; what they take (WebAssembly memory, which only grows, compiled code, and glibc's
// malloc arenas, which a process keeps even after the thread that used them has ended) would stay
// in the server for its whole life, about 50 MB above a restart (bench/README.md, "Memory of the
// embedded default"). A process gives all of it back to the operating system when it exits.
//
// Input: argv[2], JSON `{ dataDir, sharedBuffers }`. Output: one IPC message, `{ ok: true,
// applied: [{ version, name }] }` or `{ ok: false, message, name, code }`. Nothing on stdout.
import { loadMigrations, migrate } from "./migrate.ts";
import { PgliteEngine } from "./pglite.ts";

export interface FirstStartJob {
  dataDir: string;
  sharedBuffers?: string | undefined;
}

export type FirstStartResult =
  | { ok: true; applied: { version: number; name: string }[] }
  | { ok: false; message: string; name?: string | undefined; code?: string | undefined };

async function run(job: FirstStartJob): Promise<FirstStartResult> {
  try {
    // In this thread: the process is the database's for its short life, and a thread would only cost.
    const engine = await PgliteEngine.open({
      dataDir: job.dataDir,
      sharedBuffers: job.sharedBuffers,
      thread: "main",
      lockedByParent: true,
    });
    try {
      const applied = await migrate(engine, loadMigrations());
      return { ok: true, applied: applied.map((m) => ({ version: m.version, name: m.name })) };
    } finally {
      await engine.close();
    }
  } catch (error) {
    const e = (error instanceof Error ? error : new Error(String(error))) as Error & { code?: unknown };
    return {
      ok: false,
      message: e.message,
      name: e.name,
      code: typeof e.code === "string" ? e.code : undefined,
    };
  }
}

if (!process.send) throw new Error("src/db/first-start.ts is run by openDatabase, with an IPC channel");
const result = await run(JSON.parse(process.argv[2] ?? "{}") as FirstStartJob);
// Then exit, whatever is left: a PGlite that failed to start keeps the event loop alive.
process.send(result, () => process.exit(result.ok ? 0 : 1));
