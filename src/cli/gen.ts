import type { Command } from "commander";
import { type Cli, UsageError } from "./context.ts";

/** `backline gen types typescript`: supabase-js's `Database` type for /rest/v1 (docs/rest.md, "Types for supabase-js"). */

const ROLES = ["authenticated", "anon", "tenant_service"] as const;

export function register(program: Command, cli: Cli): void {
  program
    .command("gen")
    .description("generate code from this installation's database")
    .command("types")
    .description(
      "print the TypeScript types of /rest/v1's tables for supabase-js (createClient<Database>), as `supabase gen types typescript` does",
    )
    .argument("[language]", "the language (typescript)", "typescript")
    .option(
      "--role <role>",
      `the request role whose view of the tables to type (${ROLES.join(", ")})`,
      "authenticated",
    )
    .option(
      "--schema <names>",
      "the exposed schemas to type, comma-separated, the first being the default (REST_SCHEMAS)",
      process.env.REST_SCHEMAS ?? "public",
    )
    .action(async (language: string, opts: { role: string; schema: string }) => {
      if (language !== "typescript") throw new UsageError(`no types for ${language}: only typescript`);
      if (!(ROLES as readonly string[]).includes(opts.role))
        throw new UsageError(`--role must be one of ${ROLES.join(", ")}`);
      await cli.withDb(async (db) => {
        const { loadSchemaCache } = await import("../rest/schema-cache.ts");
        const { typescriptTypes } = await import("../rest/typescript-types.ts");
        const { describedRole } = await import("../rest/openapi.ts");
        const names = opts.schema.split(",").map((x) => x.trim());
        if (names.some((n) => !/^[a-z_][a-z0-9_]*$/.test(n)))
          throw new UsageError("--schema must be schema names, comma-separated");
        const caches = await Promise.all(names.map((n) => loadSchemaCache(db, n)));
        cli.io.stdout(typescriptTypes(caches, describedRole(opts.role)));
      });
    });
}
