/**
 * `npm run build:console` (also run by `npm install` / `npm ci` through `prepare`): builds the
 * Backline Console (console/) with Vite into console/dist, then writes a .br and a .gz copy of
 * every text file so the server sends them precompressed (src/console/static.ts).
 *
 * When Vite is not installed (`npm ci --omit=dev` on a server that ships a prebuilt
 * console/dist) it says so and exits 0, so the install itself does not fail.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const root = fileURLToPath(new URL("../console/", import.meta.url));
const dist = path.join(root, "dist");

let vite: typeof import("vite");
try {
  vite = await import("vite");
} catch {
  console.warn(
    "build:console: vite is not installed (dev dependencies omitted); console/dist is left as it is.",
  );
  process.exit(0);
}

await vite.build({ root, configFile: path.join(root, "vite.config.ts"), logLevel: "warn" });

const TEXT = /\.(html|js|mjs|css|json|svg|map|txt|webmanifest)$/;
let files = 0;
let raw = 0;
let gz = 0;
function walk(dir: string) {
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) {
      walk(file);
      continue;
    }
    if (!TEXT.test(name)) continue;
    const body = readFileSync(file);
    const gzipped = gzipSync(body, { level: 9 });
    writeFileSync(`${file}.gz`, gzipped);
    writeFileSync(
      `${file}.br`,
      brotliCompressSync(body, {
        params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
      }),
    );
    files += 1;
    raw += body.length;
    gz += gzipped.length;
  }
}
walk(dist);
console.log(
  `build:console: console/dist, ${files} files, ${(raw / 1024).toFixed(1)} KiB (${(gz / 1024).toFixed(1)} KiB gzipped)`,
);
