/**
 * BACKUP_SCHEDULE (docs/operations.md, "Scheduled backups"): an interval (`30m`, `6h`, `1d`) or a
 * cron line of five fields in UTC (`0 3 * * *`: at 03:00 every day; `@hourly`, `@daily`, `@weekly`
 * too). Parsed once by src/config.ts; `nextRun` says when the `backup.run` job runs next.
 */

export type BackupSchedule =
  | { text: string; everyMs: number }
  | {
      text: string;
      cron: {
        minute: Set<number>;
        hour: Set<number>;
        dom: Set<number>;
        month: Set<number>;
        dow: Set<number>;
        domAny: boolean;
        dowAny: boolean;
      };
    };

const ALIASES: Record<string, string> = {
  "@hourly": "0 * * * *",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@weekly": "0 0 * * 0",
  "@monthly": "0 0 1 * *",
};

const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

function field(text: string, min: number, max: number): Set<number> | undefined {
  const out = new Set<number>();
  for (const item of text.split(",")) {
    const m = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(item);
    if (!m) return undefined;
    const from = m[1] === "*" ? min : Number(m[2]);
    const to = m[1] === "*" ? max : m[3] !== undefined ? Number(m[3]) : m[4] !== undefined ? max : from;
    const step = m[4] !== undefined ? Number(m[4]) : 1;
    if (from < min || to > max || from > to || step < 1) return undefined;
    for (let v = from; v <= to; v += step) out.add(v);
  }
  return out;
}

/** The schedule, or what is wrong with it (for ConfigError). */
export function parseSchedule(text: string): BackupSchedule | { problem: string } {
  const value = text.trim();
  const interval = /^([1-9][0-9]{0,5})([mhd])$/.exec(value);
  if (interval)
    return { text: value, everyMs: Number(interval[1]) * (UNITS[interval[2] as string] as number) };
  const line = ALIASES[value] ?? value;
  const parts = line.split(/\s+/);
  const problem =
    "must be an interval (30m, 6h, 1d) or a cron line of five fields in UTC (minute hour day-of-month month day-of-week, e.g. 0 3 * * *)";
  if (parts.length !== 5) return { problem };
  const [mi, ho, dm, mo, dw] = parts as [string, string, string, string, string];
  const minute = field(mi, 0, 59);
  const hour = field(ho, 0, 23);
  const dom = field(dm, 1, 31);
  const month = field(mo, 1, 12);
  const dowRaw = field(dw, 0, 7);
  if (!minute || !hour || !dom || !month || !dowRaw) return { problem };
  const dow = new Set([...dowRaw].map((d) => d % 7));
  return {
    text: value,
    cron: { minute, hour, dom, month, dow, domAny: dm === "*", dowAny: dw === "*" },
  };
}

/** The first time after `after` the schedule names (an interval: `after` plus it). */
export function nextRun(schedule: BackupSchedule, after: Date): Date {
  if ("everyMs" in schedule) return new Date(after.getTime() + schedule.everyMs);
  const c = schedule.cron;
  const t = new Date(after.getTime());
  t.setUTCSeconds(0, 0);
  for (let i = 0; i < 366 * 24 * 60; i++) {
    t.setUTCMinutes(t.getUTCMinutes() + 1);
    if (!c.minute.has(t.getUTCMinutes()) || !c.hour.has(t.getUTCHours()) || !c.month.has(t.getUTCMonth() + 1))
      continue;
    // Cron's rule: with both days restricted, either matches.
    const domOk = c.dom.has(t.getUTCDate());
    const dowOk = c.dow.has(t.getUTCDay());
    const dayOk = c.domAny && c.dowAny ? true : c.domAny ? dowOk : c.dowAny ? domOk : domOk || dowOk;
    if (dayOk) return new Date(t.getTime());
  }
  // A date that never comes (30 2 31 2 *): once a year, rather than never.
  return new Date(after.getTime() + 366 * 86_400_000);
}
