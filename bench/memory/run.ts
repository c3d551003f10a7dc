// Idle memory of `npm start` on the embedded database (issue 20, item 6): the server started as
// package.json's `start` script starts it (its environment assignments and Node flags), on a fresh
// DATA_DIR (the first start, which creates the database and migrates it) and again on the same
// directory (a restart); its RSS read from /proc BENCH_IDLE_SECONDS after /ready answers.
//
//   npm run bench:memory                   # BENCH_IDLE_SECONDS=15, BENCH_ROUNDS=1
//   BENCH_BREAKDOWN=1 npm run bench:memory # also where it is: each thread's V8 heap, PGlite's
//                                          # WebAssembly memory (bench/memory/breakdown.cjs)
//
// Linux only (/proc).
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "../../test/support/process.ts";
import { npmStart, ROOT } from "../support.ts";

const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const BREAKDOWN = process.env.BENCH_BREAKDOWN === "1";
const MB = 1024 * 1024;

interface Sample {
  rss: number;
  anon: number;
  file: number;
  breakdown?: string;
}

function status(pid: number): { rss: number; anon: number; file: number } {
  const text = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb("VmRSS"), anon: kb("RssAnon"), file: kb("RssFile") };
}

/** Resident bytes of the anonymous mappings exactly `size` bytes long (a WebAssembly memory's). */
function residentOfMappings(pid: number, sizes: number[]): number {
  let total = 0;
  let counting = false;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ 0\s*$/.exec(line);
    if (m)
      counting = sizes.includes(Number.parseInt(m[2] as string, 16) - Number.parseInt(m[1] as string, 16));
    else if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) counting = false;
    else if (counting && line.startsWith("Rss:")) total += Number(line.split(/\s+/)[1]) * 1024;
  }
  return total;
}

async function describe(pid: number, file: string): Promise<string> {
  process.kill(pid, "SIGUSR2");
  await new Promise((r) => setTimeout(r, 1500));
  const last = new Map<string, Record<string, number & number[]>>();
  for (const line of fs.readFileSync(file, "utf8").trim().split("\n")) {
    const r = JSON.parse(line);
    // Threads that ended (a first start's database thread before its reopen) stop writing.
    if (r.at > Date.now() - 3000) last.set(r.thread, r);
  }
  const mb = (n: number) => `${(n / MB).toFixed(1)}`;
  const parts: string[] = [];
  for (const [thread, r] of last) {
    const wasm = r.wasm_memories as number[];
    parts.push(
      `${thread}: V8 heap ${mb(r.heap_physical as number)} MB (new space ${mb(r.new_space as number)}), external ${mb(r.external as number)} MB` +
        (wasm.length
          ? `, WebAssembly memory ${wasm.map(mb).join("+")} MB of which resident ${mb(residentOfMappings(pid, wasm))} MB`
          : ""),
    );
  }
  return parts.join("; ");
}

async function measure(dataDir: string): Promise<Sample> {
  const start = npmStart();
  const port = await freePort();
  const breakdownFile = path.join(dataDir, "..", `breakdown-${port}.jsonl`);
  const args = [
    ...(BREAKDOWN ? ["--require", path.join(ROOT, "bench/memory/breakdown.cjs")] : []),
    ...start.args,
  ];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      ...start.env,
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      PORT: String(port),
      LOG_LEVEL: "warn",
      BENCH_BREAKDOWN_FILE: breakdownFile,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  try {
    const deadline = Date.now() + 180_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
      const ok = await fetch(`http://127.0.0.1:${port}/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error("the server was not ready in 180 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const sample: Sample = status(child.pid as number);
    if (BREAKDOWN) sample.breakdown = await describe(child.pid as number, breakdownFile);
    return sample;
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

async function main() {
  const start = npmStart();
  const lines = [
    `npm start: ${Object.entries(start.env)
      .map(([k, v]) => `${k}=${v} `)
      .join("")}node ${start.args.join(" ")}`,
    `idle ${IDLE_SECONDS} s after /ready; load average ${os
      .loadavg()
      .map((n) => n.toFixed(1))
      .join(" ")} at the start`,
    "| round | first start RSS MB (anon / file) | restart RSS MB (anon / file) |",
    "|---|---|---|",
  ];
  const notes: string[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "backline-bench-memory-"));
    try {
      const first = await measure(path.join(dir, "data"));
      const again = await measure(path.join(dir, "data"));
      const cell = (s: Sample) =>
        `${(s.rss / MB).toFixed(0)} (${(s.anon / MB).toFixed(0)} / ${(s.file / MB).toFixed(0)})`;
      lines.push(`| ${round} | ${cell(first)} | ${cell(again)} |`);
      if (first.breakdown) notes.push(`round ${round}, first start: ${first.breakdown}`);
      if (again.breakdown) notes.push(`round ${round}, restart: ${again.breakdown}`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  lines.push(
    `load average ${os
      .loadavg()
      .map((n) => n.toFixed(1))
      .join(" ")} at the end`,
    ...notes,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
