import v8 from "node:v8";

/**
 * Test processes run the embedded database's WebAssembly on V8's baseline compiler (Liftoff) only,
 * never tiering it up to the optimising compiler (TurboFan). PGlite's module is large and a test
 * file or a `backline` command runs it for seconds, so the optimising compile costs more CPU than
 * it saves: measured on the embedded engine, about a third less CPU and half the peak memory for a
 * test file, and 1.9 s → 0.8 s of CPU for a `backline` command (bench/README.md, "The `backline`
 * command and the test suite"). The database's behaviour is the same on either tier.
 *
 * Importing this module sets the flags for this process (before its first PGlite opens);
 * `NODE_BASELINE_FLAGS` are the same flags for the `node` processes tests start.
 * TEST_WASM_TIER_UP=1 leaves V8's defaults, to run the suite as production runs. A file whose
 * database does heavy work (the 100,000-release seeding of admin-desk-scale) is cheaper optimised:
 * it calls `wasmTierUp()` in its body, before its first database opens.
 */
export const NODE_BASELINE_FLAGS: string[] =
  process.env.TEST_WASM_TIER_UP === "1"
    ? []
    : ["--liftoff", "--no-wasm-tier-up", "--no-wasm-dynamic-tiering"];

for (const flag of NODE_BASELINE_FLAGS) v8.setFlagsFromString(flag);

/** V8's defaults again for the PGlite instances this process opens from now on (see above). */
export function wasmTierUp(): void {
  for (const flag of ["--wasm-tier-up", "--wasm-dynamic-tiering"]) v8.setFlagsFromString(flag);
}
