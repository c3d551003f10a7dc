/**
 * A streaming reader of delimited text (RFC 4180 CSV and its semicolon and tab cousins): records
 * come out in batches as the bytes arrive, so a report of any size is read in constant memory.
 *
 * - A UTF-8 byte-order mark is dropped (TextDecoder does it); line ends are \n or \r\n.
 * - A field in double quotes may hold the delimiter, line breaks and doubled quotes ("").
 * - Each record carries the number of the line it starts on (1-based), for error messages.
 * - Blank lines are skipped. A record whose quoting is broken carries `error` instead of failing
 *   the whole read: the caller decides (the import reports it with its line number).
 * - One record is at most MAX_RECORD_CHARS characters and MAX_RECORD_LINES physical lines. A
 *   longer one (in practice an unclosed quote, which would otherwise swallow the rest of the file)
 *   comes out as one record with `error`, numbered with the line it starts on, and reading stops
 *   there: the rest of the source is drained unread, so memory stays bounded by the limit plus one
 *   chunk, and an incomplete record is never rescanned beyond the limit.
 */

export interface CsvRecord {
  line: number;
  fields: string[];
  error?: string;
}

// 500 records: a batch is done with before V8 collects its young generation twice (8 MB
// semi-spaces), so its objects die young instead of filling the old space (2,000 did not).
const BATCH = 500;
/** The longest record read, in characters (64 Ki), and in physical lines. */
export const MAX_RECORD_CHARS = 64 * 1024;
export const MAX_RECORD_LINES = 100;

export async function* readRecords(
  source: AsyncIterable<Buffer | string>,
  delimiter: string,
  /** false: quotes are plain text, each line one record (tab-separated DSR files). */
  quoting = true,
): AsyncGenerator<CsvRecord[]> {
  if (delimiter.length !== 1 || delimiter === '"' || delimiter === "\n") throw new Error("bad delimiter");
  const decoder = new TextDecoder("utf-8");
  let buf = "";
  let line = 1;
  let batch: CsvRecord[] = [];

  let stopped = false;

  for await (const chunk of source) {
    // After a record over the limit, the rest is drained unread (the caller still sees every byte go by).
    if (stopped) continue;
    buf += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    let pos = 0;
    for (;;) {
      const r = nextRecord(buf, pos, delimiter, line, false, quoting);
      if (!r) break;
      pos = r.end;
      if (r.record) batch.push(r.record);
      line += r.newlines;
      if (r.stop) {
        stopped = true;
        break;
      }
      if (batch.length >= BATCH) {
        yield batch;
        batch = [];
      }
    }
    buf = stopped ? "" : buf.slice(pos);
  }
  if (!stopped) {
    buf += decoder.decode();
    let pos = 0;
    while (pos < buf.length) {
      const r = nextRecord(buf, pos, delimiter, line, true, quoting);
      if (!r) break;
      pos = r.end;
      if (r.record) batch.push(r.record);
      line += r.newlines;
      if (r.stop) break;
    }
  }
  if (batch.length > 0) yield batch;
}

interface Next {
  /** undefined for a blank line. */
  record: CsvRecord | undefined;
  /** Index just past the record's line end. */
  end: number;
  newlines: number;
  /** The record went over the limit: read no further. */
  stop?: true;
}

function overLimit(line: number, end: number): Next {
  return {
    record: {
      line,
      fields: [],
      error:
        `a record longer than ${MAX_RECORD_CHARS} characters or ${MAX_RECORD_LINES} lines ` +
        "(an unclosed quote?): the rest of the file was not read",
    },
    end,
    newlines: 0,
    stop: true,
  };
}

/** The record starting at `pos`, or undefined when the buffer ends before it does (unless `eof`). */
function nextRecord(
  buf: string,
  pos: number,
  delimiter: string,
  line: number,
  eof: boolean,
  quoting = true,
): Next | undefined {
  if (pos >= buf.length) return undefined;
  const nl = buf.indexOf("\n", pos);
  const lineEnd = nl === -1 ? buf.length : nl;
  if (lineEnd - pos > MAX_RECORD_CHARS) return overLimit(line, buf.length);
  if (nl === -1 && !eof) return undefined;
  const end = nl === -1 ? buf.length : nl + 1;
  let text = buf.slice(pos, lineEnd);
  if (!quoting || !text.includes('"')) {
    // The fast path: no quotes on this line.
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (text.trim() === "") return { record: undefined, end, newlines: nl === -1 ? 0 : 1 };
    return { record: { line, fields: text.split(delimiter) }, end, newlines: nl === -1 ? 0 : 1 };
  }
  return quotedRecord(buf, pos, delimiter, line, eof);
}

function quotedRecord(
  buf: string,
  pos: number,
  delimiter: string,
  line: number,
  eof: boolean,
): Next | undefined {
  const fields: string[] = [];
  let field = "";
  let i = pos;
  let newlines = 0;
  let error: string | undefined;
  let atFieldStart = true;
  const over = (at: number, lines: number) => at - pos > MAX_RECORD_CHARS || lines >= MAX_RECORD_LINES;
  while (i < buf.length) {
    const c = buf[i];
    if (atFieldStart && c === '"') {
      // A quoted field: up to the closing quote, "" standing for one quote.
      i++;
      for (;;) {
        const q = buf.indexOf('"', i);
        if (q === -1) {
          if (over(buf.length, newlines + countNewlines(buf, i, buf.length)))
            return overLimit(line, buf.length);
          if (!eof) return undefined;
          field += buf.slice(i);
          newlines += countNewlines(buf, i, buf.length);
          error = "a quoted field is not closed before the end of the file";
          i = buf.length;
          break;
        }
        newlines += countNewlines(buf, i, q);
        if (over(q, newlines)) return overLimit(line, buf.length);
        field += buf.slice(i, q);
        if (buf[q + 1] === '"') {
          field += '"';
          i = q + 2;
          continue;
        }
        if (q + 1 >= buf.length && !eof) return undefined;
        i = q + 1;
        break;
      }
      atFieldStart = false;
      // After the closing quote: a delimiter, the line end, or stray text (kept, but reported).
      const next = buf[i];
      if (next !== undefined && next !== delimiter && next !== "\n" && next !== "\r") {
        error ??= "text follows the closing quote of a quoted field";
      }
      continue;
    }
    if (c === delimiter) {
      fields.push(field);
      field = "";
      atFieldStart = true;
      i++;
      continue;
    }
    if (c === "\n" || (c === "\r" && buf[i + 1] === "\n")) {
      if (over(i, newlines)) return overLimit(line, buf.length);
      fields.push(field);
      const end = c === "\n" ? i + 1 : i + 2;
      return { record: { line, fields, ...(error ? { error } : {}) }, end, newlines: newlines + 1 };
    }
    if (c === "\r" && i + 1 >= buf.length && !eof) return undefined;
    field += c;
    atFieldStart = false;
    i++;
  }
  if (over(buf.length, newlines)) return overLimit(line, buf.length);
  if (!eof) return undefined;
  fields.push(field);
  return { record: { line, fields, ...(error ? { error } : {}) }, end: buf.length, newlines };
}

function countNewlines(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = s.indexOf("\n", from); i !== -1 && i < to; i = s.indexOf("\n", i + 1)) n++;
  return n;
}
