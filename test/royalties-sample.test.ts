import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { before, describe, test } from "node:test";
import { SAMPLE_FORMATS } from "../src/royalties/sample.ts";
import { runCliOn } from "./support/cli-in-process.ts";
import { describeEachEngine } from "./support/db.ts";
import { runCli, tempDir } from "./support/process.ts";
import { seedDeliveredRelease } from "./support/royalties.ts";
import { seedAccount, seedTenant } from "./support/seed.ts";

type Obj = Record<string, unknown>;

/**
 * `backline royalties sample`: a report for your own release, in every supported format, that the
 * import matches line for line (docs/royalties.md, "Trying it with your own catalog").
 */
describeEachEngine("royalties sample", (t) => {
  let slug: string;
  let releaseId: string;
  let draftId: string;
  const dir = tempDir("backline-sample-");

  before(async () => {
    const tenant = await seedTenant(t().db);
    slug = tenant.slug;
    const account = await seedAccount(t().db, tenant, "Sample Records");
    const track = (title: string, isrc: string, n: number) => ({
      title,
      isrc,
      duration: 200,
      track_number: n,
    });
    releaseId = (
      await seedDeliveredRelease(
        t().db,
        account.id,
        { title: "Harbour Lights", upc: "012345000034" },
        [track("Harbour Lights", "QZSMP2600001", 1), track("Low Tide", "QZSMP2600002", 2)],
        "live",
      )
    ).id;
    draftId = (
      await seedDeliveredRelease(
        t().db,
        account.id,
        { title: "Draft", upc: "012345000041" },
        [track("Draft", "QZSMP2600003", 1)],
        "draft",
      )
    ).id;
  });

  for (const format of SAMPLE_FORMATS) {
    test(`a ${format} sample imports with every line matched to the release`, async () => {
      const out = path.join(dir, `${format}.csv`);
      const made = await runCliOn(t(), [
        "--json",
        "royalties",
        "sample",
        "--release",
        releaseId,
        "--format",
        format,
        "--out",
        out,
      ]);
      assert.equal(made.code, 0, made.stderr);
      const summary = JSON.parse(made.stdout) as Obj & {
        totals: Obj[];
        lines: number;
        import_command: string;
      };
      assert.equal(summary.matchable, true);
      assert.equal(summary.tenant, slug);
      assert.ok(fs.statSync(out).size > 0);

      // The import command it prints, run as printed (its words, minus `npx backline`).
      const words = summary.import_command.replace(/^npx backline /, "").split(" ");
      const imported = await runCliOn(t(), ["--json", ...words]);
      assert.equal(imported.code, 0, imported.stderr);
      const { status, import: report } = JSON.parse(imported.stdout) as { status: string; import: Obj };
      assert.equal(status, "completed");
      assert.deepEqual(
        [report.lines_total, report.lines_matched, report.lines_unmatched, report.lines_malformed],
        [summary.lines, summary.lines, 0, 0],
      );
      // The totals the sample printed are the import's, to the last decimal.
      const totals = report.totals as Obj[];
      assert.deepEqual(
        totals.map((x) => [x.currency, x.gross, x.fees, x.net]),
        summary.totals.map((x) => [x.currency, x.gross, x.fees, x.net]),
      );
      // A second sample is another report: it imports too, not refused as a duplicate.
      const again = await runCliOn(t(), [
        "royalties",
        "sample",
        "--release",
        releaseId,
        "--format",
        format,
        "--out",
        out,
      ]);
      assert.equal(again.code, 0, again.stderr);
      const second = await runCliOn(t(), ["--json", ...words]);
      assert.equal((JSON.parse(second.stdout) as Obj).status, "completed", second.stdout);
    });
  }

  test("without --out the report goes to stdout; the text summary says how to import it", async () => {
    const printed = await runCliOn(t(), [
      "royalties",
      "sample",
      "--release",
      releaseId,
      "--format",
      "backline",
      "--seed",
      "42",
      "--period",
      "2026-01",
    ]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.match(
      printed.stdout,
      /^reporting_period,sale_period,store,territory,upc,isrc,usage_type,units,gross,fees,net,currency\n2026-02,2026-01,/,
    );
    const text = await runCliOn(t(), [
      "royalties",
      "sample",
      "--release",
      releaseId,
      "--format",
      "video-ugc",
      "--out",
      path.join(dir, "v.csv"),
    ]);
    assert.match(text.stdout, /^Wrote a video-ugc report of \d+ lines for "Harbour Lights" to .*v\.csv\n/);
    assert.match(
      text.stdout,
      new RegExp(
        `Import it: npx backline royalties import .*v\\.csv --tenant ${slug} --format video-ugc --store youtube_content_id\\n$`,
      ),
    );
  });

  test("a release the stores do not have: the sample is written, with a note that it will not match", async () => {
    const r = await runCliOn(t(), [
      "--json",
      "royalties",
      "sample",
      "--release",
      draftId,
      "--format",
      "backline",
      "--out",
      path.join(dir, "d.csv"),
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as Obj).matchable, false);
    const text = await runCliOn(t(), [
      "royalties",
      "sample",
      "--release",
      draftId,
      "--format",
      "backline",
      "--out",
      path.join(dir, "d.csv"),
    ]);
    assert.match(text.stdout, /Note: the release is draft: a report matches only releases the stores have/);
  });

  test("mistakes: an unknown release, store, period or format", async () => {
    const cases: [string[], number, RegExp][] = [
      [
        ["--release", "6f1d2c3b-4a59-4e7d-8c21-0b9a8f7e6d5c", "--format", "backline"],
        1,
        /^backline: no release 6f1d2c3b/,
      ],
      [["--release", "nope", "--format", "backline"], 1, /^backline: no release nope\n$/],
      [
        ["--release", releaseId, "--format", "streaming-monthly", "--store", "nostore"],
        1,
        /^backline: no store nostore\n$/,
      ],
      [
        ["--release", releaseId, "--format", "backline", "--period", "2026-13"],
        2,
        /^backline: --period 2026-13 is not a month/,
      ],
      [
        ["--release", releaseId, "--format", "excel"],
        2,
        /^backline: option '--format <name>' argument 'excel' is invalid/,
      ],
    ];
    for (const [args, status, message] of cases) {
      const r = await runCliOn(t(), ["royalties", "sample", ...args]);
      assert.equal(r.code, status, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.equal(r.stdout, "");
    }
  });
});

describe("royalties sample: the real command", () => {
  test("--help lists every format a sample is written in", async () => {
    const r = await runCli(["royalties", "sample", "--help"], {});
    assert.equal(r.code, 0);
    for (const format of SAMPLE_FORMATS) assert.match(r.stdout, new RegExp(format));
  });
});
