/**
 * The shared pieces of the PostgREST query grammar: a cursor over one parameter (key or value)
 * that reports errors as PostgREST does, and the lexemes every parameter uses — field names,
 * JSON paths, identifiers and quoted strings.
 *
 * The cursor walks code points, not UTF-16 units, so positions match what a person counts and a
 * character outside the BMP is never split. Every loop advances the cursor, every scan is bounded
 * by the input, and nesting is capped by the callers at MAX_DEPTH: hostile input cannot make the
 * parser loop, recurse deeply or go quadratic.
 */
import { type FieldRef, type JsonStep, ParseError } from "./ast.ts";

/** How deeply logic trees and embeds may nest. PostgREST has no cap; a stack does. */
export const MAX_DEPTH = 32;

/** How much of a parameter an error message quotes back. */
const ECHO_LIMIT = 200;

export const FIELD_NAME = "field name (* or [a..z0..9_$])";

/** Parsec's `letter <|> digit <|> oneOf "_ $"`: the characters of an unquoted name. */
const IDENT_CHAR = /^[\p{L}0-9_ $]$/u;
/** What ends an unquoted JSON key (besides the end of input). */
const JSON_KEY_STOP = new Set(["(", "-", ":", ".", ",", ">", ")"]);
const INT32_MAX = 2147483647;

export function isIdentChar(ch: string | undefined): boolean {
  return ch !== undefined && IDENT_CHAR.test(ch);
}

export class Cursor {
  readonly chars: string[];
  /** `failed to parse filter (eq5)`: PostgREST's message, without the position. */
  readonly label: string;
  pos = 0;

  constructor(input: string, what: string) {
    this.chars = Array.from(input);
    this.label = `failed to parse ${what} (${echo(this.chars)})`;
    // PostgreSQL text cannot hold NUL: refuse it here rather than fail later in the database.
    const nul = this.chars.indexOf("\u0000");
    if (nul !== -1) this.fail("any character but NUL", nul);
  }

  get done(): boolean {
    return this.pos >= this.chars.length;
  }

  peek(ahead = 0): string | undefined {
    return this.chars[this.pos + ahead];
  }

  /** Whether the input continues with `s` (ASCII only). */
  at(s: string): boolean {
    for (let i = 0; i < s.length; i++) {
      if (this.chars[this.pos + i] !== s[i]) return false;
    }
    return true;
  }

  eat(s: string): boolean {
    if (!this.at(s)) return false;
    this.pos += s.length;
    return true;
  }

  expect(s: string, expecting = JSON.stringify(s)): void {
    if (!this.eat(s)) this.fail(expecting);
  }

  /** Parsec's `ws`: spaces and tabs. */
  skipWs(): void {
    while (this.chars[this.pos] === " " || this.chars[this.pos] === "\t") this.pos++;
  }

  slice(from: number, to = this.pos): string {
    return this.chars.slice(from, to).join("");
  }

  /** Everything left, consumed. */
  rest(): string {
    const s = this.slice(this.pos, this.chars.length);
    this.pos = this.chars.length;
    return s;
  }

  /** Scans while `keep` holds; returns the text scanned. */
  scan(keep: (ch: string) => boolean): string {
    const start = this.pos;
    while (this.pos < this.chars.length && keep(this.chars[this.pos] as string)) this.pos++;
    return this.slice(start);
  }

  expectEnd(expecting = "end of input"): void {
    if (!this.done) this.fail(expecting);
  }

  /** Throws PostgREST's PGRST100: `unexpected "x" at index 3, expecting ...`. */
  fail(expecting: string, at = this.pos, unexpected?: string): never {
    const what = unexpected ?? describe(this.chars[at]);
    // PostgREST's wording; the position is in the message's column.
    this.error(`unexpected ${what} expecting ${expecting}`, at);
  }

  /** Throws a PGRST100 with its own details. */
  error(details: string, at = this.pos): never {
    throw new ParseError(`"${this.label}" (line 1, column ${at + 1})`, details);
  }
}

function describe(ch: string | undefined): string {
  return ch === undefined ? "end of input" : JSON.stringify(ch);
}

function echo(chars: string[]): string {
  const shown = chars.length > ECHO_LIMIT ? [...chars.slice(0, ECHO_LIMIT), "…"] : chars;
  // Control characters are written as \uXXXX so messages stay printable.
  return shown
    .map((ch) => {
      const code = ch.charCodeAt(0);
      return code < 0x20 || code === 0x7f ? `\\u${code.toString(16).padStart(4, "0")}` : ch;
    })
    .join("");
}

/**
 * `"..."` with backslash escapes (`\x` is `x`). Returns undefined, with the cursor unmoved, when
 * the quote is not closed.
 */
export function tryQuoted(c: Cursor): string | undefined {
  const start = c.pos;
  c.pos++;
  let out = "";
  for (;;) {
    const ch = c.peek();
    if (ch === undefined) break;
    c.pos++;
    if (ch === '"') return out;
    if (ch === "\\") {
      const next = c.peek();
      if (next === undefined) break;
      out += next;
      c.pos++;
    } else {
      out += ch;
    }
  }
  c.pos = start;
  return undefined;
}

/** A quoted name, which must be closed. */
function quoted(c: Cursor): string {
  const value = tryQuoted(c);
  if (value === undefined) c.fail('closing quote (")', c.chars.length);
  return value;
}

/**
 * One or more identifier characters with surrounding spaces trimmed: PostgREST's pIdentifier,
 * which also names casts and text-search configurations.
 */
export function parseIdentifier(c: Cursor, expecting: string): string {
  const start = c.pos;
  const raw = c.scan(isIdentChar);
  const name = raw.trim();
  if (name === "") c.fail(expecting, start);
  return name;
}

/** Parts joined by `-` (a dash not starting `->`). */
function sepByDash(c: Cursor, part: () => string): string {
  const parts = [part()];
  while (c.peek() === "-" && c.peek(1) !== ">") {
    c.pos++;
    parts.push(part());
  }
  return parts.join("-");
}

/** A column, relation, alias or hint: `"quoted \" name"` or `name-with-dashes`. Never empty. */
export function parseFieldName(c: Cursor): string {
  if (c.peek() === '"') {
    const start = c.pos;
    const name = quoted(c);
    if (name === "") c.fail(`non-empty ${FIELD_NAME}`, start, '""');
    return name;
  }
  return sepByDash(c, () => parseIdentifier(c, FIELD_NAME));
}

/** `->a`, `->>b`, `->0`, `->-1`, `->"a.b"`: numeric keys become numbers. */
export function parseJsonPath(c: Cursor): JsonStep[] {
  const steps: JsonStep[] = [];
  while (c.at("->")) {
    const op = c.at("->>") ? "->>" : "->";
    c.pos += op.length;
    steps.push({ op, key: parseJsonKey(c) });
  }
  return steps;
}

function parseJsonKey(c: Cursor): string | number {
  if (c.peek() === '"') return quoted(c);
  if (c.peek() === "-" && isDigit(c.peek(1))) {
    const start = c.pos;
    c.pos++;
    const digits = c.scan(isDigit);
    const next = c.peek();
    if (next !== undefined && !JSON_KEY_STOP.has(next) && next !== " " && next !== "\t") c.fail("digit");
    const index = -Number(digits);
    if (index < -INT32_MAX - 1)
      c.fail("a JSON array index within 32 bits", start, JSON.stringify(`-${digits}`));
    return index === 0 ? 0 : index;
  }
  const key = sepByDash(c, () => {
    const start = c.pos;
    const part = c.scan((ch) => !JSON_KEY_STOP.has(ch)).trim();
    if (part === "") c.fail("JSON key (any character but .,:>()-, or a quoted key)", start);
    return part;
  });
  if (/^[0-9]+$/.test(key) && Number(key) <= INT32_MAX) return Number(key);
  return key;
}

function isDigit(ch: string | undefined): boolean {
  return ch !== undefined && ch >= "0" && ch <= "9";
}

/** PostgREST's pField: `name->json->>path`, with spaces and tabs around it skipped. */
export function parseField(c: Cursor): FieldRef {
  c.skipWs();
  const name = parseFieldName(c);
  const jsonPath = parseJsonPath(c);
  c.skipWs();
  return { name, jsonPath };
}
