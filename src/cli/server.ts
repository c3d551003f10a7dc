import type { Command } from "commander";
import type { Cli } from "./context.ts";

/** `backline serve`: the API server (what `npm start` runs). */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../start/process.ts")),
});
export function register(program: Command, _cli: Cli): void {
  program
    .command("serve")
    .description("run the API server (what `npm start` runs)")
    .action(async () => {
      const s = await services();
      const config = s.loadConfigOrDie();
      const { serveUntilSignalled } = await import("../start/serve.ts");
      await serveUntilSignalled(config, s.createLogger(config));
    });
}
