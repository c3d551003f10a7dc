import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { LineError, type RawLine } from "./formats/types.ts";
import { maxPeriodYear, monthProblem, normalise, parseAmount } from "./normalise.ts";

const codes = { stores: new Set(["spotify"]), territories: new Set(["US"]) };
const raw = (over: Partial<RawLine>): RawLine => ({
  reportingPeriod: "2026-03",
  salePeriod: "2026-02",
  store: "spotify",
  territory: "US",
  upc: "",
  isrc: "QZABC2600001",
  usageType: "stream",
  units: "1",
  gross: "0.1",
  fees: "0",
  net: "0.1",
  currency: "USD",
  ...over,
});

describe("normalise: periods", () => {
  const next = new Date().getUTCFullYear() + 1;
  const cases: [Partial<RawLine>, RegExp | undefined][] = [
    [{ salePeriod: "1950-01", reportingPeriod: "1950-01" }, undefined],
    [{ salePeriod: `${next}-12`, reportingPeriod: `${next}-12` }, undefined],
    [{ salePeriod: "0000-01" }, /^sale period "0000-01" is not a month from 1950 to \d{4}$/],
    [{ reportingPeriod: "0000-12" }, /^reporting period "0000-12" is not a month from 1950/],
    [{ salePeriod: "1949-12" }, /sale period "1949-12" is not a month from 1950/],
    [
      { salePeriod: `${next + 1}-01` },
      new RegExp(`sale period "${next + 1}-01" is not a month from 1950 to ${next}`),
    ],
    [{ salePeriod: "9999-12" }, /is not a month from 1950/],
    [{ salePeriod: "2026-13" }, /sale period "2026-13" is not a month \(YYYY-MM\)/],
    [{ reportingPeriod: "" }, /no reporting period/],
  ];
  for (const [over, want] of cases) {
    test(`${JSON.stringify(over)}: ${want ?? "accepted"}`, () => {
      if (!want) {
        const line = normalise(raw(over), 2, codes);
        assert.equal(line.periodStart, `${over.salePeriod}-01`);
        return;
      }
      assert.throws(
        () => normalise(raw(over), 2, codes),
        (e: unknown) => e instanceof LineError && want.test(e.message),
      );
    });
  }

  test("monthProblem and the year bound follow the clock", () => {
    assert.equal(monthProblem("2026-03"), undefined);
    assert.equal(maxPeriodYear(Date.UTC(2030, 11, 31, 23, 59)), 2031);
    assert.equal(maxPeriodYear(Date.UTC(2031, 0, 1)), 2032);
    maxPeriodYear();
  });
});

describe("normalise: amounts", () => {
  const cases: [string, bigint | "too large" | "not an amount"][] = [
    ["0.1", 100_000_000_000n],
    ["-0.000000000001", -1n],
    ["999999999999.999999999999", 999_999_999_999_999_999_999_999n],
    ["-999999999999", -999_999_999_999_000_000_000_000n],
    ["000000000000001", 1_000_000_000_000n],
    ["1000000000000", "too large"],
    ["-1000000000000.5", "too large"],
    ["99999999999999999999", "too large"],
    ["1.0000000000001", "not an amount"],
    ["1,5", "not an amount"],
    ["1e3", "not an amount"],
    ["", "not an amount"],
  ];
  for (const [text, want] of cases) {
    test(`${JSON.stringify(text)}: ${typeof want === "bigint" ? want : want}`, () => {
      if (typeof want === "bigint") {
        assert.equal(parseAmount(text), want);
        assert.equal(normalise(raw({ gross: text }), 2, codes).grossScaled, want);
        return;
      }
      assert.equal(parseAmount(text), undefined);
      assert.throws(
        () => normalise(raw({ net: text }), 2, codes),
        (e: unknown) =>
          e instanceof LineError &&
          e.message.startsWith(
            `net ${JSON.stringify(text)} is ${want === "too large" ? "too large" : "not an amount"}`,
          ),
      );
    });
  }
});

describe("normalise: a UPC whose check digit is wrong", () => {
  test("on a line with an ISRC or the store's own id: left off, with a warning", () => {
    const warnings: string[] = [];
    const line = normalise(raw({ upc: "731453000000" }), 9, codes, (m) => warnings.push(m));
    assert.deepEqual([line.upc, line.isrc], [null, "QZABC2600001"]);
    const byId = normalise(raw({ upc: "731453000000", isrc: "", storeReleaseId: "R-1" }), 10, codes, (m) =>
      warnings.push(m),
    );
    assert.deepEqual([byId.upc, byId.isrc, byId.storeReleaseId], [null, null, "R-1"]);
    assert.deepEqual(warnings, [
      'UPC "731453000000" is not a valid UPC or EAN (check digit): left off the line, which is matched by its ISRC',
      `UPC "731453000000" is not a valid UPC or EAN (check digit): left off the line, which is matched by the store's own id`,
    ]);
  });

  test("as the line's only identifier, or without a warning channel: a malformed line", () => {
    assert.throws(
      () => normalise(raw({ upc: "731453000000", isrc: "" }), 9, codes, () => {}),
      (e: unknown) =>
        e instanceof LineError && /UPC "731453000000" is not a valid UPC or EAN$/.test(e.message),
    );
    assert.throws(
      () => normalise(raw({ upc: "731453000000" }), 9, codes),
      (e: unknown) => e instanceof LineError && /not a valid UPC or EAN/.test(e.message),
    );
  });
});
