// Preloaded by bench/memory/run.ts with BENCH_BREAKDOWN=1 (`node --require`, which also runs in
// worker threads, unlike --import): where the idle server's memory is. Each thread writes one JSON
// line to $BENCH_BREAKDOWN_FILE: the main thread when sent SIGUSR2, the embedded database's thread
// every second. CommonJS on purpose: a TypeScript preload would load Node's type stripper into the
// database's thread, which the server itself does not (bench/README.md, "Memory").
const fs = require("node:fs");
const v8 = require("node:v8");
const { isMainThread, threadId } = require("node:worker_threads");

// WebAssembly memories made in this thread (PGlite makes its own with `new WebAssembly.Memory`).
const memories = [];
WebAssembly.Memory = new Proxy(WebAssembly.Memory, {
  construct(target, args) {
    const memory = Reflect.construct(target, args);
    memories.push(new WeakRef(memory));
    return memory;
  },
});

function report() {
  const heap = v8.getHeapStatistics();
  const spaces = Object.fromEntries(
    v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.physical_space_size]),
  );
  const line = {
    thread: isMainThread ? "main" : `worker ${threadId}`,
    at: Date.now(),
    heap_physical: heap.total_physical_size,
    heap_used: heap.used_heap_size,
    new_space: spaces.new_space,
    external: heap.external_memory,
    wasm_memories: memories.map((m) => m.deref()?.buffer.byteLength ?? 0).filter((n) => n > 0),
  };
  fs.appendFileSync(process.env.BENCH_BREAKDOWN_FILE, `${JSON.stringify(line)}\n`);
}

if (isMainThread) process.on("SIGUSR2", report);
else setInterval(report, 1000).unref();
