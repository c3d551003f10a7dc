import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { freePort, ROOT, tempDir } from "./process.ts";

/**
 * Stoplight Prism's validating proxy (the `@stoplight/prism-cli` devDependency) in front of a
 * running Backline: every answer that passes through it is checked against the OpenAPI document —
 * status, headers and body — and a departure is reported in the `sl-violations` header (and, with
 * `--errors`, turned into an error answer). Requests are not validated (`--validate-request=false`):
 * the tests send wrong requests on purpose, to provoke each documented error; what is checked is
 * how the server answers them.
 */
export interface Prism {
  /** The proxy's base URL: the document's paths go after it. */
  url: string;
  close(): Promise<void>;
}

const PRISM = path.join(ROOT, "node_modules/@stoplight/prism-cli/dist/index.js");

export async function startPrism(document: unknown, upstream: string): Promise<Prism> {
  const dir = tempDir("backline-prism-");
  const file = path.join(dir, "openapi.json");
  fs.writeFileSync(file, JSON.stringify(document));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      PRISM,
      "proxy",
      file,
      upstream,
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
      "--errors",
      "--validate-request=false",
      "--cors=false",
      "--verboseLevel",
      "error",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  // Ready once it answers anything: it reads and resolves the document first (a few seconds).
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prism exited (${child.exitCode}): ${output.slice(-2000)}`);
    const up = await fetch(`${url}/`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`prism did not start within 60 s: ${output.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    close: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
