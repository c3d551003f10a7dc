// What the webhook benchmark's processes share: the event every delivery carries, the messages
// between the benchmark and its sender process, percentiles and CPU accounting.
import fs from "node:fs";

export const EVENT_TYPE = "release.live";

/**
 * The `data` of every event: `{object: <a release as it is when it goes live>}`, as the catalog's
 * triggers write it (migration 0005), about 1 KB of JSON. `n` makes each one a little different.
 */
export function releaseData(accountId: string, n: number): { object: Record<string, unknown> } {
  const now = new Date().toISOString();
  return {
    object: {
      id: "3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21",
      account_id: accountId,
      artist_id: "8c1d4e7a-9b0f-4a6c-8d4e-3f213f2b6a5e",
      title: "Midnight Signals",
      version: "Deluxe Edition",
      release_type: "ep",
      artist_name: "The Night Owls",
      primary_genre: "Electronic",
      secondary_genre: "House",
      genres: ["electronic", "house"],
      release_date: "2026-12-18",
      original_release_date: null,
      upc: "4006381333931",
      label_name: "Night Owl Records",
      catalog_number: `NOR-${String(n).padStart(6, "0")}`,
      licensed_territories_include: "WW",
      territories: [],
      territories_exclude: [],
      services: [],
      copyright: "2026 Night Owl Records",
      copyright_year: 2026,
      phonographic_copyright: "2026 Night Owl Records",
      phonographic_year: 2026,
      explicit: false,
      language: "en",
      status: "live",
      status_reason: null,
      submitted_at: now,
      created_at: now,
      updated_at: now,
    },
  };
}

/** An endpoint as the sender process needs it for the baselines. */
export interface EndpointSpec {
  url: string;
  secret: string;
}

/** What the sender process (child.ts) is told to be, in BENCH_CHILD (JSON). */
export type ChildTask =
  | {
      kind: "dispatcher";
      /** The app's database URL (the authenticator login). */
      url: string;
      /** The SecretBox key, base64. */
      key: string;
      poolSize: number;
      concurrency: number;
    }
  | {
      kind: "baseline";
      /** `http`: a plain node:http keep-alive loop; `sender`: the dispatcher's WebhookSender. */
      client: "http" | "sender";
      endpoints: EndpointSpec[];
      accountId: string;
      events: number;
      concurrency: number;
    };

/** From the sender process to the benchmark. */
export type ChildMessage =
  | { type: "ready" }
  | { type: "done"; sent: number; failed: number; cpuMs: number }
  | { type: "stopped"; cpuMs: number; warnings: number };

/** From the benchmark to the sender process. */
export type ParentMessage = { type: "stop" };

/** Nearest-rank percentile of ascending `sorted`. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

/** CPU time (user + system) of this process so far, in ms. */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * CPU time (ms) spent so far by the PostgreSQL server's processes on this machine that work for
 * database `db` (its backends, by their process titles) or for the whole server (WAL writer,
 * checkpointer, …), from /proc: Linux only, undefined elsewhere or when the server is not local.
 * Backends that exit between two readings take their time with them: read it while the
 * connections being measured are open.
 */
export function postgresCpuMs(db: string): number | undefined {
  let entries: string[];
  try {
    entries = fs.readdirSync("/proc");
  } catch {
    return undefined;
  }
  let ticks = 0;
  let found = false;
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== "postgres") continue;
      const title = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
      // "postgres: 15/main: authenticator <db> 127.0.0.1(51234) idle" is a client's backend.
      const backend = /\(\d+\)|\[local\]/.test(title);
      if (backend && !title.includes(` ${db} `)) continue;
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
      found = true;
    } catch {
      // The process ended while being read.
    }
  }
  // USER_HZ is 100 on Linux.
  return found ? ticks * 10 : undefined;
}
