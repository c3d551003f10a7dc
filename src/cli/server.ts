import type { Command } from "commander";
import { createLogger, loadConfigOrDie } from "../start/process.ts";
import type { Cli } from "./context.ts";

/** `backline serve`: the API server (what `npm start` runs). */
export function register(program: Command, _cli: Cli): void {
  program
    .command("serve")
    .description("run the API server (what `npm start` runs)")
    .action(async () => {
      const config = loadConfigOrDie();
      const { serveUntilSignalled } = await import("../start/serve.ts");
      await serveUntilSignalled(config, createLogger(config));
    });
}
