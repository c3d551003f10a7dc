/**
 * Copies the browser tests' screenshots (artifacts/console/, written by test/console/desk.test.ts)
 * into docs/console/ as small PNGs for docs/console.md ("Screenshots"): each page's desktop shot scaled
 * to 800 px wide and each phone shot to 260 px, 256-colour palettes.
 *
 *   node --test test/console/desk.test.ts && node scripts/console-screens.ts
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import sharp from "sharp";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const from = path.join(ROOT, "artifacts", "console");
const to = path.join(ROOT, "docs", "console");

if (!fs.existsSync(from)) {
  console.error(`${from} is empty: run the browser tests first (node --test test/console/desk.test.ts).`);
  process.exit(1);
}
fs.mkdirSync(to, { recursive: true });
let total = 0;
for (const name of fs.readdirSync(from).sort()) {
  const m = /^(\d\d)-([a-z-]+)-(desktop|phone)\.png$/.exec(name);
  if (!m) continue;
  const width = m[3] === "desktop" ? 800 : 260;
  const out = path.join(to, `${m[2]}-${m[3]}.png`);
  // The top of a long page is what the docs show: at most 1.6 × its width tall.
  const image = sharp(path.join(from, name)).resize({ width });
  const { data, info } = await image.png().toBuffer({ resolveWithObject: true });
  const height = Math.min(info.height, Math.round(width * (m[3] === "desktop" ? 1 : 2.2)));
  await sharp(data)
    .extract({ left: 0, top: 0, width: info.width, height })
    .png({ palette: true, colours: 256, compressionLevel: 9, effort: 10 })
    .toFile(out);
  const size = fs.statSync(out).size;
  total += size;
  console.log(`${path.relative(ROOT, out)}  ${(size / 1024).toFixed(1)} KB`);
}
console.log(`${(total / 1024).toFixed(0)} KB in all`);
