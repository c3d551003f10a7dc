import type { CliIo } from "../../src/cli/context.ts";
import { runCommandLine } from "../../src/cli/run.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import { TEST_ENCRYPTION_KEY, type TestDb } from "./db.ts";
import { tempDir } from "./process.ts";

export interface InProcessResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a `backline` command line in this process on a test database (either engine), with the
 * same command code the `backline` process runs (src/cli/run.ts), its output captured.
 */
export async function runCliOn(
  t: TestDb,
  args: string[],
  options: { cwd?: string; config?: Config } = {},
): Promise<InProcessResult> {
  const config =
    options.config ??
    loadConfig({
      LOG_LEVEL: "silent",
      DATA_DIR: tempDir("backline-cli-"),
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    });
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    stderrIsTTY: false,
    cwd: options.cwd ?? process.cwd(),
    setExitCode: () => {},
  };
  const code = await runCommandLine(args, io, (fn) => fn(t.db, config));
  return { code, stdout, stderr };
}
