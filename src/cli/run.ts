import { type Command, CommanderError } from "commander";
import { type AuditScope, cliActor, runWithAuditScope } from "../db/audit-context.ts";
import { type CliIo, type DbOpener, RunOnServer } from "./context.ts";
import { EXIT_USAGE, failureOf, report, wantsJson } from "./errors.ts";
import { buildProgram } from "./index.ts";

/** The words of a command below `backline`, e.g. "tenants create". */
function commandPath(command: Command | undefined): string {
  const words: string[] = [];
  for (let c = command; c?.parent; c = c.parent) words.unshift(c.name());
  return words.join(" ");
}

/**
 * Runs one `backline` command line (`args` without the node and script paths) to the end: its
 * output and any error go to `io`, and the exit status is returned (0, 1 for a failure, 2 for a
 * usage error; docs/cli.md). Used by the `backline` process and by a server running it for one.
 */
export async function runCommandLine(args: string[], io: CliIo, withDb: DbOpener): Promise<number> {
  let status = 0;
  const tracked: CliIo = {
    stdout: (text) => io.stdout(text),
    stderr: (text) => io.stderr(text),
    get stderrIsTTY() {
      return io.stderrIsTTY;
    },
    get cwd() {
      return io.cwd;
    },
    setExitCode: (code) => {
      status = code;
      io.setExitCode(code);
    },
  };
  const { program } = buildProgram(tracked, withDb);
  // Commander's own complaints (unknown option, missing value …) come back here as errors, to be
  // printed as one line; so does the help it prints when a group is named without a command.
  let current: Command = program;
  let helpText = "";
  const track = (command: Command): void => {
    command.exitOverride((error) => {
      current = command;
      throw error;
    });
    command.configureOutput({
      ...command.configureOutput(),
      outputError: () => {},
      writeErr: (text) => {
        helpText += text;
      },
    });
    for (const sub of command.commands) track(sub);
  };
  track(program);
  // Every command but the server's own names itself as the actor of what it changes: the audit log
  // records "cli:<command>" with the OS user (docs/operator.md, "The audit log").
  const audit: AuditScope = {};
  program.hook("preAction", (_root, action) => {
    current = action;
    const path = commandPath(action);
    const first = path.split(" ")[0];
    if (first !== "serve" && first !== "worker") audit.actor = cliActor(path);
  });
  try {
    await runWithAuditScope(audit, () => program.parseAsync(args, { from: "user" }));
    return status;
  } catch (error) {
    if (error instanceof RunOnServer) throw error;
    if (error instanceof CommanderError && error.exitCode === 0) return 0; // --help, --version
    const json = wantsJson(args);
    if (error instanceof CommanderError && error.code === "commander.help") {
      // A group named without one of its commands (`backline tenants`), or nothing at all.
      if (current === program && !json) {
        tracked.stderr(helpText);
        tracked.setExitCode(EXIT_USAGE);
        return status;
      }
      const what = commandPath(current);
      const message = `${what || "backline"} needs a command: ${current.commands.map((c) => c.name()).join(", ")}`;
      report(
        { status: EXIT_USAGE, code: "usage", message, help: `backline ${what ? `${what} ` : ""}--help` },
        tracked,
        json,
      );
      return status;
    }
    const { explain } = await import("../start/process.ts");
    report(failureOf(error, commandPath(current), explain), tracked, json);
    return status;
  }
}
