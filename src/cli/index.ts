import { Command } from "commander";
import * as accounts from "./accounts.ts";
import * as audit from "./audit.ts";
import * as auth from "./auth.ts";
import * as backup from "./backup.ts";
import { Cli, type CliIo, type DbOpener } from "./context.ts";
import * as database from "./database.ts";
import * as deliveries from "./deliveries.ts";
import * as gen from "./gen.ts";
import * as invoices from "./invoices.ts";
import * as jobs from "./jobs.ts";
import * as keys from "./keys.ts";
import * as mail from "./mail.ts";
import * as media from "./media.ts";
import * as money from "./money.ts";
import * as oac from "./oac.ts";
import * as people from "./people.ts";
import * as releases from "./releases.ts";
import * as royalties from "./royalties.ts";
import * as secrets from "./secrets.ts";
import * as server from "./server.ts";
import * as staff from "./staff.ts";
import * as stores from "./stores.ts";
import * as tenants from "./tenants.ts";
import * as transfer from "./transfer.ts";

/**
 * `backline`: a thin shell over the same services the server uses. Every command prints a
 * human-readable answer, or JSON with --json; errors are one line on stderr.
 *
 * One file per command group, each with `register(program, cli)`; this list is the whole
 * registration, in the order `backline --help` shows the groups. A new group is a new file and
 * one line here.
 */
const GROUPS: ((program: Command, cli: Cli) => void)[] = [
  server.register, // serve
  database.register, // migrate, db
  backup.register, // backup, restore
  media.register, // media
  tenants.register, // tenants
  accounts.register, // accounts
  staff.register, // staff
  people.register, // people
  auth.register, // auth mfa
  stores.register, // stores
  jobs.registerWorker, // worker
  jobs.register, // jobs
  releases.register, // releases
  deliveries.register, // deliveries
  oac.register, // oac
  keys.register, // keys
  royalties.register, // royalties
  money.register, // money
  invoices.register, // invoices
  transfer.register, // transfer
  mail.register, // mail
  secrets.register, // secrets
  audit.register, // audit
  gen.register, // gen types
];

/** The whole `backline` program, printing to `io` and opening the database with `withDb`. */
export function buildProgram(io: CliIo, withDb: DbOpener): { program: Command; cli: Cli } {
  const program = new Command("backline")
    .description("Backline: the backend of a white-label music distribution platform")
    .option("--json", "print JSON instead of text")
    .showHelpAfterError()
    .configureOutput({
      writeOut: (str) => io.stdout(str),
      writeErr: (str) => io.stderr(str),
      outputError: (str, write) => write(`backline: ${str.replace(/^error: /, "")}`),
    });
  const cli = new Cli(program, io, withDb);
  for (const register of GROUPS) register(program, cli);
  return { program, cli };
}
