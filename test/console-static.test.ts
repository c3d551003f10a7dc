import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { brotliCompressSync, gzipSync } from "node:zlib";
import Fastify, { type FastifyInstance } from "fastify";
import pino from "pino";
import { loadConfig } from "../src/config.ts";
import { consoleStatic, DEFAULT_CONSOLE_DIR, DEFAULT_PORTAL_DIR } from "../src/console/static.ts";
import { buildApp } from "../src/http/app.ts";
import { describeEachEngine } from "./support/db.ts";
import { seedTenant } from "./support/seed.ts";

/**
 * The console's files over a real socket (src/console/static.ts): the start page and deep links
 * answer index.html without caching, hashed assets are cached immutably and sent precompressed,
 * a missing build is a 503 page saying how to build, never a 500.
 */

const INDEX = `<!doctype html><html lang="en"><head><title>Backline Console</title>
<script type="module" src="/console/assets/index-AbC123.js"></script></head><body><div id="root"></div></body></html>`;
const SCRIPT = `console.log(${JSON.stringify("x".repeat(2000))});\n`;

async function serve(dir: string): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify({ routerOptions: { ignoreTrailingSlash: true } });
  app.register(consoleStatic, { prefix: "/console", dir });
  // Another plugin's exact route under /console is not shadowed by the wildcard.
  app.get("/console/tenant.json", async () => ({ id: "t" }));
  const url = await app.listen({ port: 0, host: "127.0.0.1" });
  return { app, url };
}

describe("console static files", () => {
  let dir: string;
  let app: FastifyInstance;
  let url: string;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "backline-console-"));
    mkdirSync(path.join(dir, "assets"));
    writeFileSync(path.join(dir, "index.html"), INDEX);
    writeFileSync(path.join(dir, "assets", "index-AbC123.js"), SCRIPT);
    writeFileSync(path.join(dir, "assets", "index-AbC123.js.gz"), gzipSync(SCRIPT));
    writeFileSync(path.join(dir, "assets", "index-AbC123.js.br"), brotliCompressSync(SCRIPT));
    writeFileSync(path.join(dir, "favicon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
    ({ app, url } = await serve(dir));
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("/console and /console/ answer index.html, not cached, with a strict CSP", async () => {
    for (const p of ["/console", "/console/"]) {
      const res = await fetch(`${url}${p}`);
      assert.equal(res.status, 200, p);
      assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
      assert.equal(res.headers.get("cache-control"), "no-cache");
      const csp = res.headers.get("content-security-policy") ?? "";
      assert.match(csp, /default-src 'self'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
      assert.equal(await res.text(), INDEX);
    }
  });

  test("deep links answer index.html so the app's router shows the page", async () => {
    for (const p of [
      "/console/reviews/3f2b6a5e-8c1d-4e7a-9b0f-2a6c5d4e3f21",
      "/console/deliveries?status=error",
    ]) {
      const res = await fetch(`${url}${p}`);
      assert.equal(res.status, 200, p);
      assert.equal(res.headers.get("cache-control"), "no-cache");
      assert.equal(await res.text(), INDEX);
    }
  });

  test("hashed assets are cached immutably and sent precompressed", async () => {
    const br = await fetch(`${url}/console/assets/index-AbC123.js`, {
      headers: { "accept-encoding": "br, gzip" },
    });
    assert.equal(br.status, 200);
    assert.equal(br.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.match(br.headers.get("content-type") ?? "", /^text\/javascript/);
    assert.equal(br.headers.get("content-encoding"), "br");
    assert.equal(br.headers.get("vary"), "accept-encoding");
    assert.equal(await br.text(), SCRIPT); // fetch decodes it: the copy is the same script

    const gz = await fetch(`${url}/console/assets/index-AbC123.js`, {
      headers: { "accept-encoding": "gzip" },
    });
    assert.equal(gz.headers.get("content-encoding"), "gzip");
    assert.equal(await gz.text(), SCRIPT);

    const plain = await fetch(`${url}/console/assets/index-AbC123.js`, {
      headers: { "accept-encoding": "identity" },
    });
    assert.equal(plain.headers.get("content-encoding"), null);
    assert.equal(Number(plain.headers.get("content-length")), Buffer.byteLength(SCRIPT));
    assert.equal(await plain.text(), SCRIPT);
  });

  test("other files are cached briefly; a missing hashed asset is a 404, not the app", async () => {
    const icon = await fetch(`${url}/console/favicon.svg`);
    assert.equal(icon.status, 200);
    assert.equal(icon.headers.get("content-type"), "image/svg+xml");
    assert.equal(icon.headers.get("cache-control"), "public, max-age=3600");
    const missing = await fetch(`${url}/console/assets/index-Old999.js`);
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get("cache-control"), "no-store");
  });

  test("nothing outside the build folder, nor the compressed copies by name", async () => {
    writeFileSync(path.join(dir, "..", `secret-${path.basename(dir)}.txt`), "secret");
    try {
      for (const p of [
        `/console/..%2f${`secret-${path.basename(dir)}.txt`}`,
        `/console/%2e%2e/${`secret-${path.basename(dir)}.txt`}`,
        "/console/assets/index-AbC123.js.br",
      ]) {
        const res = await fetch(`${url}${p}`);
        const body = await res.text();
        assert.notEqual(body, "secret", p);
        assert.ok(res.status === 200 ? body === INDEX : res.status === 404, `${p}: ${res.status}`);
      }
    } finally {
      rmSync(path.join(dir, "..", `secret-${path.basename(dir)}.txt`), { force: true });
    }
  });

  test("an exact route of another plugin under /console wins over the wildcard", async () => {
    const res = await fetch(`${url}/console/tenant.json`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { id: "t" });
  });

  test("HEAD answers the headers without a body", async () => {
    const res = await fetch(`${url}/console/reviews`, { method: "HEAD" });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
    assert.equal(await res.text(), "");
  });
});

describe("console without a build", () => {
  test("a 503 page that says how to build it, for the start page and deep links", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "backline-console-empty-"));
    const { app, url } = await serve(path.join(dir, "dist"));
    try {
      for (const p of ["/console", "/console/reviews/abc"]) {
        const res = await fetch(`${url}${p}`);
        assert.equal(res.status, 503, p);
        assert.equal(res.headers.get("x-backline-code"), "console_not_built");
        assert.equal(res.headers.get("cache-control"), "no-store");
        assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
        assert.match(await res.text(), /npm run build:console/);
      }
    } finally {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("portal without a build", () => {
  test("a 503 page naming the portal and how to build it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "backline-portal-empty-"));
    const app = Fastify({ routerOptions: { ignoreTrailingSlash: true } });
    app.register(consoleStatic, { prefix: "/portal", dir: path.join(dir, "dist"), app: "portal" });
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    try {
      for (const p of ["/portal", "/portal/t/acme/releases"]) {
        const res = await fetch(`${url}${p}`);
        assert.equal(res.status, 503, p);
        assert.equal(res.headers.get("x-backline-code"), "portal_not_built");
        const body = await res.text();
        assert.match(body, /portal\/dist/);
        assert.match(body, /npm run build:console/);
      }
    } finally {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describeEachEngine("console in the app", (t) => {
  let app: FastifyInstance;
  let url: string;
  before(async () => {
    app = buildApp({ config: loadConfig({}), db: t().db, logger: pino({ level: "silent" }) });
    url = await app.listen({ port: 0, host: "127.0.0.1" });
  });
  after(() => app.close());

  test("buildApp serves the console's build at /console, deep links included", async () => {
    const built = existsSync(path.join(DEFAULT_CONSOLE_DIR, "index.html"));
    for (const p of ["/console", "/console/reviews/abc"]) {
      const res = await fetch(`${url}${p}`);
      assert.equal(res.status, built ? 200 : 503, p);
      assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
      assert.match(res.headers.get("content-security-policy") ?? "", /script-src 'self'/);
      const body = await res.text();
      if (built) {
        assert.match(body, /<div id="root">/);
        // The CSP allows no inline script: every script of the build is a file of its own.
        for (const tag of body.match(/<script\b[^>]*>/g) ?? [])
          assert.match(tag, /\bsrc="\/console\/assets\//, tag);
      }
    }
    // The APIs beside it keep their own answers.
    const api = await fetch(`${url}/admin/v1/reviews`);
    assert.equal(api.status, 401);
  });

  test("buildApp serves the portal's own build at /portal and /portal/t/<slug>/…; its two files stay theirs", async () => {
    const built = existsSync(path.join(DEFAULT_PORTAL_DIR, "index.html"));
    for (const p of ["/portal", "/portal/", "/portal/releases", "/portal/t/acme/releases/abc"]) {
      const res = await fetch(`${url}${p}`);
      assert.equal(res.status, built ? 200 : 503, p);
      assert.match(res.headers.get("content-security-policy") ?? "", /default-src 'self'/);
      const body = await res.text();
      if (built) {
        // Scripts are the build's files; the one inline element is the start data, which is
        // JSON (never run: the CSP allows no inline script).
        for (const tag of body.match(/<script\b[^>]*>/g) ?? []) {
          if (tag === '<script type="application/json" id="backline-start">') continue;
          assert.match(tag, /\bsrc="\/portal\/assets\//, tag);
        }
        assert.doesNotMatch(body, /\/console\/assets\//, "the portal's own bundle, not the console's");
      }
    }
    // Without a development tenant and with an unknown slug: no portal here (404, never a list).
    const none = await fetch(`${url}/portal/tenant.json?slug=no-such-tenant`);
    assert.equal(none.status, 404);
    assert.equal(((await none.json()) as { code?: string }).code, "no_portal");
    assert.equal((await fetch(`${url}/portal/tenant.json?slug=Not_A_Slug`)).status, 400);
    // The member's accounts need a member's token.
    assert.equal((await fetch(`${url}/portal/accounts.json`)).status, 401);
  });

  test("the portal's start page carries what GET /portal/tenant.json answers, as data that cannot close its element", async (c) => {
    if (!existsSync(path.join(DEFAULT_PORTAL_DIR, "index.html"))) return c.skip("the portal is not built");
    const tenant = await seedTenant(t().db);
    // A display name that tries to end the data block and run a script of its own.
    const hostile = '</script><script>alert("x")</script>';
    await t().db.asService((tx) =>
      tx.query(
        "insert into internal.organization_settings (tenant_id, display_name) values ($1, $2) on conflict (tenant_id) do update set display_name = excluded.display_name",
        [tenant.id, hostile],
      ),
    );
    const startData = (html: string): unknown => {
      const m = /<script type="application\/json" id="backline-start">(.*?)<\/script>/s.exec(html);
      assert.ok(m, "the page carries its start data");
      return JSON.parse(m[1] as string);
    };
    const page = await fetch(`${url}/portal/t/${tenant.slug}/releases/abc`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get("cache-control"), "no-cache");
    const html = await page.text();
    assert.equal(html.includes(hostile), false, "the name is never written as markup");
    assert.equal((html.match(/<script\b/g) ?? []).length, 2, "the start data and the bundle, nothing else");
    const asked = await (await fetch(`${url}/portal/tenant.json?slug=${tenant.slug}`)).json();
    assert.deepEqual(startData(html), asked);
    assert.equal((asked as { name: string }).name, hostile);
    // No tenant at this address: null, as the app's "There is no portal at this address".
    assert.equal(startData(await (await fetch(`${url}/portal/t/no-such-tenant/`)).text()), null);
    // A slug that cannot be one: nothing written; the app asks and is told 400.
    const odd = await (await fetch(`${url}/portal/t/Not_A_Slug/`)).text();
    assert.equal(odd.includes("backline-start"), false);
    // HEAD: the same headers, no body.
    const head = await fetch(`${url}/portal/t/${tenant.slug}/`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
  });
});
