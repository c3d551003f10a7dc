import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Config } from "../config.ts";
import { type PageScripts, scriptTags } from "../tenancy/custom-scripts.ts";

/**
 * The Backline Console's files (docs/console.md), served under /console by the same process as
 * the APIs. `npm run build:console` (run by `npm install` / `npm ci` through `prepare`) writes
 * them to console/dist; this plugin only reads that folder:
 *
 * - `/console/assets/*` have content hashes in their names: cached for a year, `immutable`;
 * - every other path under /console that is not a file (a deep link such as
 *   `/console/reviews/<id>`) answers index.html, with `no-cache`, so the browser's router shows it;
 * - a `.br` / `.gz` copy written by the build is sent when the browser accepts it;
 * - a strict Content-Security-Policy: scripts, styles and fonts from this origin only, no inline
 *   script; media and images from this origin (signed storage URLs) or the object store's origin;
 * - without a build the answer is a short page (503 console_not_built) saying how to make one,
 *   never a 500.
 *
 * Routes registered by others under /console (`GET /console/tenant.json`) are exact paths, which
 * Fastify's router prefers over this plugin's wildcard. The portal (docs/portal.md) is served by
 * the same plugin under /portal from portal/dist (`app: "portal"`): `/portal/t/<slug>/…` paths
 * are the app's too (index.html).
 */
export interface ConsoleStaticOptions {
  /** The built app; default console/dist of this checkout. */
  dir?: string;
  /** Which app: the console (default) or the portal (docs/portal.md), for the "not built" page. */
  app?: "console" | "portal";
  /** Extra origins media and images may come from (an S3 endpoint that signs URLs). */
  mediaOrigins?: string[];
  /**
   * What the app's start page carries for it (the portal's tenant, src/console/tenant-config.ts):
   * written into index.html as a JSON data block (`<script type="application/json"
   * id="backline-start">`, which the CSP lets through because it is data, never run), so the app
   * starts without a round trip to ask. undefined: nothing written (the app asks, as it does
   * under Vite's dev server); a failure to find it is the same.
   */
  startData?: (request: FastifyRequest) => Promise<unknown>;
  /**
   * The portal's tenant's own scripts (src/tenancy/custom-scripts.ts), given what startData
   * answered and the request (whose host decides whether they may run there at all): their
   * elements go into the start page and their origins into that page's CSP (script-src,
   * connect-src). undefined: none, the page's own policy.
   */
  pageScripts?: (start: unknown, request: FastifyRequest) => Promise<PageScripts | undefined>;
}

/** Where signed media URLs point when they are not Backline's own: the object store's origin. */
export function storageMediaOrigins(config: Config): string[] {
  if (config.storage.driver !== "s3") return [];
  const endpoint = config.storage.s3.endpoint;
  if (!endpoint) return ["https://*.amazonaws.com"];
  try {
    const url = new URL(endpoint);
    // Virtual-hosted style puts the bucket in the host name.
    return [url.origin, ...(config.storage.s3.forcePathStyle ? [] : [`${url.protocol}//*.${url.host}`])];
  } catch {
    return [];
  }
}

export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL("../../console/dist/", import.meta.url));
export const DEFAULT_PORTAL_DIR = fileURLToPath(new URL("../../portal/dist/", import.meta.url));

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webmanifest": "application/manifest+json",
  ".txt": "text/plain; charset=utf-8",
  ".woff2": "font/woff2",
  ".map": "application/json; charset=utf-8",
};
const COMPRESSIBLE = new Set([
  ".html",
  ".js",
  ".mjs",
  ".css",
  ".json",
  ".svg",
  ".map",
  ".txt",
  ".webmanifest",
]);

export function consoleSecurityHeaders(
  mediaOrigins: string[] = [],
  extra: { scriptOrigins?: string[]; connectOrigins?: string[] } = {},
): Record<string, string> {
  const media = ["'self'", "blob:", "data:", ...mediaOrigins].join(" ");
  const connect = [...new Set(["'self'", ...mediaOrigins, ...(extra.connectOrigins ?? [])])];
  return {
    "content-security-policy": [
      "default-src 'self'",
      `script-src ${["'self'", ...(extra.scriptOrigins ?? [])].join(" ")}`,
      "style-src 'self'",
      "font-src 'self'",
      `img-src ${media}`,
      `media-src ${media}`,
      // An upload goes straight to the object store's signed URL (the portal's release editor).
      `connect-src ${connect.join(" ")}`,
      "object-src 'none'",
      "base-uri 'self'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join("; "),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
  };
}

function notBuilt(app: "console" | "portal"): string {
  const name = app === "console" ? "Backline Console" : "Backline portal";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${name} is not built</title></head>
<body><main><h1>The ${name} is not built</h1>
<p>This server has no ${app} files in <code>${app}/dist</code>. Build them with</p>
<pre><code>npm run build:console</code></pre>
<p>(<code>npm install</code> and <code>npm ci</code> run it too), then reload this page.</p></main></body></html>
`;
}

interface Found {
  file: string;
  size: number;
  encoding?: "br" | "gzip";
}

async function fileSize(file: string): Promise<number | undefined> {
  try {
    const s = await stat(file);
    return s.isFile() ? s.size : undefined;
  } catch {
    return undefined;
  }
}

export async function consoleStatic(app: FastifyInstance, options: ConsoleStaticOptions): Promise<void> {
  const which = options.app ?? "console";
  const root = path.resolve(options.dir ?? (which === "portal" ? DEFAULT_PORTAL_DIR : DEFAULT_CONSOLE_DIR));
  const NOT_BUILT = notBuilt(which);
  const headers = consoleSecurityHeaders(options.mediaOrigins);

  // The best encoding of a file the browser accepts: the build's .br, then .gz, then the file.
  async function pick(file: string, request: FastifyRequest): Promise<Found | undefined> {
    const size = await fileSize(file);
    if (size === undefined) return undefined;
    const accepts = String(request.headers["accept-encoding"] ?? "");
    if (COMPRESSIBLE.has(path.extname(file))) {
      for (const [encoding, ext] of [
        ["br", ".br"],
        ["gzip", ".gz"],
      ] as const) {
        if (!new RegExp(`\\b${encoding}\\b`).test(accepts)) continue;
        const packed = await fileSize(file + ext);
        if (packed !== undefined) return { file: file + ext, size: packed, encoding };
      }
    }
    return { file, size };
  }

  function send(reply: FastifyReply, request: FastifyRequest, found: Found, type: string, cache: string) {
    reply.headers(headers);
    reply.header("content-type", type);
    reply.header("cache-control", cache);
    reply.header("vary", "accept-encoding");
    reply.header("content-length", String(found.size));
    if (found.encoding) reply.header("content-encoding", found.encoding);
    if (request.method === "HEAD") return reply.send();
    return reply.send(createReadStream(found.file));
  }

  async function serve(request: FastifyRequest, reply: FastifyReply) {
    const wanted = (request.params as { "*"?: string })["*"] ?? "";
    let relative: string;
    try {
      relative = decodeURIComponent(wanted.split("?")[0] ?? "");
    } catch {
      relative = "";
    }
    const file = path.resolve(root, relative);
    // Only files inside the build folder, and never the precompressed copies by their own names.
    const inside = file.startsWith(root + path.sep) && !/\.(br|gz)$/.test(file);
    const asset = inside && relative !== "" ? await pick(file, request) : undefined;
    if (asset) {
      const ext = path.extname(file);
      const hashed = relative.startsWith("assets/");
      return send(
        reply,
        request,
        asset,
        TYPES[ext] ?? "application/octet-stream",
        hashed
          ? "public, max-age=31536000, immutable"
          : ext === ".html"
            ? "no-cache"
            : "public, max-age=3600",
      );
    }
    // A missing hashed asset is a 404 (an old page asking for a file of a previous build), not the app.
    if (relative.startsWith("assets/")) {
      reply.headers(headers);
      return reply
        .status(404)
        .header("cache-control", "no-store")
        .type("text/plain; charset=utf-8")
        .send("Not found");
    }
    const index = await pick(path.join(root, "index.html"), request);
    if (!index) {
      reply.headers(headers);
      return reply
        .status(503)
        .header("cache-control", "no-store")
        .header("x-backline-code", `${which}_not_built`)
        .type("text/html; charset=utf-8")
        .send(NOT_BUILT);
    }
    if (options.startData) return sendWithStartData(request, reply, options.startData);
    return send(reply, request, index, TYPES[".html"] as string, "no-cache");
  }

  // The start page with its data: index.html is read again when the build changes it (its mtime).
  let page: { mtimeMs: number; html: string } | undefined;
  async function sendWithStartData(
    request: FastifyRequest,
    reply: FastifyReply,
    startData: (request: FastifyRequest) => Promise<unknown>,
  ) {
    const file = path.join(root, "index.html");
    const { mtimeMs } = await stat(file);
    if (page?.mtimeMs !== mtimeMs) page = { mtimeMs, html: await readFile(file, "utf8") };
    let data: unknown;
    try {
      data = await startData(request);
    } catch (error) {
      // The app asks for it itself (and says so when it cannot): the page is never refused for it.
      request.log.warn({ err: error }, "start data");
      data = undefined;
    }
    // `<` written as \u003c: the JSON can never close its own script element.
    const block =
      data === undefined
        ? ""
        : `<script type="application/json" id="backline-start">${JSON.stringify(data).replace(/</g, "\\u003c")}</script>`;
    let html = block ? page.html.replace("</head>", `${block}</head>`) : page.html;
    let scripts: PageScripts | undefined;
    try {
      scripts = data && options.pageScripts ? await options.pageScripts(data, request) : undefined;
    } catch (error) {
      // Without them the page is the portal's own: nothing from another origin.
      request.log.warn({ err: error }, "custom scripts");
      scripts = undefined;
    }
    if (scripts) {
      html = html
        // Function replacers: a `$` in an address is text, never a replacement pattern.
        .replace("</head>", () => `${scriptTags(scripts.scripts, "head")}</head>`)
        .replace("</body>", () => `${scriptTags(scripts.scripts, "body_end")}</body>`);
    }
    reply.headers(scripts ? consoleSecurityHeaders(options.mediaOrigins, scripts) : headers);
    reply.header("content-type", TYPES[".html"] as string);
    reply.header("cache-control", "no-cache");
    if (request.method === "HEAD") return reply.header("content-length", Buffer.byteLength(html)).send();
    return reply.send(html);
  }

  // `/console` and `/console/` (the router ignores trailing slashes): the app's start page.
  app.get("/", serve);
  app.get("/*", serve);
}
