import assert from "node:assert/strict";
import { test } from "node:test";
import { IMPORT_FORMATS, importPeriod } from "../../console/src/ui/royalty-imports.ts";
import { FORMAT_NAMES } from "../../src/royalties/formats/index.ts";

test("the console's import form offers every format the server reads, and only those", () => {
  assert.deepEqual(IMPORT_FORMATS.map((f) => f.name).sort(), [...FORMAT_NAMES].sort());
});

test("an import's period: the one stated, else the months its lines cover", () => {
  const cases: [Parameters<typeof importPeriod>[0], string][] = [
    [{ reporting_period: "2026-03", period_from: "2026-01-01", period_to: "2026-02-01" }, "2026-03"],
    [{ reporting_period: null, period_from: "2026-02-01", period_to: "2026-02-01" }, "2026-02"],
    [{ reporting_period: null, period_from: "2025-11-01", period_to: "2026-02-01" }, "2025-11 – 2026-02"],
    [{ reporting_period: null, period_from: null, period_to: null }, "—"],
    [{}, "—"],
  ];
  for (const [input, expected] of cases) assert.equal(importPeriod(input), expected, JSON.stringify(input));
});
