/**
 * Writes the OpenAPI 3.1 document of /api/public/v1 without a database or a server: the same
 * route specs and zod schemas the running app serves at /api/public/v1/openapi.json.
 *
 *   node scripts/openapi.ts [out.json]     (default: stdout)
 *
 * `npm run openapi:lint` writes it to .backline/openapi.json and lints it with Redocly
 * (redocly.yaml). The server URL is a placeholder: the running app names its own PUBLIC_URL.
 */
import fs from "node:fs";
import path from "node:path";
import { openApiDocument } from "../src/public-api/openapi.ts";
import { PUBLIC_API_VERSION, ROUTES } from "../src/public-api/plugin.ts";
import { WEBHOOK_EVENTS } from "../src/webhooks/events.ts";

const LINT_SERVER_URL = "https://api.backline.local/api/public/v1";

const doc = openApiDocument(ROUTES, LINT_SERVER_URL, PUBLIC_API_VERSION, WEBHOOK_EVENTS);
const text = `${JSON.stringify(doc, null, 2)}\n`;
const out = process.argv[2];
if (out && out !== "-") {
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  fs.writeFileSync(out, text);
  process.stderr.write(`wrote ${out}\n`);
} else {
  process.stdout.write(text);
}
