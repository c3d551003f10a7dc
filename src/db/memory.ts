import v8 from "node:v8";
import type { EngineKind } from "./types.ts";

/*
 * What the embedded database's memory needs from the code that runs heavy work on it. PGlite is
 * PostgreSQL compiled to WebAssembly: what it allocates comes from a WebAssembly memory that only
 * grows, so a process's peak is what it keeps (bench/README.md, "Royalty import", and
 * "Memory of the embedded default").
 */

/**
 * V8's flags for WebAssembly on its baseline compiler (Liftoff) only. With V8's defaults, the
 * functions of PGlite that get hot are recompiled by TurboFan in background threads, whose peak
 * is about 400 MB of malloc for PostgreSQL's largest functions, given back after. A short command
 * gains nothing from it; a royalty import runs 1.4× as long without it (200,000 lines: 29–31 s
 * against 20–22 s, peak ~400 against ~770 MB), so it keeps V8's defaults (src/cli/main.ts).
 */
export const BASELINE_WASM_FLAGS = ["--liftoff", "--no-wasm-tier-up", "--no-wasm-dynamic-tiering"] as const;

/**
 * Sets BASELINE_WASM_FLAGS for this process. Process-wide: call it before the embedded database
 * is opened (its thread, started after, compiles PGlite the same way).
 */
export function baselineWasmOnly(): void {
  for (const flag of BASELINE_WASM_FLAGS) v8.setFlagsFromString(flag);
}

/**
 * work_mem for the sorts and hash aggregates of a bulk statement over millions of rows (a royalty
 * import's rollups and allocation, a void's reversal), set for its transaction only. PostgreSQL:
 * 128MB, so that they run in memory, given back when the transaction ends. PGlite: 16MB (up to
 * twice that for a hash, hash_mem_multiplier): what a sort or hash takes stays in the process's
 * WebAssembly memory after it, and what does not fit goes to temporary files in the data
 * directory (base/pgsql_tmp, on disk): a 200,000-line import 21.7 s against 20.4 s before.
 */
export function bulkWorkMem(kind: EngineKind): string {
  return kind === "pglite" ? "16MB" : "128MB";
}
