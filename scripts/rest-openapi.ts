/**
 * Writes the descriptions GET /rest/v1/ serves (src/rest/openapi.ts) without a server: the
 * migrations applied to an embedded database in memory, its schema cache read as the app reads it.
 *
 *   node scripts/rest-openapi.ts user.json [service.json]
 *
 * The first is what a user's token or the anon key reads; the second what a tenant's service-role
 * key reads (it may write the analytics tables too). `npm run openapi:lint` writes both to .backline/
 * and lints them with redocly-rest.yaml, the rules for PostgREST-shaped documents. The server URL
 * is a placeholder.
 */
import fs from "node:fs";
import path from "node:path";
import { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { PgliteEngine } from "../src/db/pglite.ts";
import { describedRole, openApiDocument } from "../src/rest/openapi.ts";
import { loadSchemaCache } from "../src/rest/schema-cache.ts";

const outputs = [
  ["authenticated", process.argv[2]],
  ["tenant_service", process.argv[3]],
].filter((o): o is [string, string] => Boolean(o[1]));
if (outputs.length === 0) {
  process.stderr.write("usage: node scripts/rest-openapi.ts user.json [service.json]\n");
  process.exit(2);
}
const engine = await PgliteEngine.open();
try {
  await migrate(engine);
  const cache = await loadSchemaCache(new Db(engine));
  for (const [role, out] of outputs) {
    const doc = openApiDocument(cache, "https://api.backline.local", describedRole(role));
    fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
    fs.writeFileSync(out, `${JSON.stringify(doc, null, 2)}\n`);
    process.stderr.write(`wrote ${out} (${role})\n`);
  }
} finally {
  await engine.close();
}
