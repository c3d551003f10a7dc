import assert from "node:assert/strict";
import { test } from "node:test";
import { groupDigits, money, roundAmount } from "../ui-shared/money.ts";

test("amounts round to cents half away from zero, by strings, whatever their length", () => {
  for (const [amount, rounded] of [
    ["2.005", "2.01"],
    ["2.004999", "2.00"],
    ["0.995", "1.00"],
    ["-2.005", "-2.01"],
    ["-0.004", "0.00"],
    ["12", "12.00"],
    ["123456789012345678.125", "123456789012345678.13"],
    ["4.200000", "4.20"],
  ])
    assert.equal(roundAmount(amount as string), rounded, amount);
  assert.equal(roundAmount("not a number"), "not a number");
});

test("thousands are separated; an amount reads with its currency", () => {
  assert.equal(groupDigits(1234567), "1,234,567");
  assert.equal(groupDigits("1234.50"), "1,234.50");
  assert.equal(money("12345.678", "EUR"), "12,345.68 EUR");
});
