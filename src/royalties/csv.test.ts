import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type CsvRecord, MAX_RECORD_CHARS, MAX_RECORD_LINES, readRecords } from "./csv.ts";

/** Every record of `input` fed in chunks of `size` bytes (the whole input at once when 0). */
async function read(input: string | Buffer, size = 0, delimiter = ","): Promise<CsvRecord[]> {
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input, "utf8");
  async function* chunks(): AsyncGenerator<Buffer> {
    if (size === 0) {
      yield bytes;
      return;
    }
    for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
  }
  const out: CsvRecord[] = [];
  for await (const batch of readRecords(chunks(), delimiter)) out.push(...batch);
  return out;
}

const CASES: { name: string; input: string | Buffer; want: CsvRecord[]; delimiter?: string }[] = [
  {
    name: "plain lines, a blank line skipped, no final newline",
    input: "a,b,c\n\n1,2,3",
    want: [
      { line: 1, fields: ["a", "b", "c"] },
      { line: 3, fields: ["1", "2", "3"] },
    ],
  },
  {
    name: "CRLF line ends",
    input: "a,b\r\n1,2\r\n",
    want: [
      { line: 1, fields: ["a", "b"] },
      { line: 2, fields: ["1", "2"] },
    ],
  },
  {
    name: "a UTF-8 byte-order mark is dropped",
    input: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("a,b\n1,2\n")]),
    want: [
      { line: 1, fields: ["a", "b"] },
      { line: 2, fields: ["1", "2"] },
    ],
  },
  {
    name: "quoted fields with the delimiter and doubled quotes",
    input: 'x,"a, b","say ""hi""",""\n',
    want: [{ line: 1, fields: ["x", "a, b", 'say "hi"', ""] }],
  },
  {
    name: "a quoted field with line breaks (LF and CRLF): the next record keeps its own line number",
    input: 'id,title\n1,"two\nlines"\r\n2,"three\r\nmore\nlines"\n3,end\n',
    want: [
      { line: 1, fields: ["id", "title"] },
      { line: 2, fields: ["1", "two\nlines"] },
      { line: 4, fields: ["2", "three\r\nmore\nlines"] },
      { line: 7, fields: ["3", "end"] },
    ],
  },
  {
    name: "multi-byte characters",
    input: "artist,title\nBjörk,“Jóga” ♪\n",
    want: [
      { line: 1, fields: ["artist", "title"] },
      { line: 2, fields: ["Björk", "“Jóga” ♪"] },
    ],
  },
  {
    name: "semicolons",
    delimiter: ";",
    input: '1.234,56;"a;b"\n',
    want: [{ line: 1, fields: ["1.234,56", "a;b"] }],
  },
  {
    name: "text after a closing quote is reported on its record",
    input: 'a,"b"c,d\n1,2,3\n',
    want: [
      { line: 1, fields: ["a", "bc", "d"], error: "text follows the closing quote of a quoted field" },
      { line: 2, fields: ["1", "2", "3"] },
    ],
  },
  {
    name: "a quote left open to the end of a short file",
    input: 'a,b\n1,"open\n2,3\n',
    want: [
      { line: 1, fields: ["a", "b"] },
      {
        line: 2,
        fields: ["1", "open\n2,3\n"],
        error: "a quoted field is not closed before the end of the file",
      },
    ],
  },
];

describe("readRecords", () => {
  for (const c of CASES) {
    for (const size of [0, 1, 2, 3, 7]) {
      test(`${c.name} (${size === 0 ? "one chunk" : `${size}-byte chunks`})`, async () => {
        assert.deepEqual(await read(c.input, size, c.delimiter), c.want);
      });
    }
  }

  test("records come out in batches of at most 2000 across chunk boundaries", async () => {
    let text = "";
    for (let i = 0; i < 4500; i++) text += `${i},"v${i}"\n`;
    const batches: number[] = [];
    const bytes = Buffer.from(text);
    async function* chunks() {
      for (let i = 0; i < bytes.length; i += 4096) yield bytes.subarray(i, i + 4096);
    }
    let last: CsvRecord | undefined;
    for await (const b of readRecords(chunks(), ",")) {
      batches.push(b.length);
      last = b.at(-1);
    }
    assert.ok(batches.every((n) => n <= 2000));
    assert.equal(
      batches.reduce((a, b) => a + b, 0),
      4500,
    );
    assert.deepEqual(last, { line: 4500, fields: ["4499", "v4499"] });
  });

  describe("a record over the limit (an unclosed quote) is one error at its first line, and reading stops", () => {
    const longLines = `a,b\n1,2\n3,"open\n${"4,5\n".repeat(MAX_RECORD_LINES + 50)}`;
    const longText = `a,b\n1,2\n3,"open ${"x".repeat(MAX_RECORD_CHARS + 10)}\n4,5\n`;
    const unquoted = `a,b\n1,2\n3,${"y".repeat(MAX_RECORD_CHARS + 1)}\n4,5\n`;
    const cases = [
      { name: `more than ${MAX_RECORD_LINES} lines`, input: longLines },
      { name: `more than ${MAX_RECORD_CHARS} characters`, input: longText },
      { name: "an unquoted line that long", input: unquoted },
    ];
    for (const c of cases) {
      for (const size of [0, 1, 1000, 64 * 1024]) {
        test(`${c.name} (${size === 0 ? "one chunk" : `${size}-byte chunks`})`, async () => {
          const records = await read(c.input, size);
          assert.deepEqual(
            records.map((r) => [r.line, r.error === undefined]),
            [
              [1, true],
              [2, true],
              [3, false],
            ],
          );
          assert.match(records[2]?.error ?? "", /longer than 65536 characters or 100 lines/);
        });
      }
    }

    test("a record just under the limit is read", async () => {
      const body = "z\n".repeat(MAX_RECORD_LINES - 2);
      const records = await read(`1,"${body}end"\n2,3\n`, 5);
      assert.equal(records[0]?.error, undefined);
      assert.equal(records[0]?.fields[1], `${body}end`);
      assert.deepEqual(records[1], { line: MAX_RECORD_LINES, fields: ["2", "3"] });
    });

    test("memory stays bounded: a 20 MB file after an unclosed quote is drained, not buffered", async () => {
      const chunk = Buffer.from("1,2,3,4,5,6,7,8,9\n".repeat(4096));
      let sent = 0;
      async function* source() {
        yield Buffer.from('a,b\n1,"never closed\n');
        for (let i = 0; i < 300; i++) {
          sent += chunk.length;
          yield chunk;
        }
      }
      const started = performance.now();
      const records: CsvRecord[] = [];
      for await (const b of readRecords(source(), ",")) records.push(...b);
      assert.equal(sent, 300 * chunk.length, "the whole source is consumed");
      assert.deepEqual(
        records.map((r) => r.line),
        [1, 2],
      );
      assert.ok(records[1]?.error);
      // Rescanning the rest of the file on every chunk would take minutes.
      assert.ok(performance.now() - started < 5000);
    });
  });
});
