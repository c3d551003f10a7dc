import assert from "node:assert/strict";
import { test } from "node:test";
import { generateApiKey, hashApiKey, parseApiKey, visiblePrefix } from "./format.ts";

test("a generated key has the documented shape, a valid checksum and a visible prefix", () => {
  for (const mode of ["live", "test"] as const) {
    const { key, prefix, hash } = generateApiKey(mode);
    assert.match(key, new RegExp(`^bk_${mode}_[0-9A-Za-z]{49}$`));
    assert.deepEqual(parseApiKey(key), { mode });
    assert.equal(prefix, key.slice(0, `bk_${mode}_`.length + 6));
    assert.equal(visiblePrefix(key), prefix);
    assert.equal(hash, hashApiKey(key));
    assert.match(hash, /^[0-9a-f]{64}$/);
  }
});

test("keys are random", () => {
  const keys = new Set(Array.from({ length: 200 }, () => generateApiKey("live").key));
  assert.equal(keys.size, 200);
});

test("a changed character, a changed mode or a wrong length fails the checksum", () => {
  const { key } = generateApiKey("live");
  const last = key.at(-1) === "A" ? "B" : "A";
  const middle = key[20] === "x" ? "y" : "x";
  for (const bad of [
    key.slice(0, -1) + last,
    key.slice(0, 20) + middle + key.slice(21),
    key.replace("bk_live_", "bk_test_"),
    key.slice(0, -1),
    `${key}0`,
    "",
    "bk_live_",
    "sk_live_abc",
  ]) {
    assert.equal(parseApiKey(bad), undefined, bad);
  }
});
