/**
 * Writes the OpenAPI 3.1 documents of /api/public/v1 and /admin/v1 without a database or a server:
 * the same route specs and zod schemas the running app serves at /api/public/v1/openapi.json and
 * /admin/v1/openapi.json.
 *
 *   node scripts/openapi.ts [public.json] [admin.json]     (default: the public document to stdout)
 *
 * `npm run openapi:lint` writes them to .backline/openapi.json and .backline/admin-openapi.json and
 * lints both with Redocly (redocly.yaml). The server URLs are placeholders: the running app names
 * its own PUBLIC_URL.
 */
import fs from "node:fs";
import path from "node:path";
import { adminOpenApiDocument } from "../src/admin/openapi.ts";
import { adminRouteSpecs } from "../src/admin/routes.ts";
import type { Db } from "../src/db/db.ts";
import { openApiDocument } from "../src/public-api/openapi.ts";
import { PUBLIC_API_VERSION, ROUTES } from "../src/public-api/plugin.ts";
import type { TokenSigner } from "../src/storage/tokens.ts";
import { WEBHOOK_EVENTS } from "../src/webhooks/events.ts";

const LINT_SERVER = "https://api.backline.local";

const publicDoc = openApiDocument(ROUTES, `${LINT_SERVER}/api/public/v1`, PUBLIC_API_VERSION, WEBHOOK_EVENTS);
const adminDoc = adminOpenApiDocument(
  adminRouteSpecs({
    // Only the specs are read: no handler runs.
    db: undefined as unknown as Db,
    signer: undefined as unknown as TokenSigner,
    publicUrl: LINT_SERVER,
    royaltyImportMaxBytes: 0,
  }),
  `${LINT_SERVER}/admin/v1`,
);

function write(doc: unknown, out: string | undefined): void {
  const text = `${JSON.stringify(doc, null, 2)}\n`;
  if (out && out !== "-") {
    fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
    fs.writeFileSync(out, text);
    process.stderr.write(`wrote ${out}\n`);
  } else {
    process.stdout.write(text);
  }
}

write(publicDoc, process.argv[2]);
if (process.argv[3]) write(adminDoc, process.argv[3]);
