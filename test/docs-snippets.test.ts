import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { createTestDb, ENGINES, type TestDb } from "./support/db.ts";
import { childEnv, ROOT, type RunningServer, runCli, startServer, tempDir } from "./support/process.ts";

/**
 * Every shell and JavaScript snippet in README.md and docs/ runs as printed, or says it is not
 * meant to. A fenced block names its language, and a shell or JavaScript block says what it is:
 *
 * - ```bash runnable (or sh, js, ts …): run by this test, as printed, in order — README.md,
 *   docs/public-api.md (the quickstart), then the other pages alphabetically — in one bash, in a
 *   fresh folder whose .backline/ is a fresh server's DATA_DIR, as a newcomer runs them (on each
 *   engine of the run: the embedded one, and PostgreSQL with TEST_DATABASE_URL). Only the
 *   port is changed (the docs say 54321), and `npx backline` runs this checkout's CLI. A JavaScript
 *   block is saved under that folder (where `@supabase/supabase-js` resolves, as in the project
 *   folder) and run with the project's Node.js, as the docs say (`npx node file.mjs`), in its
 *   place in the order: it sees what the shell blocks before it exported.
 * - ```sh template: not run — a template with placeholders to fill in (`<release-id>`,
 *   `postgres://authenticator:…@db/…`), or a step the test itself stands for (`npm start`).
 *
 * A shell or JavaScript block marked neither fails, and so does a block with no language at all
 * (write ```text for plain text). No shell block, run or not, may use a GNU-only form that fails
 * with macOS's BSD tools (GNU_ONLY).
 */

const ORDER = (() => {
  const docs = fs
    .readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md") && f !== "public-api.md")
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", "docs/public-api.md", ...docs];
})();

const SHELL = new Set(["sh", "bash", "shell", "zsh", "console"]);
/** JavaScript and TypeScript languages, with the extension their file is saved with. */
const SCRIPT: Record<string, string> = {
  js: "mjs",
  mjs: "mjs",
  javascript: "mjs",
  ts: "mts",
  mts: "mts",
  typescript: "mts",
};
const MARKS = new Set(["runnable", "template"]);

export interface Fence {
  /** The language, "" when the fence names none. */
  lang: string;
  /** What follows the language: "runnable", "template". */
  marks: string[];
  /** The block's text, unindented (a block inside a list item is indented). */
  body: string;
  /** 1-based line of the opening fence. */
  line: number;
}

/** Every fenced block of a page. */
export function fences(markdown: string): Fence[] {
  return [...markdown.matchAll(/^( *)```([^\n]*)\n([\s\S]*?)^\1```[ \t]*$/gm)].map((m) => {
    const [lang = "", ...marks] = (m[2] ?? "").trim().split(/\s+/);
    return {
      lang,
      marks,
      body: (m[3] ?? "").replace(new RegExp(`^ {0,${(m[1] ?? "").length}}`, "gm"), ""),
      line: markdown.slice(0, m.index).split("\n").length,
    };
  });
}

/** What is wrong with how a page's blocks are marked: one line per block, naming it. */
export function markProblems(file: string, blocks: Fence[]): string[] {
  const problems: string[] = [];
  for (const b of blocks) {
    const where = `${file}:${b.line}`;
    const code = SHELL.has(b.lang) || b.lang in SCRIPT;
    if (!b.lang) {
      problems.push(`${where}: a fence with no language (write \`\`\`text for plain text)`);
    } else if (code && !b.marks.some((m) => MARKS.has(m))) {
      problems.push(
        `${where}: a ${b.lang} block marked neither runnable (this test runs it) nor template (placeholders to fill in)`,
      );
    } else if (b.lang in SCRIPT && !b.marks.includes("runnable") && /@supabase\/supabase-js/.test(b.body)) {
      problems.push(`${where}: a supabase-js snippet must be runnable`);
    }
  }
  return problems;
}

/** Forms of GNU's tools that fail (or do something else) with the BSD tools of macOS. */
const GNU_ONLY: { form: RegExp; instead: string }[] = [
  { form: /\bsed\b[^|;&\n]*\s-[a-zA-Z]*i/, instead: "sed -i: write to a new file and mv it" },
  { form: /\bdate\b[^|;&\n]*\s(-[a-zA-Z]*d\b|--date)/, instead: "date -d: compute dates with python3" },
  { form: /\bbase64\b[^|;&\n]*\s(-w|--wrap)/, instead: "base64 -w: pipe through tr -d '\\n'" },
  { form: /\breadlink\s+-[a-zA-Z]*f/, instead: "readlink -f: cd there and pwd -P" },
  { form: /\bgrep\b[^|;&\n]*\s-[a-zA-Z]*P/, instead: "grep -P: grep -E" },
  { form: /\bstat\s+(-c|--format)/, instead: "stat -c: wc -c < file for a size" },
  {
    form: /\b(sha256sum|sha1sum|md5sum)\b/,
    instead: "sha256sum: openssl dgst -sha256, or python3's hashlib",
  },
  { form: /\btimeout\s+\d/, instead: "timeout: not on macOS" },
  { form: /\bxargs\s+(-[a-zA-Z]*\s+)*-r\b/, instead: "xargs -r: not on macOS" },
];

/** The GNU-only forms a shell block uses, with what to write instead. */
export function gnuOnly(body: string): string[] {
  return GNU_ONLY.filter((g) => g.form.test(body)).map((g) => g.instead);
}

const pages = ORDER.map((file) => ({ file, blocks: fences(fs.readFileSync(path.join(ROOT, file), "utf8")) }));

test("the blocks are found with their language and marks, inside list items too", () => {
  const blocks = fences(
    "a\n```sh runnable\necho 1\n```\n```sh\necho no\n```\n1. step\n   ```bash runnable\n   echo 2\n   ```\n```\nplain\n```\n",
  );
  assert.deepEqual(
    blocks.map((b) => [b.lang, b.marks, b.body, b.line]),
    [
      ["sh", ["runnable"], "echo 1\n", 2],
      ["sh", [], "echo no\n", 5],
      ["bash", ["runnable"], "echo 2\n", 9],
      ["", [], "plain\n", 12],
    ],
  );
  assert.deepEqual(markProblems("x.md", blocks), [
    "x.md:5: a sh block marked neither runnable (this test runs it) nor template (placeholders to fill in)",
    "x.md:12: a fence with no language (write ```text for plain text)",
  ]);
  assert.deepEqual(markProblems("x.md", fences('```js template\nimport "@supabase/supabase-js";\n```\n')), [
    "x.md:1: a supabase-js snippet must be runnable",
  ]);
});

test("GNU-only forms are told apart from the portable ones", () => {
  for (const gnu of [
    "sed -i 's/a/b/' f",
    "sed -E -i '' x",
    'date -d "+30 days" +%F',
    "date --date=tomorrow",
    "base64 -w0 f",
    "readlink -f .",
    "grep -oP '\\d+' f",
    "stat -c %s cover.jpg",
    "sha256sum cover.jpg | cut -d' ' -f1",
    "timeout 5 curl x",
    "ls | xargs -r rm",
  ]) {
    assert.equal(gnuOnly(gnu).length, 1, gnu);
  }
  for (const portable of [
    "sed -n 1,5p f > g",
    "date +%F",
    "base64 < f | tr -d '\\n'",
    "readlink link",
    "grep -Eo '[0-9]+' f",
    "wc -c < cover.jpg",
    "openssl dgst -sha256 f",
    "curl --max-time 5 x",
    "npx backline mail list --to x --json",
  ]) {
    assert.deepEqual(gnuOnly(portable), [], portable);
  }
});

test("every shell and JavaScript block of README.md and docs/ is marked runnable or template", () => {
  assert.deepEqual(
    pages.flatMap((p) => markProblems(p.file, p.blocks)),
    [],
  );
});

test("no shell block in README.md and docs/ uses a GNU-only form", () => {
  assert.deepEqual(
    pages.flatMap((p) =>
      p.blocks
        .filter((b) => SHELL.has(b.lang))
        .flatMap((b) => gnuOnly(b.body).map((g) => `${p.file}:${b.line}: ${g}`)),
    ),
    [],
  );
});

// On each engine of the run (test/support/db.ts): the embedded database, as `npm start` makes it,
// and PostgreSQL when TEST_DATABASE_URL is set, where the server and the CLI log in as the
// non-superuser `authenticator` to a migrated database, with the development tenant asked for.
for (const kind of ENGINES)
  describe(`docs: runnable snippets [${kind}]`, () => {
    let server: RunningServer | undefined;
    let dir: string;
    let pg: TestDb | undefined;
    /** Backline's settings for the server, the snippets and the CLI (only DATA_DIR on the embedded engine). */
    let settings: Record<string, string>;
    /** How long the server took to start, in ms (reported beside the snippets' time). */
    let started = 0;

    before(async () => {
      started = performance.now();
      dir = tempDir("backline-docs-");
      settings = { DATA_DIR: path.join(dir, ".backline") };
      if (kind === "postgres") {
        pg = await createTestDb("postgres");
        settings = {
          ...settings,
          DATABASE_URL: String(pg.url),
          MIGRATE_ON_START: "false",
          DEV_TENANT: "true",
        };
      }
      // A first start migrates a new database: slow on a busy machine.
      server = await startServer(settings, 300_000);
      started = performance.now() - started;
    });

    after(async () => {
      await server?.stop();
      await pg?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    test("every runnable snippet in README.md and docs/ runs as printed against a fresh server", async (t) => {
      assert.ok(server);
      const port = new URL(server.url).port;
      const cli = `"${process.execPath}" "${path.join(ROOT, "bin/backline.js")}"`;
      // The folder stands for the project folder: its packages resolve there (the link is removed
      // with the folder, not what it points to).
      fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
      fs.mkdirSync(path.join(dir, "snippets"));
      const asPrinted = (text: string) => text.replaceAll("54321", port).replaceAll("npx backline", cli);
      const steps: string[] = [];
      let scripts = 0;
      for (const p of pages) {
        p.blocks.forEach((b, i) => {
          if (!b.marks.includes("runnable")) return;
          const label = `${p.file}:${b.line} (block ${i + 1})`;
          if (SHELL.has(b.lang)) {
            steps.push(`echo "--- ${label} at \${SECONDS}s" >&2\n${asPrinted(b.body)}`);
          } else if (b.lang in SCRIPT) {
            const file = `snippets/${path.basename(p.file, ".md")}-${b.line}.${SCRIPT[b.lang]}`;
            fs.writeFileSync(path.join(dir, file), asPrinted(b.body));
            steps.push(
              `echo "--- ${label} at \${SECONDS}s: node ${file}" >&2\n"${process.execPath}" ${file}`,
            );
            scripts++;
          }
        });
      }
      assert.ok(steps.length >= 8, `found ${steps.length} runnable blocks`);
      assert.ok(scripts >= 3, `found ${scripts} runnable JavaScript blocks`);
      const script = ["set -euo pipefail", ...steps].join("\n");
      let output: string;
      const running = performance.now();
      try {
        output = execFileSync("bash", ["-c", script], {
          cwd: dir,
          env: childEnv(kind === "postgres" ? settings : {}),
          encoding: "utf8",
          timeout: 600_000,
          stdio: "pipe",
        });
      } catch (error) {
        const e = error as { stdout?: string; stderr?: string };
        assert.fail(`a snippet failed:\n${e.stderr?.slice(-3000)}\n${e.stdout?.slice(-2000)}`);
      }
      assert.ok(output.length > 0);
      t.diagnostic(
        `server started in ${(started / 1000).toFixed(1)} s, the snippets ran in ${((performance.now() - running) / 1000).toFixed(1)} s`,
      );
      // docs/royalties.md's samples of the quickstart's release imported with every line matched.
      const imports = await runCli(["--json", "royalties", "imports", "--tenant", "dev"], settings);
      assert.equal(imports.code, 0, imports.stderr);
      const all = JSON.parse(imports.stdout) as {
        format: string;
        status: string;
        lines_total: number;
        lines_matched: number;
        lines_unmatched: number;
      }[];
      assert.deepEqual(all.map((i) => i.format).sort(), ["backline", "ddex-dsr"]);
      for (const i of all) {
        assert.equal(i.status, "completed", i.format);
        assert.ok(i.lines_total > 0, i.format);
        assert.deepEqual([i.lines_matched, i.lines_unmatched], [i.lines_total, 0], i.format);
      }
    });
  });
