import type { Command } from "commander";
import type { Cli } from "./context.ts";

/** `backline secrets`: the master key that seals secrets at rest (docs/security.md). */

/** The services behind these commands, loaded when one of them runs (not for --help or another group). */
const services = async () => ({
  ...(await import("../secrets/at-rest.ts")),
});
export function register(program: Command, cli: Cli): void {
  program
    .command("secrets")
    .description("the master key that seals secrets at rest (docs/security.md)")
    .command("rotate-master-key")
    .description(
      "seal every secret (tenant signing secrets, store credentials, webhook secrets, TOTP factor secrets) with a new master key, in one " +
        "transaction: with ENCRYPTION_KEY set, the new key is ENCRYPTION_KEY and the old one ENCRYPTION_KEY_PREVIOUS; " +
        "on the embedded default, a new DATA_DIR/encryption.key is made (stop the server first)",
    )
    .action(async () => {
      const s = await services();
      await cli.withDb(async (db, config) => {
        const report = await s.rotateMasterKey(db, config);
        const n = (counts: Record<string, number>) =>
          Object.entries(counts)
            .map(([k, v]) => `${v} ${k.replaceAll("_", " ")}`)
            .join(", ");
        cli.output(
          `Every secret is sealed with key ${report.key_id} (${report.key_source}).\n` +
            `  sealed again: ${n(report.resealed)}\n  already current: ${n(report.already_current)}\n` +
            `  plain, now sealed: ${n(report.sealed_plain)}`,
          report,
        );
      });
    });
}
