/**
 * `npm run build:console` (also run by `npm install` / `npm ci` through `prepare`): builds the
 * Backline Console (console/) and the portal (portal/, docs/portal.md) with Vite into their own
 * dist folders, then writes a .br and a .gz copy of every text file so the server sends them
 * precompressed (src/console/static.ts). `npm run build:console -- portal` builds one of them.
 *
 * When Vite is not installed (`npm ci --omit=dev` on a server that ships a prebuilt
 * console/dist) it says so and exits 0, so the install itself does not fail.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const APPS = ["console", "portal"] as const;
const wanted = process.argv.slice(2);
for (const name of wanted)
  if (!(APPS as readonly string[]).includes(name)) {
    console.error(`build:console: no app ${name}; the apps are ${APPS.join(", ")}`);
    process.exit(2);
  }
const apps = wanted.length > 0 ? APPS.filter((a) => wanted.includes(a)) : APPS;

let vite: typeof import("vite");
try {
  vite = await import("vite");
} catch {
  console.warn(
    "build:console: vite is not installed (dev dependencies omitted); console/dist and portal/dist are left as they are.",
  );
  process.exit(0);
}

const TEXT = /\.(html|js|mjs|css|json|svg|map|txt|webmanifest)$/;

for (const app of apps) {
  const root = fileURLToPath(new URL(`../${app}/`, import.meta.url));
  const dist = path.join(root, "dist");
  await vite.build({ root, configFile: path.join(root, "vite.config.ts"), logLevel: "warn" });
  let files = 0;
  let raw = 0;
  let gz = 0;
  const walk = (dir: string) => {
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
  };
  walk(dist);
  console.log(
    `build:console: ${app}/dist, ${files} files, ${(raw / 1024).toFixed(1)} KiB (${(gz / 1024).toFixed(1)} KiB gzipped)`,
  );
}
