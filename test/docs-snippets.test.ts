import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { ROOT, type RunningServer, runCli, startServer, tempDir } from "./support/process.ts";

/**
 * Every shell block marked runnable in README.md and docs/ (a fence opened with ```sh runnable or
 * ```bash runnable), run as printed, in order — README.md, docs/public-api.md (the quickstart),
 * then the other pages alphabetically — in one bash, in a fresh folder whose .backline/ is a fresh
 * server's DATA_DIR, as a newcomer runs them. Only the port is changed (the docs say 54321), and
 * `npx backline` runs this checkout's CLI. A block that stops working fails this test.
 */

const ORDER = (() => {
  const docs = fs
    .readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md") && f !== "public-api.md")
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", "docs/public-api.md", ...docs];
})();

/** The runnable blocks of one page, unindented (a block inside a list item is indented). */
export function runnableBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^( *)```(?:sh|bash) runnable\n([\s\S]*?)^\1```/gm)].map((m) =>
    (m[2] ?? "").replace(new RegExp(`^ {0,${(m[1] ?? "").length}}`, "gm"), ""),
  );
}

test("the runnable blocks are found where they are marked", () => {
  const blocks = runnableBlocks(
    "a\n```sh runnable\necho 1\n```\n```sh\necho no\n```\n1. step\n   ```bash runnable\n   echo 2\n   ```\n",
  );
  assert.deepEqual(blocks, ["echo 1\n", "echo 2\n"]);
});

describe("docs: runnable snippets", () => {
  let server: RunningServer | undefined;
  let dir: string;

  before(async () => {
    dir = tempDir("backline-docs-");
    // A first start migrates a new database: slow on a busy machine.
    server = await startServer({ DATA_DIR: path.join(dir, ".backline") }, 300_000);
  });

  after(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test("every runnable snippet in README.md and docs/ runs as printed against a fresh server", async () => {
    assert.ok(server);
    const port = new URL(server.url).port;
    const cli = `"${process.execPath}" "${path.join(ROOT, "bin/backline.js")}"`;
    const pages = ORDER.map((file) => ({
      file,
      blocks: runnableBlocks(fs.readFileSync(path.join(ROOT, file), "utf8")),
    }));
    const count = pages.reduce((n, p) => n + p.blocks.length, 0);
    assert.ok(count >= 8, `found ${count} runnable blocks`);
    const script = [
      "set -euo pipefail",
      ...pages.flatMap((p) =>
        p.blocks.map(
          (b, i) =>
            `echo "--- ${p.file} block ${i + 1}" >&2\n${b.replaceAll("54321", port).replaceAll("npx backline", cli)}`,
        ),
      ),
    ].join("\n");
    let output: string;
    try {
      output = execFileSync("bash", ["-c", script], {
        cwd: dir,
        encoding: "utf8",
        timeout: 600_000,
        stdio: "pipe",
      });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string };
      assert.fail(`a snippet failed:\n${e.stderr?.slice(-3000)}\n${e.stdout?.slice(-2000)}`);
    }
    assert.ok(output.length > 0);
    // docs/royalties.md's sample of the quickstart's release imported with every line matched.
    const imports = await runCli(["--json", "royalties", "imports", "--tenant", "dev"], {
      DATA_DIR: path.join(dir, ".backline"),
    });
    assert.equal(imports.code, 0, imports.stderr);
    const [latest] = JSON.parse(imports.stdout) as {
      status: string;
      lines_total: number;
      lines_matched: number;
      lines_unmatched: number;
    }[];
    assert.ok(latest);
    assert.equal(latest.status, "completed");
    assert.ok(latest.lines_total > 0);
    assert.deepEqual([latest.lines_matched, latest.lines_unmatched], [latest.lines_total, 0]);
  });
});
