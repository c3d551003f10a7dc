import assert from "node:assert/strict";
import { test } from "node:test";
import { brandMessage } from "./branding.ts";

const plain = {
  subject: "Sign in",
  text: "Sign in to your account.\n\nOpen this link: https://portal.example.com/auth?x=1&y=<2>\n\nOr enter this code: 123456",
};
const none = { display_name: null, logo_url: null, primary_color: null, support_email: null };

test("without branding: no sender name, the text as it was, an HTML part in the default colour", () => {
  const m = brandMessage(plain, none);
  assert.equal(m.fromName, undefined);
  assert.equal(m.text, plain.text);
  assert.match(m.html, /background:#1f4fd1;color:#ffffff/);
});

test("branding: name, support address in both parts, links escaped, a button per lone link", () => {
  const m = brandMessage(plain, {
    display_name: "  Nightjar  ",
    logo_url: "javascript:alert(1)",
    primary_color: "#ffee00",
    support_email: "help@nightjar.example",
  });
  assert.equal(m.fromName, "Nightjar");
  assert.ok(m.text.startsWith(plain.text));
  assert.ok(m.text.endsWith("\n\n-- \nNightjar\nQuestions? Write to help@nightjar.example"));
  assert.doesNotMatch(m.html, /javascript:/, "only an http(s) logo is shown");
  assert.match(m.html, /<span style="font-size:20px;font-weight:700;color:#ffee00">Nightjar<\/span>/);
  assert.match(m.html, /href="https:\/\/portal\.example\.com\/auth\?x=1&amp;y=&lt;2&gt;"/);
  assert.match(m.html, /background:#ffee00;color:#111111/, "dark text on a light colour");
  assert.match(m.html, />Open this link<\/a>/);
  assert.match(m.html, /Or enter this code: 123456/);
});

test("a malformed colour falls back to the default; a link inside a sentence stays a link", () => {
  const m = brandMessage(
    { subject: "s", text: "Read https://example.com/a now." },
    { ...none, primary_color: "red; background:url(x)" },
  );
  assert.match(
    m.html,
    /Read <a href="https:\/\/example\.com\/a" style="color:#1f4fd1">https:\/\/example\.com\/a<\/a> now\./,
  );
  assert.doesNotMatch(m.html, /url\(x\)/);
});
