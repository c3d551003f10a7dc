import fs from "node:fs";
import os from "node:os";

/**
 * Who a webhook dispatcher is, so that its claims outlive it only as long as nobody knows it is
 * dead (docs/webhooks.md, "When a dispatcher dies"). A dispatcher's row in
 * internal.webhook_dispatchers names its host, its process id and that process's start time; a
 * process started later with the same pid (a restarted container is PID 1 again) has another
 * start time, so a reused pid is never taken for the old process.
 *
 * On Linux the start time is the kernel's (field 22 of /proc/PID/stat, clock ticks since boot) and
 * the host key names the boot and the PID namespace: a dispatcher of the same host key can tell at
 * once whether another's process still runs. Elsewhere the host key is null and only the heartbeat
 * tells.
 */

export interface ProcessIdentity {
  host: string;
  /** boot id and PID namespace; null where /proc cannot tell. */
  hostKey: string | null;
  pid: number;
  /** The process's start time (clock ticks since boot on Linux); null where unknown. */
  procStart: string | null;
}

/** Field 22 of /proc/PID/stat, or null when there is no such process (or no /proc). */
export function processStart(pid: number | "self"): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // rest[0] is field 3 (state), so field 22 is rest[19].
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

function readHostKey(): string | null {
  try {
    const boot = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    const pidNs = fs.readlinkSync("/proc/self/ns/pid");
    return `${boot}/${pidNs}`;
  } catch {
    return null;
  }
}

let self: ProcessIdentity | undefined;

/** This process. */
export function thisProcess(): ProcessIdentity {
  self ??= {
    host: os.hostname().slice(0, 100),
    hostKey: readHostKey(),
    pid: process.pid,
    procStart: processStart("self"),
  };
  return self;
}

/**
 * Whether the process a dispatcher row names has certainly ended, as far as this host can see:
 * on the same host key, its pid is gone or now belongs to a process started at another time.
 * False when this host cannot tell (another host, or no /proc): then the heartbeat decides.
 */
export function processEnded(row: {
  host_key: string | null;
  pid: number;
  proc_start: string | null;
}): boolean {
  const me = thisProcess();
  if (me.hostKey === null || row.host_key !== me.hostKey || row.proc_start === null) return false;
  if (row.pid === me.pid) return row.proc_start !== me.procStart;
  return processStart(row.pid) !== row.proc_start;
}
