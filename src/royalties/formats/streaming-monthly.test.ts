import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { decimalComma } from "./streaming-monthly.ts";
import { LineError } from "./types.ts";

describe("decimalComma", () => {
  const ok: [string, string][] = [
    ["0,004", "0.004"],
    ["-0,5", "-0.5"],
    ["1.234,5678", "1234.5678"],
    ["12.345", "12345"],
    ["123.456.789,01", "123456789.01"],
    ["-1.234,5", "-1234.5"],
    ["1234,5", "1234.5"],
    ["0", "0"],
    ["007", "007"],
    ["1 234,5", "1234.5"],
    ["", ""],
  ];
  for (const [input, want] of ok) {
    test(`${JSON.stringify(input)} -> ${JSON.stringify(want)}`, () => {
      assert.equal(decimalComma(input, "Gross Revenue"), want);
    });
  }

  // A decimal point where the comma belongs must not become thousands: "0.004" is not 4.
  const bad = [
    "0.004",
    "-0.500",
    "00.123",
    "0.123.456",
    "01.234",
    "1234.567",
    "1.23",
    "1.2345",
    "1,2,3",
    ",5",
    "1,",
    "+1",
    "1e3",
    "abc",
  ];
  for (const input of bad) {
    test(`${JSON.stringify(input)} is refused`, () => {
      assert.throws(
        () => decimalComma(input, "Gross Revenue"),
        (e: unknown) =>
          e instanceof LineError &&
          e.message ===
            `Gross Revenue ${JSON.stringify(input)} is not a number with a decimal comma (e.g. 1.234,56)`,
      );
    });
  }
});
