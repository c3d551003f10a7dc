import assert from "node:assert/strict";
import { test } from "node:test";
import { gtinIsValid, normaliseIsrc } from "./identifiers.ts";

test("ISRCs are normalised: hyphens, spaces and case forgiven", () => {
  for (const [input, expected] of [
    ["US-S1Z-99-00001", "USS1Z9900001"],
    ["uss1z9900001", "USS1Z9900001"],
    [" GB-AAA-24-12345 ", "GBAAA2412345"],
    ["USS1Z990000", undefined],
    ["USS1Z99000011", undefined],
    ["1SS1Z9900001", undefined],
    ["USS1Z99A0001", undefined],
    ["", undefined],
  ] as const) {
    assert.equal(normaliseIsrc(input), expected, input);
  }
});

test("GTIN check digits (the same codes the database accepts)", () => {
  assert.equal(gtinIsValid("036000291452"), true); // UPC-A
  assert.equal(gtinIsValid("4006381333931"), true); // EAN-13
  assert.equal(gtinIsValid("00012345600012"), true); // GTIN-14
  assert.equal(gtinIsValid("036000291453"), false);
  assert.equal(gtinIsValid("03600029145"), false);
  assert.equal(gtinIsValid("03600029145a"), false);
});
