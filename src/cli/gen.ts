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
    .action(async (language: string, opts: { role: string }) => {
      if (language !== "typescript") throw new UsageError(`no types for ${language}: only typescript`);
      if (!(ROLES as readonly string[]).includes(opts.role))
        throw new UsageError(`--role must be one of ${ROLES.join(", ")}`);
      await cli.withDb(async (db) => {
        const { loadSchemaCache } = await import("../rest/schema-cache.ts");
        const { typescriptTypes } = await import("../rest/typescript-types.ts");
        const { describedRole } = await import("../rest/openapi.ts");
        const cache = await loadSchemaCache(db);
        cli.io.stdout(typescriptTypes(cache, describedRole(opts.role)));
      });
    });
}
