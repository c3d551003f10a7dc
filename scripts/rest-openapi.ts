/**
 * Writes the description GET /rest/v1/ serves (src/rest/openapi.ts) without a server: the
 * migrations applied to an embedded database in memory, its schema cache read as the app reads it.
 *
 *   node scripts/rest-openapi.ts [out.json]     (default: stdout)
 *
 * `npm run openapi:lint` writes it to .backline/rest-openapi.json and lints it with
 * redocly-rest.yaml, the rules for PostgREST-shaped documents. The server URL is a placeholder.
 */
import fs from "node:fs";
import path from "node:path";
import { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import { openApiDocument } from "../src/rest/openapi.ts";
import { loadSchemaCache } from "../src/rest/schema-cache.ts";

const engine = await PgliteEngine.open();
try {
  await migrate(engine);
  const doc = openApiDocument(await loadSchemaCache(new Db(engine)), "https://api.backline.local");
  const text = `${JSON.stringify(doc, null, 2)}\n`;
  const out = process.argv[2];
  if (out && out !== "-") {
    fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
    fs.writeFileSync(out, text);
    process.stderr.write(`wrote ${out}\n`);
  } else {
    process.stdout.write(text);
  }
} finally {
  await engine.close();
}
