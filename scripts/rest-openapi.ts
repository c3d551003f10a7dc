/**
 * Writes the descriptions GET /rest/v1/ serves (src/rest/openapi.ts) without a server: the
 * migrations applied to an embedded database in memory, its schema cache read as the app reads it.
 *
 *   node scripts/rest-openapi.ts [user.json] [service.json]     (default: the first to stdout)
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

const engine = await PgliteEngine.open();
try {
  await migrate(engine);
  const cache = await loadSchemaCache(new Db(engine));
  const write = (role: string, out: string | undefined) => {
    const text = `${JSON.stringify(openApiDocument(cache, "https://api.backline.local", role), null, 2)}\n`;
    if (out && out !== "-") {
      fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
      fs.writeFileSync(out, text);
      process.stderr.write(`wrote ${out}\n`);
    } else {
      process.stdout.write(text);
    }
  };
  write(describedRole("authenticated"), process.argv[2]);
  if (process.argv[3]) write(describedRole("tenant_service"), process.argv[3]);
} finally {
  await engine.close();
}
