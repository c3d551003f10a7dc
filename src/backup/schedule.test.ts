import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { ConfigError, loadConfig } from "../config.ts";
import { nextRun, parseSchedule } from "./schedule.ts";

describe("BACKUP_SCHEDULE", () => {
  const at = new Date("2026-12-06T07:20:30Z");
  const next = (text: string, from = at) => {
    const s = parseSchedule(text);
    if ("problem" in s) throw new Error(s.problem);
    return nextRun(s, from).toISOString();
  };

  test("an interval runs that long after the last run", () => {
    assert.equal(next("30m"), "2026-12-06T07:50:30.000Z");
    assert.equal(next("6h"), "2026-12-06T13:20:30.000Z");
    assert.equal(next("1d"), "2026-12-07T07:20:30.000Z");
  });

  test("a cron line in UTC: the next minute it names", () => {
    assert.equal(next("0 3 * * *"), "2026-12-07T03:00:00.000Z");
    assert.equal(next("*/15 * * * *"), "2026-12-06T07:30:00.000Z");
    assert.equal(next("@hourly"), "2026-12-06T08:00:00.000Z");
    assert.equal(next("@daily"), "2026-12-07T00:00:00.000Z");
    // 2026-12-06 is a Sunday: the next Monday at 02:30.
    assert.equal(next("30 2 * * 1"), "2026-12-07T02:30:00.000Z");
    assert.equal(next("0 4 1,15 * *"), "2026-12-15T04:00:00.000Z");
    // Day of month and day of week both restricted: either matches (cron's rule).
    assert.equal(next("0 0 25 * 3"), "2026-12-09T00:00:00.000Z");
    assert.equal(next("0 0 * * 7"), "2026-12-13T00:00:00.000Z", "7 is Sunday too");
  });

  test("anything else is refused with the forms it takes", () => {
    for (const bad of [
      "",
      "0m",
      "5s",
      "soon",
      "* * * *",
      "60 * * * *",
      "* 24 * * *",
      "0 0 0 * *",
      "1-x * * * *",
    ]) {
      const s = parseSchedule(bad);
      assert.ok("problem" in s, bad);
      assert.match(s.problem, /interval \(30m, 6h, 1d\) or a cron line/);
    }
  });

  test("the settings: off by default, into DATA_DIR/backups, 7 kept; a bad one names itself", () => {
    const c = loadConfig({ DATA_DIR: "/srv/backline" });
    assert.deepEqual(c.backup, { schedule: undefined, dir: "/srv/backline/backups", keep: 7 });
    const s = loadConfig({ BACKUP_SCHEDULE: "0 3 * * *", BACKUP_DIR: "bk", BACKUP_KEEP: "30" }).backup;
    assert.equal(s.schedule?.text, "0 3 * * *");
    assert.deepEqual([s.dir, s.keep], [path.resolve("bk"), 30]);
    assert.throws(
      () => loadConfig({ BACKUP_SCHEDULE: "soon" }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.setting, "BACKUP_SCHEDULE");
        assert.match(
          e.message,
          /^Invalid configuration: BACKUP_SCHEDULE must be an interval .* \(got "soon"\)$/,
        );
        return true;
      },
    );
    assert.throws(() => loadConfig({ BACKUP_KEEP: "0" }), /BACKUP_KEEP must be 1 to 10000/);
  });
});
