import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  add,
  compare,
  floorTo,
  format,
  isZero,
  largestRemainder,
  minorUnits,
  mul,
  neg,
  parseDecimal,
  roundHalfUp,
  shareOf,
  sign,
  sub,
  sum,
  toDecimal,
} from "./decimal.ts";

// The reference: a decimal string read (independently of decimal.ts) as BigInt units at a fixed
// scale, large enough for every value the generators make.
const S = 30;
function ref(s: string, scale = S): bigint {
  const negative = s.startsWith("-");
  const [whole = "", fraction = ""] = (negative ? s.slice(1) : s).split(".");
  assert.ok(fraction.length <= scale, `${s} has more than ${scale} decimals`);
  const units = BigInt(whole + fraction.padEnd(scale, "0"));
  return negative ? -units : units;
}
const CANONICAL = /^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/;
function assertCanonical(s: string): void {
  assert.match(s, CANONICAL);
  assert.notEqual(s, "-0");
}
const abs = (x: bigint): bigint => (x < 0n ? -x : x);

/** Decimal strings with up to 24 decimals, sometimes written with trailing zeros or as "-0". */
const decimal = fc
  .tuple(
    fc.oneof(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.bigInt({ min: -2000n, max: 2000n })),
    fc.integer({ min: 0, max: 24 }),
    fc.integer({ min: 0, max: 3 }),
    fc.boolean(),
  )
  .map(([units, scale, zeros, minusZero]) => {
    const digits = abs(units)
      .toString()
      .padStart(scale + 1, "0");
    const whole = digits.slice(0, digits.length - scale);
    const fraction = digits.slice(digits.length - scale) + "0".repeat(zeros);
    const minus = units < 0n || (units === 0n && minusZero) ? "-" : "";
    return `${minus}${whole}${fraction === "" ? "" : `.${fraction}`}`;
  });
const places = fc.integer({ min: 0, max: 6 });

test("parseDecimal keeps the scale as written", () => {
  for (const [input, units, scale] of [
    ["12.30", 1230n, 2],
    ["12", 12n, 0],
    ["-0.000000000123456", -123456n, 15],
    ["-0", 0n, 0],
    ["0.000", 0n, 3],
    ["007.50", 750n, 2],
    [
      "123456789012345678901234567890.123456789012345678901234",
      123456789012345678901234567890123456789012345678901234n,
      24,
    ],
  ] as const) {
    assert.deepEqual(parseDecimal(input), { units, scale }, input);
  }
});

test("bad input is rejected with a clear error", () => {
  for (const bad of [
    "",
    "1.2.3",
    "abc",
    " 1",
    "1 ",
    "+1",
    ".5",
    "5.",
    "-",
    "--1",
    "1,5",
    "0x10",
    "1_000",
    "١",
    "- 1",
  ]) {
    assert.throws(() => parseDecimal(bad), /not a decimal number/, JSON.stringify(bad));
    assert.throws(() => add(bad, "1"), /not a decimal number/, JSON.stringify(bad));
  }
  for (const bad of ["1e5", "1E-3", "-2.5e10", "1.e3", ".5e1"]) {
    assert.throws(() => parseDecimal(bad), /exponent form is not accepted/, bad);
  }
  for (const bad of ["NaN", "Infinity", "-Infinity"]) {
    assert.throws(() => parseDecimal(bad), /not a finite decimal/, bad);
  }
  // A float smuggled in from untyped code is refused, not converted.
  assert.throws(() => parseDecimal(0.1 as unknown as string), /expected a decimal string, got number/);
  assert.throws(() => sum([1 as unknown as string]), /expected a decimal string/);
});

test("places must be a small non-negative integer", () => {
  for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 20000]) {
    assert.throws(() => roundHalfUp("1", bad), RangeError, String(bad));
    assert.throws(() => floorTo("1", bad), RangeError, String(bad));
    assert.throws(() => format("1", bad), RangeError, String(bad));
    assert.throws(() => largestRemainder(["1"], bad), RangeError, String(bad));
  }
});

test("toDecimal writes canonical strings", () => {
  for (const [units, scale, expected] of [
    [0n, 0, "0"],
    [0n, 5, "0"],
    [1230n, 2, "12.3"],
    [-5n, 3, "-0.005"],
    [100n, 2, "1"],
    [-123456n, 15, "-0.000000000123456"],
    [1n, 24, "0.000000000000000000000001"],
  ] as const) {
    assert.equal(toDecimal(units, scale), expected);
  }
});

test("add, sub, neg: signs, zero, carries and canonical results", () => {
  for (const [a, b, expected] of [
    ["0.1", "0.2", "0.3"],
    ["0.995", "0.005", "1"],
    ["-0.5", "0.5", "0"],
    ["-0.000", "0", "0"],
    ["1.50", "1.50", "3"],
    ["-1", "0.25", "-0.75"],
    ["999.999", "0.001", "1000"],
    ["0.000000000000000000000001", "0.999999999999999999999999", "1"],
    ["-0.000000000123456", "0.000000000123456", "0"],
    ["12", "-12.01", "-0.01"],
  ] as const) {
    assert.equal(add(a, b), expected, `${a} + ${b}`);
    assert.equal(add(b, a), expected, `${b} + ${a}`);
    assert.equal(sub(expected, b), add(a, "0"), `${expected} - ${b}`);
  }
  assert.equal(sub("1", "1.000"), "0");
  assert.equal(sub("0", "0.01"), "-0.01");
  assert.equal(sub("-0.01", "-0.01"), "0");
  assert.equal(neg("0"), "0");
  assert.equal(neg("-0.00"), "0");
  assert.equal(neg("1.20"), "-1.2");
  assert.equal(neg("-0.5"), "0.5");
});

test("sum", () => {
  assert.equal(sum([]), "0");
  assert.equal(sum(["-0"]), "0");
  assert.equal(sum(["0.1", "0.1", "0.1"]), "0.3");
  assert.equal(sum(["1.005", "-2", "0.995", "0.000000000000000000000001"]), "0.000000000000000000000001");
  assert.equal(sum(["10.00", "20.50", "-30.50"]), "0");
});

test("mul is exact", () => {
  for (const [a, b, expected] of [
    ["0.1", "0.1", "0.01"],
    ["-1.5", "2", "-3"],
    ["-1.5", "-1.5", "2.25"],
    ["0", "-7.25", "0"],
    ["123.456", "1000", "123456"],
    ["0.000000000001", "0.000000000001", "0.000000000000000000000001"],
    ["1.000000000001", "1.000000000001", "1.000000000002000000000001"],
    ["0.8333333333", "12", "9.9999999996"],
  ] as const) {
    assert.equal(mul(a, b), expected, `${a} × ${b}`);
    assert.equal(mul(b, a), expected, `${b} × ${a}`);
  }
});

test("compare, sign, isZero", () => {
  for (const [a, b, expected] of [
    ["1.5", "1.50", 0],
    ["-0", "0.000", 0],
    ["-0.01", "0", -1],
    ["0.000000000000000000000001", "0", 1],
    ["-2", "-10", 1],
    ["9.99", "10", -1],
  ] as const) {
    assert.equal(compare(a, b), expected, `${a} vs ${b}`);
    assert.equal(compare(b, a), -expected || 0, `${b} vs ${a}`);
  }
  assert.deepEqual(["-3.2", "-0.000", "0", "0.000000000000000000000001"].map(sign), [-1, 0, 0, 1]);
  assert.deepEqual(["0", "-0", "0.000", "0.01", "-1"].map(isZero), [true, true, true, false, false]);
});

test("minorUnits follows ISO 4217", () => {
  for (const code of ["JPY", "KRW", "ISK", "CLP", "VND", "UGX", "XAF", "XOF", "PYG"]) {
    assert.equal(minorUnits(code), 0, code);
  }
  for (const code of ["BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD"]) {
    assert.equal(minorUnits(code), 3, code);
  }
  for (const code of ["USD", "EUR", "GBP", "CHF", "SEK", "BRL", "INR"]) {
    assert.equal(minorUnits(code), 2, code);
  }
  for (const bad of ["usd", "US", "USDT", "", " USD"]) {
    assert.throws(() => minorUnits(bad), /not an ISO 4217 currency code/, bad);
  }
});

test("roundHalfUp rounds half away from zero", () => {
  for (const [value, p, expected] of [
    ["0.995", 2, "1"],
    ["-0.995", 2, "-1"],
    ["0.005", 2, "0.01"],
    ["-0.005", 2, "-0.01"],
    ["0.0049999", 2, "0"],
    ["-0.0049", 2, "0"],
    ["12.345", 2, "12.35"],
    ["12.344999", 2, "12.34"],
    ["1.5", 0, "2"],
    ["-1.5", 0, "-2"],
    ["2.5", 0, "3"],
    ["-2.4", 0, "-2"],
    ["999.9995", 3, "1000"],
    ["12.30", 2, "12.3"],
    ["7", 2, "7"],
    ["-0", 2, "0"],
    ["-0.000000000123456", 12, "-0.000000000123"],
    ["-0.000000000123456", 2, "0"],
    ["0.000000000000000000000005", 23, "0.00000000000000000000001"],
    ["0.999999999999999999999999", 23, "1"],
  ] as const) {
    assert.equal(roundHalfUp(value, p), expected, `${value} at ${p}`);
  }
});

test("floorTo rounds toward negative infinity", () => {
  for (const [value, p, expected] of [
    ["1.999", 2, "1.99"],
    ["-1.991", 2, "-2"],
    ["-0.001", 2, "-0.01"],
    ["0.009", 2, "0"],
    ["-0.000", 2, "0"],
    ["5", 0, "5"],
    ["-5.5", 0, "-6"],
    ["5.5", 0, "5"],
    ["-0.000000000123456", 2, "-0.01"],
    ["0.999999999999999999999999", 23, "0.99999999999999999999999"],
    ["-1.10", 1, "-1.1"],
  ] as const) {
    assert.equal(floorTo(value, p), expected, `${value} at ${p}`);
  }
});

test("format writes fixed places, rounding half away from zero", () => {
  for (const [value, p, expected] of [
    ["12.3", 2, "12.30"],
    ["-7", 2, "-7.00"],
    ["0", 2, "0.00"],
    ["-0", 2, "0.00"],
    ["-0.5", 2, "-0.50"],
    ["5", 0, "5"],
    ["-0.000", 0, "0"],
    ["12.300", 2, "12.30"],
    ["0.001", 3, "0.001"],
    ["1234567890123456789012345", 2, "1234567890123456789012345.00"],
    ["12.345", 2, "12.35"],
    ["0.995", 2, "1.00"],
    ["-0.005", 2, "-0.01"],
    ["-0.004", 2, "0.00"],
    ["0.5", 0, "1"],
    ["-0.000000000123456", 3, "0.000"],
  ] as const) {
    assert.equal(format(value, p), expected, `${value} at ${p}`);
  }
});

test("largestRemainder: examples", () => {
  for (const [values, p, expected] of [
    [[], 2, []],
    [["0.333", "0.333", "0.334"], 2, ["0.33", "0.33", "0.34"]],
    [["0.3333", "0.3333", "0.3333"], 2, ["0.34", "0.33", "0.33"]],
    [["-0.3333", "-0.3333", "-0.3333"], 2, ["-0.33", "-0.33", "-0.34"]],
    [["0.995"], 2, ["1.00"]],
    [["0.005"], 2, ["0.01"]],
    [["-0.005"], 2, ["-0.01"]],
    [["0.005", "-0.005"], 2, ["0.01", "-0.01"]],
    [["100.5", "200.5"], 0, ["101", "200"]],
    [["0.9", "0.9"], 0, ["1", "1"]],
    [["0.5", "0"], 0, ["1", "0"]],
    [["10", "20.50"], 2, ["10.00", "20.50"]],
    [["0.004", "0.004"], 2, ["0.01", "0.00"]],
    [["0.001", "0.001", "0.001"], 2, ["0.00", "0.00", "0.00"]],
    [["1.2345", "-0.0045", "2"], 3, ["1.235", "-0.005", "2.000"]],
    [["0.000000000000000000000001", "0.004999999999999999999999"], 2, ["0.00", "0.01"]],
    [["-0.000000000123456", "0.000000000123456"], 2, ["0.00", "0.00"]],
  ] as const) {
    assert.deepEqual(largestRemainder(values, p), expected, `${values.join(", ")} at ${p}`);
    if (values.length > 0) assert.equal(sum(largestRemainder(values, p)), roundHalfUp(sum(values), p));
  }
});

test("largestRemainder: a JPY statement states whole yen", () => {
  const p = minorUnits("JPY");
  const lines = ["1234.5678", "0.4321", "-17.25", "999.9999"];
  const stated = largestRemainder(lines, p);
  assert.deepEqual(stated, ["1235", "0", "-17", "1000"]);
  assert.equal(sum(stated), roundHalfUp(sum(lines), p));
});

test("shareOf = amount × percent / 100, exactly", () => {
  for (const [amount, percent, expected] of [
    ["3.20", "12.5", "0.4"],
    ["100", "33.3333", "33.3333"],
    ["-10", "50", "-5"],
    ["0.01", "0.0001", "0.00000001"],
    ["1", "100", "1"],
    ["0", "37.5", "0"],
    ["-0.000000000123456", "12.3456", "-0.000000000015241383936"],
  ] as const) {
    assert.equal(shareOf(amount, percent), expected, `${percent}% of ${amount}`);
  }
});

test("property: results are canonical and match the BigInt reference", () => {
  fc.assert(
    fc.property(decimal, decimal, (a, b) => {
      for (const r of [add(a, b), sub(a, b), neg(a), mul(a, b), sum([a, b])]) assertCanonical(r);
      assert.equal(ref(add(a, b)), ref(a) + ref(b));
      assert.equal(ref(sub(a, b)), ref(a) - ref(b));
      assert.equal(ref(neg(a)), -ref(a));
      assert.equal(ref(mul(a, b), 2 * S), ref(a) * ref(b));
      const ra = ref(a);
      const rb = ref(b);
      assert.equal(compare(a, b), ra < rb ? -1 : ra > rb ? 1 : 0);
      assert.equal(sign(a), ra < 0n ? -1 : ra > 0n ? 1 : 0);
      assert.equal(isZero(a), ra === 0n);
      const { units, scale } = parseDecimal(a);
      assert.equal(toDecimal(units, scale), add(a, "0"));
      assert.equal(units * 10n ** BigInt(S - scale), ra);
    }),
  );
});

test("property: add and sub are inverse", () => {
  fc.assert(
    fc.property(decimal, decimal, (a, b) => {
      const canonicalA = add(a, "0");
      assert.equal(sub(add(a, b), b), canonicalA);
      assert.equal(add(sub(a, b), b), canonicalA);
      assert.equal(add(a, neg(a)), "0");
    }),
  );
});

test("property: sum is associative and independent of order", () => {
  fc.assert(
    fc.property(
      fc
        .array(decimal, { maxLength: 12 })
        .chain((values) =>
          fc.tuple(
            fc.constant(values),
            fc.shuffledSubarray(values, { minLength: values.length, maxLength: values.length }),
          ),
        ),
      decimal,
      decimal,
      decimal,
      ([values, shuffled], a, b, c) => {
        const total = sum(values);
        assertCanonical(total);
        assert.equal(sum(shuffled), total);
        assert.equal(
          values.reduce((s, v) => add(s, v), "0"),
          total,
        );
        assert.equal(
          ref(total),
          values.reduce((s, v) => s + ref(v), 0n),
        );
        assert.equal(add(add(a, b), c), add(a, add(b, c)));
        assert.equal(sum([a, b, c]), sum([c, a, b]));
      },
    ),
  );
});

test("property: roundHalfUp, floorTo and format against the reference", () => {
  fc.assert(
    fc.property(decimal, places, (value, p) => {
      const r = ref(value);
      const unit = 10n ** BigInt(S - p);
      // Half away from zero: |r| + half a unit, truncated to whole units, with r's sign.
      const rounded = ((abs(r) + unit / 2n) / unit) * unit;
      assert.equal(ref(roundHalfUp(value, p)), r < 0n ? -rounded : rounded);
      assertCanonical(roundHalfUp(value, p));

      const floor = ref(floorTo(value, p));
      assertCanonical(floorTo(value, p));
      assert.equal(floor % unit, 0n);
      assert.ok(floor <= r && r < floor + unit, `${floorTo(value, p)} ≤ ${value} < +1 minor unit`);

      const fixed = format(value, p);
      assert.equal(fixed, format(roundHalfUp(value, p), p));
      assert.equal(ref(fixed), ref(roundHalfUp(value, p)));
      assert.equal(fixed.split(".")[1]?.length ?? 0, p);
      assert.notEqual(fixed.replace(/[0.]/g, ""), "-");
    }),
  );
});

test("property: largestRemainder adds up, moves no value by a minor unit, favours the largest remainders", () => {
  fc.assert(
    fc.property(fc.array(decimal, { maxLength: 15 }), places, (values, p) => {
      const out = largestRemainder(values, p);
      assert.equal(out.length, values.length);
      if (values.length === 0) return;
      assert.equal(sum(out), roundHalfUp(sum(values), p));
      const unit = 10n ** BigInt(S - p);
      const extra: boolean[] = [];
      const remainders: bigint[] = [];
      out.forEach((o, i) => {
        const v = ref(values[i] as string);
        assert.equal(o.split(".")[1]?.length ?? 0, p, o);
        assert.ok(abs(ref(o) - v) < unit, `${o} is within a minor unit of ${values[i]}`);
        const floor = ref(floorTo(values[i] as string, p));
        assert.ok(ref(o) === floor || ref(o) === floor + unit, `${o} is the floor or one above`);
        extra.push(ref(o) !== floor);
        remainders.push(v - floor);
      });
      // Every value given a unit had a larger remainder than every value not given one (or an
      // equal one and an earlier index).
      for (let i = 0; i < out.length; i++) {
        for (let j = 0; j < out.length; j++) {
          if (!extra[i] || extra[j]) continue;
          const ri = remainders[i] as bigint;
          const rj = remainders[j] as bigint;
          assert.ok(ri > rj || (ri === rj && i < j), `${values[i]} got a unit before ${values[j]}`);
        }
      }
      assert.deepEqual(largestRemainder(out, p), out);
    }),
  );
});

test("property: largestRemainder leaves already-rounded values as they are", () => {
  fc.assert(
    fc.property(fc.array(decimal, { maxLength: 15 }), places, (values, p) => {
      const rounded = values.map((v) => roundHalfUp(v, p));
      assert.deepEqual(
        largestRemainder(rounded, p),
        rounded.map((v) => format(v, p)),
      );
    }),
  );
});

test("property: shareOf is exact", () => {
  const percent = fc
    .tuple(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 9999 }))
    .map(([w, f]) => (w === 100 ? "100" : `${w}.${String(f).padStart(4, "0")}`));
  fc.assert(
    fc.property(decimal, percent, (amount, pct) => {
      const share = shareOf(amount, pct);
      assertCanonical(share);
      assert.equal(ref(share, 2 * S + 2), ref(amount) * ref(pct));
      assert.equal(shareOf(amount, "100"), add(amount, "0"));
    }),
  );
});
