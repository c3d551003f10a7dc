import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import Fastify, { type FastifyInstance } from "fastify";
import {
  REFERENCE_ASSETS,
  referencePageHeaders,
  referencePageHtml,
  referenceRoutes,
} from "./reference-page.ts";

/**
 * The reference pages' HTML, headers and assets (src/http/reference-page.ts) over Fastify's inject;
 * test/portal/api-reference.test.ts opens the real pages in Chromium.
 */

let app: FastifyInstance;
before(async () => {
  app = Fastify();
  await app.register(referenceRoutes, { publicUrl: "https://api.example.com" });
  await app.ready();
});
after(() => app.close());

const scripts = (html: string): string[] => [...html.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1] ?? "");

test("a page: no inline script or style, only this server's assets, the document named relatively", () => {
  const html = referencePageHtml({ title: "Backline <public> API reference", document: "openapi.json" });
  assert.match(html, /<title>Backline &#60;public&#62; API reference<\/title>/);
  assert.match(html, /data-document="openapi.json"/);
  const srcs = scripts(html);
  assert.equal(srcs.length, 2);
  for (const attrs of srcs)
    assert.match(attrs, new RegExp(`^ src="${REFERENCE_ASSETS}/[a-zA-Z0-9._-]+\\.js"$`));
  assert.doesNotMatch(html, /<style|style=|https?:\/\//);
  // The start-up script first: it configures the bundle before the bundle runs.
  assert.match(srcs[0] ?? "", /reference-/);
  assert.match(srcs[1] ?? "", /scalar-\d+\.\d+\.\d+\.js/);
});

test("the pages' CSP: no inline script, no eval, connections to this server and PUBLIC_URL only", () => {
  const csp = referencePageHeaders("https://api.example.com/base")["content-security-policy"] ?? "";
  const directives = new Map(
    csp.split("; ").map((d) => [d.split(" ")[0] ?? "", d.split(" ").slice(1).join(" ")] as const),
  );
  assert.equal(directives.get("default-src"), "'none'");
  assert.equal(directives.get("script-src"), "'self'");
  assert.equal(directives.get("connect-src"), "'self' https://api.example.com");
  assert.equal(directives.get("frame-ancestors"), "'none'");
  assert.doesNotMatch(csp, /unsafe-eval|\*/);
  assert.equal(
    referencePageHeaders("not a url")["content-security-policy"]?.includes("connect-src 'self';"),
    true,
  );
});

test("GET /rest/v1/docs: the key form, without a key (the page holds no data)", async () => {
  const res = await app.inject({ url: "/rest/v1/docs" });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers["content-type"], "text/html; charset=utf-8");
  assert.match(String(res.headers["content-security-policy"]), /script-src 'self'/);
  assert.equal(res.headers["x-frame-options"], "DENY");
  assert.match(res.body, /<label for="apikey">API key<\/label>/);
  assert.match(res.body, /data-rest-document=".\/"/);
});

test("the bundle: compressed once, immutable under its versioned URL, without its source map", async () => {
  const page = await app.inject({ url: "/rest/v1/docs" });
  const [start, bundle] = [...page.body.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1] as string);
  assert.ok(start && bundle);
  const plain = await app.inject({ url: bundle });
  assert.equal(plain.statusCode, 200);
  assert.equal(plain.headers["content-type"], "text/javascript; charset=utf-8");
  assert.equal(plain.headers["cache-control"], "public, max-age=31536000, immutable");
  assert.equal(plain.headers["x-content-type-options"], "nosniff");
  assert.equal(plain.headers["content-encoding"], undefined);
  assert.match(plain.body, /createApiReference/);
  assert.doesNotMatch(plain.body, /sourceMappingURL=standalone/);
  const br = await app.inject({ url: bundle, headers: { "accept-encoding": "gzip, deflate, br" } });
  assert.equal(br.headers["content-encoding"], "br");
  assert.ok(br.rawPayload.length < plain.rawPayload.length / 3, `${br.rawPayload.length} bytes`);
  assert.equal(brotliDecompressSync(br.rawPayload).toString(), plain.body);
  const gz = await app.inject({ url: bundle, headers: { "accept-encoding": "gzip" } });
  assert.equal(gz.headers["content-encoding"], "gzip");
  assert.equal(gunzipSync(gz.rawPayload).toString(), plain.body);
  const head = await app.inject({ method: "HEAD", url: bundle });
  assert.equal(head.statusCode, 200);
  assert.equal(head.body, "");

  const script = await app.inject({ url: start });
  assert.equal(script.statusCode, 200);
  assert.equal(script.headers["content-type"], "text/javascript; charset=utf-8");
  assert.match(script.body, /withDefaultFonts: false/);
  assert.match(script.body, /jitless: true/);
  // Nothing else under the prefix: an old version, another file, a path outside it.
  for (const url of [
    `${REFERENCE_ASSETS}/scalar-0.0.1.js`,
    `${REFERENCE_ASSETS}/standalone.js.map`,
    `${REFERENCE_ASSETS}/..%2Fpackage.json`,
  ]) {
    const res = await app.inject({ url });
    assert.equal(res.statusCode, 404, url);
  }
});
