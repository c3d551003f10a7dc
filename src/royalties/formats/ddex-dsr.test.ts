import assert from "node:assert/strict";
import { createReadStream } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { dsrMissingFails, dsrPath, dsrSkip } from "../../../test/support/dsr.ts";
import { readRecords } from "../csv.ts";
import { ddexDsrFormat, dsrSenderPartyId } from "./ddex-dsr.ts";
import { FormatError, LineError, type RawLine } from "./types.ts";

const SAMPLE = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "../../../docs/formats/ddex-dsr.tsv",
);

async function parse(file: string, store = "spotify") {
  const warnings: string[] = [];
  const parser = ddexDsrFormat.create({ store, warn: (line, m) => warnings.push(`${line}: ${m}`) });
  const lines: RawLine[] = [];
  const errors: string[] = [];
  for await (const batch of readRecords(createReadStream(file), "\t", false)) {
    for (const r of batch) {
      try {
        const l = parser.record(r.fields, r.line);
        if (l) lines.push(l);
      } catch (e) {
        if (!(e instanceof LineError)) throw e;
        errors.push(`${r.line}: ${e.message}`);
      }
    }
  }
  parser.finish();
  return { lines, errors, warnings };
}

async function parseText(text: string, store?: string, warnings: string[] = []) {
  const parser = ddexDsrFormat.create({ store, warn: (line, m) => warnings.push(`${line}: ${m}`) });
  const out: RawLine[] = [];
  for await (const batch of readRecords(
    (async function* () {
      yield text;
    })(),
    "\t",
    false,
  )) {
    for (const r of batch) {
      const l = parser.record(r.fields, r.line);
      if (l) out.push(l);
    }
  }
  parser.finish();
  return out;
}

describe("ddex-dsr: the sample made for docs/formats/", () => {
  test("streams share the summary's revenue, downloads are priced, non-bearing lines carry no money", async () => {
    const { lines, errors, warnings } = await parse(SAMPLE);
    assert.deepEqual(errors, []);
    // Its FOOT counts the file right.
    assert.deepEqual(warnings, []);
    assert.deepEqual(
      lines.map((l) => [l.isrc, l.upc, l.usageType, l.units, l.net, l.currency, l.territory]),
      [
        ["QZABC2600001", "012345000010", "stream", "1500", "6", "EUR", "DE"],
        ["QZABC2600002", "012345000010", "stream", "400", "1.6", "EUR", "DE"],
        ["QZABC2600002", "012345000010", "stream", "100", "0", "EUR", "DE"],
        ["", "012345000010", "download", "2", "13.98", "GBP", "GB"],
        ["QZABC2600003", "012345000027", "download", "1", "0.99", "GBP", "GB"],
        ["QZABC2699999", "4006381333931", "stream", "100", "0.4", "EUR", "DE"],
      ],
    );
    assert.ok(lines.every((l) => l.salePeriod === "2026-03" && l.reportingPeriod === "2026-04"));
    assert.ok(lines.every((l) => l.gross === l.net && l.fees === "0" && l.store === "spotify"));
  });

  test("a file without HEAD, or without --store, is refused at once", async () => {
    await assert.rejects(
      parseText("SY01.02\tS1\n"),
      (e: unknown) => e instanceof FormatError && /HEAD/.test(e.message),
    );
    await assert.rejects(
      parseText(
        "HEAD\tdsrf\tBasicAudioProfile\t1.3\tM\t2026-04-01T00:00:00Z\t1\t1\t2026-03-01\t2026-03-31\n",
      ),
      (e: unknown) => e instanceof FormatError && /--store/.test(e.message),
    );
  });

  test("a detail naming an unknown resource or summary is a malformed line", async () => {
    const head =
      "HEAD\tdsrf\tBasicAudioProfile\t1.3\tM\t2026-04-01T00:00:00Z\t1\t1\t2026-03-01\t2026-03-31\n";
    const sy = "SY01.02\tS1\tX\t\tSubscriptionModel\tOnDemandStream\tDE\tP\t10\t1\tEUR\t1.00\n";
    const block = "RE01.02\t1\tR1\t\t\t\t012345000010\nAS02.03\t1\tA1\t\tQZABC2600001\n";
    await assert.rejects(
      parseText(`${head}${sy}${block}SU02.02\t1\tS1\tT1\t\tA9\tTRUE\t5\n`, "spotify"),
      (e: unknown) => e instanceof LineError && /TransactedResource "A9"/.test(e.message),
    );
    await assert.rejects(
      parseText(
        `${head}${sy}SY01.02\tS2\tX\t\tSubscriptionModel\tOnDemandStream\tFR\tP\t10\t1\tEUR\t1.00\n${block}SU02.02\t1\tS7\tT1\t\tA1\tTRUE\t5\n`,
        "spotify",
      ),
      (e: unknown) => e instanceof LineError && /no summary record "S7"/.test(e.message),
    );
    await assert.rejects(
      parseText(
        `${head}SY01.02\tS1\tX\t\tSubscriptionModel\tOnDemandStream\tDE\tP\t10\t1\tEUR\tlots\n`,
        "spotify",
      ),
      (e: unknown) => e instanceof LineError && /NetRevenue "lots"/.test(e.message),
    );
  });

  test("FOOT's counts are compared with the file: each difference (and a missing FOOT) is a warning", async () => {
    const head =
      "HEAD\tdsrf\tBasicAudioProfile\t1.3\tM\t2026-04-01T00:00:00Z\t1\t1\t2026-03-01\t2026-03-31\tPADPIDA2026000001X\n";
    const body =
      "SY01.02\tS1\tX\t\tSubscriptionModel\tOnDemandStream\tDE\tP\t10\t1\tEUR\t1.00\n" +
      "RE01.02\t1\tR1\t\t\t\t012345000010\nAS02.03\t1\tA1\t\tQZABC2600001\nSU02.02\t1\tS1\tT1\t\tA1\tTRUE\t5\n";
    // 6 lines, 1 summary, 1 block: right.
    let warnings: string[] = [];
    await parseText(`${head}${body}FOOT\t6\t6\t1\t1\t1\n`, "spotify", warnings);
    assert.deepEqual(warnings, []);
    warnings = [];
    const lines = await parseText(`${head}${body}FOOT\t9\t9\t2\t1\t94\n`, "spotify", warnings);
    assert.equal(lines.length, 1);
    assert.deepEqual(warnings, [
      "6: the FOOT record's NumberOfLinesInFile is 9, the file has 6",
      "6: the FOOT record's NumberOfLinesInReport is 9, the file has 6",
      "6: the FOOT record's NumberOfSummaryRecords is 2, the file has 1",
      "6: the FOOT record's NumberOfBlocksInReport is 94, the file has 1",
    ]);
    // A report in several files: its "in the report" counts are not this file's.
    warnings = [];
    await parseText(
      `${head.replace("\t1\t1\t", "\t1\t2\t")}${body}FOOT\t6\t90\t1\t1\t50\n`,
      "spotify",
      warnings,
    );
    assert.deepEqual(warnings, []);
    warnings = [];
    await parseText(`${head}${body}FOOT\tsix\t6\t1\t1\t1\n`, "spotify", warnings);
    assert.deepEqual(warnings, [
      '6: the FOOT record\'s NumberOfLinesInFile "six" is not a whole number: not compared',
    ]);
    warnings = [];
    await parseText(`${head}${body}`, "spotify", warnings);
    assert.deepEqual(warnings, [
      "null: the file has no FOOT record: its counts could not be checked (is the file complete?)",
    ]);
  });

  test("the sender's party id is HEAD's SenderPartyId, by a #HEAD row's column when one comes first", async () => {
    assert.equal(await dsrSenderPartyId(SAMPLE), "PADPIDA2026000001X");
    const { reportFile } = await import("../../../test/support/royalties.ts");
    const moved = reportFile(
      "#HEAD\tMessageVersion\tSenderPartyId\nHEAD\tdsrf\tPADPIDA0000000001Z\n",
      "moved.tsv",
    );
    assert.equal(await dsrSenderPartyId(moved), "PADPIDA0000000001Z");
    assert.equal(await dsrSenderPartyId(reportFile("SY01.02\tS1\n", "no-head.tsv")), undefined);
    assert.equal(await dsrSenderPartyId(reportFile("HEAD\tdsrf\n", "no-sender.tsv")), undefined);
  });
});

describe("ddex-dsr: DDEX's published samples (../shared/ddex/dsr)", {
  skip: dsrMissingFails ? false : dsrSkip,
}, () => {
  if (dsrMissingFails) {
    test("the samples are there under CI", () => assert.fail(String(dsrSkip)));
    return;
  }
  test("Basic Audio 1.3, Unlimited Music: 15 stream lines sharing 5000 GBP by streams, quoted PLines, CRLF", async () => {
    const { lines, errors } = await parse(dsrPath("unlimited"));
    assert.deepEqual(errors, []);
    assert.equal(lines.length, 15);
    assert.ok(lines.every((l) => l.usageType === "stream" && l.currency === "GBP" && l.territory === "GB"));
    assert.ok(lines.every((l) => l.salePeriod === "2020-06" && l.reportingPeriod === "2020-07"));
    assert.deepEqual(lines[0], {
      reportingPeriod: "2020-07",
      salePeriod: "2020-06",
      store: "spotify",
      territory: "GB",
      // The block's release (its ICPN is a valid EAN-13, so it is kept beside the ISRC).
      upc: "825646846917",
      isrc: "GBAHT0900445",
      usageType: "stream",
      units: "120",
      gross: "189.873417721518",
      fees: "0",
      // 5000 × 120 ÷ 3160, rounded down at 12 decimals.
      net: "189.873417721518",
      currency: "GBP",
      storeResourceId: "B002X426VM",
      storeReleaseId: "B002X46CDK",
    });
    const units = lines.reduce((n, l) => n + Number(l.units), 0);
    assert.equal(units, 3160);
    assert.deepEqual(
      [...new Set(lines.map((l) => l.isrc))],
      ["GBAHT0900445", "USSM16900682", "USSM16900677", "USCA20100360", "USCA20100337", "USCA20001686"],
    );
  });

  test("Basic Audio 1.3, AdFunded: 'SY1' read as the only summary; release-level lines whose ICPN fails its check digit carry the block's one ISRC", async () => {
    const { lines, errors, warnings } = await parse(dsrPath("adFunded"));
    assert.deepEqual(errors, []);
    assert.equal(lines.length, 3);
    // The ICPN stays on the raw line: normalise leaves it off with a warning.
    assert.ok(lines.every((l) => l.upc === "731453000000" && l.currency === "EUR"));
    assert.deepEqual(
      lines.map((l) => [l.isrc, l.storeResourceId, l.storeReleaseId]),
      [
        ["USRC11501628", "d37700594f044c19a48b1ecde9d96176", "04312ef08dfd4ce984d70da69e8f10e6"],
        ["GBUM70602587", "8cc0c9248511470790e2ace2cf627282", "0930c46cd5024372aaea7781e620d3d6"],
        ["GBF089601184", "d323b29082a24156b4420ebd04ef0801", "09eaeb1802f247449ff9b80ce58a7856"],
      ],
    );
    assert.ok(lines.every((l) => l.units === "1" && l.net === "0.1" && l.salePeriod === "2015-08"));
    // Its FOOT says 94 blocks in the report (of one file) for 3.
    assert.deepEqual(warnings, ["18: the FOOT record's NumberOfBlocksInReport is 94, the file has 3"]);
  });

  for (const name of ["ugc10", "ugc11"] as const) {
    test(`UGC profile (${name}): SU03 lines with their own NetRevenue, the block's ISRC, usage ugc`, async () => {
      const { lines, errors } = await parse(dsrPath(name));
      assert.deepEqual(errors, []);
      assert.ok(lines.length >= 3);
      assert.ok(lines.every((l) => l.usageType === "ugc" && l.currency === "USD" && l.territory === "IS"));
      assert.deepEqual(lines[0] && [lines[0].isrc, lines[0].units, lines[0].net, lines[0].salePeriod], [
        "USSM19803037",
        "7810",
        "2",
        "2015-10",
      ]);
    });
  }
});
