import { writeFile } from "node:fs/promises";
import type { Command } from "commander";
import { type Cli, refusal, UsageError } from "./context.ts";

/** `backline people`: a person's own data — export and erasure (docs/privacy.md). */

const services = async () => await import("../people/service.ts");

export function register(program: Command, cli: Cli): void {
  const people = program
    .command("people")
    .description("a person's own data: export everything Backline holds about them, or erase it");
  people
    .command("export")
    .description("everything Backline holds about the user with this address, as one JSON document")
    .argument("<email>", "the user's e-mail address")
    .option("--tenant <slug|id>", "the tenant of the user, when the address is a user of several")
    .option("--out <file>", "write the document to this file instead of stdout")
    .action(async (email: string, opts: { tenant?: string; out?: string }) => {
      const s = await services();
      await cli.withDb(async (db) => {
        const person = await s.findPerson(db, email, opts.tenant).catch(refusal(s.PeopleError));
        const doc = await s.exportPerson(db, person.tenant_id, person.user_id).catch(refusal(s.PeopleError));
        const text = `${JSON.stringify(doc, null, 2)}\n`;
        if (opts.out) {
          const file = cli.path(opts.out);
          await writeFile(file, text, { mode: 0o600 });
          cli.output(`The data of ${person.email} (tenant ${person.tenant_slug}) is in ${file}.`, {
            ...person,
            file,
          });
        } else cli.io.stdout(text);
      });
    });
  people
    .command("erase")
    .description(
      "erase the personal data of the user with this address: anonymised user, sign-in ended, memberships, " +
        "notifications and invitations deleted, payees erased, audit entries pseudonymised (docs/privacy.md)",
    )
    .argument("<email>", "the user's e-mail address")
    .option("--tenant <slug|id>", "the tenant of the user, when the address is a user of several")
    .option("--reason <text>", "why (a request's reference), recorded in the audit log", "erasure requested")
    .option("--yes", "really erase: it cannot be undone")
    .action(async (email: string, opts: { tenant?: string; reason: string; yes?: boolean }) => {
      if (!opts.yes) throw new UsageError("erasure cannot be undone: add --yes to erase");
      const s = await services();
      await cli.withDb(async (db) => {
        const person = await s.findPerson(db, email, opts.tenant).catch(refusal(s.PeopleError));
        const tables = await s
          .erasePerson(db, person.tenant_id, person.user_id, opts.reason)
          .catch(refusal(s.PeopleError));
        const changed = Object.entries(tables)
          .filter(([, n]) => n > 0)
          .map(([table, n]) => `  ${table}: ${n}`);
        cli.output(
          [`Erased ${person.email} (user ${person.user_id}, tenant ${person.tenant_slug}):`, ...changed].join(
            "\n",
          ),
          { status: "erased", user_id: person.user_id, tenant_id: person.tenant_id, tables },
        );
      });
    });
}
