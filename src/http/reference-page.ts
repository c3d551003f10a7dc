import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import zlib from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";

/**
 * The interactive API references (docs/public-api.md, docs/operator.md, docs/rest.md): Scalar's
 * API reference (`@scalar/api-reference`, its standalone browser bundle) over the OpenAPI document
 * each interface serves — GET /api/public/v1/docs, /admin/v1/docs and /rest/v1/docs.
 *
 * Everything the page loads comes from this server: the bundle is read from node_modules once,
 * compressed once (brotli and gzip) and answered from memory under a versioned URL, immutable for a
 * year; the page's own start-up script is a string here, under a URL naming its hash. Scalar is
 * configured to fetch nothing else: no web fonts (`withDefaultFonts: false`: the system's fonts),
 * no request proxy (the try-it console calls this server directly), no telemetry, no agent, no
 * MCP, no developer tools, no plugins from URLs. The browser test (test/portal/api-reference.test.ts)
 * fails on any request that leaves the server.
 *
 * Content-Security-Policy of the pages (`referencePageHeaders`): scripts from this origin only — no
 * inline script, no eval (the bundle is precompiled Vue: it needs neither, and the zod inside it is
 * told not to try `new Function`); `style-src 'self' 'unsafe-inline'`, because Scalar puts its
 * whole stylesheet in `<style>` elements it creates at run time and sets `style` attributes (Vue's
 * style bindings), which a nonce or hash cannot cover;
 * images from this origin, `data:` and `blob:` (its icons and a downloaded document); fonts none
 * but this origin and `data:`; `connect-src` this origin and PUBLIC_URL's (the document's `servers`,
 * where the try-it console sends its requests); no frames, objects, forms elsewhere, or framing.
 *
 * /rest/v1's document depends on the caller's key (docs/rest.md, "The OpenAPI description"), so its
 * page asks for one (the tenant's anon key shows what a signed-in user may do; the service-role key
 * the tenant's own view) and reads `GET /rest/v1/` with it; the key stays in the page.
 */

/** Where the shared assets are served: the bundle and the start-up script. */
export const REFERENCE_ASSETS = "/api-reference";

const SCALAR_ENTRY = import.meta.resolve("@scalar/api-reference");
const BUNDLE_FILE = fileURLToPath(new URL("./browser/standalone.js", SCALAR_ENTRY));
const PACKAGE_FILE = fileURLToPath(new URL("../package.json", SCALAR_ENTRY));

let scalarVersion: string | undefined;
/** The installed bundle's version: its URL names it, so a new version is a new URL. */
function bundleVersion(): string {
  scalarVersion ??= String((JSON.parse(readFileSync(PACKAGE_FILE, "utf8")) as { version: unknown }).version);
  return scalarVersion;
}

/**
 * Scalar's themes draw muted text (light: #8e8e8e, 3.3:1 on white; dark: #797979, 4.0:1 on #1a1a1a)
 * and some HTTP methods' colours (light: #069061, #ff5800, …; dark: #dc1b19) below WCAG's 4.5:1:
 * these shades keep the hues at 4.5:1 or more on the theme's backgrounds (light: white, #f6f6f6;
 * dark: #0f0f0f, #1a1a1a). Doubled class: more specific than the theme's own rules.
 */
const CUSTOM_CSS = `.light-mode.light-mode {
  --scalar-color-2: #666666;
  --scalar-color-3: #666666;
  --scalar-color-accent: #0061c2;
  --scalar-color-green: #0f7b3a;
  --scalar-color-red: #b91c1c;
  --scalar-color-yellow: #8a6d00;
  --scalar-color-blue: #0061c2;
  --scalar-color-orange: #c2410c;
  --scalar-color-purple: #7e22ce;
}
.dark-mode.dark-mode {
  --scalar-color-3: #999999;
  --scalar-color-red: #f87171;
}`;

/**
 * The page's start-up script, loaded before the bundle: it tells the bundle's zod not to compile
 * validators with \`new Function\` (its probe for that is an eval the CSP refuses and reports), then,
 * once the bundle has run, starts the reference with the settings of \`#reference\`'s data attributes.
 */
const START_SCRIPT = `"use strict";
globalThis.__zod_globalConfig = Object.assign(globalThis.__zod_globalConfig || {}, { jitless: true });
document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("reference");
  const settings = root.dataset;
  // Nothing but this server: no web fonts, no request proxy, no telemetry, agent or MCP.
  const base = {
    withDefaultFonts: false,
    telemetry: false,
    showDeveloperTools: "never",
    agent: { disabled: true },
    mcp: { disabled: true },
    documentDownloadType: "json",
    hideClientButton: false,
    metaData: { title: document.title },
    customCss: ${JSON.stringify(CUSTOM_CSS)},
  };
  const show = (config) => {
    root.hidden = false;
    window.Scalar.createApiReference(root, { ...base, ...config });
  };
  if (settings.document) {
    show({ url: settings.document });
    return;
  }
  // /rest/v1: its document is the key's view, read with the key.
  const form = document.getElementById("key-form");
  const status = document.getElementById("key-status");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = form.elements.apikey.value.trim();
    if (!key) return;
    status.textContent = "Reading the description…";
    let answer;
    try {
      answer = await fetch(settings.restDocument, {
        headers: { apikey: key, authorization: "Bearer " + key, accept: "application/openapi+json" },
      });
    } catch {
      status.textContent = "The server did not answer. Try again.";
      return;
    }
    if (!answer.ok) {
      const body = await answer.json().catch(() => ({}));
      status.textContent = "Refused (" + answer.status + "): " + (body.message || "not a key of this server") + ".";
      return;
    }
    const content = await answer.json();
    document.getElementById("key-page").hidden = true;
    show({
      content,
      authentication: {
        securitySchemes: { apikey: { value: key }, bearer: { token: key } },
      },
    });
  });
});
`;
const START_HASH = createHash("sha256").update(START_SCRIPT).digest("base64url").slice(0, 16);

const bundlePath = (): string => `${REFERENCE_ASSETS}/scalar-${bundleVersion()}.js`;
const startPath = `${REFERENCE_ASSETS}/reference-${START_HASH}.js`;

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export interface ReferencePage {
  /** The page's title: "<API> reference". */
  title: string;
  /** The OpenAPI document's URL, relative to the page (`openapi.json`). */
  document?: string;
  /** /rest/v1: the document's URL, read with the key the reader gives. */
  restDocument?: string;
}

/** The page: a mount point, the bundle and the start-up script; no inline script or style. */
export function referencePageHtml(page: ReferencePage): string {
  const title = esc(page.title);
  const keyForm = page.restDocument
    ? `<main id="key-page">
<h1>${title}</h1>
<p>The description of /rest/v1 shows what a key may do: give the tenant's anon key for what a signed-in user may do, or its service-role key for the tenant's own view. The key stays in this page.</p>
<form id="key-form">
<label for="apikey">API key</label>
<input id="apikey" name="apikey" type="password" autocomplete="off" spellcheck="false" required>
<button type="submit">Show the reference</button>
<p id="key-status" role="status"></p>
</form>
</main>
`
    : "";
  const data = page.document
    ? ` data-document="${esc(page.document)}"`
    : ` data-rest-document="${esc(page.restDocument ?? "")}"`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
</head>
<body>
<noscript><p>This reference needs JavaScript.${page.document ? ` The OpenAPI document itself: <a href="${esc(page.document)}">${esc(page.document)}</a>.` : ""}</p></noscript>
${keyForm}<div id="reference"${data}${page.restDocument ? " hidden" : ""}></div>
<script src="${startPath}"></script>
<script src="${bundlePath()}"></script>
</body>
</html>
`;
}

/** The pages' security headers: see the CSP's reasons above. */
export function referencePageHeaders(publicUrl: string): Record<string, string> {
  let origin = "";
  try {
    origin = new URL(publicUrl).origin;
  } catch {
    origin = "";
  }
  return {
    "content-security-policy": [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data: blob:",
      "font-src 'self' data:",
      `connect-src 'self'${origin ? ` ${origin}` : ""}`,
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join("; "),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-cache",
  };
}

const pages = new Map<string, string>();

/** Answers a reference page (made once per page and kept). */
export function sendReferencePage(reply: FastifyReply, publicUrl: string, page: ReferencePage): FastifyReply {
  const key = JSON.stringify(page);
  let html = pages.get(key);
  if (html === undefined) {
    html = referencePageHtml(page);
    pages.set(key, html);
  }
  return reply.headers(referencePageHeaders(publicUrl)).type("text/html; charset=utf-8").send(html);
}

interface Compressed {
  identity: Buffer;
  br: Buffer;
  gzip: Buffer;
}

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/** Read once, compressed once, in the thread pool (brotli at quality 5: 1.2 MB of 4.9, ~0.2 s). */
async function compress(text: string): Promise<Compressed> {
  const identity = Buffer.from(text);
  const [br, gz] = await Promise.all([
    brotli(identity, {
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: 5,
        [zlib.constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
      },
    }),
    gzip(identity, { level: 9 }),
  ]);
  return { identity, br, gzip: gz };
}

let bundle: Promise<Compressed> | undefined;
let start: Promise<Compressed> | undefined;

function loadBundle(): Promise<Compressed> {
  bundle ??= readFile(BUNDLE_FILE, "utf8")
    // The source map (20 MB) is not served: no reference to it, so no 404 in a browser's tools.
    .then((text) => compress(text.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n")))
    .catch((error: unknown) => {
      bundle = undefined;
      throw error;
    });
  return bundle;
}

function sendAsset(request: FastifyRequest, reply: FastifyReply, asset: Compressed): FastifyReply {
  const accepts = String(request.headers["accept-encoding"] ?? "");
  const [encoding, body] = /\bbr\b/.test(accepts)
    ? (["br", asset.br] as const)
    : /\bgzip\b/.test(accepts)
      ? (["gzip", asset.gzip] as const)
      : ([undefined, asset.identity] as const);
  reply
    .header("content-type", "text/javascript; charset=utf-8")
    // Versioned URLs: a new bundle or script is a new URL.
    .header("cache-control", "public, max-age=31536000, immutable")
    .header("vary", "accept-encoding")
    .header("x-content-type-options", "nosniff")
    .header("cross-origin-resource-policy", "same-origin");
  if (encoding) reply.header("content-encoding", encoding);
  return reply.send(body);
}

/**
 * The shared assets under /api-reference, and /rest/v1's page (outside /rest/v1's key gateway,
 * as /admin/v1's document is outside its authentication: the page holds no data).
 */
export async function referenceRoutes(app: FastifyInstance, options: { publicUrl: string }): Promise<void> {
  app.get(`${REFERENCE_ASSETS}/:file`, async (request, reply) => {
    const { file } = request.params as { file: string };
    if (file === bundlePath().slice(REFERENCE_ASSETS.length + 1)) {
      return sendAsset(request, reply, await loadBundle());
    }
    if (file === startPath.slice(REFERENCE_ASSETS.length + 1)) {
      start ??= compress(START_SCRIPT);
      return sendAsset(request, reply, await start);
    }
    return reply
      .status(404)
      .header("cache-control", "no-store")
      .type("text/plain; charset=utf-8")
      .send("Not found");
  });
  app.get("/rest/v1/docs", async (_request, reply) =>
    sendReferencePage(reply, options.publicUrl, {
      title: "Backline REST API (/rest/v1) reference",
      restDocument: "./",
    }),
  );
}
