import fs from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import type { Cli } from "./context.ts";

/** `backline media`: media files for trying uploads (docs/uploads.md). */
export function register(program: Command, cli: Cli): void {
  program
    .command("media")
    .description("media files for trying uploads (docs/uploads.md)")
    .command("samples")
    .description(
      "write cover.jpg (3000×3000 RGB) and track.wav (30 s, 44.1 kHz, 16-bit stereo) that pass the upload checks",
    )
    .argument("[dir]", "where to write them", ".")
    .action(async (dir: string) => {
      const { artworkJpeg, wav } = await import("../storage/samples.ts");
      fs.mkdirSync(cli.path(dir), { recursive: true });
      const files = [
        { path: path.join(dir, "cover.jpg"), bytes: await artworkJpeg() },
        { path: path.join(dir, "track.wav"), bytes: wav({ seconds: 30 }) },
      ];
      for (const f of files) fs.writeFileSync(cli.path(f.path), f.bytes);
      cli.output(
        files.map((f) => `${f.path}  ${f.bytes.length} bytes`).join("\n"),
        files.map((f) => ({ path: path.resolve(cli.io.cwd, f.path), bytes: f.bytes.length })),
      );
    });
}
